"""What an overlay callback returns for a frame: shapes in frame pixels.

A `Drawing` is a list of shapes (`Box`, `Polyline`, `Mask`, `Text`) in the
coordinates of the frame it belongs to: x to the right, y down, (0, 0) the
frame's top-left corner, pixel (i, j) covering [i, i+1) x [j, j+1), so a
model's (x0, y0, x1, y1) corners go in unchanged. Colours are straight
(not premultiplied) RGBA 0..255, as people write them; the renderer
premultiplies. Every shape checks its fields when it is made, so a bad
value fails in the callback that made it, with one ValueError naming the
field, and never halfway through drawing a frame.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Iterable, Iterator, Sequence, Union

import numpy as np

Color = tuple[int, int, int, int]

GREEN: Color = (0, 255, 0, 255)
WHITE: Color = (255, 255, 255, 255)


def _number(value, field: str) -> float:
    if isinstance(value, (str, bytes)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{field} must be a number, not {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{field} must be finite, not {value!r}")
    return v


def _positive(value, field: str, *, zero: bool = False) -> float:
    v = _number(value, field)
    if v < 0 or (v == 0 and not zero):
        raise ValueError(f"{field} must be {'>= 0' if zero else '> 0'}, not {value!r}")
    return v


def _byte(value, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value <= 255:
        raise ValueError(f"{field} must be an integer 0..255, not {value!r}")
    return int(value)


def _color(value, field: str) -> Color:
    """(r, g, b) or (r, g, b, a), each an integer 0..255; alpha defaults to 255."""
    try:
        items = tuple(value)
    except TypeError:
        items = ()
    if isinstance(value, (str, bytes)) or len(items) not in (3, 4) or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 <= v <= 255 for v in items):
        raise ValueError(f"{field} must be (r, g, b, a) with integers 0..255 (straight alpha), not {value!r}")
    return tuple(int(v) for v in items) + ((255,) if len(items) == 3 else ())


def _text(value, field: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a str{' or None' if optional else ''}, not {value!r}")
    return value


def _set(obj, **fields) -> None:
    for name, value in fields.items():
        object.__setattr__(obj, name, value)


@dataclasses.dataclass(frozen=True)
class Box:
    """A rectangle from corner (x0, y0) to corner (x1, y1), its outline
    `width` pixels wide drawn inside those corners (0: no outline), filled
    with its colour at `fill_alpha` (0: not filled). A `label` sits on a
    background of the box's colour just above the box's top-left corner
    (inside it when there is no room above)."""

    x0: float
    y0: float
    x1: float
    y1: float
    label: str | None = None
    color: Color = GREEN
    width: float = 2.0
    fill_alpha: int = 0
    label_size: float = 14.0

    def __post_init__(self):
        x0, y0, x1, y1 = (_number(getattr(self, f), f"Box.{f}") for f in ("x0", "y0", "x1", "y1"))
        if x1 < x0 or y1 < y0:
            raise ValueError(f"Box corners ({x0}, {y0}, {x1}, {y1}): x1 < x0 or y1 < y0 "
                             f"(a box is (x0, y0, x1, y1), not (x, y, w, h) with a negative size)")
        _set(self, x0=x0, y0=y0, x1=x1, y1=y1, label=_text(self.label, "Box.label", optional=True),
             color=_color(self.color, "Box.color"), width=_positive(self.width, "Box.width", zero=True),
             fill_alpha=_byte(self.fill_alpha, "Box.fill_alpha"),
             label_size=_positive(self.label_size, "Box.label_size"))


@dataclasses.dataclass(frozen=True, eq=False)
class Polyline:
    """Line segments through `points` ((x, y) pairs, at least two), `width`
    pixels wide with round joins; `closed` joins the last point to the first."""

    points: np.ndarray
    color: Color = GREEN
    width: float = 2.0
    closed: bool = False

    def __post_init__(self):
        try:
            pts = np.array(self.points, dtype=np.float64)
        except (TypeError, ValueError):
            pts = None
        if pts is None or pts.ndim != 2 or pts.shape[1] != 2 or len(pts) < 2:
            raise ValueError(f"Polyline.points must be two or more (x, y) pairs, not {self.points!r}")
        if not np.isfinite(pts).all():
            raise ValueError("Polyline.points must be finite numbers")
        pts.flags.writeable = False
        _set(self, points=pts, color=_color(self.color, "Polyline.color"),
             width=_positive(self.width, "Polyline.width"), closed=bool(self.closed))


@dataclasses.dataclass(frozen=True, eq=False)
class Mask:
    """Coverage per pixel: `alpha` is an HxW array, uint8 (0..255) or
    float (0..1), placed with its top-left at (x, y); a pixel is painted
    with `color` at alpha * color's alpha. `scale` is how many frame pixels
    one mask pixel spans (a number, or (sx, sy)): a model's mask at its
    input size goes on the frame without resizing it first."""

    alpha: np.ndarray
    x: float = 0.0
    y: float = 0.0
    color: Color = GREEN
    scale: tuple[float, float] = (1.0, 1.0)

    def __post_init__(self):
        a = self.alpha
        if not isinstance(a, np.ndarray) or a.ndim != 2 or 0 in a.shape:
            raise ValueError(f"Mask.alpha must be a non-empty 2-D numpy array (H x W), not {_describe(a)}")
        if a.dtype == np.uint8:
            pass
        elif np.issubdtype(a.dtype, np.floating):
            if not (np.isfinite(a).all() and a.min() >= 0.0 and a.max() <= 1.0):
                raise ValueError("Mask.alpha of floats must lie in 0..1")
        else:
            raise ValueError(f"Mask.alpha must be uint8 (0..255) or float (0..1), not {a.dtype}")
        s = self.scale
        sx, sy = (s, s) if isinstance(s, numbers.Real) else _pair(s, "Mask.scale")
        _set(self, x=_number(self.x, "Mask.x"), y=_number(self.y, "Mask.y"),
             color=_color(self.color, "Mask.color"),
             scale=(_positive(sx, "Mask.scale"), _positive(sy, "Mask.scale")))

    def alpha_u8(self) -> np.ndarray:
        """The coverage as uint8 0..255 (the array itself when it is uint8)."""
        if self.alpha.dtype == np.uint8:
            return self.alpha
        return np.rint(self.alpha * 255.0).astype(np.uint8)


@dataclasses.dataclass(frozen=True)
class Text:
    """One line of text whose box's top-left corner is (x, y), `size`
    pixels high (the font's em), optionally on a `background` colour."""

    x: float
    y: float
    text: str
    color: Color = WHITE
    size: float = 16.0
    background: Color | None = None

    def __post_init__(self):
        _set(self, x=_number(self.x, "Text.x"), y=_number(self.y, "Text.y"), text=_text(self.text, "Text.text"),
             color=_color(self.color, "Text.color"), size=_positive(self.size, "Text.size"),
             background=None if self.background is None else _color(self.background, "Text.background"))


Shape = Union[Box, Polyline, Mask, Text]
SHAPES = (Box, Polyline, Mask, Text)


def _pair(value, field: str) -> tuple[float, float]:
    try:
        a, b = value
    except (TypeError, ValueError):
        raise ValueError(f"{field} must be a number or a pair of numbers, not {value!r}") from None
    return _number(a, field), _number(b, field)


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    return f"a {type(value).__name__}"


class Drawing:
    """The shapes to draw over one frame, in order (later ones on top)."""

    def __init__(self, shapes: Iterable[Shape] = ()):
        self._shapes: list[Shape] = []
        for s in shapes:
            self.add(s)

    def add(self, shape: Shape) -> Drawing:
        if not isinstance(shape, SHAPES):
            raise TypeError(f"a Drawing holds Box, Polyline, Mask and Text shapes, not {type(shape).__name__}")
        self._shapes.append(shape)
        return self

    def box(self, x0: float, y0: float, x1: float, y1: float, label: str | None = None, color: Color = GREEN,
            width: float = 2.0, fill_alpha: int = 0, label_size: float = 14.0) -> Drawing:
        return self.add(Box(x0, y0, x1, y1, label, color, width, fill_alpha, label_size))

    def polyline(self, points: Sequence[tuple[float, float]], color: Color = GREEN, width: float = 2.0,
                 closed: bool = False) -> Drawing:
        return self.add(Polyline(points, color, width, closed))

    def mask(self, alpha: np.ndarray, x: float = 0.0, y: float = 0.0, color: Color = GREEN,
             scale: float | tuple[float, float] = 1.0) -> Drawing:
        return self.add(Mask(alpha, x, y, color, scale))

    def text(self, x: float, y: float, text: str, color: Color = WHITE, size: float = 16.0,
             background: Color | None = None) -> Drawing:
        return self.add(Text(x, y, text, color, size, background))

    def __len__(self) -> int:
        return len(self._shapes)

    def __iter__(self) -> Iterator[Shape]:
        return iter(self._shapes)

    def __repr__(self) -> str:
        return f"Drawing({self._shapes!r})"

    @classmethod
    def from_boxes(cls, boxes_xyxy, labels: Sequence | None = None, scores: Sequence[float] | None = None,
                   color: Color = GREEN, width: float = 2.0) -> Drawing:
        """A box per row of a model's (N, 4) x0, y0, x1, y1 array (numpy, or
        anything numpy reads: lists, CPU tensors), labelled "label score"
        from the optional per-box `labels` (str, or class ids) and `scores`."""
        boxes = boxes_array(boxes_xyxy, "Drawing.from_boxes boxes_xyxy")
        n = len(boxes)
        for name, seq in (("labels", labels), ("scores", scores)):
            if seq is not None and len(seq) != n:
                raise ValueError(f"Drawing.from_boxes: {len(seq)} {name} for {n} boxes")
        drawing = cls()
        for i, (x0, y0, x1, y1) in enumerate(boxes.tolist()):
            parts = ([] if labels is None else [str(labels[i])]) + \
                    ([] if scores is None else [f"{float(scores[i]):.2f}"])
            drawing.add(Box(x0, y0, x1, y1, " ".join(parts) or None, color, width))
        return drawing


def boxes_array(boxes, field: str) -> np.ndarray:
    """`boxes` as an (N, 4) float64 array, or one ValueError naming `field`."""
    try:
        a = np.asarray(boxes, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{field} must be an (N, 4) array of x0, y0, x1, y1, not {_describe(boxes)}") from None
    if a.ndim == 1 and a.size == 0:
        a = a.reshape(0, 4)
    if a.ndim != 2 or a.shape[1] != 4:
        raise ValueError(f"{field} must be an (N, 4) array of x0, y0, x1, y1, not one of shape {a.shape}")
    return a
