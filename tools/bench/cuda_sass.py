#!/usr/bin/env python3
"""Static look at the area_int kernels without a GPU: compile them with nvcc
for one architecture (default sm_90, the H200) and print, per kernel, its
registers and spills (ptxas -v) and the size in SASS instructions of each
loop (a backward branch and its target), innermost first. For changes made
where no GPU time is left; a count is not a time.

    PYTHONPATH=. python3 tools/bench/cuda_sass.py --defines SITS_INT_SHORT_MIN_BLOCKS=4 --kernels 2,1,1 2,1,0

--kernels takes FMT,OUT,SHORT triples (kernels/convert.cu codes: NV12 = 2,
YUYV = 0; float16 = 1). Needs nvcc and nvdisasm (pip: nvidia-cuda-nvdisasm)
on PATH or given.
"""
import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from sits.cuda import kernel as K


def parse_defines(text: str) -> dict[str, str]:
    """NAME=VALUE items separated by commas or spaces (NAME alone means
    NAME=1; a later item wins): the benchmarks' --defines."""
    return dict((item.split("=", 1) if "=" in item else (item, "1")) for item in text.replace(",", " ").split())


def loops(sass: str) -> list[tuple[int, int]]:
    """(first address, instructions) of each loop in one kernel's SASS."""
    labels, pending, found = {}, [], []
    for line in sass.splitlines():
        m = re.match(r"^(\.L_x_\d+):", line)
        if m:
            pending.append(m.group(1))
            continue
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if not m:
            continue
        addr = int(m.group(1), 16)
        for name in pending:
            labels[name] = addr
        pending = []
        b = re.search(r"BRA `?\(?(\.L_x_\d+)", m.group(2))
        if b and b.group(1) in labels and labels[b.group(1)] < addr:
            found.append((labels[b.group(1)], (addr - labels[b.group(1)]) // 16 + 1))
    return sorted(found, key=lambda f: f[1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--defines", nargs="*", default=[],
                    help="NAME=VALUE items put in front of the kernel text (its #ifndef tuning numbers)")
    ap.add_argument("--kernels", nargs="+", default=["2,1,1", "2,1,0", "0,1,1", "0,1,0"])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--nvcc", default=shutil.which("nvcc"))
    ap.add_argument("--nvdisasm", default=shutil.which("nvdisasm"))
    args = ap.parse_args()
    for tool in ("nvcc", "nvdisasm"):
        if not getattr(args, tool):
            print(f"cuda_sass: {tool} not found (give --{tool} PATH)", file=sys.stderr)
            return 1
    if any(not re.fullmatch(r"\d,\d,[01]", k) for k in args.kernels):
        print("cuda_sass: --kernels takes FMT,OUT,SHORT triples such as 2,1,1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="sits-sass-") as tmp:
        src, cubin = Path(tmp) / "k.cu", Path(tmp) / "k.cubin"
        variant = K.Variant(defines=tuple(parse_defines(" ".join(args.defines)).items()))
        src.write_text(K.kernel_source(variant)
                       + K.instantiations([f"sits::area_int<{k}>" for k in args.kernels]))
        built = subprocess.run([args.nvcc, "-std=c++17", f"-arch={args.arch}", "-cubin", "-Xptxas", "-v",
                                "-o", str(cubin), str(src)], capture_output=True, text=True)
        if built.returncode != 0:
            print(f"cuda_sass: nvcc failed: {K.compiler_error(built.stderr)}", file=sys.stderr)
            return 1
        sass = subprocess.run([args.nvdisasm, "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    usage, name = {}, None  # ptxas -v: a function's spills, then its registers
    for line in built.stderr.splitlines():
        m = re.search(r"Function properties for (\S+)|(\d+) bytes spill stores|Used (\d+) registers", line)
        if m and m.group(1):
            name = m.group(1)
        elif m and m.group(2):
            usage[name] = [0, int(m.group(2))]
        elif m and m.group(3) and name in usage:
            usage[name][0] = int(m.group(3))
    for text in re.split(r"\n(?=\s*\.section\s+\.text\.)", sass):
        m = re.match(r"\s*\.section\s+\.text\.(_ZN4sits8area_intILi(\d)ELi(\d)ELi(\d)E[^,\s]*)", text)
        if not m:
            continue
        regs, spill = usage.get(m.group(1), (0, 0))
        body = [n for _, n in loops(text)]
        count = len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", text, re.M))
        print(f"area_int<{m.group(2)}, {m.group(3)}, {m.group(4)}>: {regs} registers, {spill} bytes spilled, "
              f"{count} instructions; loops {body}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
