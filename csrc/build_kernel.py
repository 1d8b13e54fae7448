"""cffi builder for sits._kernel_ffi (API mode, compiled at install time).

The C compiler sees the real UAPI and libdrm headers, so every struct
layout and ioctl number is the system's own on this architecture.
"""
import glob
import os
import re
import shlex
import subprocess

from cffi import FFI

from build_bpf import INCLUDE  # csrc is no package: its folder is on the path
from cdef_part import CDEF_PART, FRAME_H, cdef_part

HERE = os.path.dirname(os.path.abspath(__file__))
# The frame queue's C (pipeline logic, compiled into this module) and its
# interface, whose cdef part is read from the header: declared once.
ROOT = os.path.dirname(HERE)
PIPELINE = os.path.join(ROOT, "sits", "pipeline")
QUEUE_H = os.path.join(PIPELINE, "frame_queue.h")
QUEUE_C = os.path.join(PIPELINE, "frame_queue.c")
TIMELINE_C = os.path.join(PIPELINE, "queue_timeline.c")
#: the sinks', the sources' and the stages' C halves
HALVES = sorted(glob.glob(os.path.join(PIPELINE, "sinks", "*.c"))) + \
    sorted(glob.glob(os.path.join(PIPELINE, "sources", "*.c"))) + \
    sorted(glob.glob(os.path.join(PIPELINE, "stages", "*.c")))
#: the files that declare a part of the interface between cdef markers,
#: read from the file itself: the halves that have one, after the stages'
#: common header (which their works read too)
DECLARING = [os.path.join(PIPELINE, "stages", "stage.h")] + [p for p in HALVES if CDEF_PART.search(open(p).read())]
IOCTL_LINE = re.compile(r"^static const unsigned long (SITS_\w+) = \w+;", re.M)


def _read(name):
    with open(os.path.join(HERE, name)) as f:
        return f.read()


def _pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, "libdrm"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit("sits build: libdrm development files not found "
                         "(Debian: apt-get install libdrm-dev pkg-config)")
    return shlex.split(out)


def ioctl_names():
    """The SITS_* ioctl constants declared in sits_ioctls.h, in file order."""
    return IOCTL_LINE.findall(_read("sits_ioctls.h"))


def queue_cdef():
    """A frame's record, as sits_frame.h has it, the frame queue's
    declarations, as frame_queue.h has them, then each sink's, as its C
    file has them."""
    return cdef_part(FRAME_H) + cdef_part(QUEUE_H) + "".join(cdef_part(p) for p in DECLARING)


def _halves_preamble():
    """Each sink's declarations for the binding's own C (its structs' layout)."""
    return "".join(f"/* {os.path.relpath(p, ROOT)} */\n{cdef_part(p)}\n" for p in DECLARING)


def _headers_digest():
    """A digest of the headers and the frame queue's C, put into the
    generated C source so that a change to one of them alone rebuilds the
    module."""
    import hashlib
    h = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(HERE, "*.h")) + glob.glob(os.path.join(INCLUDE, "*.h"))) + [QUEUE_H, QUEUE_C, TIMELINE_C] + DECLARING + HALVES:
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def source_options():
    """set_source()'s compiler options. tools/cross/check_arm64.py compiles
    the emitted C source with them too, pkg-config then reading arm64's
    libdrm.pc (PKG_CONFIG_LIBDIR)."""
    return dict(
        # relative to the project root, as setuptools wants (compile() below runs there too)
        sources=[os.path.relpath(p, ROOT) for p in [QUEUE_C, TIMELINE_C] + HALVES],
        include_dirs=[HERE, PIPELINE, INCLUDE] + [a[2:] for a in _pkg_config("--cflags-only-I")],
        libraries=["drm"],
        extra_compile_args=["-O2", "-Werror=incompatible-pointer-types"],
    )


def _ioctl_table() -> str:
    """The names of sits_ioctls.h's constants as a C array, so that Python
    knows which SITS_* names are ioctls without a list of its own."""
    names = "".join(f'"{n}", ' for n in ioctl_names())
    return f"const char *const sits_ioctl_names[] = {{{names}NULL}};\n"


#: the product's headers the binding declares from, after csrc's own: the
#: rules shared with the BPF programs (sits/include) and the frame queue's
#: interface, then what only the binding needs of them
PRODUCT_HEADERS = """\
#include "sits_vblank.h"
#include "sits_hist.h"
#include "frame_queue.h"

/* sits_hist_slot() over an array, for Python's histograms of many values */
static inline void sits_hist_slots(const __u64 *v, __u32 *slot, size_t n)
{
	for (size_t i = 0; i < n; i++)
		slot[i] = sits_hist_slot(v[i]);
}
"""

ffibuilder = FFI()
ffibuilder.cdef(_read("kernel.cdef") + "".join(
    f"static const unsigned long {name};\n" for name in ioctl_names())
    + "extern const char *const sits_ioctl_names[];\n" + queue_cdef()
    # a stage's work done in Python (sits/pipeline/python_work.py): cffi's
    # own syntax, so declared here rather than in stage.h, which C reads too
    + 'extern "Python" int sits_python_work(struct sits_stage *, int32_t, uint32_t, int32_t);\n')
ffibuilder.set_source(
    "sits._kernel_ffi",
    f'/* csrc headers {_headers_digest()} */\n#include "sits_kernel.h"\n' + PRODUCT_HEADERS + _halves_preamble()
    + _ioctl_table(),
    **source_options(),
)

if __name__ == "__main__":
    # in the project root, where the source path is relative to (the module
    # lands in sits/, where an editable install puts it)
    ffibuilder.compile(tmpdir=ROOT, verbose=True)
