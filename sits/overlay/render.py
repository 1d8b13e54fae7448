"""A Drawing into an overlay plane's buffer: premultiplied ARGB8888.

The display's overlay plane is DRM_FORMAT_ARGB8888 with premultiplied
alpha (B, G, R, A bytes in memory, colours already multiplied by alpha),
which is what KMS blends over the video plane. That is cairo's
FORMAT_ARGB32 on a little-endian machine, byte for byte, and cairo
composites premultiplied ARGB32 the way KMS blends the plane; so cairo
draws straight into the plane's buffer (a mmap of a DRM dumb buffer) and
nothing converts or copies a pixel afterwards. Pillow's RGBA is straight
alpha and would need a premultiplying pass over the whole plane per
frame. cairocffi binds the system's libcairo through cffi, which sits
already uses; it is imported when something is drawn, so that importing
sits.overlay needs neither.

Only the `width` x `height` pixels are written; the bytes past
width * 4 in each row of a wider `stride` are left as they are (the
plane never scans them out).
"""
from __future__ import annotations

import contextlib
import numbers
from typing import Iterator

import numpy as np

from sits.errors import UsageError
from sits.overlay.drawing import Box, Color, Drawing, Mask, Polyline, Text

LABEL_PAD = 2.0  # pixels around a box label's text, inside its background


def _cairo():
    try:
        import cairocffi
    except (ImportError, OSError) as e:  # OSError: cairocffi found no libcairo
        raise UsageError("the overlay needs cairocffi (libcairo): pip install 'sits[overlay]'") from e
    return cairocffi


@contextlib.contextmanager
def _surface(buf, width: int, height: int, stride: int) -> Iterator:
    """A cairo ARGB32 surface over `buf` itself, finished and let go of on
    exit: afterwards nothing refers to `buf` (a dumb buffer's mmap can be
    closed, a bytearray resized)."""
    cairo = _cairo()
    for name, v in (("width", width), ("height", height), ("stride", stride)):
        if not isinstance(v, numbers.Integral) or v <= 0:
            raise ValueError(f"overlay {name} must be a positive int, not {v!r}")
    width, height, stride = int(width), int(height), int(stride)
    need = cairo.ImageSurface.format_stride_for_width(cairo.FORMAT_ARGB32, width)
    if need < 0 or stride < need:
        raise ValueError(f"overlay stride {stride} is less than cairo needs for {width} ARGB32 pixels ({need})")
    with memoryview(buf) as whole:
        if whole.readonly:
            raise ValueError("the overlay buffer is read-only")
        if not whole.c_contiguous:
            raise ValueError("the overlay buffer is not contiguous")
        with whole.cast("B") as data:
            if data.nbytes < stride * height:
                raise ValueError(f"the overlay buffer has {data.nbytes} bytes; "
                                 f"{width}x{height} at stride {stride} needs {stride * height}")
            surface = cairo.ImageSurface.create_for_data(data, cairo.FORMAT_ARGB32, width, height, stride)
            try:
                yield cairo, surface
            finally:
                surface.finish()
                del surface


def _clear(cairo, ctx) -> None:
    ctx.save()
    ctx.set_operator(cairo.OPERATOR_CLEAR)
    ctx.paint()
    ctx.restore()


def blank(buf, width: int, height: int, stride: int) -> None:
    """Clears the `width` x `height` pixels of `buf` to transparent."""
    with _surface(buf, width, height, stride) as (cairo, surface):
        _clear(cairo, cairo.Context(surface))


def render(drawing: Drawing, buf, width: int, height: int, stride: int, clear: bool = True) -> None:
    """Clears `buf` to transparent (unless `clear` is False: over what the
    GPU drew there, sits.cuda.overlay), then draws every shape of `drawing`
    into it in order, as premultiplied ARGB8888 (`stride` bytes a row).
    `buf` is any writable, contiguous buffer of at least stride * height
    bytes: a dumb buffer's mmap, a numpy array, a bytearray."""
    if not isinstance(drawing, Drawing):
        raise TypeError(f"render draws a Drawing, not {type(drawing).__name__}")
    with _surface(buf, width, height, stride) as (cairo, surface):
        ctx = cairo.Context(surface)
        if clear:
            _clear(cairo, ctx)
        for shape in drawing:
            if isinstance(shape, Box):
                _box(cairo, ctx, shape, width, height)
            elif isinstance(shape, Polyline):
                _polyline(cairo, ctx, shape)
            elif isinstance(shape, Mask):
                _mask(cairo, ctx, shape)
            else:
                _text(cairo, ctx, shape)
        del ctx


def _source(ctx, color: Color, alpha: int | None = None) -> None:
    r, g, b, a = color
    ctx.set_source_rgba(r / 255.0, g / 255.0, b / 255.0, (a if alpha is None else alpha) / 255.0)


