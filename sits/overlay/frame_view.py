"""What an overlay callback sees of a frame: its numbers and its bytes.

`pixels` is the capture buffer itself, read-only, as rows of
`bytesperline` bytes: no copy is made for the callback, so it is valid
only while the callback runs (the buffer goes back to the camera after);
a callback copies what it keeps. `luma()` is a brightness plane for the
formats cameras give, which is what cheap detectors (motion, brightness)
work on.
"""
from __future__ import annotations

import numbers

import numpy as np

# Bytes of R, G and B in a pixel of the packed RGB formats (V4L2 fourccs,
# sits/formats.py), and the pixel's size.
_RGB = {"XR24": (2, 1, 0, 4), "AR24": (2, 1, 0, 4),    # B, G, R, X
        "XB24": (0, 1, 2, 4), "AB24": (0, 1, 2, 4),    # R, G, B, X
        "BX24": (1, 2, 3, 4),                          # X, R, G, B
        "BGR3": (2, 1, 0, 3), "RGB3": (0, 1, 2, 3)}
# Where Y is in the packed 4:2:2 formats: every second byte from this one.
_PACKED_Y = {"YUYV": 0, "YVYU": 0, "UYVY": 1, "VYUY": 1}
# Formats whose first `height` rows of one byte a pixel are the Y (or grey)
# plane, and how many rows of the buffer a frame spans, as a multiple of height.
_PLANAR_Y = {"GREY": 1.0, "NV12": 1.5, "NV21": 1.5, "YU12": 1.5, "YV12": 1.5, "NV16": 2.0, "NV61": 2.0}


class FrameView:
    """One frame, for the callback: `sequence`, `timestamp_ns`, `fourcc`
    (V4L2's, e.g. "XR24", "YUYV", "NV12"), `width`, `height`,
    `bytesperline` and `pixels`, a read-only uint8 array (rows,
    bytesperline) over the buffer (rows: height, or height * 3 // 2 for
    4:2:0 planar formats, height * 2 for NV16)."""

    __slots__ = ("sequence", "timestamp_ns", "fourcc", "width", "height", "bytesperline", "pixels")

    def __init__(self, sequence: int, timestamp_ns: int, fourcc: str, width: int, height: int,
                 bytesperline: int, buffer):
        for name, v in (("width", width), ("height", height), ("bytesperline", bytesperline)):
            if not isinstance(v, numbers.Integral) or v <= 0:
                raise ValueError(f"FrameView {name} must be a positive int, not {v!r}")
        width, height, bytesperline = int(width), int(height), int(bytesperline)
        self.sequence = sequence
        self.timestamp_ns = timestamp_ns
        self.fourcc = fourcc
        self.width = width
        self.height = height
        self.bytesperline = bytesperline
        rows = int(height * _PLANAR_Y.get(fourcc, 1.0))
        # From a read-only view, so that nothing can make the array writable again.
        data = np.frombuffer(memoryview(buffer).toreadonly().cast("B"), dtype=np.uint8)
        if data.size < rows * bytesperline:
            raise ValueError(f"a {width}x{height} {fourcc} frame of {rows} rows of {bytesperline} bytes "
                             f"needs {rows * bytesperline} bytes; the buffer has {data.size}")
        self.pixels = data[:rows * bytesperline].reshape(rows, bytesperline)

    def __repr__(self) -> str:
        return (f"FrameView(sequence={self.sequence}, {self.fourcc} {self.width}x{self.height}, "
                f"bytesperline={self.bytesperline})")

    def luma(self) -> np.ndarray:
        """Brightness, (height, width) uint8: the Y plane itself (a view)
        for YUV and grey formats; for RGB, (77 R + 150 G + 29 B) >> 8, BT.601's
        weights in full range (a new array)."""
        w, h, p = self.width, self.height, self.pixels
        if self.fourcc in _PLANAR_Y:
            return p[:h, :w]
        if self.fourcc in _PACKED_Y:
            first = _PACKED_Y[self.fourcc]
            return p[:h, first:first + 2 * w:2]
        if self.fourcc in _RGB:
            r, g, b, size = _RGB[self.fourcc]
            px = p[:h, :w * size].reshape(h, w, size)
            y = px[..., g].astype(np.uint16)
            y *= 150
            y += px[..., r] * np.uint16(77)
            y += px[..., b] * np.uint16(29)
            y >>= 8
            return y.astype(np.uint8)
        raise ValueError(f"FrameView.luma: no brightness for the {self.fourcc!r} format "
                         f"(it reads {', '.join(sorted([*_PLANAR_Y, *_PACKED_Y, *_RGB]))})")
