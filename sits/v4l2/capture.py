"""CaptureDevice: a V4L2 capture node streaming into dma-bufs.

Buffers are dma-bufs from the start: MMAP buffers are exported once with
VIDIOC_EXPBUF; with memory="heap"/"udmabuf" sits allocates them and queues
them as V4L2_MEMORY_DMABUF. A driver that cannot export its buffers
(v4l2loopback) still serves compressed formats: their frames are read from
the buffers' mappings (a decoder reads them; nothing imports them). A dequeued buffer becomes a Frame; consumers
take Leases on it and the buffer is queued again only when the last lease is
released (after the flip that replaced it, a fence, a CUDA event) -- never by
the dequeue itself.
"""
import errno
import glob
import mmap
import os
import time
from dataclasses import dataclass

from sits._kernel import lib
from sits.dmabuf.buffer import DmaBuf
from sits.errors import DeviceError, IoctlError, UsageError
from sits.formats import compressed, fourcc
from sits.v4l2 import raw
from sits.v4l2.device import VideoDevice, video_paths

CAPTURE = lib.V4L2_BUF_TYPE_VIDEO_CAPTURE
MEMORY_KINDS = ("mmap", "heap", "udmabuf")
#: udev's stable names of video nodes (60-persistent-v4l.rules): by-id
#: names a USB camera by its serial, by-path by the port it is plugged in
STABLE_DIRS = ("/dev/v4l/by-id", "/dev/v4l/by-path")


def stable_paths(node: str) -> list[str]:
    """udev's links to the video node `node` (/dev/videoN)."""
    node = os.path.realpath(node)
    return [p for d in STABLE_DIRS for p in sorted(glob.glob(os.path.join(d, "*")))
            if os.path.realpath(p) == node]


class CaptureBuffer:
    """One V4L2 buffer (an index of the driver's queue) and the dma-buf that
    holds its pixels."""

    __slots__ = ("index", "dmabuf", "format", "queued", "leased", "memfd", "mapped", "__weakref__")

    def __init__(self, index: int, dmabuf: DmaBuf | None, fmt: raw.Format, memfd=None, mapped: mmap.mmap | None = None):
        self.index = index
        self.dmabuf = dmabuf
        self.mapped = mapped  # a driver buffer it could not export: its mapping (compressed frames)
        self.format = fmt
        self.queued = False   # owned by the driver
        self.leased = False   # owned by consumers (a Frame with live leases)
        # the memfd whose pages hold the pixels (udmabuf buffers, memfd
        # sources), which CUDA registers as host memory; None for driver or
        # dma-heap memory
        if memfd is None and dmabuf is not None:
            from sits.dmabuf.udmabuf import MemFd
            memfd = dmabuf.backing if isinstance(dmabuf.backing, MemFd) else None
        self.memfd = memfd

    def __repr__(self):
        state = "queued" if self.queued else "leased" if self.leased else "idle"
        return f"<CaptureBuffer {self.index} {state}>"

    def view(self):
        """Its bytes, for a CPU reader (a decoder): the dma-buf's mapping, or the driver buffer's."""
        if self.dmabuf is not None:
            return self.dmabuf.map()
        if self.mapped is not None:
            return self.mapped
        return self.memfd.array


class Lease:
    """One consumer's claim on a Frame; release() is idempotent."""

    __slots__ = ("frame", "holder", "_live")

    def __init__(self, frame: "Frame", holder: str):
        self.frame = frame
        self.holder = holder
        self._live = True

    def release(self) -> None:
        if self._live:
            self._live = False
            self.frame._release(self)

    @property
    def live(self) -> bool:
        return self._live

    def __repr__(self):
        return f"<Lease {self.holder} on frame {self.frame.sequence}{'' if self._live else ' released'}>"


