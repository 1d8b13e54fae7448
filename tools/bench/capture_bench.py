#!/usr/bin/env python3
"""CPU per frame of `sits capture --to-kms` against GStreamer, at a sweep
of camera rates, in one VM run.

Run it inside the test VM (tools/bench/capture_bench does that, once per
vCPU count in BENCH_CPUS, and prints the sweeps side by side):
  tools/vm/run --timeout 7200 -- .venv/bin/python tools/bench/capture_bench.py

At each camera rate (BENCH_FPS, default 5,10,30,60,120: vivid XR24, and
GStreamer BGRx, 1280x720, or 640x360 above vkms' 60 Hz) every pipeline
(BENCH_ONLY, default sits mmap and GStreamer dmabuf) shows the same camera
on vkms, and sits shows its synthetic source the same way (no peer: the
display path without vivid's fill). BENCH_ONLY="sits MJPG,gst v4l2src MJPG"
measures an MJPEG camera (v4l2loopback fed JPEG frames) through sits' JPEG
decode stage against GStreamer's jpegdec. Marginal cost: CPU (user+sys) of a 320-frame run minus a 20-frame
run, divided by 300 -- start-up cancels out -- median of BENCH_REPS (3).
Steady: the scheduler runtime of all the process's threads
(/proc/PID/task/*/schedstat, sampled every 0.1 s) over the middle of the
long run's streaming, divided by the frames in that time.
By default (BENCH_CLOCK=icount, set by tools/bench/capture_bench) QEMU runs
with -icount shift=3,sleep=off: guest time advances 8 ns per guest
instruction and skips idle time, so every CPU figure here counts the
instructions the guest ran for that process (user and kernel), not host
time. BENCH_CLOCK=tcg measures host time instead. Repetitions go round all
pipelines in turn. BENCH_OUT: a JSON file of the figures (--combine FILES
prints the sweep tables of several).
Latency: sits reports V4L2 timestamp -> flip completion; for GStreamer the
`latency` tracer's source -> sink pad time, taken in a separate run (the
tracer costs CPU), which ends when the buffer reaches kmssink, before the
flip: the two are not the same span.
"""
import contextlib
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
sys.path.insert(0, ROOT)   # tests.vm.loopback: the MJPEG camera
SITS = [os.path.join(ROOT, ".venv", "bin", "sits")]
REPS = int(os.environ.get("BENCH_REPS", "3"))
SHORT, LONG = 20, 320
# The camera rates swept, each the same for every pipeline (left alone,
# vivid starts at 5 fps and GStreamer asks for its maximum, and per-frame
# costs at different rates do not compare). vkms refreshes at 60 Hz; vivid
# gives 1280x720 at up to 60 fps, so the rate above the refresh is taken
# at 640x360, the largest webcam size vivid offers at 120.
RATES = [int(r) for r in os.environ.get("BENCH_FPS", "5,10,30,60,120").split(",")]
BASE_FPS = 10          # each rate's figure is also given against this rate's
REFRESH_HZ = 60


def size_at(fps: int) -> tuple[int, int]:
    return (1280, 720) if fps <= REFRESH_HZ else (640, 360)
SAMPLE_S = 0.1
TEARDOWN_S = 3.0      # leave the last seconds out of the steady window: stop, restore, exit
STEADY_SHARE = 0.5    # the steady window is this share of the streaming time
LATENCY_FRAMES = 60


def gst_jpeg(frames: int, fps: int) -> list[str]:
    """GStreamer's MJPEG camera to the display: its libjpeg-turbo decoder
    (jpegdec) into system memory, converted to BGRx, copied into kmssink's
    buffers."""
    from tests.vm import loopback
    w, h = size_at(fps)
    return ["gst-launch-1.0", "-q", "-e", "v4l2src", f"device={loopback.PATH}", "io-mode=mmap",
            f"num-buffers={frames}", "!", f"image/jpeg,width={w},height={h},framerate={fps}/1", "!", "jpegdec", "!",
            "videoconvert", "!", "video/x-raw,format=BGRx", "!", "kmssink", "driver-name=vkms"]


def gst(io_mode: str, frames: int, fps: int, fmt: str = "BGRx", convert: bool = False) -> list[str]:
    w, h = size_at(fps)
    to_rgb = ["videoconvert", "!", "video/x-raw,format=BGRx", "!"] if convert else []
    return ["gst-launch-1.0", "-q", "-e", "v4l2src", "device=/dev/video0", f"io-mode={io_mode}",
            f"num-buffers={frames}", "!", f"video/x-raw,format={fmt},width={w},height={h},framerate={fps}/1",
            "!", *to_rgb, "kmssink", "driver-name=vkms"]


