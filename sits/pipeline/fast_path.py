"""The C flip loop (csrc/sits_flip_loop.h) and the hand-over between it and
CaptureToKms.

The C loop runs the steady state: frames only the display holds, zero-copy,
no writeback due. CaptureToKms enters it when its own state is that simple
and leaves it for anything else (a writeback commit, a signal, a uevent, a
fence to poll, an error); `leave()` turns the struct back into Frames,
display leases and SyncFiles, so the Python loop goes on exactly where C
stopped. Between `enter()` and `leave()` the buffers and fences named in the
struct are C's: nothing in Python holds them.
"""
import select

from sits._kernel import ffi, lib
from sits.dmabuf.sync_file import SyncFile
from sits.errors import IoctlError, KernelCallError
from sits.v4l2 import raw
from sits.v4l2.capture import Frame

SAMPLES = 2048   # latency samples between two drains (a drain is every call)
OPS = {lib.SITS_OP_DQBUF: "VIDIOC_DQBUF", lib.SITS_OP_QBUF: "VIDIOC_QBUF",
       lib.SITS_OP_ATOMIC: "DRM_IOCTL_MODE_ATOMIC", lib.SITS_OP_READ: "read(drm)",
       lib.SITS_OP_EPOLL: "epoll_wait"}
STAYS = (lib.SITS_LOOP_TIMEOUT, lib.SITS_LOOP_FULL)   # results after which C keeps the state


