"""Pixel formats: fourcc codes, the V4L2 <-> DRM mapping and the layout
the CUDA kernels read -- one table for capture, display and CUDA.

V4L2 and DRM both name formats by little-endian fourcc, but not always by the
same fourcc for the same memory layout: V4L2's XBGR32 ('XR24') is byte order
B,G,R,X, which DRM calls XRGB8888 (also 'XR24', as DRM names the packed
32-bit word). The table below is the single place that knows this.
"""
from dataclasses import dataclass


def fourcc(code: str) -> int:
    """'YUYV' -> its code. Shorter names are space-padded, as V4L2 spells
    them ('Y10' is 'Y10 ')."""
    if not 1 <= len(code) <= 4:
        raise ValueError(f"a fourcc has 4 characters, not {code!r}")
    a, b, c, d = (ord(ch) for ch in code.ljust(4))
    return a | (b << 8) | (c << 16) | (d << 24)


def fourcc_str(value: int) -> str:
    chars = "".join(chr((value >> (8 * i)) & 0xFF) for i in range(4))
    if value & (1 << 31) and not chars[3].isprintable():  # DRM big-endian flag
        chars = chars[:3] + "?"
    return chars.rstrip("\0 ") or f"0x{value:08x}"


@dataclass(frozen=True)
class PixelFormat:
    v4l2: str          # V4L2 fourcc
    drm: str | None    # DRM fourcc of the same memory layout, if any
    name: str          # what people call it (the CUDA stage's name for it)
    bpp: int           # bits per pixel of the first plane
    planes: int = 1    # memory planes in one buffer (contiguous)
    rgb: bool = True
    sub_x: int = 1     # chroma subsampling (YUV)
    sub_y: int = 1
    bits: int = 8      # bits per sample
    cuda: bool = False   # the CUDA kernels read it (their code for it: sits.cuda.layout.FORMAT_CODES)
    compressed: bool = False   # a frame is as long as its bytesused says (no rows: bpp 0)
    cfa: str | None = None     # Bayer: the colours of the top-left 2x2 tile, row by row ("RGGB")
    packed: bool = False       # Bayer: MIPI CSI-2 packing (10 bits: 4 samples in 5 bytes, 12: 2 in 3)


def _bayer() -> list[PixelFormat]:
    """The raw Bayer formats, as V4L2 names them (SRGGB10P...): 8 bits;
    10, 12 and 16 in 16-bit little-endian words (the high bits zero); 10
    and 12 MIPI-packed. They are R, G, B samples before demosaicing."""
    codes = {  # order: 8, 10, 10P, 12, 12P, 16
        "BGGR": ("BA81", "BG10", "pBAA", "BG12", "pBCC", "BYR2"),
        "GBRG": ("GBRG", "GB10", "pGAA", "GB12", "pGCC", "GB16"),
        "GRBG": ("GRBG", "BA10", "pgAA", "BA12", "pgCC", "GR16"),
        "RGGB": ("RGGB", "RG10", "pRAA", "RG12", "pRCC", "RG16"),
    }
    kinds = ((8, 8, False), (10, 16, False), (10, 10, True), (12, 16, False), (12, 12, True), (16, 16, False))
    return [PixelFormat(code, None, f"S{cfa}{bits}{'P' if packed else ''}", bpp, bits=bits, cuda=True, cfa=cfa,
                        packed=packed)
            for cfa, row in codes.items() for code, (bits, bpp, packed) in zip(row, kinds)]


# Only formats whose layouts we have checked against both sides.
FORMATS = [
    PixelFormat("XR24", "XR24", "XRGB8888", 32, cuda=True),        # V4L2 XBGR32
    PixelFormat("AR24", "AR24", "ARGB8888", 32),        # V4L2 ABGR32
    PixelFormat("XB24", "XB24", "XBGR8888", 32, cuda=True),        # V4L2 RGBX32
    PixelFormat("AB24", "AB24", "ABGR8888", 32),        # V4L2 RGBA32
    PixelFormat("BX24", "BX24", "BGRX8888", 32),        # V4L2 XRGB32
    PixelFormat("RGBP", "RG16", "RGB565", 16),
    PixelFormat("BGR3", "RG24", "RGB888", 24, cuda=True),   # V4L2 BGR24 = bytes B,G,R
    PixelFormat("RGB3", "BG24", "BGR888", 24, cuda=True),   # V4L2 RGB24 = bytes R,G,B
    PixelFormat("YUYV", "YUYV", "YUYV", 16, rgb=False, sub_x=2, cuda=True),
    PixelFormat("UYVY", "UYVY", "UYVY", 16, rgb=False, sub_x=2, cuda=True),
    PixelFormat("NV12", "NV12", "NV12", 8, planes=2, rgb=False, sub_x=2, sub_y=2, cuda=True),
    PixelFormat("NV16", "NV16", "NV16", 8, planes=2, rgb=False, sub_x=2, cuda=True),
    PixelFormat("P010", "P010", "P010", 16, planes=2, rgb=False, sub_x=2, sub_y=2, bits=10, cuda=True),
    # compressed: decoded by a stage before anything shows or converts them
    PixelFormat("MJPG", None, "MJPEG", 0, rgb=False, compressed=True),
    PixelFormat("JPEG", None, "JPEG", 0, rgb=False, compressed=True),
    # raw Bayer: demosaiced by a stage (display) or the CUDA kernels
    *_bayer(),
]
BY_V4L2 = {f.v4l2: f for f in FORMATS}
BY_DRM = {f.drm: f for f in FORMATS if f.drm}
BY_NAME = {f.name: f for f in FORMATS}


def compressed(code: str) -> bool:
    """V4L2 fourcc `code` is a compressed format of the table (a format not
    in it is taken for uncompressed)."""
    f = BY_V4L2.get(code)
    return f is not None and f.compressed


def bayer(code: str) -> bool:
    """V4L2 fourcc `code` is a raw Bayer format of the table."""
    f = BY_V4L2.get(code)
    return f is not None and f.cfa is not None


def drm_for_v4l2(code: str) -> str | None:
    f = BY_V4L2.get(code)
    return f.drm if f else None


def v4l2_for_drm(code: str) -> str | None:
    f = BY_DRM.get(code)
    return f.v4l2 if f else None
