"""An overlay drawing's boxes and masks drawn by the GPU (kernels/overlay.cu)
into a buffer it can write: device memory, or host memory registered for
it (the overlay plane's memfd buffers, as the capture buffers are). What
the kernel does not draw -- text, box labels, polylines -- is left for
cairo to draw on top (`GpuDrawing.draw` returns it as a Drawing;
sits.overlay.render(..., clear=False)).

Each box is whole pixels where its coordinates are (a pixel belongs to a
shape when its centre does: for whole coordinates, what cairo draws); a
scaled mask is sampled at the nearest of its pixels (cairo interpolates).
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from sits.cuda.runtime import cupy
from sits.overlay.drawing import Box, Drawing, Mask

SOURCE_PATH = Path(__file__).with_name("kernels") / "overlay.cu"
#: struct SitsShape (kernels/overlay.cu), field for field
SHAPE = np.dtype([("x0", "<f4"), ("y0", "<f4"), ("x1", "<f4"), ("y1", "<f4"), ("line", "<f4"), ("sx", "<f4"),
                  ("sy", "<f4"), ("rgba", "<u4"), ("fill", "<u4"), ("kind", "<i4"), ("mask_at", "<i4"),
                  ("mask_w", "<i4"), ("mask_h", "<i4")])
BLOCK = (32, 8, 1)


@functools.cache
def _kernel():
    return cupy().RawModule(code=SOURCE_PATH.read_text()).get_function("sits_overlay_draw")


def _rgba(color) -> int:
    r, g, b, a = color
    return int(r) | int(g) << 8 | int(b) << 16 | int(a) << 24


def split(drawing: Drawing) -> tuple[np.ndarray, np.ndarray, Drawing]:
    """The shapes the kernel draws (SHAPE records), their masks' bytes one
    after another, and the rest for cairo (box labels as label-only boxes)."""
    records, masks, rest, at = [], [], Drawing(), 0
    for shape in drawing:
        if isinstance(shape, Box):
            records.append((shape.x0, shape.y0, shape.x1, shape.y1, shape.width, 1.0, 1.0, _rgba(shape.color),
                            shape.color[3] * shape.fill_alpha // 255, 0, 0, 0, 0))
            if shape.label:
                rest.box(shape.x0, shape.y0, shape.x1, shape.y1, shape.label, shape.color, width=0,
                         label_size=shape.label_size)
        elif isinstance(shape, Mask):
            alpha = np.ascontiguousarray(shape.alpha_u8())
            h, w = alpha.shape
            sx, sy = shape.scale
            records.append((shape.x, shape.y, shape.x + w * sx, shape.y + h * sy, 0.0, 1.0 / sx, 1.0 / sy,
                            _rgba(shape.color), 0, 1, at, w, h))
            masks.append(alpha.reshape(-1))
            at += alpha.size
        else:
            rest.add(shape)
    table = np.array(records, dtype=SHAPE)
    return table, (np.concatenate(masks) if masks else np.zeros(1, np.uint8)), rest


class GpuDrawing:
    """Draws Drawings' boxes and masks into `width` x `height` premultiplied
    ARGB8888 images of `pitch` bytes a row, at GPU addresses."""

    def __init__(self, width: int, height: int, pitch: int):
        if pitch < width * 4:
            raise ValueError(f"a pitch of {pitch} bytes is less than {width} ARGB8888 pixels")
        self.width, self.height, self.pitch = width, height, pitch
        self.kernel = _kernel()
        self._keep = self._stream = None

    def draw(self, drawing: Drawing, address: int, stream=None) -> Drawing:
        """Enqueue on `stream` (default: the current one) the image of
        `drawing`'s boxes and masks at GPU address `address` (every pixel
        written: transparent where no shape is); what is left for cairo."""
        cp = cupy()
        table, masks, rest = split(drawing)
        stream = stream or cp.cuda.get_current_stream()
        with stream:
            shapes = cp.asarray(table.view(np.uint8)) if len(table) else cp.zeros(SHAPE.itemsize, cp.uint8)
            device_masks = cp.asarray(masks)
            grid = ((self.width + BLOCK[0] - 1) // BLOCK[0], (self.height + BLOCK[1] - 1) // BLOCK[1], 1)
            self.kernel(grid, BLOCK, (np.uint64(address), np.int32(self.width), np.int32(self.height),
                                      np.int32(self.pitch), shapes, np.int32(len(table)), device_masks))
        # the uploads live until the kernel has read them (wait())
        self._keep, self._stream = (shapes, device_masks), stream
        return rest

    def wait(self) -> None:
        """The last draw() is done: its image is in memory."""
        if self._stream is not None:
            self._stream.synchronize()
        self._keep = self._stream = None
