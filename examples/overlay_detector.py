#!/usr/bin/env python3
"""Live frames -> fused conversion -> a detector -> its boxes over their own frame.

    PYTHONPATH=. python3 examples/overlay_detector.py --device /dev/video0 --display   # camera, GPU and display
    PYTHONPATH=. python3 examples/overlay_detector.py --frames 300                     # GPU only (synthetic frames)

The CUDA sink turns each frame into the detector's 320x320 input (one CUDA
graph a buffer, no CPU copy); torchvision's SSDlite (random weights:
nothing is downloaded, so its boxes are noise with the shape of real ones)
finds boxes in the tensor; sits.overlay.map_from_tensor takes them back to
frame pixels through the batch's conversion plan, and sits.overlay.Results
hands each frame's drawing to the display's overlay layer by the frame's
sequence. With --display the overlay's `sync` policy makes each frame wait
for its own boxes (up to --budget-ms), so what is on screen is the frame
and what the model found in it, committed together. Without a display
(a GPU server) the drawings are made and paired by sequence, not shown;
the example prints what it made.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sits import open_chain  # noqa: E402
from sits.cuda.formats import OutputSpec  # noqa: E402
from sits.errors import SitsError  # noqa: E402
from sits.overlay import Drawing, Results, map_from_tensor  # noqa: E402
from sits.pipeline.stats import percentiles  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="synthetic", help="a V4L2 capture device (default: synthetic frames)")
    ap.add_argument("--display", action="store_true", help="show the frames and their boxes (KMS)")
    ap.add_argument("--format", default="YUYV")
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--buffers", type=int, default=8)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--boxes", type=int, default=5, help="boxes drawn a frame (the highest scores)")
    ap.add_argument("--budget-ms", type=float, default=100.0, help="how long a frame waits for its boxes")
    args = ap.parse_args()

    import torch
    import torchvision

    model = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)
    model = model.cuda().eval()
    with torch.inference_mode():
        model([torch.zeros(3, 320, 320, device="cuda")])   # cuDNN's choices before the clock starts
    torch.cuda.synchronize()

    results = Results(wait_s=args.budget_ms / 1e3)
    made, inside, latencies = [], [], []
    w, h = (int(v) for v in args.size.split("x"))

    def on_batch(batch):
        x = torch.from_dlpack(batch)       # N x 3 x 320 x 320 RGB in [0, 1], on the conversion's stream
        with torch.inference_mode():
            found = model(list(x))
        drawings = []
        for det in found:
            top = det["scores"].argsort(descending=True)[:args.boxes]
            boxes = map_from_tensor(det["boxes"][top].float().cpu().numpy(), batch.plan)
            inside.append(bool((boxes[:, [0, 2]] >= 0).all() and (boxes[:, [0, 2]] <= w).all()
                               and (boxes[:, [1, 3]] >= 0).all() and (boxes[:, [1, 3]] <= h).all()))
            drawings.append(Drawing.from_boxes(boxes, labels=[f"class {int(c)}" for c in det["labels"][top]],
                                               scores=det["scores"][top].tolist()))
        results.put_batch(batch, drawings)
        now = time.monotonic_ns()
        latencies.extend((now - t) / 1e6 for t in batch.timestamps_ns)
        made.extend(int(s) for s in batch.sequences)

    options = dict(cuda=OutputSpec(320, 320, dtype="float32"), on_batch=on_batch, format=args.format,
                   size=(w, h), fps=args.fps, buffers=args.buffers, frames=args.frames)
    if args.display:
        options.update(display=True, overlay=results, overlay_policy="sync", overlay_budget_ms=args.budget_ms)
    if args.device == "synthetic" and args.display:
        options["memory"] = "udmabuf"
    try:
        with open_chain(args.device, **options) as chain:
            summary = chain.run()
    except SitsError as exc:
        print(f"overlay_detector: {exc}", file=sys.stderr)
        return exc.exit_code
    lat = percentiles(latencies)
    print(f"{len(made)} frames of {args.format} {args.size} -> SSDlite boxes, {args.boxes} a frame, "
          f"mapped back to frame pixels ({sum(inside)} of {len(inside)} frames' boxes inside the frame)")
    print(f"capture->boxes latency: p50 {lat['p50']} ms, p99 {lat['p99']} ms; sequences paired by Results: "
          f"{len(set(made))} distinct")
    ov = summary.as_dict().get("overlay")
    if ov:
        print(f"overlay: {ov['shown_with_own']} frames shown with their own boxes, {ov['shown_with_older']} with "
              f"older ones, {ov['shown_with_none']} with none, {ov['dropped_waiting']} dropped waiting")
    else:
        print("no display: the drawings were made and paired by sequence, not shown")
    return 0


if __name__ == "__main__":
    sys.exit(main())
