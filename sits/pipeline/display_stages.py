"""The stages that make a camera's frames into XRGB8888 for a display whose
planes cannot show the camera's format, by the camera's V4L2 fourcc: the
one table the capture set-up asks (can a display take this format?) and
the display builds from. Each maker takes (queue, fourcc, width, height,
stride, inputs, outputs, pitch, **port) and returns a Stage."""
from sits.pipeline.convert_stage import FROM as CONVERTED, convert_stage
from sits.pipeline.jpeg_stage import FROM as DECODED, jpeg_stage

MAKERS = {**{code: convert_stage for code in CONVERTED}, **{code: jpeg_stage for code in DECODED}}