def sits(memory: str, frames: int, fps: int, *extra: str, fmt: str = "XR24", device: str = "/dev/video0") -> list[str]:
    w, h = size_at(fps)
    return [*SITS, "capture", "--to-kms", "--device", device, "--format", fmt,
            "--size", f"{w}x{h}", "--fps", str(fps), "--memory", memory, "--frames", str(frames), "--json", *extra]


SITS_MMAP, GST_DMABUF = "sits mmap (EXPBUF) -> KMS", "gst v4l2src io-mode=dmabuf ! kmssink"
SITS_CONVERT = "sits YUYV -> conversion stage -> KMS"
SITS_SYNTHETIC = "sits synthetic (udmabuf) -> KMS"
SITS_MJPEG = "sits MJPG (v4l2loopback) -> decode stage -> KMS"
GST_MJPEG = "gst v4l2src MJPG ! jpegdec ! videoconvert ! kmssink"
GST_CONVERT = "gst v4l2src YUY2 ! videoconvert ! kmssink"
PIPELINES = {
    SITS_MMAP: lambda n, f: sits("mmap", n, f),
    "sits udmabuf -> KMS": lambda n, f: sits("udmabuf", n, f),
    # the same display path from a source that fills nothing under a lock:
    # vivid fills each frame holding the lock its QBUF takes, and at 60 fps
    # the give-back after a flip meets that fill (docs/capture.md); no peer
    SITS_SYNTHETIC: lambda n, f: sits("udmabuf", n, f, device="synthetic"),
    # a second consumer beside the display (tools/bench/second_consumer.py):
    # every frame also to a worker thread, its lease released through an eventfd
    "sits mmap -> KMS + a second consumer": lambda n, f: [os.path.join(ROOT, ".venv", "bin", "python"),
                                                          os.path.join(ROOT, "tools", "bench", "second_consumer.py"),
                                                          *sits("mmap", n, f)[2:]],
    GST_DMABUF: lambda n, f: gst("dmabuf", n, f),
    "gst v4l2src io-mode=mmap ! kmssink": lambda n, f: gst("mmap", n, f),
    # a camera format no plane shows (vkms has no YUV plane): a CPU conversion to XRGB8888
    SITS_CONVERT: lambda n, f: sits("mmap", n, f, fmt="YUYV"),
    GST_CONVERT: lambda n, f: gst("mmap", n, f, fmt="YUY2", convert=True),
    # an MJPEG camera (v4l2loopback, fed JPEG frames at the rate by a writer
    # thread of this process while they run: its CPU is in neither's figures)
    SITS_MJPEG: lambda n, f: sits("mmap", n, f, fmt="MJPG", device=loopback_path()),
    GST_MJPEG: gst_jpeg,
}
FED = (SITS_MJPEG, GST_MJPEG)
# each sits pipeline's peer (the ratios' base): GStreamer's dmabuf path, or
# for the conversion its own CPU conversion
PEER = {SITS_CONVERT: GST_CONVERT, SITS_MJPEG: GST_MJPEG}
# the sweep's default: the pair the headline compares, and the display path
# without vivid beside it
DEFAULT_ONLY = f"{SITS_MMAP},{GST_DMABUF},{SITS_SYNTHETIC}"


def loopback_path() -> str:
    from tests.vm import loopback
    return loopback.PATH


_loaded = []


@contextlib.contextmanager
def camera_for(name: str, fps: int):
    """The MJPEG camera fed at `fps` while `name` runs, where it needs one."""
    if name not in FED:
        yield
        return
    from tests.vm import loopback
    if not _loaded:
        _loaded.append(loopback.load())
    size = size_at(fps)
    # one frame again and again: v4l2loopback's writer overwrites buffers a
    # reader still decodes (a UVC driver never does), and the same bytes
    # over the same bytes tear nothing (as tests/vm/test_mjpeg_vm.py feeds it)
    feeder = loopback.Feeder(size, loopback.frames(size, 1), fps)
    try:
        yield
    finally:
        feeder.close()


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

    def __init__(self, argv: list[str], env=None, check: bool = True):
        """`check`: a failed run ends the benchmark (else `ok` says so)."""
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
        self.ok = proc.returncode == 0
        if not self.ok:
            failed = f"bench: {' '.join(argv[:4])}... failed ({proc.returncode}): {self.err.strip()[-300:]}"
            if check:
                raise SystemExit(failed)
            print(failed, file=sys.stderr, flush=True)

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


