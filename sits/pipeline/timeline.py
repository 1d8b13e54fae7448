"""The pipeline's own frame records (`sits capture --timeline FILE`): what
sits itself saw of each frame, in sits/journey/record.py's schema -- the
ground truth that the kernel's journey (`sits probe frames`) is held against.

The frame queue's C times each stage as it happens
(sits/pipeline/queue_timeline.c) and hands a frame's record over once nothing can add
a stage to it. They come out of capture order (a dropped frame is done
before the one on screen), so they wait here until every earlier frame's
record has come, and are written in capture order.
"""
from __future__ import annotations

import os

import numpy as np

from sits._kernel import ffi
from sits.ebpf.ringbuf import FRAME_DTYPE
from sits.errors import UsageError
from sits.journey import record


class Timeline:
    """The frame queue's records to `path` (NDJSON, or CSV for FILE.csv), in
    capture order. Owns the file."""

    def __init__(self, path: str):
        try:
            self._writer = record.Writer(path)
        except OSError as exc:
            raise UsageError(f"timeline {path}: {exc.strerror}") from None
        self.path = path
        self._pid = os.getpid()
        self._waiting: dict[int, tuple] = {}  # capture number -> row, behind an earlier one
        self._next = 0                        # the capture number written next

    @property
    def written(self) -> int:
        return self._writer.written

    def add(self, records, n: int) -> None:
        """The first `n` of the queue's `struct sits_frame` array."""
        frames = np.frombuffer(ffi.buffer(records, n * FRAME_DTYPE.itemsize), FRAME_DTYPE).copy()
        frames["pid"] = self._pid
        self._waiting.update(zip(frames["id"].tolist(), record.rows_of(frames)))
        ready = []
        while self._next in self._waiting:
            ready.append(self._waiting.pop(self._next))
            self._next += 1
        if ready:
            self._writer.write_rows(ready)

    def close(self) -> None:
        """Write what still waits (behind a frame whose record never came), in order."""
        if self._waiting:
            self._writer.write_rows([self._waiting.pop(frame) for frame in sorted(self._waiting)])
        self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