class Frame:
    """A filled buffer out of the driver, with its sequence and timestamp;
    `source`: which of a pipeline's sources it came from (0: the first)."""

    __slots__ = ("buffer", "sequence", "timestamp_ns", "dequeued_ns", "bytesused", "source", "_device", "_leases")

    def __init__(self, device: "CaptureDevice", buffer: CaptureBuffer, d: raw.Dequeued,
                 dequeued_ns: int | None = None, source: int = 0):
        self._device = device  # a frame keeps its device alive
        self.source = source
        self.buffer = buffer
        buffer.leased = True
        self.sequence = d.sequence
        self.timestamp_ns = d.timestamp_ns
        self.dequeued_ns = time.monotonic_ns() if dequeued_ns is None else dequeued_ns
        self.bytesused = d.bytesused
        self._leases: set[Lease] = set()

    @property
    def dmabuf(self) -> DmaBuf:
        return self.buffer.dmabuf

    @property
    def format(self) -> raw.Format:
        return self.buffer.format

    def lease(self, holder: str) -> Lease:
        lease = Lease(self, holder)
        self._leases.add(lease)
        return lease

    @property
    def holders(self) -> list[str]:
        return sorted(le.holder for le in self._leases)

    def _release(self, lease: Lease) -> None:
        self._leases.discard(lease)
        if not self._leases:
            self.buffer.leased = False
            self._device.requeue(self.buffer)

    def __repr__(self):
        return f"<Frame seq={self.sequence} buf={self.buffer.index} holders={self.holders}>"


@dataclass
class CaptureStats:
    """What the device object counts; what each buffer meets (dequeues,
    error buffers, refused requeues) the frame queue counts."""
    dequeue_errors: int = 0     # DQBUF failed (the queue is restarted)
    setup_retries: int = 0      # REQBUFS / STREAMON refused once, then retried
    stream_restarts: int = 0

    def add(self, other: "CaptureStats") -> "CaptureStats":
        """Add another device's counts (a camera reopened after a disconnect)."""
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        return self