def _box(cairo, ctx, box: Box, width: int, height: int) -> None:
    w, h = box.x1 - box.x0, box.y1 - box.y0
    if box.fill_alpha:
        _source(ctx, box.color, box.color[3] * box.fill_alpha // 255)
        ctx.rectangle(box.x0, box.y0, w, h)
        ctx.fill()
    lw = box.width
    if lw > 0 and w > 0 and h > 0:
        _source(ctx, box.color)
        if 2 * lw >= min(w, h):  # the outline fills the box
            ctx.rectangle(box.x0, box.y0, w, h)
            ctx.fill()
        else:
            # Inside the corners: whole pixels stay whole, and the box never grows past them.
            ctx.set_line_width(lw)
            ctx.set_line_join(cairo.LINE_JOIN_MITER)
            ctx.rectangle(box.x0 + lw / 2, box.y0 + lw / 2, w - lw, h - lw)
            ctx.stroke()
    if box.label:
        _label(cairo, ctx, box, width, height)


def _label(cairo, ctx, box: Box, width: int, height: int) -> None:
    _font(cairo, ctx, box.label_size)
    ascent, descent = ctx.font_extents()[:2]
    tw = ctx.text_extents(box.label)[4]  # x_advance
    lw, lh = tw + 2 * LABEL_PAD, ascent + descent + 2 * LABEL_PAD
    x = min(max(box.x0, 0.0), max(width - lw, 0.0))
    y = box.y0 - lh if box.y0 - lh >= 0 else max(box.y0, 0.0)  # above the box, else inside its top
    y = min(y, max(height - lh, 0.0))
    _source(ctx, box.color)
    ctx.rectangle(x, y, lw, lh)
    ctx.fill()
    r, g, b, a = box.color
    dark = 0.299 * r + 0.587 * g + 0.114 * b > 140  # dark text on a light background
    _source(ctx, (0, 0, 0, a) if dark else (255, 255, 255, a))
    ctx.move_to(x + LABEL_PAD, y + LABEL_PAD + ascent)
    ctx.show_text(box.label)


def _polyline(cairo, ctx, line: Polyline) -> None:
    _source(ctx, line.color)
    ctx.set_line_width(line.width)
    ctx.set_line_join(cairo.LINE_JOIN_ROUND)
    ctx.set_line_cap(cairo.LINE_CAP_ROUND)
    (x, y), *rest = line.points.tolist()
    ctx.move_to(x, y)
    for x, y in rest:
        ctx.line_to(x, y)
    if line.closed:
        ctx.close_path()
    ctx.stroke()


def mask_surface(cairo, alpha: np.ndarray):
    """An A8 surface holding `alpha` (uint8 H x W) in rows as wide as cairo
    wants them, and the array behind it (which must outlive the surface)."""
    h, w = alpha.shape
    stride = cairo.ImageSurface.format_stride_for_width(cairo.FORMAT_A8, w)
    rows = np.zeros((h, stride), dtype=np.uint8)
    rows[:, :w] = alpha
    return cairo.ImageSurface.create_for_data(memoryview(rows).cast("B"), cairo.FORMAT_A8, w, h, stride), rows


def _mask(cairo, ctx, mask: Mask) -> None:
    surface, rows = mask_surface(cairo, mask.alpha_u8())
    try:
        _source(ctx, mask.color)
        ctx.save()
        ctx.translate(mask.x, mask.y)
        ctx.scale(*mask.scale)
        # A scaled mask is interpolated inside its rectangle and ends sharply at its edges
        # (padding, not fading into the transparent outside).
        ctx.rectangle(0, 0, surface.get_width(), surface.get_height())
        ctx.clip()
        pattern = cairo.SurfacePattern(surface)
        pattern.set_extend(cairo.EXTEND_PAD)
        ctx.mask(pattern)
        ctx.restore()
        del pattern
    finally:
        surface.finish()
    del rows


def _font(cairo, ctx, size: float) -> None:
    ctx.select_font_face("sans-serif", cairo.FONT_SLANT_NORMAL, cairo.FONT_WEIGHT_NORMAL)
    ctx.set_font_size(size)


def _text(cairo, ctx, text: Text) -> None:
    _font(cairo, ctx, text.size)
    ascent, descent = ctx.font_extents()[:2]
    if text.background is not None:
        _source(ctx, text.background)
        ctx.rectangle(text.x - LABEL_PAD, text.y - LABEL_PAD, ctx.text_extents(text.text)[4] + 2 * LABEL_PAD,
                      ascent + descent + 2 * LABEL_PAD)
        ctx.fill()
    _source(ctx, text.color)
    ctx.move_to(text.x, text.y + ascent)
    ctx.show_text(text.text)
