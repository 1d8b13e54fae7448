#!/usr/bin/env python3
"""What following every frame costs (inside the test VM; not a timed test):

    tools/bench/journey_bench [--frames 600] [--fps 60] [--size 320x180] [--reps 3] [--modes stats,records]

The same `sits capture --to-kms` pipeline runs alone and under the command
users run, `sits probe frames -o REPORT [--stream FILE] -- PIPELINE`,
alternating, in one run. Two ways of following:

  stats    `sits probe frames -o R.json`: the programs keep the statistics
           (stage histograms, drops) in the kernel; the follower sleeps
           until the pipeline exits, then reads them and the frames still
           in flight once
  records  `sits probe frames --stream FILE`: every frame's record from the
           ring too, drained once a second and written to the file

Per frame, over the middle of the streaming (the scheduler's runtime of
each process, /proc/PID/task/*/schedstat, sampled every 0.1 s, as
capture_bench's "steady" figure; start-up, attaching, the end's report and
detaching are not in it):
  programs  the journey programs' kernel run time (bpf_stats, read from
            the follower's program fds), wherever they ran: the
            pipeline's ioctls, vivid's thread, vkms's vblank timer
  dispatch  their runs a frame times what the kernel spends to start one
            program run (the calibration below: a raw tracepoint's)
  follower  the CPU of `sits probe frames` itself
  = what following runs a frame, against issue 11's 20 us. Beside it, the
pipeline's own CPU followed minus alone: under emulation the pipeline's
ioctls spin on vivid's device lock while vivid's thread fills a frame
(mutex_spin_on_owner, about a quarter of the pipeline's streaming CPU in a
perf profile), and how often they meet moves that difference by hundreds of
microseconds either way from run to run, so it is shown, with each run's
figure, and not taken for the cost. Also: how the kernel functions were
hooked, and, with records, how far the kernel's time of each stage is from
the one sits records itself (`--timeline`) for the same frame.

The guest clock (tools/bench/capture_bench: -icount shift=3) counts 8 ns a
guest instruction, so the figures are instruction counts, not this CPU's
time. To say what they come to on a real core, the same kind of work is
measured both ways, natively on the host (the wrapper runs
`journey_bench.py --calibrate` before the VM starts) and in the guest, with
the kernel's BPF statistics on in both:
  kernel    the CPU that sits' own `syscalls` probe (raw tracepoint
            programs with a pid filter and a histogram, like the
            journey's: dispatch, map lookups, a histogram update) adds to a
            one-byte read() of /dev/zero (tools/bench/probe_readloop.c);
            the guest's run also splits it into the programs' run time and
            the dispatch of one run. For the programs and their dispatch.
  records   the CPU of the follower's own work for a record of --stream:
            a drain's worth of struct sits_frame rows made records and
            written (journey.kernel.to_rows, record.Writer.write_rows).
            For the follower: Python runs several times more instructions
            a ns on a real core than the kernel's BPF paths do, so the
            kernel's ratio would make the follower's host figure too large.
Each ratio turns its part of the guest's figures into an estimate for the
host's CPU.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)

from capture_bench import SAMPLE_S, process_runtime_ns, steady_window  # noqa: E402
from ebpf_bench import build, readloop  # noqa: E402

from sits.journey import record  # noqa: E402

TARGET_US = 20.0
MODES = ("stats", "records")
STATS_SYSCTL = "/proc/sys/kernel/bpf_stats_enabled"
#: reads a calibration round: natively, and in the guest (where one costs ~100x more)
HOST_READS, GUEST_READS = 1_000_000, 20_000
#: drains of the records calibration: natively, and in the guest
HOST_DRAINS, GUEST_DRAINS = 2_000, 40
#: a drain's frames: a second's at 60 fps (sits/cli/probe/frames.py DRAIN_S)
DRAIN_FRAMES = 60
CAL_ROUNDS = 5
BPF_SAMPLE_S = 1.0


def capture_cmd(args, timeline: str | None) -> list[str]:
    return [sys.executable, "-m", "sits.cli.app", "capture", "--to-kms", "--frames", str(args.frames),
            "--size", args.size, "--fps", str(args.fps), "--json", *(["--timeline", timeline] if timeline else [])]


def follow_cmd(pipeline: list[str], report: str, stream: str | None) -> list[str]:
    return [sys.executable, "-m", "sits.cli.app", "probe", "frames", "-o", report,
            *(["--stream", stream] if stream else []), "--", *pipeline]


def child_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
    except OSError:
        return None
    return int(kids[0]) if kids else None


def bpf_run(pid: int) -> tuple[int, int]:
    """(kernel run time, runs) of every BPF program `pid` holds (all the
    journey's, in `sits probe frames`), from fdinfo."""
    time_ns = runs = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return 0, 0
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                text = f.read()
        except OSError:
            continue
        if "prog_type:" in text:
            for line in text.splitlines():
                if line.startswith("run_time_ns:"):
                    time_ns += int(line.split()[1])
                elif line.startswith("run_cnt:"):
                    runs += int(line.split()[1])
    return time_ns, runs


class Sampled:
    """`argv` run to its end, sampling every SAMPLE_S the scheduler runtime
    of the pipeline (the process, or with `follower` its child) and of the
    follower, and the follower's programs' run time."""

    def __init__(self, argv: list[str], follower: bool):
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        chunks = {"out": [], "err": []}
        readers = [threading.Thread(target=lambda f, k: chunks[k].append(f.read()), args=(f, k), daemon=True)
                   for f, k in ((proc.stdout, "out"), (proc.stderr, "err"))]
        for r in readers:
            r.start()
        pipe = None if follower else proc.pid
        # t, pipeline, follower; and when the programs' figures were read, BPF ns, BPF runs
        self.samples: list[tuple[float, int, int, float, int, int]] = []
        self.pipeline_end_s = None
        bpf = (0.0, 0, 0)
        while proc.poll() is None:
            if pipe is None:
                pipe = child_of(proc.pid)
            t = time.monotonic() - t0
            p = process_runtime_ns(pipe) if pipe is not None else None
            if p is None and pipe is not None and self.samples and self.pipeline_end_s is None:
                self.pipeline_end_s = t
            if p is not None:
                fo = process_runtime_ns(proc.pid) if follower else 0
                # every fd's fdinfo is work in the guest beside the pipeline:
                # read once a second, not at every sample
                if follower and t - bpf[0] >= BPF_SAMPLE_S:
                    bpf = (t, *bpf_run(proc.pid))
                self.samples.append((t, p, fo or 0, *bpf))
            time.sleep(SAMPLE_S)
        self.exit_s = time.monotonic() - t0
        if self.pipeline_end_s is None:
            self.pipeline_end_s = self.exit_s
        for r in readers:
            r.join()
        self.out, self.err = "".join(chunks["out"]), "".join(chunks["err"])
        if proc.returncode != 0:
            raise SystemExit(f"journey_bench: {' '.join(argv[:6])}... failed ({proc.returncode}): "
                             f"{self.err.strip()[-300:]}")

    def steady_per_frame_us(self, frames: int, fps: float) -> dict | None:
        """Each sampled quantity a frame over the middle of the streaming (as
        capture_bench's steady figure): CPU in µs, BPF runs in runs."""
        window = steady_window(self.samples, self.pipeline_end_s, frames, fps)
        if window is None:
            return None
        a, b = window
        n = (b[0] - a[0]) * fps
        out = {k: (b[i] - a[i]) / 1e3 / n for i, k in enumerate(("pipeline", "follower"), start=1)}
        nb = (b[3] - a[3]) * fps    # frames between the two reads of the programs' figures
        out["bpf"] = (b[4] - a[4]) / 1e3 / nb if nb > 0 else 0.0
        out["bpf_runs"] = (b[5] - a[5]) / nb if nb > 0 else 0.0
        return out


def calibrate(reads: int) -> dict:
    """What sits' pid-filtered `syscalls` probe (a raw tracepoint program at
    sys_enter and at sys_exit) adds to a read(), ns: in all (median of
    CAL_ROUNDS, rounds interleaved: tools/bench/ebpf_bench's measure), its
    programs' own run time (bpf_stats), and so the dispatch of one program
    run (the rest, over the two runs a read)."""
    from sits.ebpf.probes import Filters, ProbeSession
    bpf = []

    def attach(pid):
        s = ProbeSession(("syscalls",), filters=Filters(pids=(pid,)), stats=True).start()

        def stop():
            bpf.append(sum(p["run_time_ns"] for p in s.program_stats()) / reads)
            s.close()
        return stop

    with tempfile.TemporaryDirectory() as tmp:
        exe = build("probe_readloop", tmp)
        none, probed = [], []
        for _ in range(CAL_ROUNDS):
            none.append(readloop(exe, reads))
            probed.append(readloop(exe, reads, attach))
    added, run = statistics.median(probed) - statistics.median(none), statistics.median(bpf)
    return {"added_ns": added, "bpf_ns": run, "dispatch_ns": (added - run) / 2}


def calibrate_records(drains: int) -> float:
    """CPU ns a record of `sits probe frames --stream`'s own work: a
    drain's struct sits_frame rows (a 60 fps second's, each frame at every
    stage) made record rows and written to a file, median of CAL_ROUNDS."""
    import numpy as np

    from sits.ebpf.ringbuf import FRAME_DTYPE
    from sits.journey.kernel import to_rows
    frames = np.zeros(DRAIN_FRAMES, FRAME_DTYPE)
    t = 10**12 + np.arange(DRAIN_FRAMES, dtype=np.uint64) * 16_666_667
    frames["id"] = frames["sequence"] = frames["scanout_seq"] = np.arange(DRAIN_FRAMES)
    frames["replaced_seq"] = frames["scanout_seq"] + 1
    frames["buffer"] = np.arange(DRAIN_FRAMES) % 4
    frames["pid"] = os.getpid()
    for i, stage in enumerate(("captured", "dequeued", "committed", "scanout", "replaced", "requeued")):
        frames[f"{stage}_ns"] = t + i * 4_000_000
    rounds = []
    with tempfile.TemporaryDirectory() as tmp, record.Writer(os.path.join(tmp, "r.ndjson")) as w:
        for _ in range(CAL_ROUNDS):
            t0 = time.process_time()
            for _ in range(drains):
                w.write_rows(to_rows(frames))
            rounds.append((time.process_time() - t0) * 1e9 / (drains * DRAIN_FRAMES))
    return statistics.median(rounds)


class bpf_stats_on:
    """The kernel's BPF run-time statistics on (kernel.bpf_stats_enabled),
    as they were after: the figures need them, and each calibration runs
    with them as the followed pipelines do."""

    def __enter__(self):
        with open(STATS_SYSCTL) as f:
            self.was = f.read().strip()
        with open(STATS_SYSCTL, "w") as f:
            f.write("1")

    def __exit__(self, *exc):
        with open(STATS_SYSCTL, "w") as f:
            f.write(self.was)


def agreement(kernel: list[dict], own: list[dict]) -> dict:
    """Per stage, how far the kernel's time of a frame is from sits' own
    record of it (|kernel - sits|, ms: p50, p95, max), frames paired in
    dequeue order."""
    out = {}
    for stage in record.STAGES[:6]:
        d = sorted(abs(k[f"{stage}_ns"] - o[f"{stage}_ns"]) / 1e6 for k, o in zip(kernel, own)
                   if k[f"{stage}_ns"] is not None and o[f"{stage}_ns"] is not None)
        if d:
            out[stage] = {"p50": round(d[len(d) // 2], 3), "p95": round(d[int(0.95 * (len(d) - 1))], 3),
                          "max": round(d[-1], 3), "frames": len(d)}
    return out


def one_run(args, mode: str, followed: bool, tmp: str) -> dict:
    """The pipeline alone or followed in `mode` (records: with its own
    timeline, alone too, to hold the kernel's records to)."""
    timeline = os.path.join(tmp, "timeline.ndjson") if mode == "records" else None
    report = os.path.join(tmp, "report.json")
    stream = os.path.join(tmp, "stream.ndjson") if mode == "records" else None
    pipeline = capture_cmd(args, timeline)
    run = Sampled(follow_cmd(pipeline, report, stream) if followed else pipeline, follower=followed)
    summary = json.loads(run.out)
    fps = summary["fps"]
    row = {"frames": summary["frames_captured"], "fps": fps,
           "steady": run.steady_per_frame_us(summary["frames_captured"], fps)}
    if followed:
        with open(report) as f:
            rep = json.load(f)
        row["journey_frames"] = rep["frames"]["count"]
        row["hooks"] = rep["hooks"]
        if stream:
            kernel = sorted(record.read(stream), key=lambda r: r["dequeued_ns"])
            row["records"] = len(kernel)
            row["agreement_ms"] = agreement(kernel, record.read(timeline))
    return row


def costs(alone: dict, followed: dict, cal: dict, scales: dict | None) -> dict:
    """Per frame, guest clock (µs): what following adds. `bound` counts
    only what following itself runs -- the programs, their dispatch (each
    run as the calibration's), the follower -- and `measured` is the
    pipeline's own CPU followed minus alone plus the follower and the
    programs that ran elsewhere (an upper bound that the pipeline's run to
    run spread moves). With `scales` (guest / host, by calibration), the
    `host_` figures: the kernel's part and the follower's each by its own."""
    a, f = alone["steady"], followed["steady"]
    dispatch_us = f["bpf_runs"] * cal["dispatch_ns"] / 1e3
    out = {"bpf_us": f["bpf"], "bpf_runs": f["bpf_runs"], "dispatch_us": dispatch_us,
           "follower_us": f["follower"], "pipeline_delta_us": f["pipeline"] - a["pipeline"],
           "bound_us": f["bpf"] + dispatch_us + f["follower"],
           "measured_us": f["pipeline"] - a["pipeline"] + f["follower"] + f["bpf"]}
    if scales:
        kernel = (f["bpf"] + dispatch_us) / scales["kernel"]
        out["host_bound_us"] = kernel + f["follower"] / scales["records"]
        out["host_measured_us"] = (f["pipeline"] - a["pipeline"] + f["bpf"]) / scales["kernel"] \
            + f["follower"] / scales["records"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--fps", type=int, default=60)
    # vivid fills a frame holding its device's lock, which the pipeline's
    # ioctls spin on under emulation: a small frame keeps that spinning (and
    # its run-to-run spread) small
    ap.add_argument("--size", default="320x180")
    ap.add_argument("--reps", type=int, default=int(os.environ.get("BENCH_REPS", 3)))
    ap.add_argument("--modes", default=",".join(MODES), help="stats,records (default both)")
    ap.add_argument("--calibrate", action="store_true",
                    help="only measure the calibration read() (the wrapper runs this on the host) and print its ns")
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    if args.calibrate:
        with bpf_stats_on():
            print(f"{calibrate(HOST_READS)['added_ns']:.1f} {calibrate_records(HOST_DRAINS):.1f}")
        return 0
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - set(MODES):
        ap.error(f"--modes: of {', '.join(MODES)}")
    # the host's calibration (the wrapper's --calibrate): read() ns, record ns
    host = [float(v) for v in os.environ.get("BENCH_HOST_CAL", "").split()] or None
    rows = []
    with bpf_stats_on():   # the programs' run time, for every run alike
        cal = calibrate(GUEST_READS)
        cal["record_ns"] = calibrate_records(GUEST_DRAINS)
        scales = {"kernel": cal["added_ns"] / host[0], "records": cal["record_ns"] / host[1]} if host else None
        print(f"calibration: sits' syscalls probe adds {cal['added_ns']:.0f} ns to a read() in the guest "
              f"({cal['bpf_ns']:.0f} its programs, {cal['dispatch_ns']:.0f} the dispatch of each of its 2 runs)"
              + (f", {host[0]:.1f} ns on the host: the kernel's figures / {scales['kernel']:.1f}" if host else "")
              + f"; a --stream record costs the follower {cal['record_ns']:.0f} ns in the guest"
              + (f", {host[1]:.1f} ns on the host: the follower's figures / {scales['records']:.1f}" if host
                 else " (no host figures: BENCH_HOST_CAL unset)"), flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            for rep in range(args.reps):
                for mode in modes:
                    alone, f = one_run(args, mode, False, tmp), one_run(args, mode, True, tmp)
                    row = {"rep": rep, "mode": mode, "alone": alone, "followed": f}
                    if alone["steady"] and f["steady"]:
                        row.update(costs(alone, f, cal, scales))
                    rows.append(row)
                    hooks = f["hooks"]["kind"] + (f" ({f['hooks']['why']})" if f["hooks"]["why"] else "")
                    print(f"rep {rep} {mode}: " + (
                        f"BPF {row['bpf_us']:.1f} us/frame ({row['bpf_runs']:.1f} runs, dispatch "
                        f"{row['dispatch_us']:.1f}), follower {row['follower_us']:.1f}: {row['bound_us']:.1f}; "
                        f"pipeline {alone['steady']['pipeline']:.0f} alone, {f['steady']['pipeline']:.0f} followed "
                        f"({row['pipeline_delta_us']:+.1f})" if "bound_us" in row else "no steady window")
                          + f" ({f['journey_frames']} frames in the journey of {f['frames']} captured, "
                          f"{alone['fps']:.1f}/{f['fps']:.1f} fps alone/followed; hooks: {hooks})"
                          + (f"; {f['records']} records; kernel vs sits' own record, ms: " + ", ".join(
                              f"{k} p50 {v['p50']} p95 {v['p95']} max {v['max']}"
                              for k, v in f["agreement_ms"].items()) if "records" in f else ""), flush=True)
    for mode in modes:
        mine = [r for r in rows if r["mode"] == mode and "bound_us" in r]
        if not mine:
            continue
        keys = ("bpf_us", "dispatch_us", "follower_us", "bound_us", "pipeline_delta_us", "measured_us",
                *(("host_bound_us", "host_measured_us") if scales else ()))
        med = {k: statistics.median(r[k] for r in mine) for k in keys}
        on_host = (lambda k: f" = {med['host_' + k]:.1f} us on the host's CPU") if scales else (lambda k: "")
        verdict = (f" (target {TARGET_US:g} us: {'met' if med['host_bound_us'] <= TARGET_US else 'missed'})"
                   if scales else "")
        print(f"{mode}: per frame followed, median of {len(mine)}, guest clock: programs {med['bpf_us']:.1f} + "
              f"dispatch {med['dispatch_us']:.1f} + follower {med['follower_us']:.1f} = {med['bound_us']:.1f} us"
              f"{on_host('bound_us')}{verdict}; the pipeline's own CPU followed minus alone "
              f"{med['pipeline_delta_us']:+.1f} us (runs: "
              + ", ".join(f"{r['pipeline_delta_us']:+.0f}" for r in mine) + f"), measured in all "
              f"{med['measured_us']:.1f} us{on_host('measured_us')}")
    if args.json_out:
        with open(args.json_out, "w") as fo:
            json.dump({"rows": rows, "target_us": TARGET_US, "calibration": {**cal, "host": host}}, fo, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
