"""The overlay: what a user's callback draws over each video frame (boxes
with labels, polylines, masks, text), rendered as premultiplied ARGB8888
into a second KMS plane that the display blends over the video.

Importing it needs no cairo; only `render` does (the `overlay` extra).
"""
from sits.overlay.drawing import Box, Drawing, Mask, Polyline, Text
from sits.overlay.frame_view import FrameView
from sits.overlay.mapping import map_from_tensor
from sits.overlay.render import render
from sits.overlay.results import Results

__all__ = ["Box", "Drawing", "FrameView", "Mask", "Polyline", "Text", "map_from_tensor", "render", "Results"]
