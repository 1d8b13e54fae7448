"""A capture source without a camera: memfd buffers that frames land in on a timer.

`SyntheticCamera` has CaptureDevice's interface (path, format, buffers,
memory, streaming, stats, fileno/start/stop/dequeue/requeue/close) and
hands out the same Frame and Lease objects, so a Pipeline and its consumers
cannot tell it from V4L2. It stands in for vivid where there is none (the
GPU machine) and for a camera in benchmarks.

It behaves as a V4L2 driver does: a CLOCK_MONOTONIC timerfd ticks at the
frame rate; each tick fills the oldest queued buffer, stamped with the tick's
expiry time and the tick's sequence number; a tick that finds no queued
buffer is lost, and its sequence number is skipped (`skipped` counts them).
Filled buffers wait in a done queue, and `fileno()` is readable while one
waits or a tick is unread. The pixels are written once, when the buffers are
made: a camera's DMA costs the CPU nothing, and neither does a frame here
(`paint=` writes each frame, for tests that need changing content).
"""
from __future__ import annotations

import collections
import os
import select
import time
from typing import Callable

from sits._kernel import lib
from sits.dmabuf.udmabuf import MemFd
from sits.errors import UsageError
from sits.fd import FdOwner
from sits.formats import BY_V4L2
from sits.timerfd import TimerFd
from sits.v4l2 import raw
from sits.v4l2.capture import CaptureBuffer, CaptureStats, Frame

DONE_FLAGS = lib.V4L2_BUF_FLAG_DONE | lib.V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC


def synthetic_format(code: str, width: int, height: int, bytesperline: int | None = None) -> raw.Format:
    """The V4L2 format a driver would report for `code` at this size
    (single-planar: NV12/NV16 chroma right after the luma rows)."""
    pf = BY_V4L2.get(code)
    if pf is None:
        raise UsageError(f"synthetic source: format {code} unknown; supported: {' '.join(BY_V4L2)}")
    if width <= 0 or height <= 0:
        raise UsageError(f"synthetic source: size {width}x{height} is empty")
    row = width * pf.bpp // 8
    bpl = bytesperline or row
    if bpl < row:
        raise UsageError(f"synthetic source: bytesperline {bpl} is smaller than a row ({row} B)")
    if pf.planes == 2:  # NV12: chroma rows half as many; NV16: as many
        chroma_rows = (height + 1) // 2 if code == "NV12" else height
        size = bpl * (height + chroma_rows)
    else:
        size = bpl * height
    return raw.Format(code, width, height, bpl, size, lib.V4L2_FIELD_NONE, 0)


def random_fill(seed: int = 0) -> Callable:
    """A fill that gives every buffer its own random bytes (distinct frames)."""
    import numpy as np

    def fill(index: int, pixels) -> None:
        pixels[:] = np.random.default_rng((seed, index)).integers(0, 256, pixels.size, dtype=np.uint8)
    return fill


