#!/usr/bin/env python3
"""Camera-shaped load through the whole chain (GPU machine; not a timed test):

    PYTHONPATH=. python3 tools/bench/chain_bench.py [--seconds 2.5] [--json FILE]

1080p YUYV and NV12 frames land at 60 and 240 fps in memfd buffers
(SyntheticCamera: a timerfd, pixels written once, as a camera's DMA costs
the CPU nothing) and go through the pipeline's loop to a tensor-ready
224x224 fp16 ImageNet-normalised NCHW batch:

* sits, batch 1: CudaConsumer, each buffer registered once, one CUDA graph
  per buffer (ingest copy: the copy engine reads the registered pages; and
  ingest direct: the kernel reads them over PCIe), launched and completed
  inside the frame queue's C, no Python per frame; and "+python": the same
  with every batch handed to Python (an on_batch callback);
* sits, dynamic batching: the DynamicBatcher under a latency budget of four
  frame periods (max 8 frames a batch);
* loop-only: the same loop and source, a consumer that releases each lease
  at once (no GPU): the CPU floor under the Python paths; loop-c: the frame
  queue's C alone ticking (no consumer, no GPU): the floor under the C path;
* PyTorch, as a user writes it today, in the same run and through the same
  loop: the frame as a numpy array -> torch.from_numpy(...).cuda() ->
  colour conversion, antialiased resize, normalisation in PyTorch ops ->
  synchronize (its memfd buffers are not registered: a user's are not).

First the machine's floor: tools/bench/wake_floor.c, a timerfd wake-up a
frame in C with nothing else (on a sandboxed kernel a wake-up alone costs
tens of µs), printed beside each path's CPU.

Per case (after a warm-up run): capture -> tensor-ready latency p50/p99
(V4L2 timestamp, i.e. the tick the frame landed on, to the batch's work
done: the clock of the host function that runs right after it on the
stream, CLOCK_MONOTONIC; `release_ms` is how much later the loop released
the leases; PyTorch's: to its synchronize() returning) and host CPU per
frame (process CPU time, every thread: the loop's, CUDA's; the difference
between a run of a quarter of the time and the full run, so that set-up and
teardown cancel and nothing samples the loop; by thread in
`cpu_us_per_frame_by_thread`; with the run's set-up and teardown in
`cpu_us_per_frame_with_setup`), then the ratios against PyTorch and the
issue's targets.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from sits.cuda.formats import OutputSpec  # noqa: E402
from sits.errors import SitsError  # noqa: E402
from sits.pipeline.consumer import Consumer  # noqa: E402
from sits.pipeline.cuda import CudaConsumer  # noqa: E402
from sits.pipeline.pipeline import Pipeline  # noqa: E402
from sits.pipeline.stats import percentiles  # noqa: E402
from sits.pipeline.synthetic import SyntheticCamera  # noqa: E402

W, H = 1920, 1080
IMAGENET = dict(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
SPEC = OutputSpec(224, 224, dtype="float16", **IMAGENET)
TARGET_P99_MS, TARGET_CPU_US, TARGET_RATIO = 0.25, 30.0, 10.0


def pipeline_for(source, consumers):
    return Pipeline(source, consumers=consumers)


class TorchConsumer(Consumer):
    """The path a user writes today: numpy frame -> .cuda() -> PyTorch ops."""

    name = "pytorch"

    def __init__(self, code: str):
        import torch

        from sits.cuda.bench import torch_chain

        self.torch = torch
        self.chain = torch_chain(torch, code, 224, True)
        self.nbytes = W * H * 2 if code == "YUYV" else W * H * 3 // 2
        self.latencies_ms = []

    def take(self, frame, lease) -> None:
        try:
            pixels = frame.buffer.memfd.array[:self.nbytes]
            raw = self.torch.from_numpy(pixels).cuda().view(1, -1)
            self.chain(raw)
            self.torch.cuda.current_stream().synchronize()
            self.latencies_ms.append((time.monotonic_ns() - frame.timestamp_ns) / 1e6)
        finally:
            lease.release()

    def report(self):
        return self.name, {"frames": len(self.latencies_ms), "latency_ms": percentiles(self.latencies_ms)}


def thread_cpu_ns() -> dict:
    """tid -> (name, ns on a CPU) for every thread of this process."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        out[int(tid)] = (name, ns)
    return out


class QueueOnly(Consumer):
    """No consumer at work: the frame queue's C takes each tick and queues
    the buffer again (the floor of the C path's CPU)."""

    name = "queue"
    in_queue = True

    def report(self):
        return self.name, {"frames": 0, "latency_ms": percentiles([]), "converted_in": "frame queue (C)"}


