"""The numpy oracle for the fused CUDA conversion (float64, one frame at a time).

It implements the conventions written in `formats.py` in a different way
from the kernel: whole planes are decoded, each axis is resampled by
multiplying with a weight matrix, then the colour affine is applied. Tests
compare the kernel with this, with the tolerances in `TOLERANCE`.
"""
from __future__ import annotations

import math

import numpy as np

from sits.cuda.formats import DTYPES, Plan, SourceFormat

# Largest allowed |kernel - reference|, in output units, as (absolute, relative).
# float32: the kernel computes in float32 (weights, sums, affine): ~1e-6 of
# the value range; 2e-4 leaves room for area sums of ~100 terms and a
# division by a small std. float16: storage rounding, 2^-11 relative.
# uint8: the kernel's float32 result can land on the other side of a .5 tie.
TOLERANCE = {
    "float32": (2e-4, 1e-5),
    "float16": (2e-4, 2 ** -10),
    "uint8": (1.0, 0.0),
    "bfloat16": (2e-4, 2 ** -8),  # 8-bit significand: storage rounding, 2^-9 relative
}


def bfloat16_bits_to_float(bits: np.ndarray) -> np.ndarray:
    """bfloat16 values stored as uint16 bit patterns, as float32."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _plane(buf: np.ndarray, offset: int, rows: int, stride: int, row_bytes: int) -> np.ndarray:
    need = offset + stride * (rows - 1) + row_bytes
    if buf.size < need:
        raise ValueError(f"buffer of {buf.size} B is shorter than the frame ({need} B)")
    return np.lib.stride_tricks.as_strided(buf[offset:], shape=(rows, row_bytes), strides=(stride, 1))


def bayer_samples(buf: np.ndarray, src: SourceFormat) -> np.ndarray:
    """A raw Bayer frame's samples, (h, w) float64, unpacked."""
    buf = np.ascontiguousarray(buf, dtype=np.uint8).reshape(-1)
    info = src.info
    w, h = src.width, src.height
    rows = _plane(buf, 0, h, src.stride(0), info.row_bytes(w))
    if info.bpp == 8:
        return rows * 1.0
    if info.bpp == 16:
        return np.ascontiguousarray(rows).view("<u2") * 1.0
    per = 4 if info.bits == 10 else 2               # samples in a packed group
    low = info.bits - 8                              # low bits of each, in the group's last byte
    g = rows.reshape(h, w // per, per + 1).astype(np.int64)
    shifts = np.arange(per) * low
    values = (g[..., :per] << low) | ((g[..., per:] >> shifts) & ((1 << low) - 1))
    return values.reshape(h, w) * 1.0


def demosaic(raw: np.ndarray, cfa: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bilinear demosaic as convolutions: each colour's samples (zeros
    elsewhere) filtered with the green kernel [[0,1,0],[1,4,1],[0,1,0]]/4 or
    the red/blue one [[1,2,1],[2,4,2],[1,2,1]]/4; the frame is extended by
    reflection about its edge samples (numpy's "reflect"), which keeps the
    pattern's phase."""
    h, w = raw.shape
    padded = np.pad(raw, 1, mode="reflect")
    yy, xx = np.mgrid[-1:h + 1, -1:w + 1]
    colour = np.array(list(cfa)).reshape(2, 2)[yy & 1, xx & 1]
    green = np.array([[0, 1, 0], [1, 4, 1], [0, 1, 0]]) / 4
    red_blue = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]]) / 4
    out = []
    for name, kern in (("R", red_blue), ("G", green), ("B", red_blue)):
        sparse = np.where(colour == name, padded, 0.0)
        acc = np.zeros((h, w))
        for dy in range(3):
            for dx in range(3):
                acc += kern[dy, dx] * sparse[dy:dy + h, dx:dx + w]
        out.append(acc)
    return out[0], out[1], out[2]


