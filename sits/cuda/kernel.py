"""What the conversion kernels are given: parameter block, pointer table, launch shape.

Pure Python/numpy, shared by the CuPy launcher (`convert.py`) and the CPU
emulation test, so that both run the kernel with the same bytes.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from sits.cuda.formats import Plan
from sits.errors import UsageError

KERNEL_SOURCE_PATH = Path(__file__).with_name("kernels") / "convert.cu"

# (name, count, kind) in the order of `struct Params` in kernels/convert.cu;
# every field is 4 bytes (tests/unit/test_cuda_kernel_params.py checks the match).
PARAM_FIELDS = [
    ("stride0", 1, "i"), ("stride1", 1, "i"),
    ("crop_x", 1, "i"), ("crop_y", 1, "i"), ("crop_w", 1, "i"), ("crop_h", 1, "i"),
    ("out_w", 1, "i"), ("out_h", 1, "i"),
    ("content_x", 1, "i"), ("content_y", 1, "i"), ("content_w", 1, "i"), ("content_h", 1, "i"),
    ("out_stride_n", 1, "i"), ("out_stride_c", 1, "i"), ("out_stride_y", 1, "i"), ("out_stride_x", 1, "i"),
    ("word_start0", 1, "i"), ("word_count0", 1, "i"), ("word_start1", 1, "i"), ("word_count1", 1, "i"),
    ("smem_off1", 1, "i"), ("smem_row", 1, "i"),
    ("span_offset", 1, "i"), ("span_rows1", 1, "i"), ("cols0", 1, "i"), ("cols1", 1, "i"),
    ("m", 12, "f"), ("norm_a", 3, "f"), ("norm_b", 3, "f"), ("pad", 3, "f"),
]
PARAM_WORDS = sum(count for _, count, _ in PARAM_FIELDS)

OUT_CODES = {"uint8": 0, "float16": 1, "float32": 2, "bfloat16": 3}
BILINEAR_BLOCK = (32, 8, 1)
AREA_THREADS = 256
# Hopper's per-block opt-in limit is 227 KiB; stay under it with room.
MAX_SHARED_BYTES = 200 * 1024
INT32_MAX = 2 ** 31 - 1
# Output rows per area block; None: chosen from the launch size (area_band_rows).
AREA_BAND_ROWS: int | None = None
# `struct Span` in kernels/convert.cu: one row or column of an area resampling.
SPAN_DTYPE = np.dtype([("i0", "<i4"), ("n", "<i4"), ("w0", "<f4"), ("w1", "<f4"), ("inv", "<f4"),
                       ("unused", "<f4", 3)])


def _padded(n: int) -> int:
    """Floats that n column sums take in shared memory, rounded to 16 bytes."""
    return -(-n // 4) * 4


@dataclasses.dataclass(frozen=True)
class AreaWords:
    word_start0: int
    word_count0: int
    word_start1: int
    word_count1: int
    n0: int   # column sums of component 0 (luma, or the first RGB channel)
    n12: int  # column sums of each of components 1 and 2

    @property
    def smem_off1(self) -> int:
        return -(-_padded(self.n0) // 4) * 4

    @property
    def smem_row(self) -> int:
        return self.smem_off1 + 2 * _padded(self.n12)  # components 1 and 2 as pairs

    @property
    def shared_bytes(self) -> int:
        return 2 * 4 * self.smem_row  # two row buffers

    def bases(self, plan: Plan) -> tuple[int, int]:
        """Source column (component 0) and chroma column (1, 2) of the first sum in shared memory."""
        name = plan.info.name
        if name in ("YUYV", "UYVY"):
            return 2 * self.word_start0, self.word_start0
        if name in ("NV12", "NV16"):
            return 4 * self.word_start0, 2 * self.word_start1
        if name == "P010":
            return 2 * self.word_start0, self.word_start1
        return self.word_start0, self.word_start0


def vec4_possible(plan: Plan) -> bool:
    """Whether the area kernel may use 16-byte loads: every row of every plane
    starts 16-byte aligned when the frame does."""
    src = plan.src
    ok = src.stride(0) % 16 == 0
    if plan.info.planes == 2:
        ok = ok and src.stride(1) % 16 == 0 and src.plane_offset(1) % 16 == 0
    return ok


def area_words(plan: Plan, vec: int = 1) -> AreaWords:
    """The 32-bit words of each plane that cover the crop's columns, rounded to
    whole groups of `vec` words, and the shared memory their column sums take."""
    info = plan.info
    cx, _, cw, _ = plan.crop
    bpp = info.bytes_per_px

    def words(b0: int, b1: int) -> tuple[int, int]:
        ws = (b0 // 4) // vec * vec
        we = -(-(-(-b1 // 4)) // vec) * vec
        return ws, we - ws

    ws0, wc0 = words(cx * bpp, (cx + cw) * bpp)
    n0 = wc0 * (4 // bpp)
    ws1 = wc1 = 0
    if info.planes == 2:
        cb = info.chroma_bytes_per_px
        ws1, wc1 = words((cx // 2) * cb, -(-(cx + cw) // 2) * cb)
        n12 = wc1 * (4 // cb)
    else:
        n12 = wc0  # one chroma pair per YUYV word, one pixel per XRGB word
    return AreaWords(ws0, wc0, ws1, wc1, n0, n12)


def _span(b0: float, b1: float, end: int, base: int) -> tuple:
    """The kernel's Span for the footprint [b0, b1) clipped at `end` (doubles, as
    the oracle): first sample, count, the end samples' overlaps, 1 / footprint."""
    i0 = math.floor(b0)
    i1 = min(math.ceil(b1), end)
    n = i1 - i0
    w0 = min(i0 + 1, b1) - b0
    w1 = min(i1, b1) - max(i1 - 1, b0) if n > 1 else 0.0
    return (i0 - base, n, w0, w1, 1.0 / (b1 - b0), (0, 0, 0))


