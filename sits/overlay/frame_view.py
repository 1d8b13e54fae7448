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
# Brightness weights (BT.601, full range, in 256ths) of R, G and B.
_WR, _WG, _WB = 77, 150, 29
CHUNK_ROWS = 64  # rows of 32-bit pixels worked on at a time: the temporaries stay in the cache
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

    def luma(self, out: np.ndarray | None = None) -> np.ndarray:
        """Brightness, (height, width) uint8: the Y plane for YUV and grey
        formats (a view of the buffer); for RGB, (77 R + 150 G + 29 B) >> 8,
        BT.601's weights in full range (a new array). With `out`, a C-contiguous
        (height, width) uint8 array, it is written there and returned: a
        callback that runs every frame reuses its memory, and keeps what it
        needs of the frame past the callback."""
        w, h, p = self.width, self.height, self.pixels
        if out is not None and (out.shape != (h, w) or out.dtype != np.uint8 or not out.flags.c_contiguous
                                or not out.flags.writeable):
            raise ValueError(f"FrameView.luma: out must be a writable C-contiguous ({h}, {w}) uint8 array")
        if self.fourcc in _PLANAR_Y:
            y = p[:h, :w]
        elif self.fourcc in _PACKED_Y:
            first = _PACKED_Y[self.fourcc]
            y = p[:h, first:first + 2 * w:2]
        elif self.fourcc in _RGB:
            r, g, b, size = _RGB[self.fourcc]
            if size == 4 and g in (1, 2) and self.bytesperline % 4 == 0:
                return self._luma_words(r, b, 8 * (g - 1), np.empty((h, w), np.uint8) if out is None else out)
            px = p[:h, :w * size].reshape(h, w, size)
            acc = px[..., g] * np.uint16(_WG)
            acc += px[..., r] * np.uint16(_WR)
            acc += px[..., b] * np.uint16(_WB)
            acc >>= 8
            y = acc.astype(np.uint8) if out is None else acc
        else:
            raise ValueError(f"FrameView.luma: no brightness for the {self.fourcc!r} format "
                             f"(it reads {', '.join(sorted([*_PLANAR_Y, *_PACKED_Y, *_RGB]))})")
        if out is None:
            return y
        np.copyto(out, y, casting="unsafe")
        return out

    def _luma_words(self, r: int, b: int, shift: int, out: np.ndarray) -> np.ndarray:
        """luma() of a 32-bit RGB format from whole little-endian words:
        after `shift`, G is byte 1 and R and B are bytes 0 and 2, so one
        multiply puts R * wr + B * wb in bits 16..31 (the byte-0 product,
        below 2**16, carries nothing into them) and G * wg joins it there.
        Contiguous word reads instead of three strided byte reads."""
        h, w = self.height, self.width
        words = self.pixels[:h].view("<u4")[:, :w]
        w0, w2 = (_WR, _WB) if r - shift // 8 == 0 else (_WB, _WR)  # the weights of bytes 0 and 2
        rb = np.uint32(w2 | w0 << 16)     # (byte 0 + byte 2 << 16) * rb = byte 0 * w0 + byte 2 * w2 in bits 16..31
        gw = np.uint32(_WG << 8)          # (G << 8) * (wg << 8) = G * wg << 16
        n = min(CHUNK_ROWS, h)
        t, gt = np.empty((n, w), np.uint32), np.empty((n, w), np.uint32)
        for r0 in range(0, h, n):
            src = words[r0:r0 + n]
            k = len(src)
            tk, gk = t[:k], gt[:k]
            if shift:
                np.right_shift(src, np.uint32(shift), out=gk)
                src = gk
            np.bitwise_and(src, np.uint32(0x00FF00FF), out=tk)
            np.bitwise_and(src, np.uint32(0x0000FF00), out=gk)
            tk *= rb
            gk *= gw
            tk += gk
            tk >>= np.uint32(24)
            out[r0:r0 + k] = tk
        return out