class CaptureDevice(VideoDevice):
    """Configure, allocate, stream. Use as a context manager: close() stops
    streaming, closes every dma-buf and frees the driver's buffers."""

    __slots__ = ("format", "memory", "buffers", "streaming", "stats", "fps", "queue_owner", "_memory_type",
                 "_allocator", "node", "by_link")

    def __init__(self, fd: int, path: str = "?"):
        super().__init__(fd, path)
        # A camera opened by a link (udev's /dev/v4l/by-id, by-path, or a
        # rule of the user's own) is the camera the link names: after a
        # replug the link is resolved again (sits/pipeline/reconnect.py).
        self.by_link = os.path.islink(path)
        self.node = os.path.realpath(path)
        if not self.cap.is_capture:
            raise DeviceError(f"{path}: not a video capture device ({self.cap.driver} '{self.cap.card}': "
                              f"{', '.join(self.cap.cap_names) or 'no capture capability'})")
        if not self.cap.caps & lib.V4L2_CAP_STREAMING:
            raise DeviceError(f"{path}: {self.cap.driver} cannot stream (no V4L2_CAP_STREAMING)")
        self.format: raw.Format | None = None
        self.memory = None
        self.buffers: list[CaptureBuffer] = []
        self.streaming = False
        self.stats = CaptureStats()
        self.fps = 0.0
        self._memory_type = lib.V4L2_MEMORY_MMAP
        self._allocator = None
        self.queue_owner = None   # the C frame queue that queues and dequeues the buffers

    @property
    def memory_type(self) -> int:
        """V4L2_MEMORY_MMAP or V4L2_MEMORY_DMABUF, as the buffers were requested."""
        return self._memory_type

    @classmethod
    def first(cls) -> "CaptureDevice":
        """The first capture device present, like GStreamer's v4l2src."""
        for path in video_paths():
            try:
                return cls.open(path)
            except DeviceError:
                continue
        raise DeviceError("no V4L2 capture device found (is a camera plugged in, or vivid loaded?)")

    # ----------------------------------------------------------- configure
    def configure(self, code: str | None = None, size: tuple[int, int] | None = None,
                  fps: int | None = None) -> raw.Format:
        """Negotiate the format. The driver's bytesperline/sizeimage are kept
        as they are (stride may exceed width x bpp)."""
        available = [f.fourcc for f in self.formats()]
        current = raw.g_fmt(self.fileno())
        code = code or current.fourcc
        if code not in available:
            raise UsageError(f"{self.path}: format {code} not supported; supported: {' '.join(available)}")
        width, height = size or current.size
        sizes = self.frame_sizes(code)
        if (sizes.discrete or sizes.stepwise) and not sizes.allows(width, height):
            raise UsageError(f"{self.path}: size {width}x{height} not supported for {code}; "
                             f"supported: {sizes.describe()}")
        try:
            fmt = raw.s_fmt(self.fileno(), fourcc(code), width, height)
        except IoctlError as exc:
            raise self._busy(exc) from exc
        if fmt.fourcc != code or fmt.size != (width, height):
            raise UsageError(f"{self.path}: asked for {code} {width}x{height}, "
                             f"driver offers {fmt.fourcc} {fmt.width}x{fmt.height}")
        if fps:
            try:
                self.fps = raw.s_fps(self.fileno(), fps)
            except IoctlError as exc:
                if exc.errno not in (errno.ENOTTY, errno.EINVAL):
                    raise
        self.format = fmt
        return fmt

    # ------------------------------------------------------------ controls
    def controls(self):
        """Its controls, read now (sits.v4l2.controls.Controls)."""
        from sits.v4l2.controls import Controls
        return Controls.read(self.fileno(), self.path)

    def set_controls(self, wanted) -> list:
        """Set controls.requests()' (name, value) pairs: every one checked
        against the camera's ranges first (UsageError naming what the
        first bad one takes, nothing set), then set in order."""
        if not wanted:
            return []
        controls = self.controls()
        resolved = controls.resolve(wanted)
        controls.apply(self.fileno(), resolved)
        return resolved

    # ------------------------------------------------------------- buffers
    def allocate(self, count: int = 4, memory: str = "mmap") -> list[CaptureBuffer]:
        """Create `count` buffers as dma-bufs: exported MMAP buffers, or
        buffers from the system dma-heap / udmabuf imported as DMABUF."""
        if memory not in MEMORY_KINDS:
            raise UsageError(f"unknown memory {memory!r}; use one of {', '.join(MEMORY_KINDS)}")
        if self.buffers:
            raise UsageError("buffers are already allocated")
        fmt = self.format or raw.g_fmt(self.fileno())
        self.format = fmt
        mtype = lib.V4L2_MEMORY_MMAP if memory == "mmap" else lib.V4L2_MEMORY_DMABUF
        try:
            granted, caps = self._retry_once(raw.reqbufs, self.fileno(), count, mtype)
        except IoctlError as exc:
            raise self._busy(exc) from exc
        if granted == 0:
            raise DeviceError(f"{self.path}: driver granted no {memory} buffers")
        self.memory, self._memory_type = memory, mtype
        try:
            if memory == "mmap":
                for i in range(granted):
                    self.buffers.append(self._exported(i, mtype, fmt))
            else:
                self._allocator = self._open_allocator(memory)
                for i in range(granted):
                    self.buffers.append(CaptureBuffer(i, self._allocator.alloc(fmt.sizeimage), fmt))
        except BaseException:
            self.free()
            raise
        return self.buffers

    def _exported(self, index: int, mtype: int, fmt: raw.Format) -> CaptureBuffer:
        """MMAP buffer `index` as a dma-buf; for a compressed format from a
        driver that cannot export (ENOTTY, EINVAL), its mapping."""
        b = raw.querybuf(self.fileno(), index, mtype)
        try:
            return CaptureBuffer(index, DmaBuf(raw.expbuf(self.fileno(), index), b.length), fmt)
        except IoctlError as exc:
            if exc.errno not in (errno.ENOTTY, errno.EINVAL) or not compressed(fmt.fourcc):
                raise
        return CaptureBuffer(index, None, fmt, mapped=mmap.mmap(self.fileno(), b.length, mmap.MAP_SHARED,
                                                                mmap.PROT_READ, offset=b.m.offset))

    def _busy(self, exc: IoctlError) -> Exception:
        """EBUSY from a set-up ioctl means another process owns the queue."""
        if exc.errno == errno.EBUSY:
            return DeviceError(f"{self.path}: device busy (another process is streaming from it)")
        return exc

    @staticmethod
    def _open_allocator(memory: str):
        if memory == "heap":
            from sits.dmabuf.heap import DmaHeap
            return DmaHeap.open("system")
        from sits.dmabuf.udmabuf import Udmabuf
        return Udmabuf.open()

    def free(self) -> None:
        """Close every dma-buf and give the driver's buffers back."""
        if self.streaming:
            try:
                self.stop()
            except OSError:
                pass  # disconnected: the buffers are still ours to close
        for b in self.buffers:
            if b.dmabuf is not None:
                b.dmabuf.close()
            if b.mapped is not None:
                b.mapped.close()
        if self.buffers or self.memory:
            try:
                raw.reqbufs(self.fileno(), 0, self._memory_type)
            except OSError:
                pass  # a disconnected device has nothing left to free
        self.buffers = []
        self.memory = None
        if self._allocator is not None:
            self._allocator.close()
            self._allocator = None

    def requeue(self, buf: CaptureBuffer) -> None:
        """A frame's last lease went: the frame queue decides (another sink
        may still hold the buffer)."""
        if self.queue_owner is not None:
            self.queue_owner.release(buf)

    def _retry_once(self, call, *args):
        """Drivers may refuse a set-up ioctl once (vivid's error injection,
        a transient EBUSY/EIO); one retry, counted."""
        try:
            return call(*args)
        except IoctlError as exc:
            if exc.errno not in (errno.EIO, errno.EINVAL, errno.EBUSY, errno.ENOMEM):
                raise
            self.stats.setup_retries += 1
            return call(*args)

    # ------------------------------------------------------------ streaming
    def start(self) -> None:
        if not self.buffers:
            self.allocate()
        if self.queue_owner is None:
            raise UsageError(f"{self.path}: a frame queue queues its buffers (FrameQueue.attach, or a Pipeline)")
        self.queue_owner.requeue_idle()
        try:
            self._retry_once(raw.streamon, self.fileno())
        except BaseException:
            for b in self.buffers:
                b.queued = False
            raise
        self.streaming = True

    def stop(self) -> None:
        """STREAMOFF: the driver drops every queued buffer (they come back
        to us unfilled); leased frames stay valid until released."""
        if not self.streaming:
            return
        self.streaming = False
        try:
            raw.streamoff(self.fileno())
        finally:
            for b in self.buffers:
                b.queued = False
            if self.queue_owner is not None:
                self.queue_owner.forget_queued()

    def restart(self) -> None:
        """STREAMOFF + STREAMON, requeueing every buffer no consumer holds."""
        self.stop()
        self.stats.stream_restarts += 1
        self.start()

    def dequeue_failed(self, exc: OSError) -> None:
        """The frame queue's DQBUF failed. A disconnection is
        raised; anything else is a fatal queue error (vb2_queue_error), which
        fails every DQBUF until STREAMOFF: restart the queue, keep leased
        buffers."""
        if is_disconnect(exc) or not self.streaming:
            raise exc
        self.stats.dequeue_errors += 1
        self.restart()

    def close(self) -> None:
        if not self.closed:
            try:
                self.free()
            finally:
                super().close()


def is_disconnect(exc: BaseException) -> bool:
    """The device went away (unplugged, or vivid's "Disconnect")."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENODEV, errno.ENXIO)
