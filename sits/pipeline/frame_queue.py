"""FrameQueue: the Python side of the C frame queue (frame_queue.c), and the
only Python that touches its struct.

The C struct is the one record of where each capture buffer is: with the
driver, or held by one or more sinks (a bit each). Sinks plug in with
`add_sink()`: a C half (struct sits_sink_ops, sits/pipeline/sinks/*.c) with
a state of its own that its Python half owns, or none (Python's own sink:
frames handed to Python, SITS_Q_DELIVER). The pipeline calls the queue's
step functions as events arrive (`capture()`) or lets `run()` take the
steady state on the same epoll fd. When a sink's C half asks its Python
half to act (SITS_Q_SINK), `asking()` says which. Frames that Python holds
are Frame objects with leases; while the queue owns a device (the camera,
`attach()`, and any other, `add_device()`), a Frame's last lease going
comes here (`release()`, through the device's queue_owner) and C requeues
the buffer once no other sink holds it either.
"""
import os
import time

from sits._kernel import ffi, lib
from sits.errors import DeviceError, IoctlError, KernelCallError, UsageError
from sits.v4l2 import raw
from sits.v4l2.capture import Frame

RECORDS = 512    # timeline records between two drains (run() stops well before: SITS_Q_FULL)
OPS = {lib.SITS_OP_DQBUF: "VIDIOC_DQBUF", lib.SITS_OP_QBUF: "VIDIOC_QBUF",
       lib.SITS_OP_ATOMIC: "DRM_IOCTL_MODE_ATOMIC", lib.SITS_OP_READ: "read",
       lib.SITS_OP_EPOLL: "epoll_wait", lib.SITS_OP_CUDA: "cuGraphLaunch/cuStreamQuery",
       lib.SITS_OP_CHECK: "buffer conservation", lib.SITS_OP_STAGE: "a stage's eventfd"}
#: what sits_queue_check() found (frame_queue.h's SITS_CHECK_)
CHECKS = {lib.SITS_CHECK_DRIVER_AND_HELD: "is with the source and held by a sink",
          lib.SITS_CHECK_DRIVER_AND_RETRY: "is with the source and waits for a retried QBUF",
          lib.SITS_CHECK_NOWHERE: "is with no one while the source streams (lost)",
          lib.SITS_CHECK_PORT_UNHELD: "waits in a port without that sink's hold",
          lib.SITS_CHECK_PORT_TWICE: "waits twice in one port",
          lib.SITS_CHECK_READ_UNHELD: "is read by a sink's C half without its hold",
          lib.SITS_CHECK_DELIVERED_UNHELD: "was handed to Python without the sink's hold"}
#: with this set in the environment every step of every frame queue ends
#: with the conservation check (the test tiers set it)
CHECK_ENV = "SITS_QUEUE_CHECK"
NONE = lib.SITS_Q_NONE
PORT_DEPTH = lib.SITS_Q_PORT_DEPTH   # the most frames a sink's port keeps
#: a port's policies by name (frame_queue.h's SITS_POLICY_)
POLICIES = {"latest": lib.SITS_POLICY_LATEST, "drop-oldest": lib.SITS_POLICY_DROP_OLDEST,
            "drop-newest": lib.SITS_POLICY_DROP_NEWEST, "block": lib.SITS_POLICY_BLOCK}


class QueueError(Exception):
    """A C step failed: `op` (VIDIOC_QBUF, ...) with `error` (an IoctlError)."""

    def __init__(self, op: int, error: OSError, index: int, source: int = 0):
        super().__init__(str(error))
        self.op, self.error, self.index, self.source = op, error, index, source


