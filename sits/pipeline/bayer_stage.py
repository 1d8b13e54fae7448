"""Raw Bayer frames demosaiced for the display: a stage that makes each
frame into an XRGB8888 buffer the display scans out, with OpenCV's
bilinear demosaic (cv2.cvtColor, COLOR_Bayer*2BGRA) writing straight into
that buffer, on the stage's worker thread.

Samples wider than 8 bits are brought to 8 first (one more pass: the high
byte of MIPI-packed samples, a scaled copy of 16-bit ones). Black level,
white-balance gains (fixed, or grey world from each frame's own means) and
gamma are one per-channel table applied in place. A raw preview (sits.bayer
says what it is not); the CUDA stage demosaics in its own kernel.
"""
from __future__ import annotations

from sits._kernel import ffi
from sits.bayer import AUTO, RawOptions, grey_world
from sits.errors import UsageError
from sits.formats import BY_V4L2, FORMATS
from sits.pipeline import python_work
from sits.pipeline.stage import Stage

#: the camera formats it demosaics (V4L2 fourccs)
FROM = tuple(f.v4l2 for f in FORMATS if f.cfa)


def passes(fourcc: str) -> int:
    """Times the CPU writes a frame's pixels: the demosaic, and for samples
    wider than 8 bits the pass that narrows them first."""
    return 1 if BY_V4L2[fourcc].bpp == 8 else 2


class Demosaic:
    """The work: one raw frame demosaiced into one XRGB8888 buffer."""

    def __init__(self, fourcc: str, width: int, height: int, stride: int, pitch: int, raw: RawOptions):
        import cv2
        import numpy as np
        self.np, self.cv2 = np, cv2
        self.f = f = BY_V4L2[fourcc]
        raw.check(f.bits)
        self.width, self.height, self.stride, self.pitch, self.raw = width, height, stride, pitch, raw
        self.code = getattr(cv2, f"COLOR_Bayer{f.cfa}2BGRA")
        self.eight = None if f.bpp == 8 else np.empty((height, width), np.uint8)
        self.table = None if raw == RawOptions() else self._table(None)

    def _table(self, gains) -> object:
        """The (256, 1, 4) table taking 8-bit B, G, R, X to their output."""
        np, bits = self.np, self.f.bits
        v = np.arange(256, dtype=np.float64) * (1 << (bits - 8))     # the 8-bit code in sample units
        table = np.full((256, 1, 4), 255, np.uint8)
        for c, (k, off) in zip((2, 1, 0), self.raw.linear(bits, gains)):   # R, G, B to bytes 2, 1, 0
            x = np.clip(v * k + off, 0.0, 1.0) ** self.raw.inv_gamma
            table[:, 0, c] = np.rint(x * 255)
        return table

    def _samples(self, frame):
        """The frame's samples as (height, width) bytes."""
        f, h, w = self.f, self.height, self.width
        if f.bpp == 8:
            return frame[:, :w]
        if f.packed:   # each group: its samples' high bytes, then their low bits
            per = 4 if f.bits == 10 else 2
            groups = frame[:, :w * f.bpp // 8].reshape(h, w // per, per + 1)
            self.np.copyto(self.eight.reshape(h, w // per, per), groups[..., :per])
        else:
            words = frame[:, :2 * w].view("<u2")
            self.cv2.convertScaleAbs(words, dst=self.eight, alpha=1.0 / (1 << (f.bits - 8)))
        return self.eight

    def make(self, S, index, bytesused, out) -> int:
        np, cv2, h, w = self.np, self.cv2, self.height, self.width
        frame = np.frombuffer(ffi.buffer(S.in_ptr[index], self.stride * h), np.uint8).reshape(h, self.stride)
        dest = np.frombuffer(ffi.buffer(S.out_ptr[out], S.out_bytes), np.uint8).reshape(h, self.pitch)
        dest = dest[:, :w * 4].reshape(h, w, 4)
        cv2.cvtColor(self._samples(frame), self.code, dst=dest)
        table = self.table
        if self.raw.gains == AUTO:
            b, g, r, _ = cv2.mean(dest)
            scale = 1 << (self.f.bits - 8)
            table = self._table(grey_world((r * scale, g * scale, b * scale), self.raw.black_level))
        if table is not None:
            cv2.LUT(dest, table, dst=dest)
        return 0


def bayer_stage(queue, fourcc: str, width: int, height: int, stride: int, inputs: dict[int, object],
                outputs: list[object], pitch: int, raw: RawOptions | None = None, **port) -> Stage:
    """A stage of `queue` that demosaics the camera's raw `fourcc` frames
    (`inputs`: buffer number -> its bytes) into XRGB8888 `outputs` (`pitch`
    bytes a row); `raw`: black level, white balance, gamma (sits.bayer)."""
    if fourcc not in FROM:
        raise UsageError(f"the Bayer stage demosaics raw Bayer formats, not {fourcc}")
    try:
        work = Demosaic(fourcc, width, height, stride, pitch, raw or RawOptions())
    except ImportError as exc:
        raise UsageError(f"raw Bayer frames on the display need OpenCV: pip install 'sits[raw]' ({exc})") from None
    stage = Stage(queue, "demosaic", python_work.WORK, python_work.handle(work), takes=queue.camera,
                  inputs=inputs, outputs=outputs, out_bytes=pitch * height, **port)
    stage.work_object = work
    return stage
