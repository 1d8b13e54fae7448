"""cffi builder for sits.ebpf._libbpf_ffi: out-of-line ABI mode.

The generated module holds the parsed declarations, so `import` costs a few
milliseconds instead of the ~100 ms that parsing a cdef at run time costs;
libbpf.so.1 itself is dlopen()ed on first use (sits/ebpf/libbpf.py).
"""
import os

from cffi import FFI

from cdef_part import FRAME_H, cdef_part  # csrc is no package: its folder is on the path

HERE = os.path.dirname(os.path.abspath(__file__))

ffibuilder = FFI()
with open(os.path.join(HERE, "libbpf.cdef")) as f:
    # a frame's record as sits_frame.h declares it (the kernel binding reads the same)
    ffibuilder.cdef(f.read() + cdef_part(FRAME_H))
ffibuilder.set_source("sits.ebpf._libbpf_ffi", None)

if __name__ == "__main__":
    ffibuilder.compile(tmpdir=os.path.join(HERE, ".."), verbose=True)
