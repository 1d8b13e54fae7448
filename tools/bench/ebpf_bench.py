#!/usr/bin/env python3
"""sits probes vs bpftrace, in the same run (a benchmark, not a test).

    sudo .venv/bin/python tools/bench/ebpf_bench.py [--reads 1000000] [--rounds 5]

1. Added CPU per event: a per-call latency histogram of N one-byte read()s
   of /dev/zero (tools/bench/probe_readloop.c), for no probe, sits
   (`syscalls` group) and bpftrace doing the same hist(), each filtered by
   pid and by comm (`--comm probe_readloop`, bpftrace's `comm ==`); the
   loop's own CPU time (user+sys, where BPF programs are charged), rounds
   interleaved, medians. Target: sits <= 0.5x bpftrace's added ns/read,
   for either filter.
2. Streaming: bench.bpf.c (bench_probe.py) emits bursts of events through
   the same record() path (ringbuf, BPF_RB_NO_WAKEUP); sits drains the mmap'ed ring with numpy
   every 2 ms. Highest event rate with zero reserve failures. Target >= 2.5 M/s.
3. Startup: exec -> a "ready" line read by this process, printed once the
   probes are attached. Headline, the command users run: `sits probe audit
   --probes syscalls -- sh -c 'echo ready; read x'` (the CLI starts the
   command once every probe is attached, and the command prints); bpftrace:
   `bpftrace -e '...hist()...; BEGIN { printf("ready") }'` (BEGIN runs once
   its probes are attached). Second row: the library, a python process
   starting a `syscalls` ProbeSession and printing after start(). sits is
   byte-compiled first, as an installed package is; it runs from this
   checkout's virtualenv as it is (an editable install adds its import
   finder, ~8 ms, that an installed wheel does not have). The same two rows
   again with every probe group (the default `--probes`: what is missing
   on this kernel is skipped, as for users). Target <= 50 ms.
4. RSS of those processes with the probes attached, and the peak (VmHWM).
   Target <= 25 MB, peak included.

    --parts overhead,streaming,startup   (default: all)
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = sys.executable


def build(name: str, outdir: str) -> str:
    exe = os.path.join(outdir, name)
    subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, name + ".c")], check=True)
    return exe


def readloop(exe, n, attach=None):
    """Run the loop; `attach(pid)` returns a stop() after attaching probes to it."""
    proc = subprocess.Popen([exe, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    stop = attach(proc.pid) if attach else None
    out, _ = proc.communicate("go\n")
    if stop:
        stop()
    return float(out)


READLOOP_COMM = "probe_readloop"  # the loop's executable name


def sits_attach(filters):
    """attach(pid) for readloop(): a `syscalls` session, by pid or by comm."""
    def attach(pid):
        from sits.ebpf.probes import Filters, ProbeSession
        f = Filters(pids=(pid,)) if filters == "pid" else Filters(comm=READLOOP_COMM)
        s = ProbeSession(("syscalls",), filters=f).start()

        def stop():
            rows, _ = s.collect()
            s.close()
            return rows
        return stop
    return attach


BPFTRACE_HIST = """
tracepoint:syscalls:sys_enter_read /%s/ { @start[tid] = nsecs; }
tracepoint:syscalls:sys_exit_read /@start[tid]/ { @h = hist(nsecs - @start[tid]); delete(@start[tid]); }
BEGIN { printf("ready\\n"); }
"""


def _wait_ready(proc):
    """Until BEGIN's "ready" (bpftrace runs BEGIN once every probe is attached)."""
    seen = []
    for line in proc.stdout:
        if line.strip() == "ready":
            return
        seen.append(line)
    proc.kill()
    raise SystemExit(f"bpftrace did not start: {''.join(seen)}{proc.stderr.read()}")


def _stop_bpftrace(proc):
    proc.send_signal(2)  # it prints its maps and detaches
    try:
        proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:  # a SIGINT right after BEGIN can go unseen
        proc.kill()
        proc.communicate()


