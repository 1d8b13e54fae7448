"""The structs user space reads (csrc/libbpf.cdef) match the BPF side's
(sits/ebpf/programs/sits_probe.h) as compiled: sizes and member offsets
from the objects' BTF. The syscall numbers of each __TARGET_ARCH_ block
are that architecture's (x86, and arm64 through its cross compiler)."""
import glob
import json
import os
import re
import shutil
import subprocess

import pytest

from sits.ebpf.loader import program_path

#: the benchmarks' BPF source (no part of sits), whose syscall numbers are checked too
BENCH_SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            "tools", "bench", "bench.bpf.c")
STRUCTS = ("sits_hist_key", "sits_hist", "sits_event", "sits_config", "sits_fence_name", "sits_frame",
           "sits_frame_stats", "sits_frame_epoch", "sits_journey_config")


def btf_structs(obj):
    out = subprocess.run(["bpftool", "-j", "btf", "dump", "file", obj], capture_output=True,
                         text=True, check=True)
    return {t["name"]: t for t in json.loads(out.stdout)["types"]
            if t.get("kind") == "STRUCT" and t.get("name") in STRUCTS}


@pytest.mark.skipif(not shutil.which("bpftool"), reason="bpftool not installed")
@pytest.mark.parametrize("obj", ["syscalls", "fence"])
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


@pytest.mark.skipif(not shutil.which("bpftool"), reason="bpftool not installed")
def test_journey_structs_match_compiled_btf():
    """The frame record, the in-kernel statistics and the journey's
    .rodata, as journey.bpf.o has them; and numpy's view of the statistics."""
    path = program_path("journey")
    if not os.path.exists(path):
        pytest.skip(f"{path} not built")
    from sits.ebpf._libbpf_ffi import ffi
    from sits.ebpf.ringbuf import FRAME_DTYPE
    from sits.journey.kernel import EPOCH_DTYPE
    structs = btf_structs(path)
    assert {"sits_frame", "sits_frame_stats", "sits_frame_epoch", "sits_journey_config", "sits_hist"} <= set(structs)
    for name, t in structs.items():
        assert ffi.sizeof(f"struct {name}") == t["size"], name
        for m in t["members"]:
            assert ffi.offsetof(f"struct {name}", m["name"]) * 8 == m["bits_offset"], (name, m["name"])
    assert EPOCH_DTYPE.itemsize == structs["sits_frame_epoch"]["size"]
    assert FRAME_DTYPE.itemsize == structs["sits_frame"]["size"]
    stats = {m["name"]: m["bits_offset"] // 8 for m in structs["sits_frame_stats"]["members"]}
    assert {k: EPOCH_DTYPE["stats"].fields[k][1] for k in stats} == stats


def test_value_size_constant_matches_cdef():
    from sits.ebpf._libbpf_ffi import ffi
    from sits.ebpf.maps import HIST_VALUE_SIZE
    assert ffi.sizeof("struct sits_hist") == HIST_VALUE_SIZE
    assert HIST_VALUE_SIZE % 8 == 0  # per-CPU values are laid out 8-aligned


def arch_syscall_numbers(path) -> dict[str, dict[str, int]]:
    """{arch: {name: number}}: the NR_<name> defines under each
    `#if defined(__TARGET_ARCH_<arch>)` of a BPF source."""
    found, arch = {}, None
    for line in open(path):
        if m := re.match(r"#(?:el)?if defined\(__TARGET_ARCH_(\w+)\)", line):
            arch = found.setdefault(m.group(1), {})
        elif line.startswith(("#else", "#endif")):
            arch = None
        elif (m := re.match(r"#define NR_(\w+) (-?\d+)$", line.strip())) and arch is not None:
            arch[m.group(1)] = int(m.group(2))
    return found


def uapi_syscall_numbers(cc) -> dict[str, int]:
    """{name: number} of the __NR_<name> that <asm/unistd.h> defines for cc's
    architecture, as its preprocessor sees them."""
    out = subprocess.run([cc, "-E", "-dM", "-include", "asm/unistd.h", "-x", "c", "/dev/null"],
                         capture_output=True, text=True, check=True).stdout
    macros = dict(re.findall(r"^#define (\w+) (\S+)$", out, re.M))

    def value(v):
        while v in macros:  # asm-generic defines some through a second name (__NR3264_*)
            v = macros[v]
        return int(v) if v.isdigit() else None
    return {n[len("__NR_"):]: value(v) for n, v in macros.items() if n.startswith("__NR_")}


@pytest.mark.parametrize("arch", ["x86", "arm64"])
def test_syscall_numbers_match_the_uapi_header(arch, request):
    """Every NR_ of a BPF source (sits' and the benchmarks') is its architecture's __NR_, or negative
    where that architecture lacks the syscall (arm64: poll, select, epoll_wait)."""
    if arch == "arm64":
        cc = request.getfixturevalue("arm64_build")["cc"]  # it installs the cross headers
    else:
        cc = "x86_64-linux-gnu-gcc"
        if not shutil.which(cc):
            pytest.skip(f"{cc} not installed")
    nr = uapi_syscall_numbers(cc)
    checked = []
    sources = glob.glob(os.path.join(os.path.dirname(program_path("syscalls")), "*.bpf.c")) + [BENCH_SOURCE]
    for src in sorted(sources):
        for name, number in arch_syscall_numbers(src).get(arch, {}).items():
            if number < 0:
                assert name not in nr, (src, name)
            else:
                assert nr.get(name) == number, (src, name)
            checked.append(name)
    assert {"read", "ioctl", "ppoll", "epoll_pwait", "getppid"} <= set(checked)
