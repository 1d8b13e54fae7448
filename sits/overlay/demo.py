"""A stand-in detector for `--overlay-demo`: boxes on live video with no model.

It works on a coarse grid of cells (16 x 16 pixels by default) of the
frame's brightness: the cells in which enough pixels changed since the
previous frame are motion; when nothing moved, the brightest cells are
boxed instead, so that a still picture shows a box too. Neighbouring
cells (one cell apart at most) make one group and one box. All the
per-pixel work is a few vectorised numpy passes; Python only walks runs
of cells.
"""
from __future__ import annotations

import bisect

import numpy as np

from sits.overlay.drawing import Drawing
from sits.overlay.frame_view import FrameView

MOTION = (255, 64, 64, 255)
BRIGHT = (255, 200, 0, 255)


class Demo:
    """`Demo()(frame) -> Drawing`: up to `max_boxes` "motion" boxes, or one
    "bright" box, and a line naming the frame.

    A cell moved when at least `min_changed` of its pixels changed by more
    than `threshold` levels (a camera's noise changes many pixels a little,
    a moving edge few a lot). The bright box is around the largest group
    of the brightest tenth of the cells.
    """

    def __init__(self, cell: int = 16, threshold: int = 24, min_changed: int = 6, max_boxes: int = 8):
        if cell < 2 or max_boxes < 1:
            raise ValueError(f"Demo: cell ({cell}) must be >= 2 and max_boxes ({max_boxes}) >= 1")
        self.cell = cell
        self.threshold = threshold
        self.min_changed = min_changed
        self.max_boxes = max_boxes
        # Arrays reused from frame to frame (fresh ones of a frame's size cost more in page faults
        # than the work done in them): two brightness planes, this frame's and the last, and scratch.
        self._planes: list[np.ndarray] = []
        self._turn = 0  # the plane this frame's brightness goes into; the other holds the last one's
        self._scratch: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._prev: np.ndarray | None = None

    def __call__(self, frame: FrameView) -> Drawing:
        c = self.cell
        h, w = frame.height, frame.width
        gh, gw = h // c, w // c
        if not self._planes or self._planes[0].shape != (h, w):
            self._planes = [np.empty((h, w), np.uint8) for _ in range(2)]
            grid = (gh * c, gw * c)
            self._scratch = (np.empty(grid, np.uint8), np.empty(grid, np.uint8), np.empty(grid, bool))
            self._prev = None
        plane = self._planes[self._turn]
        self._turn ^= 1
        y = frame.luma(out=plane)[:gh * c, :gw * c]  # a copy: the capture buffer goes back to the camera
        prev, self._prev = self._prev, y
        drawing = Drawing()
        if gh and gw:
            moved = self._moved(prev, y, gh, gw) if prev is not None else None
            if moved is not None and moved.any():
                boxes, label, color = groups(moved, self.max_boxes), "motion", MOTION
            else:
                boxes, label, color = groups(self._bright(y, gh, gw), 1), "bright", BRIGHT
            for gy0, gx0, gy1, gx1 in boxes:
                drawing.box(gx0 * c, gy0 * c, gx1 * c, gy1 * c, label, color)
        drawing.text(8, 8, f"sits overlay demo  frame {frame.sequence}", size=16.0, background=(0, 0, 0, 160))
        return drawing

    def _moved(self, prev: np.ndarray, y: np.ndarray, gh: int, gw: int) -> np.ndarray:
        """(gh, gw) bool: the cells with at least min_changed pixels changed by more than threshold."""
        c = self.cell
        diff, low, changed = self._scratch
        np.maximum(prev, y, out=diff)
        np.minimum(prev, y, out=low)
        diff -= low  # |prev - y| without leaving uint8
        np.greater(diff, self.threshold, out=changed)
        # Down each cell's rows first: numpy sums along a middle axis at memory speed, not along a short last one.
        columns = changed.view(np.uint8).reshape(gh, c, gw * c).sum(axis=1, dtype=np.uint8 if c < 256 else np.uint32)
        return columns.reshape(gh, gw, c).sum(axis=2, dtype=np.uint32) >= self.min_changed

    def _bright(self, y: np.ndarray, gh: int, gw: int) -> np.ndarray:
        """(gh, gw) bool: the brightest tenth of the cells (by their sums of
        every 4th pixel each way, 16 a cell: plenty for a mean)."""
        step = self.cell // 4 if self.cell % 4 == 0 else 1
        k = self.cell // step
        sums = y[::step, ::step].reshape(gh, k, gw * k).sum(axis=1, dtype=np.uint32).reshape(gh, gw, k).sum(axis=2)
        flat = sums.ravel()
        nth = (flat.size * 9) // 10
        return sums >= np.partition(flat, nth)[nth]


def groups(cells: np.ndarray, limit: int) -> list[tuple[int, int, int, int]]:
    """Bounding boxes (gy0, gx0, gy1, gx1, ends exclusive) of the groups of
    True cells, largest groups first, at most `limit`. Two cells are of
    one group when at most one cell lies between them each way, so that a
    line of text's changes makes one box.

    It joins runs of cells, not cells: when the whole picture moves, a row
    is one run, and Python walks tens of runs instead of thousands of cells.
    """
    h, w = cells.shape
    edges = np.diff(np.pad(cells.astype(np.int8), ((0, 0), (1, 1))), axis=1)
    starts, ends = np.nonzero(edges == 1), np.nonzero(edges == -1)
    rows: list[list[list[int]]] = [[] for _ in range(h)]  # per row: [x0, x1 (exclusive), cells, id]
    for r, a, b in zip(starts[0].tolist(), starts[1].tolist(), ends[1].tolist()):
        row = rows[r]
        if row and a - row[-1][1] <= 1:  # one cell between: the same run
            row[-1][1], row[-1][2] = b, row[-1][2] + b - a
        else:
            row.append([a, b, b - a, 0])
    parent: list[int] = []
    box: list[list[int]] = []  # per run id: y0, x0, y1, x1, cells
    for r, row in enumerate(rows):
        for run in row:
            run[3] = len(parent)
            parent.append(run[3])
            box.append([r, run[0], r + 1, run[1], run[2]])

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for r, row in enumerate(rows):
        for below in rows[r + 1:r + 3]:  # the next two rows: one row between at most
            ends_below = [run[1] for run in below]
            for a, b, _, i in row:
                # runs of `below` within two columns of [a, b): x1 > a - 2 and x0 < b + 2
                for a2, b2, _, j in below[bisect.bisect_right(ends_below, a - 2):]:
                    if a2 >= b + 2:
                        break
                    ri, rj = root(i), root(j)
                    if ri != rj:
                        parent[rj] = ri
                        bi, bj = box[ri], box[rj]
                        box[ri] = [min(bi[0], bj[0]), min(bi[1], bj[1]), max(bi[2], bj[2]), max(bi[3], bj[3]),
                                   bi[4] + bj[4]]
    found = [box[i] for i in range(len(parent)) if parent[i] == i]
    found.sort(key=lambda g: -g[4])
    return [tuple(g[:4]) for g in found[:limit]]
