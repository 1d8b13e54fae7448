"""FrameQueue: the Python side of the C frame queue (frame_queue.c).

The C struct is the one record of where each capture buffer is: with the
driver, next for the display, committed, on screen, leaving the screen, or
held by Python's consumers. The pipeline calls its step functions as events
arrive (`capture()`, `flip_events()`, ...) or lets `run()` take the steady
state on the same epoll fd. Frames that Python's consumers hold are Frame
objects with leases; while the queue owns a device, a Frame's last lease
going comes here (`release()`, CaptureDevice.queue_owner) and C requeues
the buffer once the display no longer holds it either.
"""
from sits._kernel import ffi, lib
from sits.errors import IoctlError, KernelCallError
from sits.v4l2 import raw
from sits.v4l2.capture import Frame

SAMPLES = 2048   # latency samples between two drains (a drain is every call)
OPS = {lib.SITS_OP_DQBUF: "VIDIOC_DQBUF", lib.SITS_OP_QBUF: "VIDIOC_QBUF",
       lib.SITS_OP_ATOMIC: "DRM_IOCTL_MODE_ATOMIC", lib.SITS_OP_READ: "read(drm)",
       lib.SITS_OP_EPOLL: "epoll_wait"}
NONE, OWN, COPY = lib.SITS_Q_NONE, lib.SITS_Q_OWN, lib.SITS_Q_COPY


class QueueError(Exception):
    """A C step failed: `op` (VIDIOC_QBUF, ...) with `error` (an IoctlError)."""

    def __init__(self, op: int, error: OSError, index: int):
        super().__init__(str(error))
        self.op, self.error, self.index = op, error, index