def measure(fps: int, names: list[str]) -> dict:
    """Every pipeline in `names` at camera rate `fps`, REPS times round."""
    acc = {n: {"marginal": [], "steady": [], "lat": [], "inloop": [], "rates": [], "flip": [], "shown": [],
               "wakeups": []} for n in names}
    info = {}
    # Repetitions outside, pipelines inside: whatever drifts over the run
    # (the host's load under TCG) reaches every pipeline alike.
    for _ in range(REPS):
        for name in names:
            a = acc[name]
            # Both runs without tracers: a tracer only in the long run would
            # add its own per-frame cost to the marginal figure.
            make = PIPELINES[name]
            with camera_for(name, fps):
                short, long_ = Run(make(SHORT, fps)), Run(make(LONG, fps))
            a["marginal"].append(1000 * (long_.cpu - short.cpu) / (LONG - SHORT))
            s = json.loads(long_.out) if name.startswith("sits") else None
            # the camera's rate as this pipeline saw it: sits' own (its frames
            # from the first to the last: its run's duration has the start
            # and the stop in it); GStreamer's, the extra frames over the extra
            # time (start-ups that differ by more than the 300 frames' time,
            # as a loaded host's file reads make them, spoil that one)
            seen = (s["capture_fps"] if s is not None
                    else (LONG - SHORT) / (long_.exit_s - short.exit_s))
            a["rates"].append(seen)
            per_s = long_.steady_cpu_per_s(LONG, seen)
            a["steady"].append(1000 * per_s / seen if per_s is not None else None)
            if s is not None:
                a["lat"].append(s["dequeue_to_commit_ms"]["p50"])
                a["flip"].append(s["latency_ms"]["p50"])
                a["inloop"].append(s["cpu_ms_per_frame"])
                a["shown"].append((s["frames_displayed"], s["frames_captured"], s["c_loop_commits"],
                                   s["drops"].get("sequence_gap", 0)))
                w = s["wakeups"]
                a["wakeups"].append((w["c_loop"] + w["python"]) / max(1, s["frames_captured"]))
                info[name] = (s["zero_copy"], s["cpu_copies_per_frame"])
            else:
                info[name] = (io_zero_copy(name), None)
    for name in names:
        if name.startswith("gst"):
            # latency from a separate, shorter run with the tracer on
            env = {**os.environ, "GST_TRACERS": "latency", "GST_DEBUG": "GST_TRACER:7"}
            # GStreamer's v4l2src on v4l2loopback at times ends with "Failed
            # to allocate a buffer": its latency run is tried three times
            vals = None
            for _ in range(3):
                with camera_for(name, fps):
                    run = Run(PIPELINES[name](LATENCY_FRAMES, fps), env, check=name != GST_MJPEG)
                if run.ok:
                    vals = gst_latency_ms(run.err)
                    break
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
                         "wakeups_per_frame": statistics.median(a["wakeups"]) if a["wakeups"] else None,
                         "zero_copy": info[name][0], "cpu_copies_per_frame": info[name][1],
                         "shown": a["shown"]}
    return results


def report(fps: int, results: dict) -> None:
    w, h = size_at(fps)
    clock = os.environ.get("BENCH_CLOCK", "tcg")
    print(f"\ncapture -> KMS, vivid {w}x{h} at {fps} fps on vkms, {os.cpu_count()} vCPU(s), "
          f"median of {REPS}, guest clock: {clock}"
          + (" (QEMU -icount shift=3: 8 ns a guest instruction; the ms are instruction counts, "
             "the ratios are what compares)" if clock == "icount" else " (host time: moves with the host's load)"))
    print(f"marginal = CPU of a {LONG}-frame run minus a {SHORT}-frame run, / {LONG - SHORT}; "
          f"steady = scheduler runtime (/proc/PID/schedstat) over the middle of the {LONG}-frame run's "
          "streaming, / frames in that time; ratios against each one's peer (GStreamer's dmabuf path, "
          "or its videoconvert for the conversion)")
    print(f"{'pipeline':40s} {'marginal':>9s} {'ratio':>6s} {'steady':>7s} {'ratio':>6s} {'fps':>6s} "
          f"{'latency p50':>11s}  zero-copy  runs (marginal | steady)")
    for name, r in results.items():
        base = None if name == SITS_SYNTHETIC else results.get(PEER.get(name, GST_DMABUF))
        ratio = r["cpu_ms_per_frame"] / base["cpu_ms_per_frame"] if base and base["cpu_ms_per_frame"] else float("nan")
        sratio = (r["steady_cpu_ms_per_frame"] / base["steady_cpu_ms_per_frame"]
                  if base and base["steady_cpu_ms_per_frame"] else float("nan"))
        runs = ("/".join(f"{v:.2f}" for v in r["runs"]) + " | "
                + "/".join("-" if v is None else f"{v:.2f}" for v in r["steady_runs"]))
        print(f"{name:40s} {r['cpu_ms_per_frame']:9.2f} {ratio:5.2f}x {r['steady_cpu_ms_per_frame']:7.2f} "
              f"{sratio:5.2f}x {r['fps']:6.2f} {r['latency_p50_ms']:8.1f} ms  {str(r['zero_copy']):9s}  {runs}")
    for name, r in results.items():
        if r["in_loop_cpu_ms_per_frame"] is not None:
            shown = ", ".join(f"{d}/{c} ({k} by the C loop, {g} skipped)" for d, c, k, g in r["shown"])
            print(f"  {name}: {r['in_loop_cpu_ms_per_frame']:.2f} CPU ms/frame by its own count, "
                  f"{r['wakeups_per_frame']:.2f} wake-ups a frame, V4L2 timestamp -> flip p50 "
                  f"{r['capture_to_flip_p50_ms']:.1f} ms; displayed/captured: {shown}")
    sys.stdout.flush()


