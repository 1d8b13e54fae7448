#!/usr/bin/env python3
"""Where the chain's capture -> tensor-ready latency goes, frame by frame
(GPU machine; not a timed test):

    PYTHONPATH=. python3 tools/bench/chain_split.py [--seconds 10] [--formats YUYV] [--fps 60,240]

chain_bench.py's sits paths (SyntheticCamera 1080p, CudaConsumer at batch
1, converted in the frame queue's C), each run with a `--timeline` (its
cost is not measured here: chain_bench runs without one), and every frame
split at its stages: wake-up (the tick the frame landed on -> the loop
dequeues it), the queue (dequeue -> the graph's launch is recorded), the
GPU (launch -> the graph's end stamp, cuGraphLaunch included). Prints each
part's p50 / p99 / max in µs, and the worst frames' parts.
"""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)

from chain_bench import H, W, make_consumer  # noqa: E402

from sits.journey import record  # noqa: E402
from sits.pipeline.pipeline import Pipeline  # noqa: E402
from sits.pipeline.stats import percentiles  # noqa: E402
from sits.pipeline.synthetic import SyntheticCamera  # noqa: E402

PARTS = {"wake-up": ("captured_ns", "dequeued_ns"), "queue": ("dequeued_ns", "cuda_submitted_ns"),
         "gpu": ("cuda_submitted_ns", "cuda_done_ns"), "total": ("captured_ns", "cuda_done_ns")}
WORST = 6


def p50_p99_max_us(values: list[int]) -> str:
    """As chain_bench states its p50 and p99 (sits.pipeline.stats), and the max."""
    q = percentiles([v / 1e3 for v in values])
    return f"{q['p50']:.1f} / {q['p99']:.1f} / {max(values) / 1e3:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--formats", default="YUYV")
    ap.add_argument("--fps", default="60,240")
    ap.add_argument("--paths", default="sits-copy,sits-direct")
    args = ap.parse_args()
    for code in args.formats.split(","):
        for fps in (float(f) for f in args.fps.split(",")):
            for kind in args.paths.split(","):
                cam = SyntheticCamera(code, (W, H), fps=fps, buffers=4)
                with tempfile.TemporaryDirectory() as tmp:
                    path = os.path.join(tmp, "t.ndjson")
                    Pipeline(cam, consumers=[make_consumer(code, fps, kind)]).run(duration=0.3)  # warm-up
                    Pipeline(cam, consumers=[make_consumer(code, fps, kind)], timeline=path).run(
                        duration=args.seconds)
                    recs = [r for r in record.read(path) if r["cuda_done_ns"]]
                split = {k: [r[b] - r[a] for r in recs] for k, (a, b) in PARTS.items()}
                print(f"{code} {fps:g} fps {kind}, {len(recs)} frames, µs p50 / p99 / max: " + "; ".join(
                    f"{k} {p50_p99_max_us(v)}" for k, v in split.items()))
                for r in sorted(recs, key=lambda r: r["cuda_done_ns"] - r["captured_ns"])[-WORST:]:
                    print(f"    frame {r['sequence']}: " + ", ".join(
                        f"{k} {(r[b] - r[a]) / 1e3:.0f}" for k, (a, b) in PARTS.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
