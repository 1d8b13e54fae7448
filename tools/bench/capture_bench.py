#!/usr/bin/env python3
"""CPU per frame of `sits capture --to-kms` against GStreamer, in one VM run.

Run it inside the test VM (tools/bench/capture_bench does that):
  tools/vm/run --timeout 1500 -- .venv/bin/python tools/bench/capture_bench.py

Marginal cost, as in the issue: CPU (user+sys) of a 320-frame run minus a
20-frame run, divided by 300 -- start-up cancels out -- median of 5 (the issue: 3). All
pipelines capture vivid XR24 (GStreamer BGRx) 1280x720 at the same frame
rate (BENCH_FPS, default 10) and show it on vkms. Under TCG the start-up of
a Python process varies by a second or more of CPU, which lands in the
marginal figure; so the bench also reports a "steady" figure: the
scheduler runtime of all the process's threads (/proc/PID/task/*/schedstat,
sampled every 0.1 s) over the middle of the long run's streaming phase,
divided by the frames shown in that time.
By default (BENCH_CLOCK=icount, set by tools/bench/capture_bench) QEMU runs
with -icount shift=3,sleep=off: guest time advances 8 ns per guest
instruction and skips idle time, so every CPU figure here counts the
instructions the guest ran for that process (user and kernel), not host
time: the host's load and TCG's code translation (which otherwise charges
each first run of new code, e.g. an interpreter's start-up, to the guest)
no longer move the numbers. BENCH_CLOCK=tcg measures host time instead.
Repetitions go round all pipelines in turn, and the ratios are also given
per repetition ("paired").
Latency: sits reports V4L2 timestamp -> flip completion; for GStreamer the
`latency` tracer's source -> sink pad time, taken in a separate run (the
tracer costs CPU), which ends when the buffer reaches kmssink, before the
flip: the two are not the same span, and the table says so.
"""
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SITS = [os.path.join(ROOT, ".venv", "bin", "sits")]
W, H = 1280, 720
REPS = int(os.environ.get("BENCH_REPS", "5"))  # the issue asks for 3; 5 steadies the marginal median
SHORT, LONG = 20, 320
# The same camera rate for every pipeline: left alone, vivid starts at 5 fps
# and GStreamer asks for its maximum (60, of which TCG delivers ~22), and
# per-frame costs at different rates do not compare. 10 fps is well within
# what vivid produces at 1280x720 under TCG.
FPS = int(os.environ.get("BENCH_FPS", "10"))
SAMPLE_S = 0.1
TEARDOWN_S = 3.0      # leave the last seconds out of the steady window: stop, restore, exit
STEADY_SHARE = 0.5    # the steady window is this share of the streaming time
LATENCY_FRAMES = 60


def gst(io_mode: str, frames: int) -> list[str]:
    return ["gst-launch-1.0", "-q", "-e", "v4l2src", "device=/dev/video0", f"io-mode={io_mode}",
            f"num-buffers={frames}", "!", f"video/x-raw,format=BGRx,width={W},height={H},framerate={FPS}/1",
            "!", "kmssink", "driver-name=vkms"]


def sits(memory: str, frames: int, *extra: str) -> list[str]:
    return [*SITS, "capture", "--to-kms", "--device", "/dev/video0", "--format", "XR24",
            "--size", f"{W}x{H}", "--fps", str(FPS), "--memory", memory, "--frames", str(frames), "--json", *extra]


PIPELINES = {
    "sits mmap (EXPBUF) -> KMS": lambda n: sits("mmap", n),
    "sits udmabuf -> KMS": lambda n: sits("udmabuf", n),
    # a second consumer beside the display (tools/bench/second_consumer.py):
    # every frame also to a worker thread, its lease released through an eventfd
    "sits mmap -> KMS + a second consumer": lambda n: [os.path.join(ROOT, ".venv", "bin", "python"),
                                                       os.path.join(ROOT, "tools", "bench", "second_consumer.py"),
                                                       *sits("mmap", n)[2:]],
    # every event through Python's epoll, no C loop: what the C loop buys
    "sits mmap, Python loop -> KMS": lambda n: sits("mmap", n, "--python-loop"),
    "gst v4l2src io-mode=dmabuf ! kmssink": lambda n: gst("dmabuf", n),
    "gst v4l2src io-mode=mmap ! kmssink": lambda n: gst("mmap", n),
}


