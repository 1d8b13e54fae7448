"""Results: drawings made away from the overlay's callback (a model's
output, in the CUDA sink's `on_batch`) for the frames they came from.

Used as the overlay callback (`overlay=results`), it hands the drawing
stage each frame's own drawing, by the frame's sequence, once `put()` has
it: the stage's worker thread waits for it (up to `wait_s`), never the
loop's; with the `sync` policy the frame waits with it, so the boxes a
model found in a frame are shown over that frame. A frame whose drawing
does not come in time is given the newest drawing there is (boxes stay
up rather than blink), which the summary counts as an older one's age.
"""
from __future__ import annotations

import threading
from collections import OrderedDict


class Results:
    def __init__(self, wait_s: float = 0.2, keep: int = 64):
        """`wait_s`: how long a frame's drawing is waited for; `keep`: the
        drawings kept for frames the overlay has not asked for yet."""
        if wait_s < 0 or keep < 1:
            raise ValueError(f"Results(wait_s={wait_s}, keep={keep}): wait_s >= 0 and keep >= 1")
        self.wait_s, self.keep = wait_s, keep
        self._cv = threading.Condition()
        self._by_sequence: OrderedDict[int, object] = OrderedDict()
        self._newest = None
        self.late = 0          # frames given the newest drawing instead of their own

    def put(self, sequence: int, drawing) -> None:
        """The drawing for the frame of `sequence` (a sits.overlay.Drawing)."""
        with self._cv:
            self._by_sequence[int(sequence)] = drawing
            while len(self._by_sequence) > self.keep:
                self._by_sequence.popitem(last=False)
            self._newest = drawing
            self._cv.notify_all()

    def put_batch(self, batch, drawings) -> None:
        """One drawing per frame of a sits FrameBatch, in its order."""
        for sequence, drawing in zip(batch.sequences, drawings):
            self.put(int(sequence), drawing)

    def __call__(self, frame):
        """The overlay callback: `frame`'s own drawing, else the newest."""
        key = int(frame.sequence)
        with self._cv:
            if not self._cv.wait_for(lambda: key in self._by_sequence, timeout=self.wait_s):
                self.late += 1
                return self._newest
            return self._by_sequence.pop(key)
