#!/usr/bin/env python3
"""Area kernel only: time compile-time variants of kernels/convert.cu on the
benchmark's cases, each checked against the numpy oracle first.

    PYTHONPATH=. python3 tools/bench/cuda_area_variants.py --defines SITS_AREA_MIN_BLOCKS=4 SITS_AREA_MIN_BLOCKS=5 \
        --integer 0 1 --shapes auto b2 b8 --json $OUT/area.json

Each kernel is compiled when a case first needs it (a FrameConverter of
the variant), so a variant builds only the area kernels of the chosen cases.
A variant is a kernel.Variant given to the converter: the kernel text with
`#define NAME VALUE` lines put in front (one --defines item, NAME=VALUE
pairs joined by commas: the kernel's #ifndef tuning numbers,
SITS_AREA_MIN_BLOCKS, SITS_INT_MIN_BLOCKS and SITS_INT_SHORT_MIN_BLOCKS,
the blocks per SM that the register caps aim at), with the integer kernel
on or off (Variant.integer), its dot products on or off (Variant.dot) and
its block size (Variant.int_threads, which kernel.py writes into the text);
each is timed over launch shapes: "auto" (kernel.area_band_rows, the
product's launch), "bN" bands of N rows (Variant.band_rows).
Times are those of sits/cuda/bench.py item (a): the kernel alone, two frame
sets replayed alternately from one graph, against "input read once + output
written once" at the device-to-device copy bandwidth measured in this run.
"""
import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cuda_sass import parse_defines  # noqa: E402

from sits.cuda import bench as B  # noqa: E402
from sits.cuda import convert as C  # noqa: E402
from sits.cuda import kernel as K  # noqa: E402
from sits.cuda import reference as R  # noqa: E402
from sits.cuda.formats import OutputSpec, SourceFormat, make_plan  # noqa: E402
from sits.cuda.runtime import cupy  # noqa: E402
from sits.errors import SitsError  # noqa: E402

CASES = [("YUYV", 224, "float16", "NCHW"), ("YUYV", 224, "bfloat16", "NHWC"), ("NV12", 224, "float16", "NCHW"),
         ("YUYV", 640, "float16", "NCHW"), ("NV12", 640, "float16", "NCHW")]


def check(cp, conv, plan, frames) -> float:
    """Largest error of two converted frames in units of the tolerance (<= 1 passes)."""
    out = conv.convert(frames[:2]).tensor
    got = out.float().cpu().numpy() if hasattr(out, "cpu") else cp.asnumpy(out)
    atol, rtol = R.TOLERANCE[plan.out.dtype]
    ref = R.convert_batch([cp.asnumpy(f) for f in frames[:2]], plan)
    return float(np.max(np.abs(got.astype(np.float64) - ref) / (atol + rtol * np.abs(ref))))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--defines", nargs="+", default=["SITS_AREA_MIN_BLOCKS=5"])
    ap.add_argument("--integer", type=int, nargs="+", default=[1], help="kernel.Variant.integer values")
    ap.add_argument("--dot", type=int, nargs="+", default=[1], help="kernel.Variant.dot values")
    ap.add_argument("--int-threads", type=int, nargs="+", default=[K.PRODUCT.int_threads],
                    help="kernel.Variant.int_threads values")
    ap.add_argument("--shapes", nargs="+", default=["auto", "b2", "b8"])
    ap.add_argument("--cases", type=int, nargs="+", help="indices into CASES")
    ap.add_argument("--once", action="store_true", help="one conversion per case, no timing (for ncu)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--json")
    args = ap.parse_args()
    try:
        cp = cupy()
    except SitsError as exc:  # one line, as cuda_bench.py
        print(f"cuda_area_variants: {exc}", file=sys.stderr)
        return 1
    stream = cp.cuda.Stream(non_blocking=True)
    d2d = B.d2d_bandwidth(cp, stream)
    print(f"d2d {d2d / 1e12:.3f} TB/s", flush=True)
    cases = [CASES[i] for i in args.cases] if args.cases else CASES
    sets_of = {}
    rows = []
    variants = [(item, integer, dot, threads) for item in args.defines for integer in args.integer
                for dot in args.dot for threads in args.int_threads]
    for item, integer, dot, threads in variants:
        defines = parse_defines(item)
        variant = K.Variant(integer=bool(integer), dot=bool(dot), int_threads=threads,
                            defines=tuple(defines.items()))
        mb = ",".join(f"{k}={v}" for k, v in defines.items()) + f" int={integer} dot={dot} threads={threads}"
        try:
            run_variant(args, cp, stream, d2d, cases, sets_of, rows, mb, variant)
        except Exception as e:  # one variant that fails to build or run costs only its own rows
            print(f"{mb} FAILED: {type(e).__name__}: {str(e)[-2000:]}", flush=True)
        if args.json:  # after every variant, so a run cut short keeps what it measured
            Path(args.json).write_text(json.dumps(dict(d2d=d2d, rows=rows), indent=1))
    return 0


def run_variant(args, cp, stream, d2d, cases, sets_of, rows, mb, variant: K.Variant) -> None:
    """The cases with the kernel variant: a row each in `rows`."""
    for fmt, size, dtype, layout in cases:
        src = SourceFormat(fmt, B.W, B.H)
        if fmt not in sets_of:
            sets_of[fmt] = [B.random_device_frames(cp, src, args.batch, seed) for seed in (1, 2)]
        sets = sets_of[fmt]
        plan = make_plan(src, OutputSpec(size, size, layout=layout, dtype=dtype, **B.IMAGENET), resize="area")
        conv = C.FrameConverter(plan, max_batch=args.batch, stream=stream, tables=2, variant=variant)
        err = check(cp, conv, plan, sets[0])
        if args.once:
            conv.convert(sets[0])
            cp.cuda.runtime.deviceSynchronize()
            print(f"{mb} {fmt} {size} {dtype} {layout} err={err:.3f}", flush=True)
            continue
        outs = [conv.allocate(args.batch) for _ in range(2)]
        in_bytes = args.batch * src.frame_bytes
        out_bytes = args.batch * 3 * size * size * 2
        roof = (in_bytes + out_bytes) / d2d * 1e3
        sweep = {}
        for shape in args.shapes:
            banded = conv
            if shape != "auto":
                banded = C.FrameConverter(plan, max_batch=args.batch, stream=stream, tables=1,
                                          variant=dataclasses.replace(variant, band_rows=int(shape[1:])))
            sweep[shape] = B.time_fixed(cp, stream, [banded.fixed(sets[i], out=outs[i]) for i in range(2)])
            del banded
        best = min(sweep, key=sweep.get)
        row = dict(variant=mb, format=fmt, size=size, dtype=dtype,
                   layout=layout, regs=conv.registers, resident=conv.resident.get(4), err=err,
                   roofline_ms=roof, sweep_ms=sweep, best=best, best_frac=roof / sweep[best])
        rows.append(row)
        print(f"{mb} {fmt} {size} {dtype} {layout} regs={conv.registers} "
              f"res={row['resident']} err={err:.3f} "
              + " ".join(f"{b}={ms * 1e3:.1f}us({roof / ms:.0%})" for b, ms in sweep.items()), flush=True)
        del conv, outs


if __name__ == "__main__":
    sys.exit(main())
