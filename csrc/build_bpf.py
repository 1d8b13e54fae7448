"""clang's flags for sits' BPF objects (CO-RE, one per
sits/ebpf/programs/*.bpf.c): setup.py builds them for this machine, and
tools/cross/check_arm64.py for arm64 against an arm64 vmlinux.h.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(os.path.dirname(HERE), "sits", "ebpf", "programs")
#: headers whose rules both the BPF programs and the frame queue's C follow
INCLUDE = os.path.join(os.path.dirname(HERE), "sits", "include")
#: `uname -m` -> the __TARGET_ARCH_ name of libbpf's bpf_tracing.h
BPF_ARCH = {"x86_64": "x86", "aarch64": "arm64", "armv7l": "arm",
            "riscv64": "riscv", "ppc64le": "powerpc", "s390x": "s390"}


def clang_args(arch, vmlinux_dir):
    """Everything but -c/-o; vmlinux_dir holds the vmlinux.h for arch."""
    return ["-O2", "-g", "-target", "bpf", f"-D__TARGET_ARCH_{arch}",
            "-I", vmlinux_dir, "-I", PROGRAMS, "-I", INCLUDE, "-Wall", "-Werror"]
