"""The Python halves of the frame queue's sources (their C halves:
sits/pipeline/sources/*.c): each makes its C half's state for a source
object and keeps it alive while the queue uses it."""
from __future__ import annotations

from sits._kernel import ffi, lib
from sits.v4l2.capture import CaptureDevice


class V4l2Source:
    """A V4L2 CaptureDevice: DQBUF / QBUF of its buffers (sources/v4l2.c)."""

    def __init__(self, cap: CaptureDevice):
        self.ops = lib.sits_v4l2_source()
        self.state = S = ffi.new("struct sits_v4l2_source *")
        S.memory = cap.memory_type
        for b in cap.buffers:
            if b.dmabuf is not None:   # queued as DMABUF (an MMAP buffer's is only its export)
                S.dmabuf_fd[b.index] = b.dmabuf.fileno()
                S.length[b.index] = b.dmabuf.size


class TimerSource:
    """A source on a timerfd (SyntheticCamera): each tick fills a buffer (sources/timer.c)."""

    def __init__(self, cap):
        self.ops = lib.sits_timer_source()
        self.state = ffi.new("struct sits_timer_source *")

    def started(self, first_ns: int, period_ns: int, bytesused: dict[int, int] | None = None) -> None:
        """The timer runs: tick k lands at first_ns + k * period_ns; each
        buffer's frame holds `bytesused` (the queue's buffer number -> bytes)."""
        T = self.state
        T.first_ns, T.period_ns, T.ticks = first_ns, period_ns, 0
        for index, n in (bytesused or {}).items():
            T.bytesused[index] = n


def half_of(cap):
    """The Python half for source object `cap`."""
    if isinstance(cap, CaptureDevice):
        return V4l2Source(cap)
    if getattr(cap, "timer_fd", None) is not None:
        return TimerSource(cap)
    raise TypeError(f"{cap!r} is no source the frame queue knows")
