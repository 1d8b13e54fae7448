"""What the conversion kernels are given: parameter block, pointer table, launch shape.

Pure Python/numpy, shared by the CuPy launcher (`convert.py`) and the CPU
emulation test, so that both run the kernel with the same bytes.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import re
from pathlib import Path

import numpy as np

from sits.cuda.formats import FORMATS, Plan, format_info
# the Params block, the Span entry and the output codes, as kernels/convert.cu declares them
from sits.cuda.layout import OUT_CODES, PARAM_FIELDS, PARAM_WORDS, SOURCE_PATH, SPAN_DTYPE  # noqa: F401
from sits.errors import UsageError

KERNEL_SOURCE_PATH = SOURCE_PATH

BILINEAR_BLOCK = (32, 8, 1)
AREA_THREADS = 256
# Hopper's per-block opt-in limit is 227 KiB; stay under it with room.
MAX_SHARED_BYTES = 200 * 1024
INT32_MAX = 2 ** 31 - 1
# Formats area_int handles: 8-bit YUV, read as 16-byte groups.
AREA_INTEGER_FORMATS = ("YUYV", "UYVY", "NV12", "NV16")
# area_int keeps a row buffer for each row of its band: at most this many.
AREA_INT_MAX_ROWS = 8
# Threads of an area_int block: the product's Variant.int_threads (SITS_INT_THREADS in kernels/convert.cu).
AREA_INT_THREADS = 256


@dataclasses.dataclass(frozen=True)
class Variant:
    """How the kernels are built and area launches are made. Variant() is
    the product's choice, which every function here takes by default; a test
    passes another to reach a path the product takes only for other plans,
    a benchmark to time one against the product's (tools/bench)."""

    # 16-byte area launches of 8-bit YUV take the integer kernel when its
    # weights are exact (area_integer); False keeps the float kernel.
    integer: bool = True
    # area_int's general path sums a footprint row with dot products where
    # dot_columns can hold the plan's column weights; False: loops.
    dot: bool = True
    # Output rows per area block; None: area_band_rows chooses them.
    band_rows: int | None = None
    # Threads of an area_int block (SITS_INT_THREADS in the kernel text).
    int_threads: int = AREA_INT_THREADS
    # (NAME, VALUE) #defines in front of the kernel text after ours: the
    # kernel's #ifndef tuning numbers (SITS_AREA_MIN_BLOCKS, ...).
    defines: tuple[tuple[str, str], ...] = ()


PRODUCT = Variant()


def kernel_defines(variant: Variant = PRODUCT) -> dict[str, str]:
    """The #defines that kernels/convert.cu needs from here: its block sizes,
    for the GPU build (kernel_source) and the CPU emulator alike."""
    return {"SITS_BILINEAR_THREADS": str(math.prod(BILINEAR_BLOCK)), "SITS_AREA_THREADS": str(AREA_THREADS),
            "SITS_INT_THREADS": str(variant.int_threads)}


def kernel_source(variant: Variant = PRODUCT) -> str:
    """The kernel text with kernel_defines() in front, then the variant's own
    defines, which may not restate those (set the Variant's fields instead)."""
    ours = kernel_defines(variant)
    extra = dict(variant.defines)
    if set(ours) & set(extra):
        raise ValueError(f"{sorted(set(ours) & set(extra))} come from the Variant's fields; set those instead")
    defines = {**ours, **extra}
    return "".join(f"#define {k} {v}\n" for k, v in defines.items()) + KERNEL_SOURCE_PATH.read_text()


