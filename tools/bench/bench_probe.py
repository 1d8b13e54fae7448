"""bench.bpf.c, the synthetic event source of tools/bench/ebpf_bench.py's
streaming part and of the bpf tier's ring and histogram-row tests: bursts
of events through common.bpf.h's record(), the path sits' probes take,
added to a started ProbeSession. It is no part of sits: it is built here,
as sits' own objects are (csrc/build_bpf.py), when first used."""
import glob
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SOURCE = os.path.join(HERE, "bench.bpf.c")
OBJECT = os.path.join(HERE, "bench.bpf.o")

#: what sets a burst off -> its program: a getppid() of a traced process,
#: or a switch away from one (interrupts off)
TRIGGERS = {"getppid": "sits_bench_burst", "switch": "sits_bench_switch"}
#: the bursts' probe id (RowKey.probe, an event's probe): one that no sits
#: point has, below the 64 bits of the probe mask
PROBE = 63


def build() -> str:
    """bench.bpf.o, compiled again when older than its inputs; needs the
    vmlinux.h that building sits wrote into sits/ebpf."""
    sys.path.insert(0, os.path.join(ROOT, "csrc"))
    try:
        from build_bpf import BPF_ARCH, INCLUDE, PROGRAMS, clang_args
    finally:
        sys.path.pop(0)
    ebpf = os.path.dirname(PROGRAMS)
    deps = [SOURCE, os.path.join(ebpf, "vmlinux.h"), *glob.glob(os.path.join(PROGRAMS, "*.h")),
            *glob.glob(os.path.join(INCLUDE, "*.h"))]
    if os.path.exists(OBJECT) and os.path.getmtime(OBJECT) >= max(map(os.path.getmtime, deps)):
        return OBJECT
    arch = BPF_ARCH.get(platform.machine(), platform.machine())
    tmp = f"{OBJECT}.{os.getpid()}.tmp"
    subprocess.run(["clang", *clang_args(arch, ebpf), "-c", SOURCE, "-o", tmp], check=True)
    os.replace(tmp, OBJECT)
    return OBJECT


def add_bursts(session, burst: int, trigger: str = "getppid"):
    """`burst` events, keys 0 .. burst - 1 under probe PROBE, at each
    `trigger` of a process the started `session` traces; the object
    closes with the session."""
    from sits.ebpf.points import POINT_BY_ID
    assert PROBE not in POINT_BY_ID
    if trigger not in TRIGGERS:
        raise ValueError(f"unknown trigger {trigger!r} (known: {', '.join(TRIGGERS)})")

    def configure(obj):
        cfg = obj.section(".rodata.bench", "__u32 *")
        cfg[0], cfg[1] = burst, PROBE
    return session.add_object("bench", build(), (TRIGGERS[trigger],), configure)
