"""From a model's input tensor back to the frame it was made from.

The CUDA stage crops, resizes and letterboxes a frame into the tensor a
model reads (`sits.cuda.formats.Plan`: `crop` is x, y, w, h in frame
pixels, `content` the x, y, w, h of the picture inside the tensor). A
model answers in tensor pixels; the overlay draws in frame pixels. The
map is the inverse of that resize, edge to edge (the tensor's content
edges are the crop's edges), and clips to the crop: what a model puts on
the letterbox bars lies outside the picture.

Any object with `.crop` and `.content` serves as the plan, so this module
imports nothing of CUDA.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from sits.overlay.drawing import Box, Drawing, Mask, Polyline, Text, boxes_array


@dataclasses.dataclass(frozen=True)
class TensorMap:
    """x_frame = crop_x + (x_tensor - content_x) * sx, likewise for y."""

    crop: tuple[float, float, float, float]
    content: tuple[float, float, float, float]

    @classmethod
    def of(cls, plan_like) -> TensorMap:
        crop, content = (_rect(getattr(plan_like, name, None), name) for name in ("crop", "content"))
        return cls(crop, content)

    @property
    def scale(self) -> tuple[float, float]:
        return self.crop[2] / self.content[2], self.crop[3] / self.content[3]

    def points(self, xy: np.ndarray) -> np.ndarray:
        """(..., 2) tensor points -> frame points, clipped to the crop."""
        cx, cy, cw, ch = self.crop
        sx, sy = self.scale
        out = np.empty(xy.shape, dtype=np.float64)
        out[..., 0] = np.clip(cx + (xy[..., 0] - self.content[0]) * sx, cx, cx + cw)
        out[..., 1] = np.clip(cy + (xy[..., 1] - self.content[1]) * sy, cy, cy + ch)
        return out

    def boxes(self, boxes: np.ndarray) -> np.ndarray:
        return self.points(boxes.reshape(-1, 2, 2)).reshape(-1, 4)

    def shape(self, s):
        if isinstance(s, Box):
            x0, y0, x1, y1 = self.boxes(np.array([[s.x0, s.y0, s.x1, s.y1]]))[0].tolist()
            return dataclasses.replace(s, x0=x0, y0=y0, x1=x1, y1=y1)
        if isinstance(s, Polyline):
            return dataclasses.replace(s, points=self.points(s.points))
        if isinstance(s, Text):
            x, y = self.points(np.array([s.x, s.y])).tolist()
            return dataclasses.replace(s, x=x, y=y)
        if isinstance(s, Mask):
            # Not clipped: a mask's pixels on the letterbox bars are its own to leave empty.
            sx, sy = self.scale
            cx, cy = self.crop[:2]
            return dataclasses.replace(s, x=cx + (s.x - self.content[0]) * sx, y=cy + (s.y - self.content[1]) * sy,
                                       scale=(s.scale[0] * sx, s.scale[1] * sy))
        raise TypeError(f"map_from_tensor maps Box, Polyline, Mask and Text shapes, not {type(s).__name__}")


def _rect(value, name: str) -> tuple[float, float, float, float]:
    try:
        x, y, w, h = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"the plan's {name} must be (x, y, w, h), not {value!r}") from None
    if not (w > 0 and h > 0):
        raise ValueError(f"the plan's {name} {value!r} has no area")
    return x, y, w, h


def map_from_tensor(drawing_or_boxes, plan_like):
    """Tensor coordinates -> frame pixels, through the conversion plan
    `plan_like` (a `sits.cuda.formats.Plan`, or anything with `.crop` and
    `.content`).

    A `Drawing` (or a single shape) comes back as a new one with every
    shape mapped: box corners and polyline points clipped to the crop, a
    text's position too (its size stays in display pixels), a mask moved
    and its `scale` multiplied. An (N, 4) array of x0, y0, x1, y1 comes
    back as an (N, 4) float64 array, ready for `Drawing.from_boxes`.
    """
    m = TensorMap.of(plan_like)
    if isinstance(drawing_or_boxes, Drawing):
        return Drawing(m.shape(s) for s in drawing_or_boxes)
    if isinstance(drawing_or_boxes, (Box, Polyline, Mask, Text)):
        return m.shape(drawing_or_boxes)
    return m.boxes(boxes_array(drawing_or_boxes, "map_from_tensor boxes"))
