"""Build steps that PEP 621 metadata cannot express.

- cffi: the kernel/libdrm binding (API mode, compiled against the system
  headers) and the libbpf binding (out-of-line ABI mode).
- eBPF: every sits/ebpf/programs/*.bpf.c is compiled with clang into a
  CO-RE object shipped as package data, against a vmlinux.h dumped from
  this machine's BTF.
"""
import glob
import os
import platform
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
EBPF = os.path.join(HERE, "sits", "ebpf")
sys.path.insert(0, os.path.join(HERE, "csrc"))
from build_bpf import BPF_ARCH, INCLUDE, clang_args  # noqa: E402  (csrc is no package)


def _need(tool, hint):
    path = shutil.which(tool)
    if not path:
        raise SystemExit(f"sits build: {tool} not found ({hint})")
    return path


def build_bpf_objects():
    vmlinux_h = os.path.join(EBPF, "vmlinux.h")
    btf = os.environ.get("SITS_BTF", "/sys/kernel/btf/vmlinux")
    if not os.path.exists(vmlinux_h):
        bpftool = _need("bpftool", "Debian: apt-get install bpftool")
        with open(vmlinux_h + ".tmp", "w") as out:
            subprocess.run([bpftool, "btf", "dump", "file", btf, "format", "c"],
                           stdout=out, check=True)
        os.replace(vmlinux_h + ".tmp", vmlinux_h)
    clang = _need("clang", "Debian: apt-get install clang")
    arch = BPF_ARCH.get(platform.machine(), platform.machine())
    for src in sorted(glob.glob(os.path.join(EBPF, "programs", "*.bpf.c"))):
        obj = src[:-2] + ".o"
        deps = [src, vmlinux_h] + glob.glob(os.path.join(EBPF, "programs", "*.h")) + glob.glob(os.path.join(INCLUDE, "*.h"))
        if os.path.exists(obj) and os.path.getmtime(obj) >= max(map(os.path.getmtime, deps)):
            continue
        subprocess.run([clang, *clang_args(arch, EBPF), "-c", src, "-o", obj], check=True)


class BuildPyWithBpf(build_py):
    def run(self):
        build_bpf_objects()
        super().run()


setup(
    cffi_modules=["csrc/build_kernel.py:ffibuilder", "csrc/build_libbpf.py:ffibuilder"],
    cmdclass={"build_py": BuildPyWithBpf},
)
