#!/usr/bin/env python3
"""CPU per frame of `sits capture --to-kms` against GStreamer, in one VM run.

Run it inside the test VM (tools/bench/capture_bench does that):
  tools/vm/run --timeout 1500 -- .venv/bin/python tools/bench/capture_bench.py

Marginal cost, as in the issue: CPU (user+sys) of a 320-frame run minus a
20-frame run, divided by 300 -- start-up cancels out -- median of 3. All
pipelines capture vivid XR24 (GStreamer BGRx) 1280x720 and show it on vkms.
Latency: sits reports V4L2 timestamp -> flip completion; for GStreamer the
`latency` tracer's source -> sink time (kmssink returns from render after the
flip event, so it ends at the flip too).
"""
import json
import os
import re
import resource
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SITS = [os.path.join(ROOT, ".venv", "bin", "sits")]
W, H = 1280, 720
REPS = int(os.environ.get("BENCH_REPS", "3"))
SHORT, LONG = 20, 320


def gst(io_mode: str, frames: int) -> list[str]:
    return ["gst-launch-1.0", "-q", "-e", "v4l2src", "device=/dev/video0", f"io-mode={io_mode}",
            f"num-buffers={frames}", "!", f"video/x-raw,format=BGRx,width={W},height={H}", "!",
            "kmssink", "driver-name=vkms"]


def sits(memory: str, frames: int) -> list[str]:
    return [*SITS, "capture", "--to-kms", "--device", "/dev/video0", "--format", "XR24",
            "--size", f"{W}x{H}", "--memory", memory, "--frames", str(frames), "--json"]


PIPELINES = {
    "sits mmap (EXPBUF) -> KMS": lambda n: sits("mmap", n),
    "sits udmabuf -> KMS": lambda n: sits("udmabuf", n),
    "gst v4l2src io-mode=dmabuf ! kmssink": lambda n: gst("dmabuf", n),
    "gst v4l2src io-mode=mmap ! kmssink": lambda n: gst("mmap", n),
}


def cpu_of(argv: list[str], env=None) -> tuple[float, str, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"bench: {argv[0].rsplit('/', 1)[-1]} {' '.join(a for a in argv if a.startswith(('io-mode', 'num-buffers', 'mmap', 'udmabuf', '--frames')) or a.isdigit())}"
          f" -> {cpu:.2f} s CPU", file=sys.stderr, flush=True)
    if r.returncode != 0:
        raise SystemExit(f"bench: {' '.join(argv[:4])}... failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), r.stdout, r.stderr


def gst_latency_ms(stderr: str) -> list[float]:
    return [int(m) / 1e6 for m in re.findall(r"time=\(guint64\)(\d+)", stderr)]


def main() -> int:
    # The guest's root is read-only: without a writable registry GStreamer
    # rescans every plugin at each start (~10-40 s under TCG, and noisy).
    os.environ.setdefault("GST_REGISTRY", "/tmp/sits-bench-gst-registry.bin")
    subprocess.run(["gst-inspect-1.0", "kmssink"], capture_output=True)
    results = {}
    only = os.environ.get("BENCH_ONLY")  # e.g. "sits mmap,gst" to shorten a run
    for name, make in PIPELINES.items():
        if only and not any(name.startswith(prefix) for prefix in only.split(",")):
            continue
        marginal, lat = [], []
        for _ in range(REPS):
            short, _, _ = cpu_of(make(SHORT))
            env = None
            if name.startswith("gst"):
                env = {**os.environ, "GST_TRACERS": "latency", "GST_DEBUG": "GST_TRACER:7"}
            long_, out, err = cpu_of(make(LONG), env)
            marginal.append(1000 * (long_ - short) / (LONG - SHORT))
            if name.startswith("sits"):
                s = json.loads(out)
                lat.append(s["latency_ms"]["p50"])
                zero_copy, copies = s["zero_copy"], s["cpu_copies_per_frame"]
            else:
                vals = gst_latency_ms(err)
                lat.append(statistics.median(vals) if vals else None)
                zero_copy, copies = io_zero_copy(name), None
        results[name] = {"cpu_ms_per_frame": statistics.median(marginal), "runs": marginal,
                         "latency_p50_ms": statistics.median([v for v in lat if v is not None] or [float("nan")]),
                         "zero_copy": zero_copy, "cpu_copies_per_frame": copies}
    base = results["gst v4l2src io-mode=dmabuf ! kmssink"]
    print(f"capture -> KMS, vivid XR24 {W}x{H} on vkms, marginal CPU of {LONG}-{SHORT} frames, median of {REPS}")
    print(f"{'pipeline':40s} {'CPU ms/frame':>12s} {'vs gst dmabuf':>14s} {'latency p50 ms':>15s}  zero-copy")
    for name, r in results.items():
        ratio = r["cpu_ms_per_frame"] / base["cpu_ms_per_frame"] if base["cpu_ms_per_frame"] else float("nan")
        print(f"{name:40s} {r['cpu_ms_per_frame']:12.2f} {ratio:13.2f}x {r['latency_p50_ms']:15.1f}  {r['zero_copy']}")
    if "--json" in sys.argv:
        print(json.dumps(results))
    return 0


def io_zero_copy(name: str) -> bool:
    return "dmabuf" in name


if __name__ == "__main__":
    sys.exit(main())