def sweep_table(cpus: int, by_rate: dict) -> list[str]:
    """One line a rate: sits' and GStreamer's steady CPU a frame, their
    ratio, and sits' against its own figure at BASE_FPS; the same display
    path from the synthetic source, against its own BASE_FPS figure."""
    def at(fps, name):
        return by_rate.get(fps, {}).get(name, {}).get("steady_cpu_ms_per_frame", float("nan"))

    def ratio(a, b):
        return a / b if b and b == b else float("nan")
    lines = [f"| {cpus} vCPU | camera rate | size | sits steady ms/frame | gst steady ms/frame | sits / gst "
             f"| sits / sits at {BASE_FPS} fps | sits wake-ups a frame | synthetic steady ms/frame "
             f"| synthetic / synthetic at {BASE_FPS} fps |", "|---|---|---|---|---|---|---|---|---|---|"]
    for fps in sorted(by_rate):
        si = by_rate[fps].get(SITS_MMAP)
        if si is None:
            continue
        s_ms, g_ms, y_ms = at(fps, SITS_MMAP), at(fps, GST_DMABUF), at(fps, SITS_SYNTHETIC)
        w, h = size_at(fps)
        lines.append(f"| {cpus} | {fps} fps | {w}x{h} | {s_ms:.2f} | {g_ms:.2f} | {ratio(s_ms, g_ms):.2f}x "
                     f"| {ratio(s_ms, at(BASE_FPS, SITS_MMAP)):.2f}x | {si['wakeups_per_frame']:.2f} "
                     f"| {y_ms:.2f} | {ratio(y_ms, at(BASE_FPS, SITS_SYNTHETIC)):.2f}x |")
    return lines


def combine(paths: list[str]) -> int:
    """The sweep tables of several runs (one VM each: BENCH_OUT files), the
    headline's first."""
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        print("\n".join(sweep_table(run["cpus"], {int(k): v for k, v in run["rates"].items()})))
        print()
    return 0


def main() -> int:
    if sys.argv[1:2] == ["--combine"]:
        return combine(sys.argv[2:])
    # The guest's root is read-only: without a writable registry GStreamer
    # rescans every plugin at each start (~10-40 s under TCG, and noisy).
    os.environ.setdefault("GST_REGISTRY", "/tmp/sits-bench-gst-registry.bin")
    subprocess.run(["gst-inspect-1.0", "kmssink"], capture_output=True)
    only = os.environ.get("BENCH_ONLY") or DEFAULT_ONLY   # e.g. "sits mmap,gst"
    names = [n for n in PIPELINES if any(n.startswith(prefix) for prefix in only.split(","))]
    by_rate = {}
    for fps in RATES:
        by_rate[fps] = measure(fps, names)
        report(fps, by_rate[fps])
    print()
    print("\n".join(sweep_table(os.cpu_count(), by_rate)))
    out = os.environ.get("BENCH_OUT")
    if out:
        with open(out, "w") as f:
            json.dump({"cpus": os.cpu_count(), "clock": os.environ.get("BENCH_CLOCK", "tcg"), "reps": REPS,
                       "rates": by_rate}, f)
    if "--json" in sys.argv:
        print(json.dumps(by_rate))
    return 0


def io_zero_copy(name: str) -> bool:
    return "dmabuf" in name


if __name__ == "__main__":
    sys.exit(main())
