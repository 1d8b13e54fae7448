"""Frame formats, colour maths and geometry of the CUDA conversion stage.

Pure Python (numpy only): this module decides everything about a
conversion at set-up time, so that a bad format/size/stride is refused
here with a clear UsageError and never becomes a wrong image; the kernel
(`kernels/convert.cu`) and the numpy oracle (`reference.py`) both take
their numbers from a `Plan`.

Conventions, shared by the kernel and the reference:

* Pixel centres are at +0.5 (PyTorch ``align_corners=False``, OpenCV).
* Subsampled chroma is sited as MPEG-2/H.264 default (chroma_sample_loc 0):
  horizontally co-sited with the even luma sample, vertically (4:2:0)
  halfway between two luma rows.
* Bilinear sampling clamps to the edges of the crop.
* Area resampling is an exact box filter: every source pixel is weighted
  by its overlap with the output pixel's footprint, so each source pixel
  is read; for chroma the footprint is halved in each subsampled axis.
* Conversion happens after resampling (it is affine, so this equals
  converting first, except that RGB is clamped to [0, 1] once, at the end).
* XRGB8888/XBGR8888 use DRM's names: XRGB8888 is B, G, R, X in memory,
  XBGR8888 is R, G, B, X.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

from sits.bayer import AUTO, AUTO_NOT_ON_GPU, RawOptions, not_raw
from sits.cuda.layout import FORMAT_CODES
from sits.errors import UsageError
from sits.formats import FORMATS as PIXEL_FORMATS


def kernel_code(f) -> int:
    """The kernel's code for sits.formats.PixelFormat `f`: its own name's; a
    raw Bayer format's by how a sample is stored (the pattern is a parameter)."""
    if f.cfa is None:
        return FORMAT_CODES[f.name]
    return FORMAT_CODES[f"BAYER{f.bits}P" if f.packed else f"BAYER{8 if f.bits == 8 else 16}"]


# The formats the kernels read, from the one format table (sits/formats.py):
# name: (code, planes, bytes per luma px in plane 0, chroma sub x, sub y, bits, packed rgb,
#        bits per px in plane 0, Bayer pattern)
FORMATS = {f.name: (kernel_code(f), f.planes, f.bpp // 8, f.sub_x, f.sub_y, f.bits, f.rgb, f.bpp, f.cfa)
           for f in PIXEL_FORMATS if f.cuda}
# V4L2/DRM fourccs people pass instead of our names.
ALIASES = {**{f.v4l2: f.name for f in PIXEL_FORMATS if f.cuda and f.v4l2 != f.name},
           **{f.drm: f.name for f in PIXEL_FORMATS if f.cuda and f.drm and f.drm != f.name},
           "YUY2": "YUYV", "P010LE": "P010"}

# (Kr, Kb) of each colour matrix.
MATRICES = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722), "bt2020": (0.2627, 0.0593)}
RANGES = ("limited", "full")
LAYOUTS = ("NCHW", "NHWC")
# Storage of each output dtype; bfloat16 (which numpy and CuPy lack) is kept
# as its 16-bit pattern (reference.bfloat16_bits_to_float reads it back).
DTYPES = {"uint8": np.uint8, "float16": np.float16, "float32": np.float32, "bfloat16": np.uint16}
ORDERS = ("RGB", "BGR")
RESIZES = ("auto", "bilinear", "area")


