#!/usr/bin/env python3
"""Run the CUDA stage benchmark from a checkout (no install needed):

    PYTHONPATH=. python3 tools/bench/cuda_bench.py --items abcde --json $OUT/cuda_bench.json

Same numbers as `sits bench cuda`; see sits/cuda/bench.py for what each item measures.
"""
import argparse
import json
import sys

from sits.cuda import bench
from sits.errors import SitsError


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", default="abcde")
    ap.add_argument("--json")
    args = ap.parse_args()
    try:
        results = bench.run(args.items)
    except SitsError as exc:
        print(f"cuda_bench: {exc}", file=sys.stderr)
        return 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    for line in bench.report_lines(results):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