class LoopOnly(Consumer):
    """No GPU: the loop, the source, a lease taken and released (the floor
    under every other path's CPU)."""

    name = "loop"

    def __init__(self):
        self.latencies_ms = []

    def take(self, frame, lease) -> None:
        self.latencies_ms.append((time.monotonic_ns() - frame.timestamp_ns) / 1e6)
        lease.release()

    def report(self):
        return self.name, {"frames": len(self.latencies_ms), "latency_ms": percentiles(self.latencies_ms)}


def make_consumer(code: str, fps: float, kind: str):
    """kind: pytorch, loop-only, dynamic, or sits-<ingest>[+<schedule>][+python]
    (sits-copy: converted inside the frame queue's C; +python: every batch
    through Python, as with an on_batch callback)."""
    if kind == "pytorch":
        return TorchConsumer(code)
    if kind == "loop-only":
        return LoopOnly()
    if kind == "loop-c":
        return QueueOnly()
    if kind == "dynamic":
        return CudaConsumer(SPEC, max_batch=8, latency_budget_s=4 / fps)
    ingest, *extra = kind.split("-", 1)[1].split("+")
    schedule = next((e for e in extra if e != "python"), None)
    on_batch = (lambda batch: None) if "python" in extra else None
    return CudaConsumer(SPEC, ingest=ingest, schedule=schedule, on_batch=on_batch)


def thread_cpu_by_name(before: dict, after: dict) -> dict:
    """ns on a CPU between two thread_cpu_ns() snapshots, by thread name
    ("main": the loop's thread)."""
    main, out = os.getpid(), {}
    for tid, (name, ns) in after.items():
        key = "main" if tid == main else name
        out[key] = out.get(key, 0) + ns - before.get(tid, (name, 0))[1]
    return out


def timed_run(cam, consumer, seconds: float):
    """One run with nothing sampling it (no status callback: a library
    user's run): its summary, process CPU seconds and threads' CPU."""
    threads0, cpu0 = thread_cpu_ns(), time.process_time()
    summary = pipeline_for(cam, [consumer]).run(duration=seconds)
    cpu = time.process_time() - cpu0
    return summary, cpu, thread_cpu_by_name(threads0, thread_cpu_ns())


def run_case(code: str, fps: float, kind: str, seconds: float) -> dict:
    """CPU per frame is the difference between a short run and a long one
    (both with the same set-up, start and teardown, which cancel): the
    steady state with every thread's share, and nothing in the loop to
    measure it (a sampler in the loop costs more than a frame here)."""
    cam = SyntheticCamera(code, (W, H), fps=fps, buffers=12 if kind == "dynamic" else 4)
    try:
        # Warm-up with a consumer of its own: kernels compiled, allocators and cuDNN ready.
        pipeline_for(cam, [make_consumer(code, fps, kind)]).run(duration=0.3)
        short, short_cpu, short_threads = timed_run(cam, make_consumer(code, fps, kind), seconds / 4)
        t0 = time.monotonic()
        consumer = make_consumer(code, fps, kind)
        summary, cpu_run, threads = timed_run(cam, consumer, seconds)
        wall = time.monotonic() - t0
        rep = consumer.report()[1]
        frames = summary.frames_captured
        more = frames - short.frames_captured
        steady = round(1e6 * (cpu_run - short_cpu) / more, 1) if more > 0 else None
        by_thread = {k: round((ns - short_threads.get(k, 0)) / 1e3 / more, 1)
                     for k, ns in sorted(threads.items(), key=lambda kv: -kv[1])} if more > 0 else None
        row = dict(format=code, fps=fps, path=kind, frames=rep["frames"] or frames,
                   skipped=summary.drops["sequence_gap"], seconds=round(wall, 2),
                   cpu_us_per_frame=steady,
                   cpu_us_per_frame_with_setup=round(1e6 * cpu_run / max(1, frames), 1),
                   cpu_us_per_frame_by_thread={k: v for k, v in (by_thread or {}).items() if abs(v) >= 0.1},
                   latency_ms=rep["latency_ms"])
        if isinstance(consumer, CudaConsumer):
            row.update(batches=rep["batches"], frames_per_batch=round(frames / max(1, rep["batches"]), 2),
                       gpu_ms_per_batch=rep["gpu_ms_per_batch"], release_ms=rep["release_ms"],
                       import_path=rep["import_path"], zero_copy=rep["zero_copy"], wake=rep["wake"],
                       schedule=rep["schedule"], converted_in=rep["converted_in"])
            if kind == "dynamic":
                row["budget_ms"] = round(4e3 / fps, 2)
        return row
    finally:
        cam.close()


