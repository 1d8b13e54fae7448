"""JPEG decoding as a stage: an MJPEG camera's frames made into XRGB8888
buffers (the display's), by libjpeg-turbo through simplejpeg (a maintained
wheel that bundles it), on the stage's worker thread, straight into the
buffer the display scans out where its rows are packed (else through one
row-by-row copy).

A frame the decoder finds corrupt or truncated (libjpeg-turbo's warnings
count: strict mode; a truncated frame would otherwise come back grey-filled)
or of another size is the stage's error (`decode_error`): its buffer goes
back, nothing is made, the previous frame stays on screen. Frames without
Huffman tables (as many UVC cameras send them) decode with the standard
tables, as libjpeg-turbo does.
"""
from __future__ import annotations

import errno

from sits._kernel import ffi
from sits.errors import UsageError
from sits.pipeline import python_work
from sits.pipeline.stage import Stage

#: the camera formats it decodes (V4L2 fourccs)
FROM = ("MJPG", "JPEG")


class JpegDecode:
    """The work: one frame's JPEG bytes decoded into one XRGB8888 buffer."""

    def __init__(self, width: int, height: int, pitch: int):
        # numpy and the decoder only now: the display's zero-copy path, which
        # reads this module's table, touches no pixel (and loads neither)
        import numpy as np
        import simplejpeg
        self.np, self.decoder = np, simplejpeg
        self.width, self.height, self.pitch = width, height, pitch
        # a pitch wider than the rows: decoded here, then copied row by row
        self.rows = None if pitch == width * 4 else np.empty((height, width * 4), np.uint8)
        self.corrupt = self.wrong_size = 0
        self.last_error = ""

    def why(self) -> str:
        """Its errors, in words."""
        parts = []
        if self.corrupt:
            parts.append(f"{self.corrupt} corrupt or truncated, the last: {self.last_error}")
        if self.wrong_size:
            parts.append(f"{self.wrong_size} not {self.width}x{self.height}")
        return "; ".join(parts) or "none"

    def make(self, S, index, bytesused, out) -> int:
        data = ffi.buffer(S.in_ptr[index], bytesused)
        try:
            h, w, _, _ = self.decoder.decode_jpeg_header(data)
            if (w, h) != (self.width, self.height):
                self.wrong_size += 1
                self.last_error = f"a {w}x{h} frame"
                return errno.EBADMSG
            np = self.np
            dest = np.frombuffer(ffi.buffer(S.out_ptr[out], S.out_bytes), np.uint8).reshape(self.height, self.pitch)
            if self.rows is None:
                self.decoder.decode_jpeg(data, colorspace="BGRX", buffer=dest, strict=True)
            else:
                self.decoder.decode_jpeg(data, colorspace="BGRX", buffer=self.rows, strict=True)
                dest[:, :self.width * 4] = self.rows
        except ValueError as exc:
            self.corrupt += 1
            self.last_error = str(exc)
            return errno.EBADMSG
        return 0


def jpeg_stage(queue, fourcc: str, width: int, height: int, stride: int, inputs: dict[int, object],
               outputs: list[object], pitch: int, **port) -> Stage:
    """A stage of `queue` that decodes the camera's JPEG frames (width x
    height; `inputs`: buffer number -> its bytes) into XRGB8888 `outputs`
    (`pitch` bytes a row)."""
    if fourcc not in FROM:
        raise UsageError(f"the JPEG stage decodes {', '.join(FROM)}, not {fourcc}")
    try:
        work = JpegDecode(width, height, pitch)
    except ImportError as exc:
        raise UsageError(f"{fourcc} frames need simplejpeg (libjpeg-turbo): pip install simplejpeg ({exc})") from None
    stage = Stage(queue, "decode", python_work.WORK, python_work.handle(work), takes=queue.camera, inputs=inputs,
                  outputs=outputs, out_bytes=pitch * height, **port)
    stage.work_object = work
    return stage