class DeviceOwner:
    """The frame queue as one device's `queue_owner`: the device's calls
    (CaptureDevice, SyntheticCamera), in its source's numbering."""

    def __init__(self, queue: "FrameQueue", source: int, half):
        self.queue, self.id = queue, source
        self.source = half   # the source's Python half (queue_sources.py)

    def requeue_idle(self) -> None:
        self.queue.requeue_idle(self.id)

    def forget_queued(self) -> None:
        self.queue.forget_queued(self.id)

    def release(self, buf) -> None:
        self.queue.release(buf, self.id)

    def number(self, index: int) -> int:
        """The queue's number of the device's buffer `index`."""
        return self.queue.number(self.id, index)


class FrameQueue:
    def __init__(self, epoll_fd: int):
        #: the C frame queue (struct sits_queue): this object is its one owner
        self.c_queue = L = ffi.new("struct sits_queue *")
        L.epfd = epoll_fd
        L.check = int(bool(os.environ.get(CHECK_ENV)))
        L.delivered.index = NONE
        self.device = None     # the camera
        self.source = None     # the camera's half (queue_sources.py), while attached
        self.camera = None     # the camera's source id (the first source)
        self._camera_bufs = 0  # the buffers numbered for it
        self.devices: dict[int, object] = {}   # source id -> the device it drives (the camera's too)
        self._halves_of_sources: dict[int, object] = {}   # source id -> its Python half (kept alive)
        self._value_slots: dict[str, int] = {}   # a per-frame value's name -> its slot
        self.frames: dict[int, Frame] = {}   # buffers Python holds
        self.failed: QueueError | None = None   # a release's QBUF failed: the loop handles it
        self.timeline = None   # a Timeline (timeline.py) the frames' records go to
        self._halves: dict[int, object] = {}    # sink id -> its Python half
        # Python's own sink: the frames Python's consumers are offered, and
        # every buffer a Frame object holds
        self.python_sink = self.add_sink(None, None, "block", lib.SITS_Q_PORT_DEPTH, offered=False)

    # -------------------------------------------------------------- sinks
    def add_sink(self, ops, state, policy: str, depth: int, half=None, offered: bool = True,
                 takes: int | tuple[int, ...] = 0) -> int:
        """A sink from now on: `ops` its C half (NULL: Python's), `state`
        the C half's struct (its Python half keeps it alive), its port's
        `policy` and `depth`, the source (or the tuple of sources) whose
        frames it `takes`; `half` answers when its C half asks
        (`asking()`). Its id."""
        if policy not in POLICIES:
            raise UsageError(f"unknown drop policy {policy!r}; use one of {', '.join(POLICIES)}")
        mask = 0
        for source in (takes,) if isinstance(takes, int) else takes:
            mask |= 1 << source
        sink = lib.sits_queue_add_sink(self.c_queue, ops if ops is not None else ffi.NULL,
                                       state if state is not None else ffi.NULL, POLICIES[policy], depth,
                                       int(offered), mask)
        if sink < 0:
            raise UsageError(f"a sink with policy {policy} and depth {depth}: at most "
                             f"{lib.SITS_Q_MAX_SINKS} sinks, depth 1 to {lib.SITS_Q_PORT_DEPTH}")
        self._halves[sink] = half
        return sink

    def add_source(self, ops, state, nbufs: int, counted: bool, half=None) -> int:
        """A source from now on, with `nbufs` buffers numbered after those
        before it: `ops` its C half, `state` that half's struct (its Python
        half, `half`, keeps it alive); `counted`: its frames count as
        captured (a camera's; a stage's frames are a camera's frames made
        into others). Its id; its fd comes with set_source_fd()."""
        source = lib.sits_queue_add_source(self.c_queue, nbufs, int(counted))
        if source < 0:
            raise UsageError(f"a source of {nbufs} buffers: at most {lib.SITS_Q_MAX_SOURCES} sources "
                             f"and {lib.SITS_Q_MAX_BUFS} buffers in all")
        src = self.c_queue.sources[source]
        src.ops, src.state = ops, state
        self._halves_of_sources[source] = half
        return source

    def stages(self) -> list:
        """The Python halves of its stages (the sources whose frames are
        others' frames made into buffers of their own), whoever set them up."""
        return [half for source, half in self._halves_of_sources.items()
                if half is not None and not self.c_queue.sources[source].counted]

    def set_source_fd(self, source: int, fd: int) -> None:
        """`source`'s fd: readable when it has filled a buffer (-1: nothing is queued into it)."""
        self.c_queue.sources[source].fd = fd

    def _source(self, source: int | None) -> int:
        """`source`, the camera's when None."""
        return self.camera if source is None else source

    def number(self, source: int, index: int) -> int:
        """The queue's number of `source`'s own buffer `index` (its V4L2 index)."""
        return self.c_queue.sources[source].first + index

    def buffers_of(self, source: int) -> range:
        """`source`'s buffers in the queue's numbering."""
        src = self.c_queue.sources[source]
        return range(src.first, src.first + src.nbufs)

    def offer(self, sink: int, on: bool) -> None:
        """Offer `sink` every frame (or no more frames: it keeps what it holds)."""
        self.c_queue.sinks[sink].offered = int(on)

    def sink_fd(self, sink: int, fd: int) -> None:
        """`sink`'s fd: run() wakes for it while its C half wants (want_fd)."""
        s = self.c_queue.sinks[sink]
        s.fd, s.fd_watched = fd, 0

    def sink_fd_watched(self, sink: int, watched: bool | None = None) -> bool:
        """Whether `sink`'s fd is in the epoll set; `watched`: Python put it
        there (or took it out) itself."""
        s = self.c_queue.sinks[sink]
        if watched is not None:
            s.fd_watched = int(watched)
        return bool(s.fd_watched)

    def set_ready(self, sink: int, ready: bool) -> None:
        """A Python sink's Python half takes a frame now (or not)."""
        self.c_queue.sinks[sink].ready = int(ready)

    def sink_counts(self, sink: int) -> dict:
        s = self.c_queue.sinks[sink]
        return {"taken": s.taken, "dropped": s.dropped, "waiting": s.port_n}

    def holds(self, sink: int, index: int) -> bool:
        """`sink` holds buffer `index` (works on it, or it waits in its port)."""
        return bool(self.c_queue.holds[index] >> sink & 1)

    def holding(self, sink: int) -> bool:
        """`sink` holds a buffer."""
        return any(self.holds(sink, i) for i in range(self.c_queue.nbufs))

    def release_all(self, sink: int) -> None:
        """`sink` stops: it lets go of every buffer it holds or that waits for it."""
        if lib.sits_queue_release_all(self.c_queue, sink) == lib.SITS_Q_ERROR:
            self.failed = self.failed or self.error()

    def next_deadline(self) -> float | None:
        """Seconds until a sink's C half wants its deadline call (deadlines()); None: none."""
        due = lib.sits_queue_next_deadline(self.c_queue)
        return None if not due else max(0.0, due / 1e9 - time.monotonic())

    def deadlines(self) -> int:
        """The sinks whose deadline passed are called (Python's loop; run() does it itself)."""
        return self._drain(lib.sits_queue_deadlines(self.c_queue))

    def asking(self):
        """The Python half whose C half returned SITS_Q_SINK."""
        return self._halves[self.c_queue.asking]

    def pump(self, sink: int) -> int:
        return self._drain(lib.sits_queue_pump(self.c_queue, sink))

    # ------------------------------------------------------------ devices
    def attach(self, cap) -> None:
        """Queue `cap`'s buffers from now on (before cap.start()): a V4L2
        CaptureDevice, or a timer source (SyntheticCamera); `source` is its
        half (sits/pipeline/queue_sources.py)."""
        from sits.pipeline.queue_sources import half_of
        L = self.c_queue
        n = len(cap.buffers)
        if self.device is not None and self.device is not cap:
            self.device.queue_owner = None
        half = half_of(cap)
        if self.camera is None:   # the first source: its buffers are numbered first, as the device's
            if L.nsources:
                raise UsageError("the camera is the frame queue's first source")
            self.camera = self.add_source(half.ops, half.state, n, counted=True, half=half)
            self._camera_bufs = n
        elif n > self._camera_bufs:   # a camera come back: the numbers it had
            raise UsageError(f"{n} capture buffers after a reconnect; the camera had {self._camera_bufs}")
        src = L.sources[self.camera]
        src.ops, src.state, src.nbufs = half.ops, half.state, n
        self._halves_of_sources[self.camera] = self.source = half
        src.fd = cap.fileno()
        for b in cap.buffers:
            L.queued[b.index] = L.unqueued[b.index] = L.holds[b.index] = 0
        self.device = self.devices[self.camera] = cap
        cap.queue_owner = DeviceOwner(self, self.camera, half)

    def add_device(self, cap) -> int:
        """Queue another device's buffers from now on (before cap.start()),
        a source of its own after the camera, its frames counted as
        captured: a second camera, a timer source. Its source id."""
        from sits.pipeline.queue_sources import half_of
        if self.camera is None:
            raise UsageError("the camera is the frame queue's first source: attach() it first")
        half = half_of(cap)
        source = self.add_source(half.ops, half.state, len(cap.buffers), counted=True, half=half)
        self.set_source_fd(source, cap.fileno())
        self.devices[source] = cap
        cap.queue_owner = DeviceOwner(self, source, half)
        return source

    def source_fd(self, source: int | None = None) -> int:
        """The fd of `source` (the camera by default) whose readiness means
        a frame (DQBUF, or a timer tick); -1: nothing is queued into it."""
        return self.c_queue.sources[self._source(source)].fd

    def detach(self, source: int | None = None) -> None:
        """The device of `source` (the camera by default) is gone or
        closing: nothing is queued into it any more. Its frames that sinks
        still hold keep coming here when let go (their holds end, nothing is
        queued), so that a lost camera can be closed once the last goes;
        attach() takes the camera's next device. Its frames' records are
        never requeued."""
        source = self._source(source)
        self.c_queue.sources[source].fd = -1
        if self.timeline is not None:
            lib.sits_queue_timeline_device_gone(self.c_queue, source)

    # the queue owner's part (CaptureDevice.start/stop/requeue call these)
    def requeue_idle(self, source: int | None = None) -> None:
        """STREAMON comes next: queue every buffer of `source` (the camera's
        by default) that nothing holds."""
        if lib.sits_queue_requeue_idle(self.c_queue, self._source(source)) == lib.SITS_Q_ERROR:
            raise self.error().error

    def forget_queued(self, source: int | None = None) -> None:
        """STREAMOFF took every queued buffer back from the driver."""
        lib.sits_queue_forget_queued(self.c_queue, self._source(source))

    def release(self, buf, source: int | None = None) -> None:
        """The last lease of a Python Frame of `source` (the camera by default) went."""
        index = self.number(self._source(source), buf.index)
        if self.frames.get(index) is not None and self.frames[index].buffer is buf:
            del self.frames[index]
        if self._drain(lib.sits_queue_release(self.c_queue, self.python_sink, index)) == lib.SITS_Q_ERROR:
            self.failed = self.failed or self.error()   # not raised inside a consumer's release()

    def with_driver(self, source: int | None = None) -> int:
        """Buffers `source` (the camera by default) may fill now."""
        return lib.sits_queue_with_driver(self.c_queue, self._source(source))

    def held(self, index: int) -> bool:
        """Some sink holds buffer `index`."""
        return bool(lib.sits_queue_held(self.c_queue, index))

    # ------------------------------------------------------------ counts
    @property
    def captured(self) -> int:
        return self.c_queue.captured

    @property
    def capture_fps(self) -> float:
        """Frames captured a second, between the first frame's dequeue and the last's (0: fewer than two)."""
        L = self.c_queue
        span = L.last_frame_ns - L.first_frame_ns
        return (L.captured - 1) / span * 1e9 if L.captured > 1 and span > 0 else 0.0

    @property
    def last_frame_ns(self) -> int:
        """When the last frame was dequeued (0: none yet)."""
        return self.c_queue.last_frame_ns

    @property
    def wakeups(self) -> int:
        return self.c_queue.wakeups

    @property
    def frames_limit(self) -> int:
        return self.c_queue.frames_limit

    @frames_limit.setter
    def frames_limit(self, n: int) -> None:
        """run() returns SITS_Q_FRAMES once this many frames were captured (0: no limit)."""
        self.c_queue.frames_limit = n

    def source_counts(self, source: int | None = None) -> dict:
        """A source's counts (the camera's by default; V4L2's: dequeues,
        error buffers, refused requeues, skipped sequence numbers)."""
        if source is None and self.camera is None:
            return {"captured": 0, "dequeued": 0, "buffer_errors": 0, "requeue_errors": 0, "sequence_gaps": 0,
                    "unqueued_fills": 0}
        src = self.c_queue.sources[self._source(source)]
        return {"captured": src.captured, "dequeued": src.dequeued, "buffer_errors": src.buffer_errors,
                "requeue_errors": src.requeue_errors, "sequence_gaps": src.sequence_gaps,
                "unqueued_fills": src.unqueued_fills}

    def blocked(self, source: int | None = None) -> bool:
        """A blocking sink of `source` (the camera by default) has a full
        port: the source must not be dequeued."""
        return bool(lib.sits_queue_blocked(self.c_queue, self._source(source)))

    # ------------------------------------------------------------ timeline
    def record_timeline(self, timeline) -> None:
        """Time every frame's stages from the next capture on, into `timeline`."""
        L = self.c_queue
        self.timeline = timeline
        self._records = ffi.new("struct sits_frame[]", RECORDS)
        L.records, L.records_cap, L.timeline = self._records, RECORDS, 1

    def end_timeline(self) -> dict | None:
        """The run ended: the records still open go as they are, the file
        is closed; what was written (and lost, which should never be)."""
        timeline = self.timeline
        if timeline is None:
            return None
        lib.sits_queue_timeline_end(self.c_queue)
        self._drain(0)
        self.timeline = None
        timeline.close()
        return {"file": timeline.path, "records": timeline.written, "lost": self.c_queue.records_lost}

    def cuda_stage(self, index: int, done_ns: int | None = None) -> None:
        """The CUDA consumer launched (done_ns None: now) or completed the
        conversion of the frame in buffer `index` (a frame Python holds)."""
        if self.timeline is not None:
            lib.sits_queue_timeline_cuda(self.c_queue, index, int(done_ns is not None), done_ns or 0)

    # -------------------------------------------------------------- frames
    def frame(self, index: int) -> Frame:
        """The Frame of buffer `index` (out of the driver): the one Python
        holds, or a new one (Python's sink then holds the buffer until its
        last lease goes)."""
        frame = self.frames.get(index)
        if frame is None:
            L = self.c_queue
            f = L.frames[index]
            source = L.buffer_source[index]
            device = self.devices[source]
            buf = device.buffers[index - L.sources[source].first]
            d = raw.Dequeued(buf.index, f.sequence, f.timestamp_ns, f.bytesused, 0)
            frame = Frame(device, buf, d, dequeued_ns=f.dequeued_ns, source=source)
            self.frames[index] = frame
            lib.sits_queue_hold(self.c_queue, self.python_sink, index)
        return frame

    def sequence(self, index: int) -> int:
        """The sequence number of the frame in buffer `index` (out of the driver)."""
        return self.c_queue.frames[index].sequence

    def identity(self, index: int) -> tuple[int, int]:
        """The frame in buffer `index`: (its source, its sequence number),
        the same in a buffer a stage made it into."""
        f = self.c_queue.frames[index]
        return f.source, f.sequence

    # ----------------------------------------------------- per-frame values
    def value_slot(self, name: str) -> int:
        """The slot of the per-frame value `name`, one holder's for another
        (say the overlay's drawing for the display): the same slot for
        every holder that asks by that name."""
        slot = self._value_slots.get(name)
        if slot is None:
            if len(self._value_slots) >= lib.SITS_Q_VALUES:
                raise UsageError(f"per-frame value {name!r}: at most {lib.SITS_Q_VALUES} "
                                 f"({', '.join(self._value_slots)} taken)")
            slot = self._value_slots[name] = len(self._value_slots)
        return slot

    def set_value(self, index: int, slot: int, value: int) -> None:
        """The frame in buffer `index` (held) carries `value` in `slot` from now on."""
        self.c_queue.frames[index].values[slot] = value

    def value(self, index: int, slot: int) -> int:
        """The value in `slot` of the frame in buffer `index` (0: none set)."""
        return self.c_queue.frames[index].values[slot]

    def deliveries(self):
        """The frames C hands to Python's sinks, as (frame, sink), one after
        another while a ready sink has one waiting: from each, the Frame
        holds the buffer (until its last lease goes), not the sink."""
        L = self.c_queue
        while True:
            delivered = L.delivered
            if delivered.index == NONE:
                for sink in range(L.nsinks):
                    s = L.sinks[sink]
                    if s.ops == ffi.NULL and s.ready and s.port_n:
                        lib.sits_queue_pump(L, sink)
                        break
                else:
                    return
                continue
            index, sink = delivered.index, L.delivered_sink
            delivered.index = NONE
            frame = self.frame(index)
            lib.sits_queue_release(L, sink, index)
            yield frame, sink

    def half(self, sink: int):
        """The Python half of `sink`."""
        return self._halves[sink]

    # --------------------------------------------------------------- steps
    def run(self, timeout_ms: int) -> int:
        return self._drain(lib.sits_queue_run(self.c_queue, max(0, int(timeout_ms))))

    def capture(self, source: int | None = None) -> int:
        """`source` (the camera by default) woke: its frame, if one is there."""
        return self._drain(lib.sits_queue_capture(self.c_queue, self._source(source)))

    def ask(self, fn, *args):
        """A sink's C question about this queue (fn(c_queue, *args)): no step."""
        return fn(self.c_queue, *args)

    def step(self, fn, *args) -> int:
        """A sink's C call on this queue (fn(L, *args)), drained as every step."""
        return self._drain(fn(self.c_queue, *args))

    def _drain(self, code: int) -> int:
        L = self.c_queue
        if L.check and code != lib.SITS_Q_ERROR:
            code = lib.sits_queue_check(L) or code
        if L.records_n:
            self.timeline.add(self._records, L.records_n)
            L.records_n = 0
        return code

    def error(self) -> QueueError:
        """What the last SITS_Q_ERROR was."""
        L = self.c_queue
        op = OPS.get(L.err_op, "frame queue")
        if L.err_op == lib.SITS_OP_CUDA and L.err == lib.SITS_CU_STAMP_MISSING:
            err = DeviceError(f"buffer {L.err_index}'s conversion ended without its end stamp "
                              "(the stream is idle): the graph did not run to its end")
        elif L.err_op == lib.SITS_OP_CHECK:
            err = AssertionError(f"frame queue: buffer {L.err_index} {CHECKS.get(L.err, L.err)}")
        elif L.err_op == lib.SITS_OP_CUDA:   # err is a CUresult
            err = DeviceError(f"{op}: CUresult {L.err} (buffer {L.err_index})")
        else:
            err = (IoctlError if L.err_op in (lib.SITS_OP_DQBUF, lib.SITS_OP_QBUF, lib.SITS_OP_ATOMIC)
                   else KernelCallError)(L.err, op)
        return QueueError(L.err_op, err, L.err_index, L.err_source)
