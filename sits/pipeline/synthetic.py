"""A capture source without a camera: memfd buffers that frames land in on a timer.

`SyntheticCamera` has CaptureDevice's interface (path, format, buffers,
memory, streaming, stats, fileno/start/stop/requeue/close) and hands out the
same Frame and Lease objects, so a Pipeline and its consumers cannot tell it
from V4L2. It stands in for vivid where there is none (the GPU machine) and
for a camera in benchmarks.

It is a timer source of the C frame queue (sits/pipeline/frame_queue.c),
which behaves as a V4L2 driver does: a CLOCK_MONOTONIC timerfd ticks at the
frame rate; each tick fills the buffer queued longest ago, stamped with the
tick's expiry time and the tick's sequence number; a tick that finds no
queued buffer is lost, and its sequence number is skipped (the queue counts
it as a sequence gap). The pixels are written once, when the buffers are
made: a camera's DMA costs the CPU nothing, and neither does a frame here.
"""
from __future__ import annotations

import time
from typing import Callable

from sits._kernel import lib
from sits.dmabuf.udmabuf import MemFd
from sits.errors import UsageError
from sits.formats import BY_V4L2
from sits.timerfd import TimerFd
from sits.v4l2 import raw
from sits.v4l2.capture import CaptureBuffer, CaptureStats

def synthetic_format(code: str, width: int, height: int, bytesperline: int | None = None) -> raw.Format:
    """The V4L2 format a driver would report for `code` at this size
    (single-planar: NV12/NV16 chroma right after the luma rows)."""
    pf = BY_V4L2.get(code)
    if pf is None:
        raise UsageError(f"synthetic source: format {code} unknown; supported: {' '.join(BY_V4L2)}")
    if width <= 0 or height <= 0:
        raise UsageError(f"synthetic source: size {width}x{height} is empty")
    if pf.compressed:   # no rows; room for a frame of two bytes a pixel, as UVC drivers bound MJPEG
        return raw.Format(code, width, height, 0, width * height * 2, lib.V4L2_FIELD_NONE, 0)
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


