#!/usr/bin/env python3
"""Live frames -> fused conversion -> ResNet-50 -> per-frame features.

    PYTHONPATH=. python3 examples/feature_extraction.py [--frames 300] [--fps 60]
    PYTHONPATH=. python3 examples/feature_extraction.py --device /dev/video0 --memory udmabuf

Frames come from a synthetic camera (memfd buffers on a timer) or, with
--device, from V4L2 into udmabuf buffers; CudaConsumer turns each into the
model's fp16 input (registered once, one CUDA graph a buffer, no CPU copy);
torchvision's ResNet-50 (random weights: nothing is downloaded) gives the
2048 pooled features of every frame. Prints the throughput and the capture
-> features latency (V4L2 timestamp to the features on the host's clock).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sits.cuda.formats import OutputSpec  # noqa: E402
from sits.errors import SitsError  # noqa: E402
from sits.pipeline.cuda import CudaConsumer  # noqa: E402
from sits.pipeline.pipeline import Pipeline  # noqa: E402
from sits.pipeline.stats import percentiles  # noqa: E402

IMAGENET = dict(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))


def source(args):
    w, h = (int(v) for v in args.size.split("x"))
    if args.device is None:
        from sits.pipeline.synthetic import SyntheticCamera
        return SyntheticCamera(args.format, (w, h), fps=args.fps, buffers=args.buffers)
    from sits.v4l2.capture import CaptureDevice
    cap = CaptureDevice.open(args.device)
    try:
        cap.configure(args.format, (w, h), args.fps)
        cap.allocate(args.buffers, memory=args.memory)
    except BaseException:
        cap.close()
        raise
    return cap


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", help="a V4L2 capture device (default: a synthetic camera)")
    ap.add_argument("--memory", default="udmabuf", help="V4L2 buffers: udmabuf (memfd pages CUDA registers)")
    ap.add_argument("--format", default="YUYV")
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--fps", type=float, default=60)
    ap.add_argument("--buffers", type=int, default=6)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--batch", type=int, default=1, help="largest batch (needs --budget-ms above 1)")
    ap.add_argument("--budget-ms", type=float, default=None, help="latency budget for dynamic batching")
    args = ap.parse_args()

    import torch
    import torchvision

    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50(weights=None)
    model.fc = torch.nn.Identity()  # the 2048-d pooled features
    model = model.cuda().half().eval().to(memory_format=torch.channels_last)
    with torch.inference_mode():  # cuDNN picks its kernels before the clock starts
        for n in sorted({1, max(1, args.batch)}):
            model(torch.zeros(n, 3, 224, 224, device="cuda", dtype=torch.float16).to(
                memory_format=torch.channels_last))
    torch.cuda.synchronize()

    latencies, shapes, done = [], set(), []

    def on_batch(batch):
        # DLPack: PyTorch's stream waits for the conversion's event, no host
        # sync; the NHWC output is the channels_last NCHW input, no copy.
        x = torch.from_dlpack(batch).permute(0, 3, 1, 2)
        with torch.inference_mode():
            features = model(x)
        torch.cuda.current_stream().synchronize()  # the features exist now
        now = time.monotonic_ns()
        latencies.extend((now - t) / 1e6 for t in batch.timestamps_ns)
        shapes.add(tuple(features.shape[1:]))
        done.append(now)

    budget = args.budget_ms / 1e3 if args.budget_ms else None
    consumer = CudaConsumer(OutputSpec(224, 224, layout="NHWC", dtype="float16", **IMAGENET), on_batch=on_batch,
                            max_batch=args.batch if budget else 1, latency_budget_s=budget)
    try:
        src = source(args)
    except SitsError as exc:
        print(f"feature_extraction: {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        Pipeline(src, consumers=[consumer]).run(frames=args.frames)
    except SitsError as exc:
        print(f"feature_extraction: {exc}", file=sys.stderr)
        return exc.exit_code
    finally:
        src.close()
    rep = consumer.report()[1]
    n = len(latencies)
    secs = (done[-1] - done[0]) / 1e9 if len(done) > 1 else 0.0  # first to last features
    lat = percentiles(latencies)
    print(f"{n} frames of {args.format} {args.size} from {src.path} -> ResNet-50 features {sorted(shapes)}")
    print(f"throughput: {(n - 1) / secs if secs else 0:.1f} frames/s (source {args.fps:g} fps), "
          f"{rep['batches']} batches, import {rep['import_path']}, zero_copy {rep['zero_copy']}")
    print(f"capture->features latency: p50 {lat['p50']} ms, p95 {lat['p95']} ms, p99 {lat['p99']} ms "
          f"(capture->tensor-ready p50 {rep['latency_ms']['p50']} ms, p99 {rep['latency_ms']['p99']} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
