"""The stages that make a camera's frames into XRGB8888 for a display whose
planes cannot show the camera's format, by the camera's V4L2 fourcc: the
one table the capture set-up asks (can a display take this format?) and
the display builds from. Each maker takes (queue, fourcc, width, height,
stride, inputs, outputs, pitch, **port) and returns a Stage; the raw Bayer
one also takes `raw` (sits.bayer.RawOptions)."""
from sits.pipeline.bayer_stage import FROM as DEMOSAICED, bayer_stage, passes as bayer_passes
from sits.pipeline.convert_stage import FROM as CONVERTED, convert_stage
from sits.pipeline.jpeg_stage import FROM as DECODED, jpeg_stage

MAKERS = {**{code: convert_stage for code in CONVERTED}, **{code: jpeg_stage for code in DECODED},
          **{code: bayer_stage for code in DEMOSAICED}}


def cpu_passes(fourcc: str) -> int:
    """Times the CPU writes a frame's pixels on its way to the display."""
    return bayer_passes(fourcc) if fourcc in DEMOSAICED else 1