def bpftrace_attach(filters):
    def attach(pid):
        pred = f"pid == {pid}" if filters == "pid" else f'comm == "{READLOOP_COMM}"'
        proc = subprocess.Popen(["bpftrace", "-B", "none", "-e", BPFTRACE_HIST % pred], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        _wait_ready(proc)
        return lambda: _stop_bpftrace(proc)
    return attach


FILTERS = ("pid", "comm")
#: the overhead runs: "none", then sits and bpftrace by each filter
RUNS = ("none",) + tuple(f"{tool}_{f}" for f in FILTERS for tool in ("sits", "bpftrace"))


def overhead(exe, n, rounds):
    attach = {"none": None, **{f"sits_{f}": sits_attach(f) for f in FILTERS},
              **{f"bpftrace_{f}": bpftrace_attach(f) for f in FILTERS}}
    res = {k: [] for k in RUNS}
    for _ in range(rounds):
        for k in RUNS:
            res[k].append(readloop(exe, n, attach[k]))
    med = {k: statistics.median(v) for k, v in res.items()}
    return res, med


def streaming(exe):
    import numpy  # noqa: F401  (imported before timing)

    from bench_probe import add_bursts
    from sits.ebpf.probes import Filters, ProbeSession
    from sits.ebpf.ringbuf import ring_consumer
    results = []
    for burst in (8, 16, 32, 64, 128, 256):
        calls = max(20000, 4_000_000 // burst)
        s = ProbeSession((), filters=Filters(follow=True), hist=False, stream=True, ring_bytes=16 << 20).start()
        try:
            add_bursts(s, burst)
            rc = ring_consumer(s)
            proc = subprocess.Popen([exe, str(calls)], stdin=subprocess.PIPE)
            s.track(proc.pid)
            got = 0
            cpu0 = time.process_time()
            t0 = time.perf_counter()
            proc.stdin.write(b"go\n")
            proc.stdin.close()
            while proc.poll() is None:
                got += len(rc.drain(copy=False))
                time.sleep(0.002)
            el = time.perf_counter() - t0
            got += len(rc.drain(copy=False))
            cpu = time.process_time() - cpu0
            drops = s.drops()["ringbuf"]
            rc.close()
        finally:
            s.close()
        results.append({"burst": burst, "events": got, "expected": burst * calls, "lost": drops,
                        "rate_mps": round((got + drops) / el / 1e6, 3),
                        "consumer_ns_per_event": round(cpu / max(got, 1) * 1e9, 1)})
    lossless = [r for r in results if r["lost"] == 0 and r["events"] == r["expected"]]
    return results, max((r["rate_mps"] for r in lossless), default=0.0)


SITS_STARTUP = """
import sys, time
t_main = time.monotonic()
from sits.ebpf.probes import DEFAULT_GROUPS, ProbeSession
t_import = time.monotonic()
s = ProbeSession(DEFAULT_GROUPS if sys.argv[1] == "all" else sys.argv[1].split(",")).start()
t = time.monotonic()
print("ready", flush=True)
with open("/proc/self/status") as f:
    mem = dict(l.split(":", 1) for l in f if l.startswith(("VmRSS", "VmHWM")))
print(t_main, t_import, t, mem["VmRSS"].split()[0], mem["VmHWM"].split()[0], flush=True)
sys.stdin.read()
s.close()
"""

#: what the startup rows attach: the syscalls group, and every group
#: (the CLI's default --probes, here given by leaving --probes out)
STARTUP_GROUPS = ("syscalls", "all")


def _memory(pid):
    """(VmRSS, VmHWM) of `pid` in MB."""
    with open(f"/proc/{pid}/status") as f:
        mem = {l.split(":")[0]: int(l.split()[1]) / 1024 for l in f if l.startswith(("VmRSS", "VmHWM"))}
    return mem["VmRSS"], mem["VmHWM"]


def startup_sits(groups):
    """(exec -> "ready" read here ms, import+start ms, start() ms, RSS MB, peak RSS MB)"""
    t0 = time.monotonic()
    proc = subprocess.Popen([PY, "-c", SITS_STARTUP, groups], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline()
    ms = (time.monotonic() - t0) * 1e3
    if line.strip() != "ready":
        proc.kill()
        raise SystemExit(f"sits did not start: {line}{proc.stderr.read()}")
    t_main, t_import, t, rss, hwm = proc.stdout.readline().split()
    t_main, t_import, t = float(t_main), float(t_import), float(t)
    proc.communicate("")
    return ms, (t - t_main) * 1e3, (t - t_import) * 1e3, int(rss) / 1024, int(hwm) / 1024


def startup_sits_cli(groups):
    """(exec -> the followed command's "ready" read here ms, RSS MB, peak RSS MB) of
    `sits probe audit`: the command is started once the probes are attached."""
    probes = [] if groups == "all" else ["--probes", groups]
    t0 = time.monotonic()
    proc = subprocess.Popen([os.path.join(os.path.dirname(PY), "sits"), "probe", "audit", "--json", *probes,
                             "--", "sh", "-c", "echo ready; read x"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    line = proc.stdout.readline()
    ms = (time.monotonic() - t0) * 1e3
    if line.strip() != "ready":
        proc.kill()
        raise SystemExit(f"sits probe audit did not start: {line}{proc.stderr.read()}")
    rss, hwm = _memory(proc.pid)
    proc.communicate("\n", timeout=30)
    return ms, rss, hwm


def startup_bpftrace():
    """(exec -> "ready" read here ms, RSS MB, peak RSS MB)"""
    t0 = time.monotonic()
    proc = subprocess.Popen(["bpftrace", "-B", "none", "-e", BPFTRACE_HIST % "pid == 1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _wait_ready(proc)
    ms = (time.monotonic() - t0) * 1e3
    rss, hwm = _memory(proc.pid)
    _stop_bpftrace(proc)
    return ms, rss, hwm


def byte_compile():
    """What installing sits does; without it every run compiles the sources
    (PYTHONDONTWRITEBYTECODE=1 environments)."""
    subprocess.run([PY, "-m", "compileall", "-q", os.path.join(ROOT, "sits")], check=True,
                   env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})


def startup(rounds=5):
    """Medians (and runs) of every startup row, interleaved; RSS of each."""
    byte_compile()
    runs = {f"{kind}_{g}": [] for g in STARTUP_GROUPS for kind in ("cli", "library")}
    runs["bpftrace"] = []
    for _ in range(rounds):
        for g in STARTUP_GROUPS:
            runs[f"cli_{g}"].append(startup_sits_cli(g))
            runs[f"library_{g}"].append(startup_sits(g))
        runs["bpftrace"].append(startup_bpftrace())
    med = lambda rows, i: round(statistics.median(r[i] for r in rows), 1)  # noqa: E731
    ms = {k: {"median": med(v, 0), "runs": [round(r[0], 1) for r in v]} for k, v in runs.items()}
    for g in STARTUP_GROUPS:
        lib = runs[f"library_{g}"]
        ms[f"library_{g}"].update(import_and_start=med(lib, 1), start_call=med(lib, 2))
    rss = {k: {"rss": med(v, -2), "peak": med(v, -1)} for k, v in runs.items()}
    return ms, rss


PARTS = ("overhead", "streaming", "startup")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated: " + ",".join(PARTS))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if not parts or set(parts) - set(PARTS):
        raise SystemExit(f"--parts: choose from {','.join(PARTS)}")
    if os.geteuid() != 0:
        raise SystemExit("needs root (eBPF)")
    if not shutil.which("bpftrace"):
        raise SystemExit("bpftrace not installed (Debian: apt-get install bpftrace)")
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        if "overhead" in parts:
            raw, med = overhead(build("probe_readloop", tmp), args.reads, args.rounds)
            out["per_read_cpu_ns"] = {k: [round(x, 1) for x in v] for k, v in raw.items()}
            out["median_per_read_cpu_ns"] = {k: round(v, 1) for k, v in med.items()}
            out["added_ns_per_read"] = {}
            for f in FILTERS:
                sits_add, bt_add = med[f"sits_{f}"] - med["none"], med[f"bpftrace_{f}"] - med["none"]
                out["added_ns_per_read"][f] = {"sits": round(sits_add, 1), "bpftrace": round(bt_add, 1),
                                               "ratio": round(sits_add / bt_add, 3) if bt_add > 0 else None}
        if "streaming" in parts:
            out["streaming"], out["max_lossless_mps"] = streaming(build("probe_getppid_loop", tmp))
    if "startup" in parts:
        out["startup_ms"], out["rss_mb"] = startup()
    if args.json:
        print(json.dumps(out, indent=2))
        return
    if "added_ns_per_read" in out:
        med, raw = out["median_per_read_cpu_ns"], out["per_read_cpu_ns"]
        print(f"workload: {args.reads} x read(/dev/zero, 1 byte), {args.rounds} interleaved rounds, medians")
        print(f"  plain read              {med['none']:8.1f} ns CPU/read  (runs {raw['none']})")
        for f in FILTERS:
            a = out["added_ns_per_read"][f]
            print(f"  sits histogram, {f:4s}    {med[f'sits_{f}']:8.1f} ns  -> +{a['sits']:.1f} ns/event  "
                  f"(runs {raw[f'sits_{f}']})")
            print(f"  bpftrace hist(), {f:4s}   {med[f'bpftrace_{f}']:8.1f} ns  -> +{a['bpftrace']:.1f} ns/event  "
                  f"(runs {raw[f'bpftrace_{f}']})")
            print(f"  ratio sits/bpftrace, {f:4s} {a['ratio']}   (target <= 0.5)")
    if "streaming" in out:
        print("streaming (ringbuf, BPF_RB_NO_WAKEUP, mmap+numpy drain every 2 ms):")
        for r in out["streaming"]:
            print(f"  burst {r['burst']:4d}: {r['events']:9d}/{r['expected']:9d} events, lost {r['lost']:8d}, "
                  f"{r['rate_mps']:6.2f} M ev/s offered, consumer {r['consumer_ns_per_event']} ns/event")
        print(f"  max lossless rate    {out['max_lossless_mps']:.2f} M events/s   (target >= 2.5)")
    if "startup_ms" in out:
        s, b = out["startup_ms"], out["rss_mb"]
        print("startup, exec -> \"ready\" read here (probes attached), medians of 5 interleaved runs "
              "(target <= 50 ms):")
        for g in STARTUP_GROUPS:
            probes = "" if g == "all" else f" --probes {g}"
            cli, lib = s[f"cli_{g}"], s[f"library_{g}"]
            groups = "DEFAULT_GROUPS" if g == "all" else f'(\"{g}\",)'
            print(f"  CLI      `sits probe audit{probes} -- CMD` {cli['median']:6.1f} ms  (runs {cli['runs']})")
            print(f"  library  ProbeSession({groups}).start() {lib['median']:6.1f} ms  (runs {lib['runs']}; "
                  f"import+start {lib['import_and_start']} ms, start() {lib['start_call']} ms)")
        print(f"  bpftrace `bpftrace -e '...hist()...'` {s['bpftrace']['median']:6.1f} ms  "
              f"(runs {s['bpftrace']['runs']})")
        print("RSS with probes attached (peak VmHWM), target <= 25 MB:")
        print("  " + ", ".join(f"{k} {v['rss']} MB (peak {v['peak']})" for k, v in b.items()))


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    main()
