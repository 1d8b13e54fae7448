#!/usr/bin/env python3
"""CPU per frame of the C frame queue's steady state with --timeline off
and on, in one run: a timer source (SyntheticCamera) through a Pipeline
with no consumer, so every frame is dequeued and requeued inside
sits_queue_run() and the only Python per frame is the timeline's drain.

  .venv/bin/python tools/bench/timeline_bench.py [FRAMES] [FPS]

Runs alternate (off, on, off, on, ...) so that the host's load lands on
both; the medians and their ratio are printed. The off runs are the
steady state as it was before the timeline, plus one test per stage.
"""
import os
import resource
import statistics
import sys
import tempfile

from sits.pipeline.pipeline import Pipeline
from sits.pipeline.synthetic import SyntheticCamera

REPS = 5


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def one(frames: int, fps: float, timeline: str | None) -> float:
    """CPU microseconds per frame of one run."""
    with SyntheticCamera("YUYV", (64, 32), fps=fps, buffers=4) as cam:
        p = Pipeline(cam, timeline=timeline)
        c0 = cpu_s()
        s = p.run(frames=frames)
        used = cpu_s() - c0
    assert s.frames_captured == frames
    return 1e6 * used / frames


def main() -> None:
    frames = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    fps = float(sys.argv[2]) if len(sys.argv) > 2 else 1000.0
    off, on = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.ndjson")
        one(200, fps, None)   # warm: imports, first allocations
        for _ in range(REPS):
            off.append(one(frames, fps, None))
            on.append(one(frames, fps, path))
    m_off, m_on = statistics.median(off), statistics.median(on)
    print(f"{frames} frames at {fps:g} fps, median of {REPS}")
    print(f"  timeline off: {m_off:8.2f} us CPU/frame  {[round(x, 2) for x in off]}")
    print(f"  timeline on:  {m_on:8.2f} us CPU/frame  {[round(x, 2) for x in on]}")
    print(f"  on / off: {m_on / m_off:.2f}x")


if __name__ == "__main__":
    main()