class FrameQueue:
    def __init__(self, epoll_fd: int):
        self.L = L = ffi.new("struct sits_queue *")
        self._latency = ffi.new("float[]", SAMPLES)
        self._submit = ffi.new("float[]", SAMPLES)
        L.latency_ms, L.submit_ms, L.samples_cap = self._latency, self._submit, SAMPLES
        L.epfd, L.vfd, L.dfd = epoll_fd, -1, -1
        for slot in (L.next, L.pending, L.on_screen, L.retire, L.delivered):
            slot.index, slot.fence = NONE, -1
        L.hand_back_displayed = -1
        self.device = None
        self.frames: dict[int, Frame] = {}   # buffers Python's consumers hold
        self.latencies: list[float] = []
        self.submit_ms: list[float] = []
        self.c_commits = 0     # commits made inside run(): the C loop's share
        self.failed: QueueError | None = None   # a release's QBUF failed: the loop handles it

    # ------------------------------------------------------------ devices
    def attach(self, cap) -> None:
        """Queue `cap`'s buffers from now on (before cap.start())."""
        L = self.L
        if len(cap.buffers) > lib.SITS_Q_MAX_BUFS:
            raise IoctlError(22, f"more than {lib.SITS_Q_MAX_BUFS} capture buffers")
        if self.device is not None and self.device is not cap:
            self.device.queue_owner = None
        L.vfd, L.memory, L.nbufs = cap.fileno(), cap.memory_type, len(cap.buffers)
        for b in cap.buffers:
            L.dmabuf_fd[b.index] = b.dmabuf.fileno()
            L.length[b.index] = b.dmabuf.size
            L.queued[b.index] = L.py_hold[b.index] = L.unqueued[b.index] = 0
        self.device = cap
        cap.queue_owner = self

    def detach(self) -> None:
        """The device is gone or closing: nothing is queued into it any more.
        Its frames that consumers still hold keep coming here when released
        (their holds end, nothing is queued), so that a lost camera can be
        closed once the last goes; attach() takes the next device."""
        self.L.vfd = -1

    # the queue owner's part (CaptureDevice.start/stop/requeue call these)
    def requeue_idle(self) -> None:
        """STREAMON comes next: queue every buffer nothing holds."""
        self.L.sequence_seen = 0
        if lib.sits_queue_requeue_idle(self.L) == lib.SITS_Q_ERROR:
            raise self.error().error

    def forget_queued(self) -> None:
        """STREAMOFF took every queued buffer back from the driver."""
        for i in range(self.L.nbufs):
            self.L.queued[i] = 0

    def release(self, buf) -> None:
        """The last lease of a Python Frame went."""
        if self.frames.get(buf.index) is not None and self.frames[buf.index].buffer is buf:
            del self.frames[buf.index]
        if lib.sits_queue_release(self.L, buf.index) == lib.SITS_Q_ERROR:
            self.failed = self.failed or self.error()   # not raised inside a consumer's release()

    # -------------------------------------------------------------- frames
    def frame(self, slot) -> Frame:
        """The Frame of a slot's buffer: the one Python holds, or a new one
        (Python then holds the buffer until its last lease goes)."""
        index = slot.index
        frame = self.frames.get(index)
        if frame is None:
            d = raw.Dequeued(index, slot.sequence, slot.timestamp_ns, slot.bytesused, 0)
            frame = Frame(self.device, self.device.buffers[index], d, dequeued_ns=slot.dequeued_ns)
            self.frames[index] = frame
            self.L.py_hold[index] = 1
        return frame

    def take_delivered(self) -> Frame | None:
        """The frame C dequeued for Python's consumers, if any (its hold is Python's)."""
        slot = self.L.delivered
        if slot.index == NONE:
            return None
        frame = self.frame(slot)
        slot.index = NONE
        return frame

    def idle(self, index: int) -> bool:
        """Nothing holds the buffer (display slots, Python, the driver)."""
        return not lib.sits_queue_held(self.L, index) and not self.L.queued[index]

    # --------------------------------------------------------------- steps
    def run(self, timeout_ms: int) -> int:
        before = self.L.submit_n
        code = lib.sits_queue_run(self.L, max(0, int(timeout_ms)))
        self.c_commits += self.L.submit_n - before
        return self._drain(code)

    def capture(self) -> int:
        return self._drain(lib.sits_queue_capture(self.L))

    def flip_events(self) -> int:
        return self._drain(lib.sits_queue_flip_events(self.L))

    def try_commit(self) -> int:
        return self._drain(lib.sits_queue_try_commit(self.L))

    def committed(self, kind: int, fence, started_ns: int) -> None:
        """Python made the commit (user_data tag + 1) of the next frame
        (kind: its index, or COPY) or of a buffer of its own (OWN); C owns
        the out-fence from now on."""
        fd = fence.detach() if fence is not None else -1
        lib.sits_queue_committed(self.L, kind, fd, started_ns)
        self._drain(0)

    def retired(self) -> int:
        return self._drain(lib.sits_queue_retired(self.L))

    def drop_next(self) -> int:
        return self._drain(lib.sits_queue_drop_next(self.L))

    def _drain(self, code: int) -> int:
        L = self.L
        if L.latency_n:
            self.latencies.extend(ffi.unpack(self._latency, L.latency_n))
            L.latency_n = 0
        if L.submit_n:
            self.submit_ms.extend(ffi.unpack(self._submit, L.submit_n))
            L.submit_n = 0
        return code

    def error(self) -> QueueError:
        """What the last SITS_Q_ERROR was."""
        L = self.L
        op = OPS.get(L.err_op, "frame queue")
        err = (IoctlError if L.err_op in (lib.SITS_OP_DQBUF, lib.SITS_OP_QBUF, lib.SITS_OP_ATOMIC)
               else KernelCallError)(L.err, op)
        return QueueError(L.err_op, err, L.err_index)

    def close_fences(self) -> None:
        """Close the out-fences C still owns (shutdown)."""
        import os
        for slot in (self.L.pending, self.L.on_screen, self.L.retire):
            if slot.fence >= 0:
                try:
                    os.close(slot.fence)
                except OSError:
                    pass
                slot.fence = -1