def compiler_error(log: str) -> str:
    """The first line of an NVRTC, nvcc or ptxas log that reports an error
    ("...: error: ..." or "...; error   : ..."), else its first line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    return next((line for line in lines if re.search(r"\berror\s*:", line)), lines[0] if lines else "(no message)")


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

    @property
    def int_off1(self) -> int:
        """area_int: 32-bit words of a row buffer before the (U, V) pairs (the
        luma samples, 16 bits each), a multiple of 4."""
        return -(-self.n0 // 8) * 4

    @property
    def int_row(self) -> int:
        """area_int: 32-bit words of one row buffer."""
        return self.int_off1 + _padded(self.n12)

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
    if plan.info.pixelwise:   # area_px reads pixels, not word groups
        return False
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
    return (i0 - base, n, w0, w1, 1.0 / (b1 - b0), 0, 0, 0.0)


def _exact_spans(start: int, length: int, count: int, sub: int, end: int, base: int) -> list[tuple] | None:
    """Spans of `count` footprints tiling [start, start + length) / sub, in
    integers: every boundary is (start * count + k * length) / (count * sub),
    so with D = count * sub each overlap is an integer number of 1/D. The
    weights are reduced by their common divisor g: W = overlap * D / g out of
    q = D / g a sample; scale = 1 / (footprint * q). None when the integer
    kernel's fields cannot hold them."""
    d = count * sub
    raw = []
    for k in range(count):
        n0, n1 = start * count + k * length, start * count + (k + 1) * length  # in 1/D
        i0 = n0 // d
        i1 = min(-(-n1 // d), end)
        n = i1 - i0
        w0 = min((i0 + 1) * d, n1) - n0
        w1 = min(i1 * d, n1) - max((i1 - 1) * d, n0) if n > 1 else 0
        raw.append((i0, n, w0, w1))
    g = d
    for _, _, w0, w1 in raw:
        g = math.gcd(g, w0, w1)
    q = d // g
    if q >= 1 << 16 or length // g >= 1 << 16:
        return None
    scale = float(np.float32(g / length))
    return [(i0 - base, n, w0 / d, w1 / d, d / length, (w0 // g) | ((w1 // g) << 16), q,
             scale) for i0, n, w0, w1 in raw]


def area_integer(plan: Plan, vec: int = 4, variant: Variant = PRODUCT) -> bool:
    """Whether the area launch with `vec`-word groups takes the integer
    kernel (area_int): the variant's choice, 8-bit YUV, 16-byte groups, and exact weights whose
    sums fit its lanes (255 * the weights of a footprint row < 2^16; 65535
    * those of a column < 2^32), in planes whose rows it finds at 32-bit
    offsets (stride * rows < 2^32)."""
    if not variant.integer or vec != 4 or plan.resize != "area" or plan.info.name not in AREA_INTEGER_FORMATS:
        return False
    if 4 * area_words(plan, 4).int_row > MAX_SHARED_BYTES:
        return False  # the float kernel refuses it with the reason
    if plan.src.stride(0) * plan.src.height >= 1 << 32:
        return False  # (a chroma plane is no taller)
    return _integer_spans(plan) is not None


def area_int_short(plan: Plan) -> bool:
    """Whether area_int takes its SHORT path: footprints of at most 3 rows
    (both planes), 3 luma columns and 2 chroma columns, a chroma pair's
    weighted sum fits each 16-bit lane (255 * the row weights * the column
    weights < 2^16), so U and V share one 32-bit multiply-add, a luma sum
    fits 2^23, and every luma column weight a byte."""
    rows0, rows1, cols0, cols1 = _integer_spans(plan)
    rows_c = rows1 or rows0
    if max(s[1] for s in rows0 + rows_c) > 3 or max(s[1] for s in cols0) > 3 or max(s[1] for s in cols1) > 2:
        return False
    if 255 * max(_weight_sum(s) for s in rows0) * max(_weight_sum(s) for s in cols0) >= 1 << 23:
        return False  # a luma sum is made a float in 2^23's mantissa
    if max(max(_taps(s)) for s in cols0) > 255:
        return False  # luma column weights are bytes of a dot product (short_columns)
    return 255 * max(_weight_sum(s) for s in rows_c) * max(_weight_sum(s) for s in cols1) < 1 << 16


def _taps(span: tuple) -> list[int]:
    """A footprint's integer weights: W0, q between, W1 last (W0 alone for one sample)."""
    n, packed, q = span[1], span[5], span[6]
    w0, w1 = packed & 0xffff, packed >> 16
    return [w0] if n == 1 else [w0] + [q] * (n - 2) + [w1]


def _weight_sum(span: tuple) -> int:
    return sum(_taps(span))


def _integer_spans(plan: Plan) -> tuple[list, list, list, list] | None:
    """Exact spans (rows0, rows1, cols0, cols1) when area_int can use them, else None."""
    info = plan.info
    return _integer_spans_of(plan.crop, plan.content, info.planes, info.sub_y, area_words(plan, 4).bases(plan))


@functools.lru_cache(maxsize=64)
def _integer_spans_of(crop, content, planes, sub_y, bases) -> tuple[list, list, list, list] | None:
    cx, cy, cw, ch = crop
    _, _, ow, oh = content
    base0, base1 = bases
    rows0 = _exact_spans(cy, ch, oh, 1, cy + ch, 0)
    rows1 = []
    if planes == 2:
        rows1 = _exact_spans(cy, ch, oh, sub_y, (cy + ch + sub_y - 1) // sub_y, 0)
    cols0 = _exact_spans(cx, cw, ow, 1, cx + cw, base0)
    cols1 = _exact_spans(cx, cw, ow, 2, (cx + cw + 1) // 2, base1)
    if rows0 is None or rows1 is None or cols0 is None or cols1 is None:
        return None
    for rows in (rows0, rows1):
        if rows and 255 * max(_weight_sum(s) for s in rows) >= 1 << 16:
            return None
    for cols in (cols0, cols1):
        if 65535 * max(_weight_sum(s) for s in cols) >= 1 << 32 or max(s[0] for s in cols) >= 1 << 16:
            return None
    return rows0, rows1, cols0, cols1


def area_spans(plan: Plan, words: AreaWords, integer: bool = False) -> tuple[np.ndarray, dict[str, int]]:
    """The Span table (rows0, rows1, cols0, cols1) and where each part starts;
    `integer`: the exact spans of the integer kernel (area_integer)."""
    if integer:
        rows0, rows1, cols0, cols1 = _integer_spans(plan)
        table = np.array(rows0 + rows1 + cols0 + cols1, dtype=SPAN_DTYPE)
        start = {"span_rows1": len(rows0) if rows1 else 0, "span_cols0": len(rows0) + len(rows1)}
        start["span_cols1"] = start["span_cols0"] + len(cols0)
        return table, start
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


def col_table(cols: np.ndarray, integer: bool = False) -> np.ndarray:
    """A ColTable (kernels/convert.cu) as bytes: one 16-byte entry per column,
    (i0 | n << 16, w0, w1, inv); `integer`: (i0 | n << 16, W, q, scale)."""
    if len(cols) and (cols["i0"].min() < 0 or cols["i0"].max() >= 1 << 16 or cols["n"].max() >= 1 << 15):
        raise UsageError("area columns out of the kernel's 16-bit range")
    entries = np.zeros((len(cols), 4), np.uint32)
    entries[:, 0] = (cols["i0"].astype(np.int64) | (cols["n"].astype(np.int64) << 16)).astype(np.uint32)
    if integer:
        entries[:, 1] = cols["W"]
        entries[:, 2] = cols["q"].astype(np.uint32)
        entries[:, 3] = cols["scale"].astype(np.float32).view(np.uint32)
    else:
        for k, name in enumerate(("w0", "w1", "inv"), start=1):
            entries[:, k] = cols[name].astype(np.float32).view(np.uint32)
    return entries.reshape(-1).view(np.uint8)


DOT_WORDS = 6  # row-buffer words a column's dot products cover, each part


def dot_columns(plan: Plan, variant: Variant = PRODUCT) -> np.ndarray | None:
    """The dot-product column table of area_int's general path (kernels/
    convert.cu `DotCol`, 12 words a column), or None where it does not serve:
    a variant without them, SHORT plans (their own table, short_columns), a column weight over 255
    (a byte of the product), or a footprint past DOT_WORDS words of a row
    buffer part."""
    if not (variant.dot and area_integer(plan, 4, variant)) or area_int_short(plan):
        return None
    words = area_words(plan, 4)
    _, _, cols0, cols1 = _integer_spans(plan)
    # A part's words: luma samples two a word; (U, V) pairs one a word (padded to 4).
    part_words = (words.int_off1, _padded(words.n12))
    if min(part_words) < DOT_WORDS:
        return None
    table = np.zeros((len(cols0), 12), np.uint32)
    for k, (c0, c1) in enumerate(zip(cols0, cols1)):
        t0, t1 = _taps(c0), _taps(c1)
        if max(t0 + t1) > 255:
            return None
        first0 = min(c0[0] // 2, part_words[0] - DOT_WORDS)  # never past the part
        b = c0[0] - 2 * first0  # sample 0's byte in the weights
        if b + c0[1] > 2 * DOT_WORDS:
            return None
        wl = np.zeros(2 * DOT_WORDS, np.uint8)
        wl[b:b + c0[1]] = t0
        first1 = min(c1[0], part_words[1] - DOT_WORDS)
        b = c1[0] - first1
        if b + c1[1] > DOT_WORDS:
            return None
        wu = np.zeros(2 * DOT_WORDS, np.uint8)
        wv = np.zeros(2 * DOT_WORDS, np.uint8)
        for j, t in enumerate(t1):  # pair m: byte 2m of U's weights, 2m + 1 of V's
            wu[2 * (b + j)] = t
            wv[2 * (b + j) + 1] = t
        table[k, 0] = first0
        table[k, 1:4] = wl.view("<u4")
        table[k, 4] = first1
        table[k, 5:8] = wu.view("<u4")
        table[k, 8:11] = wv.view("<u4")
    return table


def short_columns(plan: Plan) -> np.ndarray | None:
    """SHORT's column table (kernels/convert.cu `ShortCol`, 4 words a
    column), or None for other plans: the row-buffer word of the column's
    first luma sample | its first (U, V) word << 16; the luma weights as the
    bytes of one word, from that word's first sample on (a footprint of up to
    3 samples starting at either half: two `__dp2a`); the chroma taps
    c0 | c1 << 16 (c1 0 for a footprint of one pair)."""
    if not (area_integer(plan, 4) and area_int_short(plan)):
        return None
    _, _, cols0, cols1 = _integer_spans(plan)
    table = np.zeros((len(cols0), 4), np.uint32)
    for k, (c0, c1) in enumerate(zip(cols0, cols1)):
        i0 = c0[0]
        weights = np.zeros(4, np.uint8)
        weights[i0 & 1:(i0 & 1) + c0[1]] = _taps(c0)
        t1 = _taps(c1) + [0]
        table[k] = (i0 // 2 | c1[0] << 16, weights.view("<u4")[0], t1[0] | t1[1] << 16, 0)
    return table


def int_scales(plan: Plan) -> list[float]:
    """area_int's k0, z0, k1, z1: a sum times k is the mean sample of its
    footprint (k = 1 / (footprint * q) of both axes, one a plane: every
    footprint is as long), and z = -2^23 * k (the sums become floats in 2^23's
    mantissa)."""
    rows0, rows1, cols0, cols1 = _integer_spans(plan)
    k0 = np.float32(cols0[0][7]) * np.float32(rows0[0][7])
    k1 = np.float32(cols1[0][7]) * np.float32((rows1 or rows0)[0][7])
    return [k0, np.float32(-8388608.0) * k0, k1, np.float32(-8388608.0) * k1]


def area_band_rows(plan: Plan, batch: int, resident: int | None = None) -> int:
    """Output rows per area block: up to 4 (measured best on the H200 for
    224 and 640 outputs), fewer when the launch would not fill the GPU twice
    over with `resident` blocks at a time (area_resident; a guess without)."""
    return max(1, min(4, plan.out.height * batch // (2 * (resident or 660))))


def area_int_max_rows(plan: Plan) -> int:
    """Rows of an area_int band: its row buffers fit MAX_SHARED_BYTES."""
    return max(1, min(AREA_INT_MAX_ROWS, MAX_SHARED_BYTES // (4 * area_words(plan, 4).int_row)))


def area_int_shared(plan: Plan, rows: int) -> int:
    """area_int's shared memory for a band of `rows`: a row buffer each, and
    16 bytes that SHORT's taps past the last footprint read."""
    return 4 * area_words(plan, 4).int_row * rows + 16


def area_resident(registers: int, shared_bytes: int, sms: int, shared_per_sm: int,
                  reserved_per_block: int = 1024, threads: int = AREA_THREADS) -> int:
    """Area blocks (of `threads`) the GPU holds at once: registers are
    allocated per warp in units of 256, shared memory per block plus what
    the driver reserves."""
    per_warp = -(-registers * 32 // 256) * 256
    by_regs = 65536 // (per_warp * -(-threads // 32))
    by_smem = shared_per_sm // (shared_bytes + reserved_per_block)
    return sms * max(1, min(by_regs, by_smem, 2048 // threads))


def word_area(plan: Plan) -> bool:
    """An area plan of the word-group kernels (area, area_int), which read
    spans and column tables; pixelwise formats' area_px is launched as bilinear."""
    return plan.resize == "area" and not plan.info.pixelwise


def kernel_name(plan: Plan, vec: int = 1, variant: Variant = PRODUCT) -> str:
    if plan.info.pixelwise:
        kind = "area_px" if plan.resize == "area" else "bilinear"
        return f"sits::{kind}<{plan.info.code}, {OUT_CODES[plan.out.dtype]}>"
    if area_integer(plan, vec, variant):
        return f"sits::area_int<{plan.info.code}, {OUT_CODES[plan.out.dtype]}, {int(area_int_short(plan))}>"
    if plan.resize == "area":
        return f"sits::area<{plan.info.code}, {OUT_CODES[plan.out.dtype]}, {vec}>"
    return f"sits::bilinear<{plan.info.code}, {OUT_CODES[plan.out.dtype]}>"


def all_kernel_names() -> list[str]:
    """Every kernel kernel_name can name (tests/unit/test_cuda_arch_build.py builds them all)."""
    outs = range(len(OUT_CODES))
    infos = [format_info(name) for name in FORMATS]
    words = sorted({i.code for i in infos if not i.pixelwise})
    pixelwise = sorted({i.code for i in infos if i.pixelwise})
    integer = sorted({i.code for i in infos if i.name in AREA_INTEGER_FORMATS})
    names = [f"sits::bilinear<{fmt}, {out}>" for fmt in words + pixelwise for out in outs]
    names += [f"sits::area_px<{fmt}, {out}>" for fmt in pixelwise for out in outs]
    names += [f"sits::area<{fmt}, {out}, {vec}>" for fmt in words for out in outs for vec in (1, 4)]
    return names + [f"sits::area_int<{fmt}, {out}, {short}>" for fmt in integer for out in outs for short in (0, 1)]


def instantiations(names: list[str]) -> str:
    """Explicit instantiations of the kernels `names` (kernel_name's), for
    an nvcc build of kernel_source() (NVRTC takes them as name expressions)."""
    return "".join(f"template __global__ void {name}(const sits::Params, const unsigned char* __restrict__, "
                   "const unsigned long long* __restrict__);\n" for name in names)


def default_out_strides(plan: Plan) -> tuple[int, int, int, int]:
    """Element strides (n, c, y, x) of a contiguous output."""
    h, w = plan.out.height, plan.out.width
    if plan.out.layout == "NCHW":
        return (3 * h * w, h * w, w, 1)
    return (3 * h * w, 1, 3 * w, 3)


def pack_params(plan: Plan, out_strides: tuple[int, int, int, int] | None = None, vec: int = 1,
                variant: Variant = PRODUCT) -> np.ndarray:
    """The Params block as bytes (uint8 array of PARAM_WORDS * 4), followed for
    area plans by the Span table (16-byte aligned, at span_offset)."""
    strides = out_strides or default_out_strides(plan)
    if any(s < 0 or s > INT32_MAX for s in strides):
        raise UsageError(f"output strides {strides} do not fit the kernel's 32-bit strides")
    head = PARAM_WORDS * 4
    span_offset = -(-head // 16) * 16
    integer = area_integer(plan, vec, variant)
    if word_area(plan):
        words = area_words(plan, vec)
        spans, starts = area_spans(plan, words, integer)
    else:
        words = AreaWords(0, 0, 0, 0, 0, 0)
        spans, starts = np.zeros(0, SPAN_DTYPE), {"span_rows1": 0, "span_cols0": 0, "span_cols1": 0}
    col_tables, col_offsets = [], [0, 0]
    if word_area(plan):  # the ColTables after the Span table: cols0, then cols1 (YUV)
        at = span_offset + spans.nbytes
        n_cols = plan.content[2]
        for k, first in enumerate((starts["span_cols0"], starts["span_cols1"] if not plan.info.rgb else None)):
            if first is None:
                col_offsets[k] = col_offsets[0]
                continue
            col_offsets[k] = at
            table = col_table(spans[first:first + n_cols], integer)
            col_tables.append(table)
            at += table.nbytes
    cols2 = 0  # area_int: its path's own column table (dot products or SHORT's), after the ColTables
    own = (short_columns(plan) if area_int_short(plan) else dot_columns(plan, variant)) if integer else None
    if own is not None:
        cols2 = span_offset + spans.nbytes + sum(t.nbytes for t in col_tables)
        col_tables.append(own.reshape(-1).view(np.uint8))
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
        "smem_off1": words.int_off1 if integer else words.smem_off1,
        "smem_row": words.int_row if integer else words.smem_row,
        "span_offset": span_offset, "span_rows1": starts["span_rows1"],
        "cols0": col_offsets[0], "cols1": col_offsets[1], "cols2": cols2,
        "kz": int_scales(plan) if integer else [0.0] * 4,
        "m": plan.affine.reshape(-1), "norm_a": plan.norm_a, "norm_b": plan.norm_b, "pad": pad,
        "frame_w": plan.src.width, "frame_h": plan.src.height,
        "cfa": plan.info.cfa_code if plan.info.cfa else 0, "inv_gamma": plan.inv_gamma,
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


def launch_shape(plan: Plan, batch: int, vec: int = 1, resident: int | None = None,
                 variant: Variant = PRODUCT) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """(grid, block, dynamic shared bytes) for one batch; `resident`: area
    blocks the GPU holds at once (area_resident), when known."""
    if batch < 1:
        raise UsageError(f"batch size {batch} is not positive")
    if batch > 65535:
        raise UsageError(f"batch size {batch} is over the kernel's limit of 65535")
    if word_area(plan):
        words = area_words(plan, vec)
        band = variant.band_rows or area_band_rows(plan, batch, resident)
        if area_integer(plan, vec, variant):  # a row buffer for each row of the band
            band = max(1, min(band, area_int_max_rows(plan)))
            blocks = -(-plan.out.height // band)
            rows = -(-plan.out.height // blocks)
            return (blocks, batch, 1), (variant.int_threads, 1, 1), area_int_shared(plan, rows)
        smem = words.shared_bytes
        if smem > MAX_SHARED_BYTES:
            raise UsageError(f"crop width {plan.crop[2]} needs {smem} B of shared memory for area "
                             f"resampling, over {MAX_SHARED_BYTES} B; crop narrower or use bilinear")
        blocks = -(-plan.out.height // band)
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