def process_runtime_ns(pid: int) -> int | None:
    """Scheduler runtime of every thread of `pid` (GStreamer streams from its
    own threads: the main thread's schedstat alone would miss them)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that just ended
    return total


class Run:
    """One pipeline run: total CPU (rusage of the child), its output, and
    (t, CPU ns) samples from /proc/PID/schedstat every SAMPLE_S seconds,
    which is exact scheduler runtime, not tick-sampled."""

    def __init__(self, argv: list[str], env=None):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.samples: list[tuple[float, int]] = []
        chunks = {"out": [], "err": []}
        readers = [threading.Thread(target=lambda f, k: chunks[k].append(f.read()), args=(f, k), daemon=True)
                   for f, k in ((proc.stdout, "out"), (proc.stderr, "err"))]
        for r in readers:
            r.start()
        while proc.poll() is None:
            ns = process_runtime_ns(proc.pid)
            if ns is not None:
                self.samples.append((time.monotonic() - t0, ns))
            time.sleep(SAMPLE_S)
        self.exit_s = time.monotonic() - t0
        for r in readers:
            r.join()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        self.out, self.err = "".join(chunks["out"]), "".join(chunks["err"])
        words = " ".join(a for a in argv if a.startswith(("io-mode", "num-buffers", "mmap", "udmabuf", "--frames", "--python"))
                         or a.isdigit())
        print(f"bench: {argv[0].rsplit('/', 1)[-1]} {words} -> {self.cpu:.2f} s CPU in {self.exit_s:.1f} s",
              file=sys.stderr, flush=True)
        if proc.returncode != 0:
            raise SystemExit(f"bench: {' '.join(argv[:4])}... failed ({proc.returncode}): {self.err.strip()[-300:]}")

    def steady_cpu_per_s(self, frames: int, fps: float) -> float | None:
        """CPU seconds per second while streaming: the slope of the samples
        over the middle of the streaming phase (the last frames/fps seconds
        before exit, minus tear-down), so start-up is not in it at all."""
        window = steady_window(self.samples, self.exit_s, frames, fps)
        if window is None:
            return None
        (t1, c1), (t2, c2) = window
        return (c2 - c1) / 1e9 / (t2 - t1)


def steady_window(samples: list[tuple], end_s: float, frames: int, fps: float) -> tuple | None:
    """The first and last of `samples` (each starting with its time, s)
    in the middle of the streaming: STEADY_SHARE of the frames' time,
    ending TEARDOWN_S before `end_s` (the pipeline's end); None with fewer
    than 5 samples there."""
    end = end_s - TEARDOWN_S
    begin = end - STEADY_SHARE * frames / fps
    window = [s for s in samples if begin <= s[0] <= end]
    return (window[0], window[-1]) if len(window) >= 5 else None


def gst_latency_ms(stderr: str) -> list[float]:
    return [int(m) / 1e6 for m in re.findall(r"time=\(guint64\)(\d+)", stderr)]


def main() -> int:
    # The guest's root is read-only: without a writable registry GStreamer
    # rescans every plugin at each start (~10-40 s under TCG, and noisy).
    os.environ.setdefault("GST_REGISTRY", "/tmp/sits-bench-gst-registry.bin")
    subprocess.run(["gst-inspect-1.0", "kmssink"], capture_output=True)
    only = os.environ.get("BENCH_ONLY")  # e.g. "sits mmap,gst" to shorten a run
    names = [n for n in PIPELINES if not only or any(n.startswith(prefix) for prefix in only.split(","))]
    acc = {n: {"marginal": [], "steady": [], "lat": [], "inloop": [], "rates": [], "flip": [], "shown": []}
           for n in names}
    info = {}
    # Repetitions outside, pipelines inside: whatever drifts over the run
    # (the host's load under TCG) reaches every pipeline alike.
    for _ in range(REPS):
        for name in names:
            a = acc[name]
            # Both runs without tracers: a tracer only in the long run would
            # add its own per-frame cost to the marginal figure.
            make = PIPELINES[name]
            short, long_ = Run(make(SHORT)), Run(make(LONG))
            a["marginal"].append(1000 * (long_.cpu - short.cpu) / (LONG - SHORT))
            # the camera's rate as this pipeline saw it: the extra frames over the extra time
            fps = (LONG - SHORT) / (long_.exit_s - short.exit_s)
            a["rates"].append(fps)
            per_s = long_.steady_cpu_per_s(LONG, fps)
            a["steady"].append(1000 * per_s / fps if per_s is not None else None)
            if name.startswith("sits"):
                s = json.loads(long_.out)
                a["lat"].append(s["dequeue_to_commit_ms"]["p50"])
                a["flip"].append(s["latency_ms"]["p50"])
                a["inloop"].append(s["cpu_ms_per_frame"])
                a["shown"].append((s["frames_displayed"], s["frames_captured"], s["c_loop_commits"]))
                info[name] = (s["zero_copy"], s["cpu_copies_per_frame"])
            else:
                info[name] = (io_zero_copy(name), None)
    for name in names:
        if name.startswith("gst"):
            # latency from a separate, shorter run with the tracer on
            env = {**os.environ, "GST_TRACERS": "latency", "GST_DEBUG": "GST_TRACER:7"}
            vals = gst_latency_ms(Run(PIPELINES[name](LATENCY_FRAMES), env).err)
            acc[name]["lat"].append(statistics.median(vals) if vals else None)
    results = {}
    for name in names:
        a = acc[name]
        steady = [v for v in a["steady"] if v is not None]
        results[name] = {"cpu_ms_per_frame": statistics.median(a["marginal"]), "runs": a["marginal"],
                         "steady_cpu_ms_per_frame": statistics.median(steady) if steady else float("nan"),
                         "steady_runs": a["steady"], "fps": statistics.median(a["rates"]),
                         "in_loop_cpu_ms_per_frame": statistics.median(a["inloop"]) if a["inloop"] else None,
                         "capture_to_flip_p50_ms": statistics.median(a["flip"]) if a["flip"] else None,
                         "latency_p50_ms": statistics.median([v for v in a["lat"] if v is not None]
                                                             or [float("nan")]),
                         "zero_copy": info[name][0], "cpu_copies_per_frame": info[name][1],
                         "shown": a["shown"]}
    base = results["gst v4l2src io-mode=dmabuf ! kmssink"]
    clock = os.environ.get("BENCH_CLOCK", "tcg")
    print(f"capture -> KMS, vivid XR24 {W}x{H} at {FPS} fps on vkms, median of {REPS}, guest clock: {clock}"
          + (" (QEMU -icount shift=3: 8 ns a guest instruction; the ms are instruction counts, "
             "the ratios are what compares)" if clock == "icount" else " (host time: moves with the host's load)"))
    print(f"marginal = CPU of a {LONG}-frame run minus a {SHORT}-frame run, / {LONG - SHORT} (the issue's measure; "
          "start-up noise of the short and long runs lands in it)")
    print(f"steady   = scheduler runtime (/proc/PID/schedstat) over the middle of the {LONG}-frame run's "
          "streaming, / frames in that time (no start-up in it)")
    print(f"{'pipeline':40s} {'marginal':>9s} {'ratio':>6s} {'steady':>7s} {'ratio':>6s} {'fps':>5s} "
          f"{'latency p50':>11s}  zero-copy  runs (marginal | steady)")
    for name, r in results.items():
        ratio = r["cpu_ms_per_frame"] / base["cpu_ms_per_frame"] if base["cpu_ms_per_frame"] else float("nan")
        sratio = r["steady_cpu_ms_per_frame"] / base["steady_cpu_ms_per_frame"]
        runs = ("/".join(f"{v:.1f}" for v in r["runs"]) + " | "
                + "/".join("-" if v is None else f"{v:.2f}" for v in r["steady_runs"]))
        print(f"{name:40s} {r['cpu_ms_per_frame']:9.2f} {ratio:5.2f}x {r['steady_cpu_ms_per_frame']:7.2f} "
              f"{sratio:5.2f}x {r['fps']:5.2f} {r['latency_p50_ms']:8.1f} ms  {str(r['zero_copy']):9s}  {runs}")
    print("CPU in ms per frame; ratio against gst dmabuf -> kmssink. Latency p50, the same span for both: "
          "buffer dequeued -> handed to the display (sits: DQBUF -> atomic commit; GStreamer: its latency "
          "tracer's v4l2src -> kmssink pad time)")
    base_name = "gst v4l2src io-mode=dmabuf ! kmssink"
    for name, r in results.items():
        if name == base_name:
            continue
        pairs = [(m / bm, (st / bst) if st and bst else None) for m, bm, st, bst in
                 zip(r["runs"], base["runs"], r["steady_runs"], base["steady_runs"]) if bm > 0]
        if pairs:
            ms = statistics.median(p[0] for p in pairs)
            sts = [p[1] for p in pairs if p[1] is not None]
            print(f"paired: {name} / gst dmabuf, each repetition's own ratio, median: marginal {ms:.2f}x, "
                  f"steady {statistics.median(sts):.2f}x" if sts else f"paired: {name}: marginal {ms:.2f}x")
    for name, r in results.items():
        if r["capture_to_flip_p50_ms"] is not None:
            print(f"{name}: V4L2 timestamp -> flip completed (page-flip event) p50 "
                  f"{r['capture_to_flip_p50_ms']:.1f} ms (GStreamer reports no such span)")
    for name, r in results.items():
        if r["in_loop_cpu_ms_per_frame"] is not None:
            shown = ", ".join(f"{d}/{c} ({k} by the C loop)" for d, c, k in r["shown"])
            print(f"cross-check: {name} measures {r['in_loop_cpu_ms_per_frame']:.2f} CPU ms/frame itself "
                  f"(getrusage over its streaming loop); frames displayed/captured in the long runs: {shown}")
    if "--json" in sys.argv:
        print(json.dumps(results))
    return 0


def io_zero_copy(name: str) -> bool:
    return "dmabuf" in name


if __name__ == "__main__":
    sys.exit(main())
