#!/usr/bin/env python3
"""Area kernel only: time compile-time variants of kernels/convert.cu on the
benchmark's cases, each checked against the numpy oracle first.

    PYTHONPATH=. python3 tools/bench/cuda_area_variants.py --defines SITS_AREA_MIN_BLOCKS=4 SITS_AREA_MIN_BLOCKS=5 \
        --integer 0 1 --shapes auto b2 b8 --json $OUT/area.json

Each kernel is compiled when a case first needs it (convert._kernel), so a
variant builds only the area kernels of the chosen cases.
A variant is the kernel text with `#define NAME VALUE` lines put in front
(one --defines item, NAME=VALUE pairs joined by commas: the kernel's
#ifndef tuning numbers, SITS_AREA_MIN_BLOCKS, SITS_INT_MIN_BLOCKS and
SITS_INT_SHORT_MIN_BLOCKS, the blocks per SM that the register caps aim
at), with the integer kernel on or off (kernel.AREA_INTEGER), its dot
products on or off (kernel.AREA_INT_DOT) and its block size
(kernel.AREA_INT_THREADS, which the kernel text takes from kernel.py);
each is timed over launch shapes: "auto" (kernel.area_band_rows, the default launch), "bN"
bands of N rows.
Times are those of sits/cuda/bench.py item (a): the kernel alone, two frame
sets replayed alternately from one graph, against "input read once + output
written once" at the device-to-device copy bandwidth measured in this run.
"""
import argparse
import functools
import json
import sys
from pathlib import Path

import numpy as np

from sits.cuda import bench as B
from sits.cuda import convert as C
from sits.cuda import kernel as K
from sits.cuda import reference as R
from sits.cuda.formats import OutputSpec, SourceFormat, make_plan
from sits.cuda.runtime import cupy
from sits.errors import SitsError

PRODUCT_SOURCE = K.kernel_source
CASES = [("YUYV", 224, "float16", "NCHW"), ("YUYV", 224, "bfloat16", "NHWC"), ("NV12", 224, "float16", "NCHW"),
         ("YUYV", 640, "float16", "NCHW"), ("NV12", 640, "float16", "NCHW")]


def use_variant(defines: dict[str, str]) -> None:
    """Build the kernels with `defines` in front of the product's text."""
    K.kernel_source = functools.partial(PRODUCT_SOURCE, defines)
    C._kernel.cache_clear()


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
    ap.add_argument("--integer", type=int, nargs="+", default=[1], help="kernel.AREA_INTEGER values")
    ap.add_argument("--dot", type=int, nargs="+", default=[1], help="kernel.AREA_INT_DOT values")
    ap.add_argument("--int-threads", type=int, nargs="+", default=[K.AREA_INT_THREADS],
                    help="kernel.AREA_INT_THREADS values")
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
        defines = K.parse_defines(item)
        K.AREA_INTEGER = bool(integer)
        K.AREA_INT_DOT = bool(dot)
        K.AREA_INT_THREADS = threads
        mb = ",".join(f"{k}={v}" for k, v in defines.items()) + f" int={integer} dot={dot} threads={threads}"
        try:
            use_variant(defines)
            run_variant(args, cp, stream, d2d, cases, sets_of, rows, mb)
        except Exception as e:  # one variant that fails to build or run costs only its own rows
            print(f"{mb} FAILED: {type(e).__name__}: {str(e)[-2000:]}", flush=True)
        if args.json:  # after every variant, so a run cut short keeps what it measured
            Path(args.json).write_text(json.dumps(dict(d2d=d2d, rows=rows), indent=1))
    return 0


def run_variant(args, cp, stream, d2d, cases, sets_of, rows, mb) -> None:
    """The cases with the kernel variant in use now (use_variant): a row each in `rows`."""
    for fmt, size, dtype, layout in cases:
        src = SourceFormat(fmt, B.W, B.H)
        if fmt not in sets_of:
            sets_of[fmt] = [B._random_device_frames(cp, src, args.batch, seed) for seed in (1, 2)]
        sets = sets_of[fmt]
        plan = make_plan(src, OutputSpec(size, size, layout=layout, dtype=dtype, **B.IMAGENET), resize="area")
        conv = C.FrameConverter(plan, max_batch=args.batch, stream=stream, slots=2)
        err = check(cp, conv, plan, sets[0])
        if args.once:
            conv.convert(sets[0])
            cp.cuda.runtime.deviceSynchronize()
            print(f"{mb} {fmt} {size} {dtype} {layout} err={err:.3f}", flush=True)
            continue
        outs = [conv._allocate(args.batch) for _ in range(2)]
        in_bytes = args.batch * src.frame_bytes
        out_bytes = args.batch * 3 * size * size * 2
        roof = (in_bytes + out_bytes) / d2d * 1e3
        sweep = {}
        for shape in args.shapes:
            K.AREA_BAND_ROWS = None if shape == "auto" else int(shape[1:])
            try:
                sweep[shape] = B._time_fixed(cp, stream, conv, sets, outs, args.batch)
            finally:
                K.AREA_BAND_ROWS = None
        best = min(sweep, key=sweep.get)
        row = dict(variant=mb, format=fmt, size=size, dtype=dtype,
                   layout=layout, regs=conv.registers, resident=conv._resident.get(4), err=err,
                   roofline_ms=roof, sweep_ms=sweep, best=best, best_frac=roof / sweep[best])
        rows.append(row)
        print(f"{mb} {fmt} {size} {dtype} {layout} regs={conv.registers} "
              f"res={row['resident']} err={err:.3f} "
              + " ".join(f"{b}={ms * 1e3:.1f}us({roof / ms:.0%})" for b, ms in sweep.items()), flush=True)
        del conv, outs


if __name__ == "__main__":
    sys.exit(main())
