"""The pipeline's own frame records (`sits capture --timeline FILE`): what
sits itself saw of each frame, in sits/journey/record.py's schema -- the
ground truth that the kernel's journey (`sits probe frames`) is held against.

The frame queue's C times each stage as it happens (frame_queue.c, its
timeline_* functions) and hands a frame's record over once nothing can add
a stage to it. They come out of capture order (a dropped frame is done
before the one on screen), so they wait here until every earlier frame's
record has come, and are written in capture order.
"""
from __future__ import annotations

import os

from sits.errors import UsageError
from sits.journey import record

STAGE_FIELDS = tuple(f"{s}_ns" for s in record.STAGES)   # the C record's names too
VBLANK_WRAP = 1 << 32   # the flip events' vblank counter is 32 bits


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
        self._waiting: dict[int, dict] = {}   # capture number -> record, behind an earlier one
        self._next = 0                        # the capture number written next

    @property
    def written(self) -> int:
        return self._writer.written

    def add(self, records, n: int) -> None:
        """The first `n` of the queue's `struct sits_q_record` array."""
        for i in range(n):
            r = records[i]
            self._waiting[r.frame] = self._record(r)
        while self._next in self._waiting:
            self._writer.write(self._waiting.pop(self._next))
            self._next += 1

    def _record(self, r) -> dict:
        stages = {name: getattr(r, name) or None for name in STAGE_FIELDS}
        vblanks = None
        if r.scanout_ns and r.replaced_ns:
            vblanks = (r.replaced_vblank - r.scanout_vblank) % VBLANK_WRAP
        return record.new(pid=self._pid, buffer=r.buffer, sequence=r.sequence, **stages,
                          skipped_before=r.skipped_before, copied=bool(r.copied), vblanks=vblanks,
                          late_ns=r.late_ns or None)

    def close(self) -> None:
        """Write what still waits (behind a frame whose record never came), in order."""
        for frame in sorted(self._waiting):
            self._writer.write(self._waiting.pop(frame))
        self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
