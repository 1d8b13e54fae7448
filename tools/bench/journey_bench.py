#!/usr/bin/env python3
"""What following every frame costs (inside the test VM; not a timed test):

    tools/bench/journey_bench [--frames 600] [--fps 60] [--size 640x480] [--reps 3] [--modes stats,records]

The same `sits capture --to-kms` pipeline runs alone and under the frame
journey (journey.bpf.c read as `sits probe frames` reads it), alternating,
in one run. Two ways of following:

  stats    as `sits probe frames --json`: the programs keep the statistics
           (stage histograms, drops) in the kernel; the follower sleeps
           until the pipeline exits, then reads them and the frames still
           in flight once
  records  as `sits probe frames --stream FILE`: every frame's record from
           the ring too, drained every 0.1 s and written to a file

Per captured frame: the pipeline's own CPU (its rusage) alone and followed,
the follower's CPU (this process's rusage while it follows, and reads
the end; starting and detaching the programs, once a run, apart) and the
journey programs' kernel time (BPF run-time statistics), then
what following adds in all, against issue 11's 20 us a frame; how the
kernel functions were hooked (BPF trampolines, or kprobes); and, with
records, how far the kernel's time of each stage is from the one sits
records itself (`--timeline`) for the same frame.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from sits.ebpf.probes import Filters, ProbeSession  # noqa: E402
from sits.journey import kernel as kj  # noqa: E402
from sits.journey import record  # noqa: E402
from sits.journey.stats import Journey  # noqa: E402

TARGET_US = 20.0
DRAIN_S = 0.1   # as sits probe frames --stream
MODES = ("stats", "records")


def capture_cmd(args) -> list[str]:
    return [sys.executable, "-m", "sits.cli.app", "capture", "--to-kms", "--frames", str(args.frames),
            "--size", args.size, "--fps", str(args.fps), "--json"]


def cpu_s(ru) -> float:
    return ru.ru_utime + ru.ru_stime


def alone(args) -> dict:
    # through sh as when followed, so that both count the same
    # with --timeline as when followed, whose records are compared
    timeline = f"/tmp/journey-bench-alone-{os.getpid()}.ndjson"
    p = subprocess.Popen(["sh", "-c", " ".join(capture_cmd(args) + ["--timeline", timeline])],
                         stdout=subprocess.PIPE, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    os.unlink(timeline)
    s = json.loads(out)
    return {"frames": s["frames_captured"], "pipeline_cpu_s": cpu_s(ru)}


def followed(args, mode: str) -> dict:
    records = mode == "records"
    journey = Journey()
    session = ProbeSession(("frames",), filters=Filters(follow=True), stats=True,
                           configure=kj.configure(journey, records=records)).start()
    timeline = f"/tmp/journey-bench-{os.getpid()}.ndjson"
    stream = f"/tmp/journey-bench-{os.getpid()}-stream.ndjson"
    kernel = []
    try:
        reader = kj.KernelJourney(session)
        # the first read loads numpy's reductions: once a run, as the start is
        journey.merge(reader.collect())
        summary = f"/tmp/journey-bench-{os.getpid()}.json"
        before = resource.getrusage(resource.RUSAGE_SELF)
        pid = session.spawn(["sh", "-c", " ".join(capture_cmd(args) + ["--timeline", timeline]) + f" > {summary}"])
        with record.Writer(stream) as writer:
            take = lambda rec: (writer.write(rec), kernel.append(rec))  # noqa: E731
            if records:
                while True:
                    done, status, ru = os.wait4(pid, os.WNOHANG)
                    for rec in reader.drain():
                        take(rec)
                    if done:
                        break
                    time.sleep(DRAIN_S)
            else:   # nothing to do until the end
                _, status, ru = os.wait4(pid, 0)
            bpf_ns = sum(p["run_time_ns"] for p in session.program_stats() if p["program"].startswith("sits_journey"))
            # detaching is once a run (it was session.close()'s before the
            # report stopped the programs first): counted apart
            ended = resource.getrusage(resource.RUSAGE_SELF)
            reader.detach()
            detached = resource.getrusage(resource.RUSAGE_SELF)
            report = kj.kernel_report(reader, journey, session, also=take)
        after = resource.getrusage(resource.RUSAGE_SELF)
        with open(summary) as fo:
            out = fo.read()
        os.unlink(summary)
        os.unlink(stream)
        s = json.loads(out)
    finally:
        session.close()
    own = record.read(timeline)
    kernel.sort(key=lambda r: r["dequeued_ns"])   # streamed as journeys end, not in capture order
    os.unlink(timeline)
    return {"frames": s["frames_captured"], "journey_frames": report["frames"]["count"], "records": len(kernel),
            "hooks": report["hooks"], "pipeline_cpu_s": cpu_s(ru),
            "follower_cpu_s": cpu_s(ended) - cpu_s(before) + cpu_s(after) - cpu_s(detached),
            "detach_cpu_s": cpu_s(detached) - cpu_s(ended), "bpf_s": bpf_ns / 1e9,
            "agreement_ms": agreement(kernel, own) if records else {}}


def agreement(kernel: list[dict], own: list[dict]) -> dict:
    """Per stage, how far the kernel's time of a frame is from sits' own
    record of it (|kernel - sits|, ms: p50, p95, max), frames paired in
    capture order."""
    out = {}
    for stage in record.STAGES[:6]:
        d = sorted(abs(k[f"{stage}_ns"] - o[f"{stage}_ns"]) / 1e6 for k, o in zip(kernel, own)
                   if k[f"{stage}_ns"] is not None and o[f"{stage}_ns"] is not None)
        if d:
            out[stage] = {"p50": round(d[len(d) // 2], 3), "p95": round(d[int(0.95 * (len(d) - 1))], 3),
                          "max": round(d[-1], 3), "frames": len(d)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--fps", type=int, default=60)
    ap.add_argument("--size", default="640x480")
    ap.add_argument("--reps", type=int, default=int(os.environ.get("BENCH_REPS", 3)))
    ap.add_argument("--modes", default=",".join(MODES), help="stats,records (default both)")
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - set(MODES):
        ap.error(f"--modes: of {', '.join(MODES)}")
    rows = []
    per = lambda s, n: 1e6 * s / n  # noqa: E731  (µs a frame)
    for rep in range(args.reps):
        a = alone(args)
        for mode in modes:
            f = followed(args, mode)
            row = {"rep": rep, "mode": mode, "alone": a, "followed": f,
                   "pipeline_us_alone": per(a["pipeline_cpu_s"], a["frames"]),
                   "pipeline_us_followed": per(f["pipeline_cpu_s"], f["frames"]),
                   "follower_us": per(f["follower_cpu_s"], f["frames"]),
                   "bpf_us": per(f["bpf_s"], f["frames"])}
            row["pipeline_added_us"] = row["pipeline_us_followed"] - row["pipeline_us_alone"]
            row["added_us"] = row["pipeline_added_us"] + row["follower_us"]
            rows.append(row)
            hooks = f["hooks"]["kind"] + (f" ({f['hooks']['why']})" if f["hooks"]["why"] else "")
            print(f"rep {rep} {mode}: pipeline {row['pipeline_us_alone']:.0f} us/frame alone, "
                  f"{row['pipeline_us_followed']:.0f} followed (+{row['pipeline_added_us']:.0f}; BPF "
                  f"{row['bpf_us']:.1f} of it); follower {row['follower_us']:.1f}; added {row['added_us']:.1f} "
                  f"us/frame ({f['journey_frames']} frames in the journey, {f['records']} records, of "
                  f"{f['frames']} captured; hooks: {hooks}; detaching once {1e3 * f['detach_cpu_s']:.0f} ms)"
                  + ("; kernel vs sits' own record, ms: " + ", ".join(
                      f"{k} p50 {v['p50']} p95 {v['p95']} max {v['max']}" for k, v in f["agreement_ms"].items())
                     if f["agreement_ms"] else ""),
                  flush=True)
    for mode in modes:
        mine = [r for r in rows if r["mode"] == mode]
        med = lambda k: sorted(r[k] for r in mine)[len(mine) // 2]  # noqa: E731
        print(f"{mode}: per frame followed, median of {len(mine)}: pipeline +{med('pipeline_added_us'):.1f} us, "
              f"follower {med('follower_us'):.1f} us, added {med('added_us'):.1f} us (target {TARGET_US:g} us: "
              f"{'met' if med('added_us') <= TARGET_US else 'missed'})")
    if args.json_out:
        with open(args.json_out, "w") as fo:
            json.dump({"rows": rows, "target_us": TARGET_US}, fo, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