def area_spans(plan: Plan, words: AreaWords) -> tuple[np.ndarray, dict[str, int]]:
    """The Span table (rows0, rows1, cols0, cols1) and where each part starts."""
    cx, cy, cw, ch = plan.crop
    _, _, ow, oh = plan.content
    sx, sy = cw / ow, ch / oh
    info = plan.info
    base0, base1 = words.bases(plan)
    rows0 = [_span(cy + k * sy, cy + (k + 1) * sy, cy + ch, 0) for k in range(oh)]
    rows1 = []
    if info.planes == 2:
        sub = info.sub_y
        rows1 = [_span((cy + k * sy) / sub, (cy + (k + 1) * sy) / sub, (cy + ch + sub - 1) // sub, 0)
                 for k in range(oh)]
    cols0 = [_span(cx + k * sx, cx + (k + 1) * sx, cx + cw, base0) for k in range(ow)]
    cols1 = []
    if not info.rgb:
        cols1 = [_span((cx + k * sx) * 0.5, (cx + (k + 1) * sx) * 0.5, (cx + cw + 1) // 2, base1)
                 for k in range(ow)]
    table = np.array(rows0 + rows1 + cols0 + cols1, dtype=SPAN_DTYPE)
    start = {"span_rows1": len(rows0) if rows1 else 0, "span_cols0": len(rows0) + len(rows1)}
    start["span_cols1"] = start["span_cols0"] + (len(cols0) if cols1 else 0)
    return table, start


def col_table(cols: np.ndarray) -> np.ndarray:
    """A ColTable (kernels/convert.cu) as bytes: one 16-byte entry per column,
    (i0 | n << 16, w0, w1, inv)."""
    if len(cols) and (cols["i0"].min() < 0 or cols["i0"].max() >= 1 << 16 or cols["n"].max() >= 1 << 15):
        raise UsageError("area columns out of the kernel's 16-bit range")
    entries = np.zeros((len(cols), 4), np.uint32)
    entries[:, 0] = (cols["i0"].astype(np.int64) | (cols["n"].astype(np.int64) << 16)).astype(np.uint32)
    for k, name in enumerate(("w0", "w1", "inv"), start=1):
        entries[:, k] = cols[name].astype(np.float32).view(np.uint32)
    return entries.reshape(-1).view(np.uint8)


def area_band_rows(plan: Plan, batch: int, resident: int | None = None) -> int:
    """Output rows per area block: up to 4 (measured best on the H200 for
    224 and 640 outputs), fewer when the launch would not fill the GPU twice
    over with `resident` blocks at a time (area_resident; a guess without)."""
    if AREA_BAND_ROWS:
        return int(AREA_BAND_ROWS)
    return max(1, min(4, plan.out.height * batch // (2 * (resident or 660))))


def area_resident(registers: int, shared_bytes: int, sms: int, shared_per_sm: int,
                  reserved_per_block: int = 1024) -> int:
    """Area blocks (of AREA_THREADS) the GPU holds at once: registers are
    allocated per warp in units of 256, shared memory per block plus what
    the driver reserves."""
    per_warp = -(-registers * 32 // 256) * 256
    by_regs = 65536 // (per_warp * (AREA_THREADS // 32))
    by_smem = shared_per_sm // (shared_bytes + reserved_per_block)
    return sms * max(1, min(by_regs, by_smem, 2048 // AREA_THREADS))


def kernel_name(plan: Plan, vec: int = 1) -> str:
    if plan.resize == "area":
        return f"sits::area<{plan.info.code}, {OUT_CODES[plan.out.dtype]}, {vec}>"
    return f"sits::bilinear<{plan.info.code}, {OUT_CODES[plan.out.dtype]}>"


def all_kernel_names() -> list[str]:
    outs = range(len(OUT_CODES))
    names = [f"sits::bilinear<{fmt}, {out}>" for fmt in range(7) for out in outs]
    return names + [f"sits::area<{fmt}, {out}, {vec}>" for fmt in range(7) for out in outs for vec in (1, 4)]


def default_out_strides(plan: Plan) -> tuple[int, int, int, int]:
    """Element strides (n, c, y, x) of a contiguous output."""
    h, w = plan.out.height, plan.out.width
    if plan.out.layout == "NCHW":
        return (3 * h * w, h * w, w, 1)
    return (3 * h * w, 1, 3 * w, 3)


def pack_params(plan: Plan, out_strides: tuple[int, int, int, int] | None = None, vec: int = 1) -> np.ndarray:
    """The Params block as bytes (uint8 array of PARAM_WORDS * 4), followed for
    area plans by the Span table (16-byte aligned, at span_offset)."""
    strides = out_strides or default_out_strides(plan)
    if any(s < 0 or s > INT32_MAX for s in strides):
        raise UsageError(f"output strides {strides} do not fit the kernel's 32-bit strides")
    head = PARAM_WORDS * 4
    span_offset = -(-head // 16) * 16
    if plan.resize == "area":
        words = area_words(plan, vec)
        spans, starts = area_spans(plan, words)
    else:
        words = AreaWords(0, 0, 0, 0, 0, 0)
        spans, starts = np.zeros(0, SPAN_DTYPE), {"span_rows1": 0, "span_cols0": 0, "span_cols1": 0}
    col_tables, col_offsets = [], [0, 0]
    if plan.resize == "area":  # the ColTables after the Span table: cols0, then cols1 (YUV)
        at = span_offset + spans.nbytes
        n_cols = plan.content[2]
        for k, first in enumerate((starts["span_cols0"], starts["span_cols1"] if not plan.info.rgb else None)):
            if first is None:
                col_offsets[k] = col_offsets[0]
                continue
            col_offsets[k] = at
            table = col_table(spans[first:first + n_cols])
            col_tables.append(table)
            at += table.nbytes
    pad = plan.pad_out
    if plan.out.dtype == "uint8":
        pad = np.clip(np.rint(pad), 0, 255)
    values = {
        "stride0": plan.src.stride(0), "stride1": plan.src.stride(1) if plan.info.planes == 2 else 0,
        "crop_x": plan.crop[0], "crop_y": plan.crop[1], "crop_w": plan.crop[2], "crop_h": plan.crop[3],
        "out_w": plan.out.width, "out_h": plan.out.height,
        "content_x": plan.content[0], "content_y": plan.content[1],
        "content_w": plan.content[2], "content_h": plan.content[3],
        "out_stride_n": strides[0], "out_stride_c": strides[1],
        "out_stride_y": strides[2], "out_stride_x": strides[3],
        "word_start0": words.word_start0, "word_count0": words.word_count0,
        "word_start1": words.word_start1, "word_count1": words.word_count1,
        "smem_off1": words.smem_off1, "smem_row": words.smem_row,
        "span_offset": span_offset, "span_rows1": starts["span_rows1"],
        "cols0": col_offsets[0], "cols1": col_offsets[1],
        "m": plan.affine.reshape(-1), "norm_a": plan.norm_a, "norm_b": plan.norm_b, "pad": pad,
    }
    buf = np.zeros(PARAM_WORDS, dtype=np.uint32)
    i = 0
    for name, count, kind in PARAM_FIELDS:
        val = np.asarray(values[name]).reshape(-1)
        if val.size != count:
            raise AssertionError(f"param {name}: {val.size} values, want {count}")
        if kind == "i":
            buf[i:i + count] = val.astype(np.int64).astype(np.int32).view(np.uint32)
        else:
            buf[i:i + count] = val.astype(np.float32).view(np.uint32)
        i += count
    out = np.zeros(span_offset + spans.nbytes, dtype=np.uint8)
    out[:head] = buf.view(np.uint8)
    out[span_offset:] = spans.view(np.uint8)
    return np.concatenate([out] + col_tables)


def param_struct(packed: np.ndarray) -> np.void:
    """The Params block (the head of pack_params' bytes) as a structured
    scalar, which CuPy passes by value as the kernel's first argument."""
    words = np.dtype([("words", "<u4", (PARAM_WORDS,))])
    return np.frombuffer(packed[:PARAM_WORDS * 4].tobytes(), dtype=words)[0]


def launch_shape(plan: Plan, batch: int, vec: int = 1,
                 resident: int | None = None) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """(grid, block, dynamic shared bytes) for one batch; `resident`: area
    blocks the GPU holds at once (area_resident), when known."""
    if batch < 1:
        raise UsageError(f"batch size {batch} is not positive")
    if batch > 65535:
        raise UsageError(f"batch size {batch} is over the kernel's limit of 65535")
    if plan.resize == "area":
        smem = area_words(plan, vec).shared_bytes
        if smem > MAX_SHARED_BYTES:
            raise UsageError(f"crop width {plan.crop[2]} needs {smem} B of shared memory for area "
                             f"resampling, over {MAX_SHARED_BYTES} B; crop narrower or use bilinear")
        blocks = -(-plan.out.height // area_band_rows(plan, batch, resident))
        return (blocks, batch, 1), (AREA_THREADS, 1, 1), smem
    bx, by, _ = BILINEAR_BLOCK
    grid = (-(-plan.out.width // bx), -(-plan.out.height // by), batch)
    return grid, BILINEAR_BLOCK, 0


def pointer_table(out_ptr: int, planes: list[tuple[int, int]], plan: Plan) -> np.ndarray:
    """The uint64 table: output base, then (plane 0, plane 1) of each frame."""
    table = np.empty(1 + 2 * len(planes), dtype=np.uint64)
    table[0] = out_ptr
    for n, (p0, p1) in enumerate(planes):
        if p0 % 4 or (plan.info.planes == 2 and p1 % 4):
            raise UsageError(f"frame {n}: plane addresses {p0:#x}/{p1:#x} are not 4-byte aligned")
        table[1 + 2 * n] = p0
        table[2 + 2 * n] = p1 if plan.info.planes == 2 else p0
    return table


def aligned16(planes: list[tuple[int, int]]) -> bool:
    return all(p0 % 16 == 0 and p1 % 16 == 0 for p0, p1 in planes)


def frame_planes(base: int, plan: Plan) -> tuple[int, int]:
    """Plane addresses of a frame laid out in one buffer at `base`."""
    if plan.info.planes == 2:
        return base, base + plan.src.plane_offset(1)
    return base, base
