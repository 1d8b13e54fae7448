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
import collections

from sits._kernel import ffi, lib
from sits.ebpf.histogram import SLOTS, Histogram
from sits.errors import DeviceError, IoctlError, KernelCallError, UsageError
from sits.pipeline.stats import CUDA_LATENCY_WINDOW
from sits.v4l2 import raw
from sits.v4l2.capture import Frame

SAMPLES = 2048   # CUDA latency samples between two drains (a drain is every call)
RECORDS = 512    # timeline records between two drains (run() stops well before: SITS_Q_FULL)
OPS = {lib.SITS_OP_DQBUF: "VIDIOC_DQBUF", lib.SITS_OP_QBUF: "VIDIOC_QBUF",
       lib.SITS_OP_ATOMIC: "DRM_IOCTL_MODE_ATOMIC", lib.SITS_OP_READ: "read",
       lib.SITS_OP_EPOLL: "epoll_wait", lib.SITS_OP_CUDA: "cuGraphLaunch/cuStreamQuery"}
NONE, OWN, COPY = lib.SITS_Q_NONE, lib.SITS_Q_OWN, lib.SITS_Q_COPY


class QueueError(Exception):
    """A C step failed: `op` (VIDIOC_QBUF, ...) with `error` (an IoctlError)."""

    def __init__(self, op: int, error: OSError, index: int):
        super().__init__(str(error))
        self.op, self.error, self.index = op, error, index


