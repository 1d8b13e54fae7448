"""The CPU conversion as a stage (its work: sits/pipeline/stages/convert.c):
packed 4:2:2 YUV frames made into XRGB8888 buffers, for a display whose
planes cannot show the camera's format."""
from __future__ import annotations

from sits._kernel import ffi, lib
from sits.pipeline.stage import Stage

#: the formats it converts from (V4L2 fourcc -> its work's code)
FROM = {"YUYV": lib.SITS_CONVERT_YUYV, "UYVY": lib.SITS_CONVERT_UYVY}


def convert_stage(queue, fourcc: str, width: int, height: int, stride: int, inputs: dict[int, object],
                  outputs: list[object], pitch: int, **port) -> Stage:
    """A stage of `queue` that converts the camera's `fourcc` frames
    (width x height, `stride` bytes a row; `inputs`: buffer number -> its
    bytes) into XRGB8888 `outputs` (`pitch` bytes a row)."""
    C = ffi.new("struct sits_convert *")
    C.code, C.width, C.height, C.in_stride, C.out_pitch = FROM[fourcc], width, height, stride, pitch
    return Stage(queue, "convert", lib.sits_convert_work(), C, takes=queue.camera, inputs=inputs, outputs=outputs,
                 out_bytes=pitch * height, **port)