def block_image(size: tuple[int, int], seed) -> "np.ndarray":
    """An RGB image of `size` in flat 16x16 blocks of random colour (from
    `seed`, anything numpy's default_rng takes): what a JPEG decoder gives
    back within a few levels inside each block."""
    import numpy as np
    width, height = size
    blocks = np.random.default_rng(seed).integers(0, 256, ((height + 15) // 16, (width + 15) // 16, 3), np.uint8)
    return np.ascontiguousarray(blocks.repeat(16, 0).repeat(16, 1)[:height, :width])


def jpeg_fill(size: tuple[int, int], seed: int = 0, quality: int = 85, subsampling: str = "422") -> Callable:
    """A fill for a JPEG source of `size`: every buffer its own JPEG frame
    (random blocks, so that each decodes to a different image), by
    libjpeg-turbo (simplejpeg); it returns the frame's length (bytesused)."""
    import numpy as np
    width, height = size

    def fill(index: int, pixels) -> int:
        import simplejpeg
        data = simplejpeg.encode_jpeg(block_image(size, (seed, index)), quality=quality, colorsubsampling=subsampling)
        if len(data) > pixels.size:
            raise UsageError(f"synthetic source: a {width}x{height} JPEG of {len(data)} B does not fit "
                             f"{pixels.size} B")
        pixels[:len(data)] = np.frombuffer(data, np.uint8)
        return len(data)
    return fill


def random_fill(seed: int = 0) -> Callable:
    """A fill that gives every buffer its own random bytes (distinct frames)."""
    import numpy as np

    def fill(index: int, pixels) -> None:
        pixels[:] = np.random.default_rng((seed, index)).integers(0, 256, pixels.size, dtype=np.uint8)
    return fill


class SyntheticCamera:
    """`buffers` memfd capture buffers of `code` at `size`, frames at `fps`.

    `fill(index, pixels)` writes each buffer once (pixels: its bytes as a
    numpy uint8 array) and may return how many bytes it wrote (a compressed
    frame's bytesused; None: all); default `random_fill()`, `jpeg_fill()`
    for MJPG/JPEG. A FrameQueue drives it
    (`FrameQueue.attach`, as a Pipeline does): the queue reads the timer's
    ticks and fills its buffers, as it dequeues a V4L2 device's.
    """

    def __init__(self, code: str = "YUYV", size: tuple[int, int] = (1920, 1080), fps: float = 60.0,
                 buffers: int = 4, *, bytesperline: int | None = None, fill: Callable | None = None,
                 path: str | None = None, memory: str = "memfd"):
        if not fps > 0:
            raise UsageError(f"synthetic source: frame rate {fps} is not positive")
        if buffers < 1:
            raise UsageError(f"synthetic source: {buffers} buffers; it needs at least one")
        fmt = synthetic_format(code, *size, bytesperline=bytesperline)
        self._timer = TimerFd.create()
        self.path = path or f"synthetic:{code}-{size[0]}x{size[1]}@{fps:g}"
        self.format = fmt
        if memory not in ("memfd", "udmabuf"):
            raise UsageError(f"synthetic source: memory {memory!r}: memfd, or udmabuf (a dma-buf over each, "
                             "which a display imports)")
        self.memory = memory
        self.streaming = False
        self.stats = CaptureStats()
        self.fps = float(fps)
        self.queue_owner = None     # the C frame queue that drives this source
        self.buffers: list[CaptureBuffer] = []
        fill = fill or (jpeg_fill(size) if BY_V4L2[code].compressed else random_fill())
        self.bytesused: list[int] = []   # what each buffer's frame holds
        udmabuf = None
        try:
            if memory == "udmabuf":
                from sits.dmabuf.udmabuf import Udmabuf
                udmabuf = Udmabuf.open()
            for i in range(buffers):
                if udmabuf is not None:
                    dmabuf = udmabuf.alloc(fmt.sizeimage)
                    self.buffers.append(CaptureBuffer(i, dmabuf, fmt))
                else:
                    memfd = MemFd.create(fmt.sizeimage, f"sits-synthetic-{i}")
                    self.buffers.append(CaptureBuffer(i, None, fmt, memfd=memfd))
                pixels = self.buffers[-1].memfd.array
                n = fill(i, pixels)
                self.bytesused.append(fmt.sizeimage if n is None else n)
        except BaseException:
            self.close()
            raise
        finally:
            if udmabuf is not None:
                udmabuf.close()

    def fileno(self) -> int:
        return self._timer.fileno()

    @property
    def timer_fd(self) -> int:
        """The frame clock's timerfd: the C frame queue reads its ticks
        itself, as it does DQBUF for V4L2."""
        return self._timer.fileno()

    @property
    def closed(self) -> bool:
        return self._timer.closed

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
        if self.queue_owner is None:
            raise UsageError("synthetic source: a frame queue drives it (FrameQueue.attach, or a Pipeline)")
        period = self.period_ns
        first = time.monotonic_ns() + period
        owner = self.queue_owner
        owner.requeue_idle()
        owner.source.started(first, period, {owner.number(b.index): n for b, n in zip(self.buffers, self.bytesused)})
        self._timer.start(first, period)
        self.streaming = True

    def stop(self) -> None:
        """As STREAMOFF: no more frames; queued buffers come back unfilled;
        held frames stay valid until released."""
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

    def requeue(self, buf: CaptureBuffer) -> None:
        """A frame's last lease went: the frame queue decides."""
        if self.queue_owner is not None:
            self.queue_owner.release(buf)

    def close(self) -> None:
        if self.closed:
            return
        self.stop()
        for b in self.buffers:
            if b.dmabuf is not None:
                b.dmabuf.close()
            if b.memfd is not None:
                b.memfd.close()
        self._timer.close()