@dataclasses.dataclass(frozen=True)
class FormatInfo:
    name: str
    code: int
    planes: int
    bytes_per_px: int  # in plane 0
    sub_x: int
    sub_y: int
    bits: int
    rgb: bool
    bpp: int = 0            # bits a pixel takes in plane 0 (10 for 10-bit packed Bayer)
    cfa: str | None = None  # raw Bayer: the 2x2 tile's colours, row by row ("RGGB")

    @property
    def pixelwise(self) -> bool:
        """The kernels read it a pixel at a time (raw Bayer, 24-bit RGB), not
        in 32-bit word groups: any row alignment, area by area_px."""
        return bool(self.cfa) or self.bpp == 24

    def row_bytes(self, width: int) -> int:
        """Bytes of `width` pixels in plane 0."""
        return width * self.bpp // 8

    @property
    def cfa_code(self) -> int:
        """Where red is in the tile, (x & 1) | (y & 1) << 1 (the kernel's Params.cfa)."""
        i = self.cfa.index("R")
        return (i & 1) | (i >> 1) << 1

    @property
    def chroma_bytes_per_px(self) -> int:
        """Bytes of one chroma sample pair in plane 1 (planar formats)."""
        return 2 * ((self.bits + 7) // 8)


def format_info(name: str) -> FormatInfo:
    key = next((k for k in (ALIASES.get(n, n) for n in (name, name.upper())) if k in FORMATS), name)
    if key not in FORMATS:
        raise UsageError(f"unsupported pixel format {name!r} for the CUDA stage "
                         f"(supported: {', '.join(FORMATS)})")
    return FormatInfo(key, *FORMATS[key])


@dataclasses.dataclass(frozen=True)
class SourceFormat:
    """What a capture buffer holds: V4L2's pix format in our words.

    `bytesperline` is plane 0's stride; planar formats' second plane has
    `bytesperline_uv` (V4L2 single-planar NV12 uses the same stride and
    puts the chroma plane right after `height` rows: the default
    `uv_offset`).
    """

    fourcc: str
    width: int
    height: int
    bytesperline: int | None = None
    bytesperline_uv: int | None = None
    uv_offset: int | None = None

    @property
    def info(self) -> FormatInfo:
        return format_info(self.fourcc)

    def stride(self, plane: int) -> int:
        info = self.info
        if plane == 0:
            return self.bytesperline or info.row_bytes(self.width)
        return self.bytesperline_uv or self.stride(0)

    def plane_rows(self, plane: int) -> int:
        if plane == 0:
            return self.height
        return -(-self.height // self.info.sub_y)

    def plane_offset(self, plane: int) -> int:
        if plane == 0:
            return 0
        return self.uv_offset if self.uv_offset is not None else self.stride(0) * self.height

    @property
    def frame_bytes(self) -> int:
        """Bytes one frame spans in a single buffer (all planes)."""
        end = self.stride(0) * self.height
        if self.info.planes == 2:
            end = max(end, self.plane_offset(1) + self.stride(1) * self.plane_rows(1))
        return end

    def validate(self) -> None:
        info = self.info
        if self.width <= 0 or self.height <= 0:
            raise UsageError(f"{info.name}: frame size {self.width}x{self.height} is empty")
        if info.sub_x == 2 and self.width % 2:
            raise UsageError(f"{info.name}: width {self.width} is odd; 4:2:x formats need an even width")
        if info.sub_y == 2 and self.height % 2:
            raise UsageError(f"{info.name}: height {self.height} is odd; 4:2:0 formats need an even height")
        if info.cfa:
            if self.width % 2 or self.height % 2 or self.width < 2 or self.height < 2:
                raise UsageError(f"{info.name}: frame size {self.width}x{self.height}: raw Bayer frames are "
                                 "whole 2x2 tiles")
            group = 8 // math.gcd(8, info.bpp)   # pixels whose packed bits end on a byte
            if self.width % group:
                raise UsageError(f"{info.name}: width {self.width} is not a multiple of {group} "
                                 "(packed groups of samples)")
        row0 = info.row_bytes(self.width)
        if self.stride(0) < row0:
            raise UsageError(f"{info.name}: bytesperline {self.stride(0)} is smaller than a row "
                             f"({self.width} px x {info.bpp} bits = {row0} B)")
        if info.planes == 2:
            row1 = (self.width // info.sub_x) * info.chroma_bytes_per_px
            if self.stride(1) < row1:
                raise UsageError(f"{info.name}: chroma bytesperline {self.stride(1)} is smaller "
                                 f"than a chroma row ({row1} B)")
            if self.plane_offset(1) < self.stride(0) * self.height:
                raise UsageError(f"{info.name}: chroma plane offset {self.plane_offset(1)} overlaps "
                                 f"the luma plane ({self.stride(0) * self.height} B)")
        # The kernels load whole 32-bit words (coalesced); rows must start on
        # one (pixelwise formats' are read a sample at a time: 16-bit ones, aligned).
        if info.pixelwise:
            if info.bpp == 16 and self.stride(0) % 2:
                raise UsageError(f"{info.name}: bytesperline {self.stride(0)} is odd (16-bit samples)")
            return
        for plane in range(info.planes):
            if self.stride(plane) % 4:
                raise UsageError(f"{info.name}: plane {plane} bytesperline {self.stride(plane)} "
                                 "is not a multiple of 4, which the CUDA kernels need")
        if info.planes == 2 and self.plane_offset(1) % 4:
            raise UsageError(f"{info.name}: chroma plane offset {self.plane_offset(1)} is not a "
                             "multiple of 4")


@dataclasses.dataclass(frozen=True)
class OutputSpec:
    width: int
    height: int
    layout: str = "NCHW"
    dtype: str = "float16"
    order: str = "RGB"
    mean: Sequence[float] = (0.0, 0.0, 0.0)
    std: Sequence[float] = (1.0, 1.0, 1.0)
    scale: float | None = None  # RGB in [0,1] is multiplied by this first; None: 255 for uint8, 1 else

    def validate(self) -> None:
        if self.width <= 0 or self.height <= 0:
            raise UsageError(f"output size {self.width}x{self.height} is empty")
        if self.layout not in LAYOUTS:
            raise UsageError(f"output layout {self.layout!r} is not one of {', '.join(LAYOUTS)}")
        if self.dtype not in DTYPES:
            raise UsageError(f"output dtype {self.dtype!r} is not one of {', '.join(DTYPES)}")
        if self.order not in ORDERS:
            raise UsageError(f"channel order {self.order!r} is not one of {', '.join(ORDERS)}")
        if len(self.mean) != 3 or len(self.std) != 3:
            raise UsageError("mean and std need three values (one per channel)")
        if any(s == 0 or not math.isfinite(s) for s in self.std):
            raise UsageError(f"std {tuple(self.std)} has a zero or non-finite value")

    @property
    def effective_scale(self) -> float:
        if self.scale is not None:
            return float(self.scale)
        return 255.0 if self.dtype == "uint8" else 1.0


def yuv_to_rgb_affine(matrix: str, range_: str, bits: int) -> np.ndarray:
    """3x4 affine taking code values (Y, Cb, Cr) to RGB in [0, 1] (before clamping)."""
    if matrix not in MATRICES:
        raise UsageError(f"colour matrix {matrix!r} is not one of {', '.join(MATRICES)}")
    if range_ not in RANGES:
        raise UsageError(f"range {range_!r} is not one of {', '.join(RANGES)}")
    kr, kb = MATRICES[matrix]
    kg = 1.0 - kr - kb
    s = float(1 << (bits - 8))
    if range_ == "limited":
        yoff, ys = 16.0 * s, 1.0 / (219.0 * s)
        coff, cs = 128.0 * s, 1.0 / (224.0 * s)
    else:
        full = float((1 << bits) - 1)
        yoff, ys = 0.0, 1.0 / full
        coff, cs = float(1 << (bits - 1)), 1.0 / full
    # RGB = A @ (y, cb, cr) with y, cb, cr normalised.
    a = np.array([
        [1.0, 0.0, 2.0 * (1.0 - kr)],
        [1.0, -2.0 * kb * (1.0 - kb) / kg, -2.0 * kr * (1.0 - kr) / kg],
        [1.0, 2.0 * (1.0 - kb), 0.0],
    ])
    scale = np.diag([ys, cs, cs])
    lin = a @ scale
    off = -lin @ np.array([yoff, coff, coff])
    return np.hstack([lin, off[:, None]])


def rgb_affine(range_: str) -> np.ndarray:
    """3x4 affine taking 8-bit (R, G, B) code values to RGB in [0, 1]."""
    if range_ not in RANGES:
        raise UsageError(f"range {range_!r} is not one of {', '.join(RANGES)}")
    if range_ == "full":
        return np.hstack([np.eye(3) / 255.0, np.zeros((3, 1))])
    return np.hstack([np.eye(3) / 219.0, np.full((3, 1), -16.0 / 219.0)])


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything a conversion needs, decided and checked once."""

    src: SourceFormat
    out: OutputSpec
    matrix: str
    range: str
    resize: str  # "bilinear" or "area" (never "auto" once planned)
    crop: tuple[int, int, int, int]  # x, y, w, h in source pixels
    content: tuple[int, int, int, int]  # x, y, w, h of the picture inside the output canvas
    affine: np.ndarray  # 3x4, rows already in output channel order
    norm_a: np.ndarray  # (3,) out = clamp(rgb) * a + b, in output channel order
    norm_b: np.ndarray
    pad_rgb: tuple[float, float, float]  # letterbox fill, RGB in [0, 1]
    inv_gamma: float = 1.0  # raw Bayer: clamp(rgb) ** inv_gamma before mean/std

    @property
    def info(self) -> FormatInfo:
        return self.src.info

    @property
    def scale_xy(self) -> tuple[float, float]:
        return self.crop[2] / self.content[2], self.crop[3] / self.content[3]

    @property
    def pad_out(self) -> np.ndarray:
        pad = np.asarray(self.pad_rgb, dtype=np.float64)
        if self.out.order == "BGR":
            pad = pad[::-1]
        return pad * self.norm_a + self.norm_b

    def out_shape(self, batch: int) -> tuple[int, int, int, int]:
        h, w = self.out.height, self.out.width
        return (batch, 3, h, w) if self.out.layout == "NCHW" else (batch, h, w, 3)


def make_plan(src: SourceFormat, out: OutputSpec, *, matrix: str | None = None, range: str | None = None,
              resize: str = "auto", crop: tuple[int, int, int, int] | None = None,
              letterbox: bool = False, pad_rgb: Sequence[float] = (0.0, 0.0, 0.0),
              raw: RawOptions | None = None) -> Plan:
    """Check a conversion and fix its numbers; raises UsageError on anything
    bad. `matrix`/`range` None: V4L2's defaults for a format that names no
    colorimetry (BT.601; limited range for YUV, full for RGB). `raw`: how a
    raw Bayer format's samples become RGB (sits.bayer; None: as they are)."""
    src.validate()
    out.validate()
    info = src.info
    if raw is not None and not info.cfa:
        raise not_raw(info.name)
    if matrix is None or range is None:
        from sits.v4l2.colorimetry import colorimetry
        default_matrix, default_range = colorimetry(rgb=info.rgb)
        matrix, range = matrix or default_matrix, range or default_range
    if crop is None:
        crop = (0, 0, src.width, src.height)
    cx, cy, cw, ch = (int(v) for v in crop)
    if cw <= 0 or ch <= 0 or cx < 0 or cy < 0 or cx + cw > src.width or cy + ch > src.height:
        raise UsageError(f"crop {crop} does not fit the {src.width}x{src.height} frame")
    if info.sub_x == 2 and cx % 2:
        raise UsageError(f"{info.name}: crop x {cx} is odd; it must fall on a chroma sample")
    if info.sub_y == 2 and cy % 2:
        raise UsageError(f"{info.name}: crop y {cy} is odd; it must fall on a chroma row")
    if letterbox:
        s = min(out.width / cw, out.height / ch)
        w = max(1, min(out.width, round(cw * s)))
        h = max(1, min(out.height, round(ch * s)))
        content = ((out.width - w) // 2, (out.height - h) // 2, w, h)
    else:
        content = (0, 0, out.width, out.height)
    sx, sy = cw / content[2], ch / content[3]
    if resize not in RESIZES:
        raise UsageError(f"resize {resize!r} is not one of {', '.join(RESIZES)}")
    if resize == "auto":
        resize = "area" if min(sx, sy) >= 1.0 and max(sx, sy) >= 2.0 else "bilinear"
    if resize == "area" and min(sx, sy) < 1.0:
        raise UsageError(f"area resampling is for downscaling; the scale here is {sx:.3f} x {sy:.3f} "
                         "(use bilinear)")
    inv_gamma = 1.0
    if info.cfa:
        raw = raw or RawOptions()
        raw.check(info.bits)
        if raw.gains == AUTO:
            raise UsageError(AUTO_NOT_ON_GPU)
        affine = np.zeros((3, 4))
        for c, (k, off) in enumerate(raw.linear(info.bits)):
            affine[c, c], affine[c, 3] = k, off
        inv_gamma = raw.inv_gamma
    elif info.rgb:
        affine = rgb_affine(range)  # both RGB formats hand over (R, G, B)
    else:
        affine = yuv_to_rgb_affine(matrix, range, info.bits)
    if len(pad_rgb) != 3:
        raise UsageError("pad colour needs three values")
    scale = out.effective_scale
    mean = np.asarray(out.mean, dtype=np.float64)
    std = np.asarray(out.std, dtype=np.float64)
    a = scale / std
    b = -mean / std
    if out.order == "BGR":
        affine = affine[::-1].copy()
        a, b = a[::-1].copy(), b[::-1].copy()
    return Plan(src, out, matrix, range, resize, (cx, cy, cw, ch), content, affine, a, b,
                tuple(float(v) for v in pad_rgb), inv_gamma)