class FlipLoop:
    """One per CaptureToKms run; `active` while C owns the state."""

    def __init__(self, pipeline):
        self.p = pipeline
        self.L = ffi.new("struct sits_flip_loop *")
        self._latency = ffi.new("float[]", SAMPLES)
        self._submit = ffi.new("float[]", SAMPLES)
        self.L.latency_ms, self.L.submit_ms, self.L.samples_cap = self._latency, self._submit, SAMPLES
        self.active = False
        self.commits = 0    # frames the C loop committed

    # ----------------------------------------------------------- entering
    def usable(self) -> bool:
        """Is the pipeline's state one the C loop can take over?"""
        p = self.p
        cap = p.cap
        if not (p.zero_copy and p._capturing and p._stop_reason is None and cap is not None
                and cap.streaming and not p._wb_pending and not p._fences and not p._lost
                and p._wait_id is None and not p._freeze_wanted and not p.display_paused
                and p.out.configured and not cap.unqueued
                and len(cap.buffers) <= lib.SITS_LOOP_MAX_BUFS):
            return False
        held = set()
        for frame, lease in self._python_frames():
            if (frame._device is not cap or lease is None or not lease.live
                    or frame.holders != ["display"]):
                return False   # someone else holds it (or it is another device's)
            held.add(frame.buffer.index)
        return all(b.queued or b.index in held for b in cap.buffers)

    def _python_frames(self):
        p = self.p
        if p._next is not None:
            yield p._next
        for shown in (p._pending, p._on_screen):
            if shown is not None and shown.frame is not None:
                yield shown.frame, shown.lease

    def enter(self) -> None:
        p, L = self.p, self.L
        cap, out, card = p.cap, p.out, p.card
        L.epfd, L.vfd, L.dfd = p._poller.fileno(), cap.fileno(), card.fileno()
        L.memory, L.nbufs = cap.memory_type, len(cap.buffers)
        for b in cap.buffers:
            L.dmabuf_fd[b.index] = b.dmabuf.fileno()
            L.length[b.index] = b.dmabuf.size
            L.fb_id[b.index] = p._fb_for_buffer(b).id
        L.plane_id, L.crtc_id = out.plane_id, out.crtc_id
        L.fb_prop = card.prop_id(out.plane_id, "FB_ID")
        L.out_fence_prop = card.prop_id(out.crtc_id, "OUT_FENCE_PTR")
        self._put(L.next, p._next is not None, p._next[0] if p._next else None)
        for slot, shown in ((L.pending, p._pending), (L.on_screen, p._on_screen)):
            if shown is None:
                self._put(slot, False)
            else:
                self._put(slot, True, shown.frame, shown.fence, shown.timestamp_ns, shown.tag)
        L.retire.index = lib.SITS_LOOP_NONE
        # the Python objects go without releasing anything: C holds the buffers now
        p._next = p._pending = p._on_screen = None
        s = p.summary
        L.tag = p._tag
        L.captured, L.displayed, L.dropped = s.frames_captured, s.frames_displayed, s.frames_dropped
        L.anomalies = s.timestamp_anomalies
        L.last_frame_ns = int(p._last_frame * 1e9)
        L.dequeued = L.buffer_errors = L.latency_n = L.submit_n = 0
        L.frames_limit = p.opts.frames or 0
        L.hand_back_displayed, L.hand_back_captured = p._writeback_due()
        # C reads flip events when the next frame comes and watches the DRM
        # fd only when it must (csrc/sits_flip_loop.h)
        p._poller.unregister(card.fileno())
        L.dfd_watched = 0
        self.active = True

    @staticmethod
    def _put(slot, present: bool, frame=None, fence=None, shown_from_ns: int = 0, tag: int = 0) -> None:
        """A slot of the struct from a frame (None: a buffer of Python's own,
        the freeze frame) and, for a commit, its out-fence, which C owns now."""
        slot.fence = -1
        if not present:
            slot.index = lib.SITS_LOOP_NONE
            return
        if frame is None:
            slot.index = lib.SITS_LOOP_OWN
        else:
            slot.index = frame.buffer.index
            slot.sequence, slot.bytesused = frame.sequence, frame.bytesused
            slot.timestamp_ns, slot.dequeued_ns = frame.timestamp_ns, frame.dequeued_ns
        if fence is not None and not fence.closed:
            slot.fence = fence.detach()
        slot.shown_from_ns, slot.tag = shown_from_ns, tag

    # ------------------------------------------------------------ running
    def run(self, timeout_ms: int) -> int:
        """Run C until something needs Python; the counters and samples are
        the pipeline's again when it returns."""
        code = lib.sits_flip_loop_run(self.L, max(0, int(timeout_ms)))
        self._drain()
        return code

    def _drain(self) -> None:
        p, L = self.p, self.L
        s = p.summary
        s.frames_captured, s.frames_displayed, s.frames_dropped = L.captured, L.displayed, L.dropped
        s.timestamp_anomalies = L.anomalies
        p._tag = L.tag
        p._last_frame = L.last_frame_ns / 1e9
        st = p.cap.stats
        st.dequeued += L.dequeued
        st.buffer_errors += L.buffer_errors
        L.dequeued = L.buffer_errors = 0
        if L.latency_n:
            p._latencies.extend(ffi.unpack(self._latency, L.latency_n))
            L.latency_n = 0
        if L.submit_n:
            self.commits += L.submit_n
            p._submit_ms.extend(ffi.unpack(self._submit, L.submit_n))
            L.submit_n = 0

    # ------------------------------------------------------------ leaving
    def leave(self, code: int | None = None) -> None:
        """Give the state back to Python objects, then act on how C stopped
        (an error is raised or handled as the Python loop would)."""
        if not self.active:
            return
        self.active = False
        p, L = self.p, self.L
        if not L.dfd_watched:
            p._poller.register(p.card.fileno(), select.EPOLLIN)
        cap = p.cap
        held = {f.index for f in (L.next, L.pending, L.on_screen, L.retire) if f.index >= 0}
        failed = L.err_index if code == lib.SITS_LOOP_ERROR and L.err_op == lib.SITS_OP_QBUF else -1
        for b in cap.buffers:
            b.queued = b.index not in held and b.index != failed
            b.leased = b.index in held
        p._next = None
        if L.next.index >= 0:
            frame = self._frame(L.next)
            p._next = (frame, frame.lease("display"))
        p._pending = self._shown(L.pending)
        p._on_screen = self._shown(L.on_screen)
        if code == lib.SITS_LOOP_RETIRE_WAIT:
            p._watch(p._on_screen.fence, "retire", self._shown(L.retire))
        if code != lib.SITS_LOOP_ERROR:
            return
        op = OPS.get(L.err_op, "flip loop")
        if L.err_op == lib.SITS_OP_QBUF:
            cap.requeue_failed(cap.buffers[failed], IoctlError(L.err, op))
        elif L.err_op == lib.SITS_OP_DQBUF:
            p._dequeue_failed(IoctlError(L.err, op))
        elif L.err_op == lib.SITS_OP_ATOMIC:
            pass  # the frame is next again: the Python loop's commit retries it and reports a failure
        else:
            raise KernelCallError(L.err, op)

    def _frame(self, slot) -> Frame:
        cap = self.p.cap
        d = raw.Dequeued(slot.index, slot.sequence, slot.timestamp_ns, slot.bytesused, 0)
        return Frame(cap, cap.buffers[slot.index], d, dequeued_ns=slot.dequeued_ns)

    def _shown(self, slot):
        from sits.pipeline.capture_to_kms import _Shown
        if slot.index == lib.SITS_LOOP_NONE:
            return None
        frame = lease = None
        if slot.index >= 0:
            frame = self._frame(slot)
            lease = frame.lease("display")
        fence = SyncFile.from_fd(slot.fence) if slot.fence >= 0 else None
        slot.fence = -1
        return _Shown(frame, lease, fence, slot.shown_from_ns, slot.tag)