def decode(buf: np.ndarray, src: SourceFormat) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Code values of the three components: (Y, Cb, Cr) or (R, G, B), float64.

    Y / R,G,B are at full resolution; Cb, Cr at chroma resolution.
    """
    buf = np.ascontiguousarray(buf, dtype=np.uint8).reshape(-1)
    info = src.info
    w, h = src.width, src.height
    if info.cfa:
        return demosaic(bayer_samples(buf, src), info.cfa)
    rows = _plane(buf, 0, h, src.stride(0), w * info.bytes_per_px)
    name = info.name
    if name == "YUYV":
        return rows[:, 0::2] * 1.0, rows[:, 1::4] * 1.0, rows[:, 3::4] * 1.0
    if name == "UYVY":
        return rows[:, 1::2] * 1.0, rows[:, 0::4] * 1.0, rows[:, 2::4] * 1.0
    if name in ("XRGB8888", "XBGR8888", "RGB888", "BGR888"):
        px = rows.reshape(h, w, info.bytes_per_px)
        if name in ("XRGB8888", "RGB888"):   # B, G, R in memory
            return px[..., 2] * 1.0, px[..., 1] * 1.0, px[..., 0] * 1.0
        return px[..., 0] * 1.0, px[..., 1] * 1.0, px[..., 2] * 1.0
    cw = w // info.sub_x
    uv = _plane(buf, src.plane_offset(1), src.plane_rows(1), src.stride(1), cw * info.chroma_bytes_per_px)
    if name == "P010":
        y = np.ascontiguousarray(rows).view("<u2") >> 6
        uv16 = np.ascontiguousarray(uv).view("<u2") >> 6
        return y * 1.0, uv16[:, 0::2] * 1.0, uv16[:, 1::2] * 1.0
    return rows * 1.0, uv[:, 0::2] * 1.0, uv[:, 1::2] * 1.0


def bilinear_weights(n_out: int, n_in: int, start: int, length: int, scale: float,
                     sub: int = 1, centred: bool = False) -> np.ndarray:
    """(n_out, n_in) matrix: output k samples the crop [start, start+length) of a
    full-resolution axis; for a subsampled axis (sub=2) the plane has n_in
    samples and the crop is mapped onto it (co-sited, or centred for 4:2:0 rows)."""
    wts = np.zeros((n_out, n_in))
    for k in range(n_out):
        u = start + (k + 0.5) * scale - 0.5
        if sub == 1:
            lo, hi = start, start + length - 1
        else:
            u = (u + 0.5) / 2 - 0.5 if centred else u / 2
            lo, hi = start // 2, (start + length - 1) // 2
        u = min(max(u, lo), hi)
        i0 = int(math.floor(u))
        i1 = min(i0 + 1, hi)
        f = u - i0
        wts[k, i0] += 1.0 - f
        wts[k, i1] += f
    return wts


def area_weights(n_out: int, n_in: int, start: int, scale: float, sub: int = 1) -> np.ndarray:
    """(n_out, n_in) box-filter matrix: overlap of each input sample with the
    output sample's footprint, divided by the footprint's length."""
    wts = np.zeros((n_out, n_in))
    for k in range(n_out):
        b0 = (start + k * scale) / sub
        b1 = (start + (k + 1) * scale) / sub
        for i in range(int(math.floor(b0)), int(math.ceil(b1))):
            ov = min(i + 1, b1) - max(i, b0)
            if ov > 0:
                wts[k, i] = ov / (b1 - b0)
    return wts


def convert_frame(buf: np.ndarray, plan: Plan) -> np.ndarray:
    """One frame through the plan: an array of the output's shape (without N) and dtype."""
    src, info = plan.src, plan.info
    comps = decode(buf, src)
    cx, cy, cw, ch = plan.crop
    ox, oy, ow, oh = plan.content
    sx, sy = plan.scale_xy
    out_comps = []
    for idx, comp in enumerate(comps):
        chroma = idx > 0 and not info.rgb
        subx = info.sub_x if chroma else 1
        suby = info.sub_y if chroma else 1
        if plan.resize == "area":
            wx = area_weights(ow, comp.shape[1], cx, sx, subx)
            wy = area_weights(oh, comp.shape[0], cy, sy, suby)
        else:
            wx = bilinear_weights(ow, comp.shape[1], cx, cw, sx, subx)
            wy = bilinear_weights(oh, comp.shape[0], cy, ch, sy, suby, centred=suby == 2)
        out_comps.append(wy @ comp @ wx.T)
    raw = np.stack(out_comps)  # (3, oh, ow)
    rgb = np.einsum("ij,jhw->ihw", plan.affine[:, :3], raw) + plan.affine[:, 3][:, None, None]
    val = np.clip(rgb, 0.0, 1.0) ** plan.inv_gamma * plan.norm_a[:, None, None] + plan.norm_b[:, None, None]
    canvas = np.empty((3, plan.out.height, plan.out.width))
    canvas[...] = plan.pad_out[:, None, None]
    canvas[:, oy:oy + oh, ox:ox + ow] = val
    if plan.out.dtype == "uint8":
        canvas = np.clip(np.rint(canvas), 0, 255)
    if plan.out.layout == "NHWC":
        canvas = canvas.transpose(1, 2, 0)
    return canvas.astype(DTYPES[plan.out.dtype]) if plan.out.dtype == "uint8" else canvas


def convert_batch(bufs, plan: Plan) -> np.ndarray:
    """Reference for a batch, float64 (uint8 for uint8 outputs)."""
    return np.stack([convert_frame(b, plan) for b in bufs])


def max_error(got: np.ndarray, ref: np.ndarray, dtype: str) -> float:
    """Largest error in units of the tolerance (<= 1 passes)."""
    atol, rtol = TOLERANCE[dtype]
    if dtype == "bfloat16" and np.asarray(got).dtype == np.uint16:
        got = bfloat16_bits_to_float(got)
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        raise ValueError(f"shape {got.shape} != reference {ref.shape}")
    if not np.all(np.isfinite(got)):
        return math.inf
    return float(np.max(np.abs(got - ref) / (atol + rtol * np.abs(ref)), initial=0.0))