class FrameQueue:
    def __init__(self, epoll_fd: int):
        self.L = L = ffi.new("struct sits_queue *")
        self._latency_slots = ffi.new("uint32_t[]", SLOTS)
        self._submit_slots = ffi.new("uint32_t[]", SLOTS)
        self._cuda_latency = ffi.new("float[]", SAMPLES)
        self._cuda_release = ffi.new("float[]", SAMPLES)
        L.latency.slots, L.submit.slots, L.samples_cap = self._latency_slots, self._submit_slots, SAMPLES
        L.cuda_latency_ms, L.cuda_release_ms = self._cuda_latency, self._cuda_release
        L.epfd, L.vfd, L.dfd = epoll_fd, -1, -1
        for slot in (L.next, L.pending, L.on_screen, L.retire, L.delivered):
            slot.index, slot.fence = NONE, -1
        L.hand_back_displayed = -1
        self.device = None
        self.frames: dict[int, Frame] = {}   # buffers Python's consumers hold
        # The CUDA consumer's windows of its last samples, as its own.
        self.cuda_latencies: collections.deque = collections.deque(maxlen=CUDA_LATENCY_WINDOW)  # capture -> done on the GPU
        self.cuda_release_ms: collections.deque = collections.deque(maxlen=CUDA_LATENCY_WINDOW)  # done -> released
        self.c_commits = 0     # commits made inside run(): the C loop's share
        self.failed: QueueError | None = None   # a release's QBUF failed: the loop handles it
        self.timeline = None   # a Timeline (timeline.py) the frames' records go to

    # ------------------------------------------------------------ devices
    def attach(self, cap) -> None:
        """Queue `cap`'s buffers from now on (before cap.start()): a V4L2
        CaptureDevice, or a timer source (its `timer_fd`: SyntheticCamera)."""
        L = self.L
        if len(cap.buffers) > lib.SITS_Q_MAX_BUFS:
            raise UsageError(f"{len(cap.buffers)} capture buffers; at most {lib.SITS_Q_MAX_BUFS}")
        if self.device is not None and self.device is not cap:
            self.device.queue_owner = None
        timer = getattr(cap, "timer_fd", None)
        L.timer = int(timer is not None)
        L.vfd = timer if timer is not None else cap.fileno()
        L.memory = 0 if timer is not None else cap.memory_type
        L.nbufs = len(cap.buffers)
        for b in cap.buffers:
            if timer is None:
                L.dmabuf_fd[b.index] = b.dmabuf.fileno()
                L.length[b.index] = b.dmabuf.size
            L.queued[b.index] = L.py_hold[b.index] = L.unqueued[b.index] = L.cuda_hold[b.index] = 0
        self.device = cap
        cap.queue_owner = self

    @property
    def source_fd(self) -> int:
        """The fd whose readiness means a frame (DQBUF, or a timer tick)."""
        return self.L.vfd

    def timer_started(self, first_ns: int, period_ns: int) -> None:
        """The timer source's clock: tick k lands at first_ns + k * period_ns."""
        L = self.L
        L.timer_first_ns, L.timer_period_ns, L.timer_ticks = first_ns, period_ns, 0

    def detach(self) -> None:
        """The device is gone or closing: nothing is queued into it any more.
        Its frames that consumers still hold keep coming here when released
        (their holds end, nothing is queued), so that a lost camera can be
        closed once the last goes; attach() takes the next device. Its
        frames' records are never requeued."""
        self.L.vfd = -1
        if self.timeline is not None:
            lib.sits_queue_timeline_device_gone(self.L)

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

    # ------------------------------------------------------------ timeline
    def record_timeline(self, timeline) -> None:
        """Time every frame's stages from the next capture on, into `timeline`."""
        L = self.L
        self.timeline = timeline
        self._records = ffi.new("struct sits_q_record[]", RECORDS)
        L.records, L.records_cap, L.timeline = self._records, RECORDS, 1

    def end_timeline(self) -> dict | None:
        """The run ended: the records still open go as they are, the file
        is closed; what was written (and lost, which should never be)."""
        timeline = self.timeline
        if timeline is None:
            return None
        lib.sits_queue_timeline_end(self.L)
        self._drain(0)
        self.timeline = None
        timeline.close()
        return {"file": timeline.path, "records": timeline.written, "lost": self.L.records_lost}

    def cuda_stage(self, index: int, done_ns: int | None = None) -> None:
        """The CUDA consumer launched (done_ns None: now) or completed the
        conversion of the frame in buffer `index` (a frame Python holds)."""
        if self.timeline is not None:
            lib.sits_queue_timeline_cuda(self.L, index, int(done_ns is not None), done_ns or 0)

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

    def display_holds(self, index: int) -> bool:
        """The display has the buffer: next, committed, on screen or leaving it."""
        L = self.L
        return index in (L.next.index, L.pending.index, L.on_screen.index, L.retire.index)

    # ---------------------------------------------------------- histograms
    # Whole-run histograms, bounded however long the run (log-linear,
    # quantiles within 1/16), filled by the C every frame.
    @property
    def latency(self) -> Histogram:
        """Capture (the V4L2 timestamp) -> on screen (the flip event)."""
        return self._histogram(self.L.latency, self._latency_slots)

    @property
    def submit(self) -> Histogram:
        """Dequeue -> commit."""
        return self._histogram(self.L.submit, self._submit_slots)

    @staticmethod
    def _histogram(h, slots) -> Histogram:
        counts = ffi.unpack(slots, SLOTS)
        return Histogram(h.count, h.sum_ns, h.max_ns, {s: n for s, n in enumerate(counts) if n})

    # --------------------------------------------------------------- steps
    def run(self, timeout_ms: int) -> int:
        before = self.L.submit.count
        code = lib.sits_queue_run(self.L, max(0, int(timeout_ms)))
        self.c_commits += self.L.submit.count - before
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

    def attach_cuda(self, graphs: dict, stream: int, entry_points, stamps: int) -> None:
        """Convert every frame in C from now on: `graphs` maps a buffer index
        to its conversion's CUgraphExec, launched on `stream`, whose first
        and last nodes write the buffer's stamp at `stamps` (host memory,
        SITS_CU_STAMP_WORDS u64 a buffer index; sits/cuda/stamp.py);
        `entry_points`: the driver's cuGraphLaunch and cuStreamQuery as
        addresses."""
        L = self.L
        for index, exec_ in graphs.items():
            L.cu_graph[index] = exec_
        L.cu_stream = stream
        L.cu_graph_launch, L.cu_stream_query = entry_points
        L.cu_stamps = ffi.cast("uint64_t *", stamps)
        L.cu_launched = L.cu_completed = L.cu_start_bound_ns = L.cu_last_begin = 0
        L.cuda = 1

    def detach_cuda(self) -> None:
        self.L.cuda = 0

    def cuda_done(self) -> int:
        return self._drain(lib.sits_queue_cuda_done(self.L))

    def cuda_in_flight(self) -> int:
        return self.L.cu_launched - self.L.cu_completed

    def retired(self) -> int:
        return self._drain(lib.sits_queue_retired(self.L))

    def drop_next(self) -> int:
        return self._drain(lib.sits_queue_drop_next(self.L))

    def _drain(self, code: int) -> int:
        L = self.L
        if L.cuda_latency_n:
            self.cuda_latencies.extend(ffi.unpack(self._cuda_latency, L.cuda_latency_n))
            self.cuda_release_ms.extend(ffi.unpack(self._cuda_release, L.cuda_latency_n))
            L.cuda_latency_n = 0
        if L.records_n:
            self.timeline.add(self._records, L.records_n)
            L.records_n = 0
        return code

    def error(self) -> QueueError:
        """What the last SITS_Q_ERROR was."""
        L = self.L
        op = OPS.get(L.err_op, "frame queue")
        if L.err_op == lib.SITS_OP_CUDA and L.err == lib.SITS_CU_STAMP_MISSING:
            err = DeviceError(f"buffer {L.err_index}'s conversion ended without its end stamp "
                              "(the stream is idle): the graph did not run to its end")
        elif L.err_op == lib.SITS_OP_CUDA:   # err is a CUresult
            err = DeviceError(f"{op}: CUresult {L.err} (buffer {L.err_index})")
        else:
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
