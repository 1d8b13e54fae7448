"""The structs user space reads (csrc/libbpf.cdef) match the BPF side's
(sits/ebpf/programs/sits_probe.h) as compiled: sizes and member offsets
from the objects' BTF."""
import json
import os
import shutil
import subprocess

import pytest

from sits.ebpf.loader import program_path

STRUCTS = ("sits_hist_key", "sits_hist", "sits_event", "sits_config", "sits_fence_name")


def btf_structs(obj):
    out = subprocess.run(["bpftool", "-j", "btf", "dump", "file", obj], capture_output=True,
                         text=True, check=True)
    return {t["name"]: t for t in json.loads(out.stdout)["types"]
            if t.get("kind") == "STRUCT" and t.get("name") in STRUCTS}


@pytest.mark.skipif(not shutil.which("bpftool"), reason="bpftool not installed")
@pytest.mark.parametrize("obj", ["syscalls", "fence", "bench"])
def test_cdef_layout_matches_compiled_btf(obj):
    path = program_path(obj)
    if not os.path.exists(path):
        pytest.skip(f"{path} not built")
    from sits.ebpf._libbpf_ffi import ffi
    structs = btf_structs(path)
    assert {"sits_hist_key", "sits_hist", "sits_config"} <= set(structs)
    for name, t in structs.items():
        assert ffi.sizeof(f"struct {name}") == t["size"], name
        for m in t["members"]:
            assert ffi.offsetof(f"struct {name}", m["name"]) * 8 == m["bits_offset"], (name, m["name"])


def test_value_size_constant_matches_cdef():
    from sits.ebpf._libbpf_ffi import ffi
    from sits.ebpf.maps import HIST_VALUE_SIZE
    assert ffi.sizeof("struct sits_hist") == HIST_VALUE_SIZE
    assert HIST_VALUE_SIZE % 8 == 0  # per-CPU values are laid out 8-aligned


def test_x86_syscall_numbers_match_the_uapi_header():
    header = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"
    if os.uname().machine != "x86_64" or not os.path.exists(header):
        pytest.skip("x86-64 UAPI header not present")
    nr = {}
    for line in open(header):
        parts = line.split()
        if len(parts) == 3 and parts[0] == "#define" and parts[1].startswith("__NR_"):
            nr[parts[1][5:]] = int(parts[2])
    src = open(os.path.join(os.path.dirname(program_path("syscalls")), "syscalls.bpf.c")).read()
    x86 = src[src.index("__TARGET_ARCH_x86"):src.index("#elif")]
    for line in x86.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "#define" and parts[1].startswith("NR_"):
            assert nr[parts[1][3:]] == int(parts[2]), parts[1]