def machine_floor(rates: list[float], seconds: float) -> list[dict]:
    """What one timer wake-up a frame costs this machine with no sits and
    no Python (tools/bench/wake_floor.c, built once: a timerfd in an epoll,
    read at each tick), at each rate: the floor under every path's CPU per
    frame."""
    import shutil
    import subprocess
    import tempfile
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return [dict(path="floor", fps=fps, error="no C compiler") for fps in rates]
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wake_floor.c")
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "wake_floor")
        subprocess.run([cc, "-O2", "-o", exe, src], check=True)
        return [dict(path="floor", **json.loads(subprocess.run([exe, str(fps), str(seconds)], check=True,
                                                              capture_output=True, text=True).stdout))
                for fps in rates]


def over(row: dict, floor: dict) -> str:
    """CPU per frame above the machine's floor at the row's rate."""
    f, c = floor.get(row["fps"]), row.get("cpu_us_per_frame")
    return f"{c - f:+.1f}" if f is not None and c is not None else "-"


def ms(value) -> str:
    return f"{value:>8.3f}" if value is not None else f"{'-':>8}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.5)
    ap.add_argument("--formats", default="YUYV,NV12")
    ap.add_argument("--fps", default="60,240")
    ap.add_argument("--paths", default="loop-c,loop-only,sits-copy,sits-direct,sits-copy+python,dynamic,pytorch")
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = machine_floor([float(f) for f in args.fps.split(",")], args.seconds)
    for row in rows:
        print(json.dumps(row), flush=True)
    floor = {r["fps"]: r.get("cpu_us_per_frame") for r in rows}
    try:
        for code in args.formats.split(","):
            for fps in (float(f) for f in args.fps.split(",")):
                for kind in args.paths.split(","):
                    try:
                        row = run_case(code, fps, kind, args.seconds)
                    except SitsError:
                        raise
                    except Exception as exc:  # one case's failure is recorded, the rest run
                        row = dict(format=code, fps=fps, path=kind, error=f"{type(exc).__name__}: {exc}")
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    except SitsError as exc:
        print(f"chain_bench: {exc}", file=sys.stderr)
        return 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print()
    print("machine floor (a timer wake-up a frame, C, no sits): " + ", ".join(
        f"{r['fps']:.0f} fps {r['cpu_us_per_frame']} us/frame, woken {r['wake_late_us']['p50']}/"
        f"{r['wake_late_us']['p99']} us (p50/p99) after the tick" for r in rows if r["path"] == "floor" and "error" not in r))
    print(f"{'format':6} {'fps':>4} {'path':16} {'frames':>6} {'batch':>5} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'CPU us/f':>9} {'- floor':>8} {'p99 x':>7} {'CPU x':>7}")
    torch_rows = {(r["format"], r["fps"]): r for r in rows if r["path"] == "pytorch" and "error" not in r}
    for r in rows:
        if r["path"] == "floor":
            continue
        if "error" in r:
            print(f"{r['format']:6} {r['fps']:>4.0f} {r['path']:16} error: {r['error']}")
            continue
        t = torch_rows.get((r["format"], r["fps"]))
        lat = r["latency_ms"]
        p99x = cpux = ""
        if t is not None and r["path"] not in ("pytorch", "loop-only", "loop-c") and lat["p99"]:
            p99x = f"{t['latency_ms']['p99'] / lat['p99']:.1f}"
            if r["cpu_us_per_frame"]:
                cpux = f"{t['cpu_us_per_frame'] / r['cpu_us_per_frame']:.1f}"
        print(f"{r['format']:6} {r['fps']:>4.0f} {r['path']:16} {r['frames']:>6} {r.get('frames_per_batch', 1):>5} "
              f"{ms(lat['p50'])} {ms(lat['p99'])} {r['cpu_us_per_frame'] or float('nan'):>9.1f} {over(r, floor):>8} {p99x:>7} {cpux:>7}")
    print()
    for r in rows:
        if "error" in r or not r["path"].startswith("sits-"):
            continue
        t = torch_rows.get((r["format"], r["fps"]))
        ratio = t["latency_ms"]["p99"] / r["latency_ms"]["p99"] if t else None
        ok = [r["latency_ms"]["p99"] <= TARGET_P99_MS, (r["cpu_us_per_frame"] or 1e9) <= TARGET_CPU_US,
              ratio is not None and ratio >= TARGET_RATIO]
        print(f"targets {r['format']} {r['fps']:.0f} fps {r['path']}: p99 {r['latency_ms']['p99']:.3f} ms "
              f"(<= {TARGET_P99_MS}: {'met' if ok[0] else 'missed'}), CPU {r['cpu_us_per_frame'] or float('nan'):.1f} us/frame "
              f"(<= {TARGET_CPU_US:.0f}: {'met' if ok[1] else 'missed'}; {over(r, floor).strip()} over the floor), p99 vs PyTorch "
              f"{'%.1fx' % ratio if ratio else '?'} (>= {TARGET_RATIO:.0f}x: {'met' if ok[2] else 'missed'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