class SyntheticCamera:
    """`buffers` memfd capture buffers of `code` at `size`, frames at `fps`.

    `fill(index, pixels)` writes each buffer once (pixels: its bytes as a
    numpy uint8 array); default `random_fill()`. `paint(pixels, sequence)`,
    if given, runs for every frame as it lands (the CPU writes the frame).
    """

    def __init__(self, code: str = "YUYV", size: tuple[int, int] = (1920, 1080), fps: float = 60.0,
                 buffers: int = 4, *, bytesperline: int | None = None, fill: Callable | None = None,
                 paint: Callable | None = None, path: str | None = None):
        if not fps > 0:
            raise UsageError(f"synthetic source: frame rate {fps} is not positive")
        if buffers < 1:
            raise UsageError(f"synthetic source: {buffers} buffers; it needs at least one")
        fmt = synthetic_format(code, *size, bytesperline=bytesperline)
        # fileno() is an epoll fd, readable while the timer has unread ticks
        # or the done queue holds a frame (the eventfd), as a V4L2 fd is.
        self._epoll = select.epoll(2)  # its own owner: closed by close() or when it goes
        self._timer = TimerFd.create()
        self._ready = FdOwner(os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK))
        self._ready_set = False
        self._epoll.register(self._timer.fileno(), select.EPOLLIN)
        self._epoll.register(self._ready.fileno(), select.EPOLLIN)
        self.path = path or f"synthetic:{code}-{size[0]}x{size[1]}@{fps:g}"
        self.format = fmt
        self.memory = "memfd"
        self.streaming = False
        self.stats = CaptureStats()
        self.fps = float(fps)
        self.skipped = 0            # ticks that found no queued buffer (sequence numbers lost)
        self.queue_owner = None     # the C frame queue, while it drives this source (as for V4L2)
        self._queue: collections.deque = collections.deque()   # buffers the "driver" may fill
        self._done: collections.deque = collections.deque()    # (buffer, sequence, timestamp_ns)
        self._sequence = 0
        self._paint = paint
        self.buffers: list[CaptureBuffer] = []
        fill = fill or random_fill()
        try:
            for i in range(buffers):
                memfd = MemFd.create(fmt.sizeimage, f"sits-synthetic-{i}")
                self.buffers.append(CaptureBuffer(i, None, fmt, memfd=memfd))
                fill(i, memfd.array)
        except BaseException:
            self.close()
            raise

    def fileno(self) -> int:
        return self._epoll.fileno()

    @property
    def timer_fd(self) -> int:
        """The frame clock's timerfd: the C frame queue reads its ticks itself
        (sits/pipeline/frame_queue.c), as it does DQBUF for V4L2."""
        return self._timer.fileno()

    @property
    def closed(self) -> bool:
        return self._epoll.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def period_ns(self) -> int:
        return round(1e9 / self.fps)

    # ------------------------------------------------------------ streaming
    def start(self) -> None:
        if self.streaming:
            return
        self._sequence = 0
        period = self.period_ns
        first = time.monotonic_ns() + period
        if self.queue_owner is not None:
            self.queue_owner.requeue_idle()
            self.queue_owner.timer_started(first, period)
        else:
            for b in self.buffers:
                if not b.queued and not b.leased:
                    b.queued = True
                    self._queue.append(b)
        self._timer.start(first, period)
        self.streaming = True

    def stop(self) -> None:
        """As STREAMOFF: no more frames; queued and done buffers come back
        unfilled; leased frames stay valid until released."""
        if not self.streaming:
            return
        self.streaming = False
        if not self._timer.closed:
            self._timer.stop()
            self._timer.expirations()
        for b in self.buffers:
            b.queued = False
        if self.queue_owner is not None:
            self.queue_owner.forget_queued()
        self._queue.clear()
        self._done.clear()
        self._set_ready(False)

    def _land(self) -> None:
        """Apply the ticks that expired since the last look: each fills the
        oldest queued buffer, or is lost when none is queued."""
        first, period = self._timer.first_ns, self._timer.period_ns
        if time.monotonic_ns() < first + self._sequence * period:
            return  # the next tick is still to come: no read needed
        ticks = self._timer.expirations()
        if not ticks:
            return
        filled = min(ticks, len(self._queue))
        for _ in range(filled):
            buf = self._queue.popleft()
            buf.queued = False
            seq = self._sequence
            self._sequence += 1
            if self._paint is not None:
                self._paint(buf.memfd.array, seq)
            self._done.append((buf, seq, first + seq * period))
        self.skipped += ticks - filled
        self._sequence += ticks - filled
        self._set_ready(bool(self._done))

    def _set_ready(self, ready: bool) -> None:
        if ready == self._ready_set or self._ready.closed:
            return
        if ready:
            os.eventfd_write(self._ready.fileno(), 1)
        else:
            try:
                os.eventfd_read(self._ready.fileno())
            except BlockingIOError:
                pass
        self._ready_set = ready

    def dequeue(self) -> Frame | None:
        """The oldest filled frame, or None when none has landed."""
        if not self.streaming:
            return None
        self._land()
        if not self._done:
            return None
        buf, seq, ts = self._done.popleft()
        self._set_ready(bool(self._done))
        self.stats.dequeued += 1
        return Frame(self, buf, raw.Dequeued(buf.index, seq, ts, self.format.sizeimage, DONE_FLAGS))

    def requeue(self, buf: CaptureBuffer) -> None:
        """A frame's last lease went: the buffer may be filled again, by ticks
        after now (the ticks before it were lost or went to other buffers)."""
        if self.queue_owner is not None:
            self.queue_owner.release(buf)
            return
        if not self.streaming or buf.queued or buf.leased or self.closed:
            return
        self._land()
        buf.queued = True
        self._queue.append(buf)

    def close(self) -> None:
        if self.closed:
            return
        self.stop()
        for b in self.buffers:
            if b.memfd is not None:
                b.memfd.close()
        self._timer.close()
        self._ready.close()
        self._epoll.close()
