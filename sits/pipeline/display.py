"""KmsDisplay: the display sink of a capture pipeline, its Python half.

Its C half (sits/pipeline/sinks/kms.c, a sink of the frame queue) keeps
the display's frames (waiting -> committed -> on screen -> leaving the
screen) and commits the steady state itself; its port keeps the newest
frame only. What is left here is what only Python does, when the C half
asks (SITS_Q_SINK): the first commit (a modeset), commits that carry a
writeback (--verify, --snapshot), the wait for an out-fence that had not
signalled at its flip; and the freeze frame of a lost camera, picking the
mode again after a hotplug. Framebuffers are made once per capture buffer
(PRIME import of its dma-buf). When no plane shows the camera's format,
the display takes the frames of a conversion stage (convert_stage.py)
instead, made into three dumb buffers of its own, off the loop's thread.
"""
import os

from sits._kernel import ffi, lib
from sits.drm.framebuffer import DumbBuffer, Framebuffer
from sits.ebpf.histogram import SLOTS, Histogram
from sits.formats import BY_V4L2, drm_for_v4l2
from sits.pipeline.frame_queue import NONE
from sits.pipeline.stats import histogram_percentiles

OWN = lib.SITS_KMS_OWN


class KmsDisplay:
    name = "display"

    def __init__(self, card, out, fmt, zero_copy: bool, writeback=None, stage_options: dict | None = None,
                 overlay=None):
        """`stage_options`: keywords of the stage that makes the camera's
        frames into the display's (not zero-copy; display_stages.MAKERS);
        `overlay`: an overlay layer (overlay.Overlay) above the video."""
        self.card, self.out, self.zero_copy, self.writeback = card, out, zero_copy, writeback
        self.overlay = overlay
        if overlay is not None:
            overlay.prepare(card, out, fmt.width, fmt.height)
        self.stage_options = stage_options or {}
        self.format = fmt
        # V4L2 buffers are linear: say so where the driver takes modifiers
        self.modifier = lib.DRM_FORMAT_MOD_LINEAR if card.cap(lib.DRM_CAP_ADDFB2_MODIFIERS) else None
        self.framebuffers: dict[int, Framebuffer] = {}   # capture buffer index -> its framebuffer
        # on screen + in flight + being written: three are always enough
        self.dumbs = [] if zero_copy else [DumbBuffer(card, fmt.width, fmt.height, "XR24") for _ in range(3)]
        self.stage = None          # the conversion stage the display takes its frames from (not zero-copy)
        self.freeze_buffer = None
        self._freeze_from = None   # a lost camera's buffers, one of which is on screen
        self.paused = False        # no display connected (hotplug)
        self.commits = 0           # commits made here (the rest are the C half's)
        self.queue = self.device = None
        self.K = None              # the C half's struct sits_kms (this object owns it)
        self.sink = None           # its id in the frame queue
        self._watch_fence = self._watch_fence_fd = self._handle = None

    def framebuffer(self, buf) -> Framebuffer:
        fb = self.framebuffers.get(buf.index)
        if fb is None:
            f = buf.format
            fb = Framebuffer.from_dmabuf(self.card, buf.dmabuf, f.width, f.height, drm_for_v4l2(f.fourcc),
                                         f.bytesperline, modifier=self.modifier)
            self.framebuffers[buf.index] = fb
        return fb

    def test(self, cap) -> None:
        """TEST_ONLY the first commit: refused before anything is on screen."""
        fb = self.framebuffer(cap.buffers[0]) if self.zero_copy else self.dumbs[0].fb
        wb = self.writeback.buffer.fb if self.writeback else None
        self.out.test(fb, writeback_fb=wb)

    # --------------------------------------------------------- the queue
    def attach(self, queue, cap, pipeline) -> None:
        """Show `cap`'s frames through `queue` (again, for a camera come
        back); `pipeline` watches fences and acts on the queue's codes."""
        self.device = cap
        self._watch_fence, self._watch_fence_fd = pipeline.watch_fence, pipeline.watch_fence_fd
        self._handle = pipeline.handle
        out, card = self.out, self.card
        if self.queue is None:
            self.queue = queue
            if not self.zero_copy:
                self.stage = self._conversion(queue, cap)
                pipeline.watch_stage(self.stage)
            K = self.K = ffi.new("struct sits_kms *")
            K.dfd = card.fileno()
            K.plane_id = out.plane_id
            K.fb_prop = card.prop_id(out.plane_id, "FB_ID")
            K.hand_back_displayed = -1
            for commit in (K.pending, K.on_screen, K.retire):
                commit.index, commit.fence, commit.overlay = NONE, -1, NONE
            self._latency_slots = ffi.new("uint32_t[]", SLOTS)
            self._submit_slots = ffi.new("uint32_t[]", SLOTS)
            K.latency.slots, K.submit.slots = self._latency_slots, self._submit_slots
            takes = queue.camera if self.stage is None else self.stage.source
            policy, depth = self.overlay.display_port() if self.overlay is not None else ("latest", 1)
            self.sink = K.sink = queue.add_sink(lib.sits_kms_sink(), K, policy, depth, half=self, takes=takes)
            queue.sink_fd(self.sink, K.dfd)
        elif self.stage is not None:   # a camera come back
            self.stage.set_inputs(*self.inputs(cap))
        if self.overlay is not None:
            self.overlay.attach(queue, cap, self, pipeline)
        if self.zero_copy:
            for b in cap.buffers:
                self.K.fb_id[b.index] = self.framebuffer(b).id
        else:
            for index, dumb in zip(queue.buffers_of(self.stage.source), self.dumbs):
                self.K.fb_id[index] = dumb.fb.id
        self.sync()

    @staticmethod
    def inputs(cap):
        """The camera's buffers' bytes and dma-bufs, for the conversion stage."""
        return ({b.index: b.view() for b in cap.buffers},
                {b.index: b.dmabuf.fileno() for b in cap.buffers if b.dmabuf is not None})

    def _conversion(self, queue, cap):
        """The stage that makes the camera's frames into the dumb buffers."""
        from sits.pipeline.display_stages import MAKERS
        f = cap.format
        inputs, dmabufs = self.inputs(cap)
        return MAKERS[f.fourcc](queue, f.fourcc, f.width, f.height, f.bytesperline, inputs,
                                [d.map() for d in self.dumbs], self.dumbs[0].pitch, dmabufs=dmabufs,
                                **self.stage_options)

    def _dumb_of(self, index: int) -> DumbBuffer:
        """The dumb buffer of the conversion stage's buffer `index`."""
        return self.dumbs[self.queue.buffers_of(self.stage.source).index(index)]

    def forget_device(self) -> list:
        """The camera went: its framebuffers, to close once nothing shows them."""
        fbs, self.framebuffers, self.device = list(self.framebuffers.values()), {}, None
        return fbs

    def sync(self) -> None:
        """The queue's view of what Python must do: every commit until the
        first (a modeset), a writeback when due."""
        K = self.K
        K.python_commits = int(not self.out.configured)
        # the vblank grid the timeline's late rule reads; a modeset starts a new one
        K.vblank_period_ns = self.out.mode.frame_ns
        if not self.out.configured:
            K.last_vblank_ns = 0
        K.paused = int(self.paused)
        K.hold_commits = int(self.writeback is not None and self.writeback.pending)
        if self.writeback is not None:
            K.hand_back_displayed, K.hand_back_captured = self.writeback.due(K.displayed, self.queue.captured)

    def repick(self) -> None:
        """A connector changed: choose the mode again (paused while none is connected)."""
        self.paused = not self.out.repick()
        self.sync()

    # ------------------------------------------- what the C half asks for
    def on_ask(self) -> None:
        """The C half returned SITS_Q_SINK: a commit that is Python's, or
        an out-fence to wait for."""
        if self.K.asks == lib.SITS_KMS_ASK_COMMIT:
            self.commit_next()
        elif self.K.asks == lib.SITS_KMS_ASK_FENCE:
            fd = self.K.on_screen.fence    # C's: watched, not owned
            self._watch_fence_fd(fd, self._retired)

    def _retired(self) -> None:
        self._handle(self.queue.step(lib.sits_kms_retired, self.K))
        self.try_commit()

    def flip_events(self) -> None:
        self._handle(self.queue.step(lib.sits_kms_flip_events, self.K))

    def try_commit(self) -> None:
        self._handle(self.queue.step(lib.sits_kms_try_commit, self.K))

    def drop_waiting(self) -> None:
        """The frame waiting for a commit is dropped (the run stops, the camera
        went), and those waiting for the conversion; the one being converted
        is still shown."""
        self.queue.step(lib.sits_kms_drop_waiting, self.K)
        if self.stage is not None:
            self.stage.drop_waiting()

    def busy(self) -> bool:
        """A flip in flight, a frame leaving the screen that waits for its
        fence, or a frame being converted for the screen."""
        return (self.K.pending.index != NONE or self.K.retire.index != NONE
                or (self.stage is not None and self.stage.busy()))

    def holds(self, index: int) -> bool:
        """Buffer `index` waits for a commit, is committed, on screen or leaving the screen."""
        return self.queue.holds(self.sink, index)

    def counts(self) -> dict:
        K = self.K
        return {"displayed": K.displayed, "anomalies": K.anomalies,
                "dropped": self.queue.sink_counts(self.sink)["dropped"]}

    def c_commits(self) -> int:
        """Commits the C half made."""
        return self.K.c_commits if self.K is not None else 0

    def latency_ms(self) -> dict:
        """Capture (the V4L2 timestamp) -> on screen (the flip event): p50/p95/p99."""
        return histogram_percentiles(self._histogram(self.K.latency, self._latency_slots))

    def submit_ms(self) -> dict:
        """Dequeue -> commit: p50/p95/p99."""
        return histogram_percentiles(self._histogram(self.K.submit, self._submit_slots))

    @staticmethod
    def _histogram(h, slots) -> Histogram:
        counts = ffi.unpack(slots, SLOTS)
        return Histogram(h.count, h.sum_ns, h.max_ns, {s: n for s, n in enumerate(counts) if n})

    def watching_fd(self, on: bool | None = None) -> bool:
        """Whether the DRM fd is in the loop's epoll set; `on`: Python put it there."""
        return self.queue.sink_fd_watched(self.sink, on)

    def close_fences(self) -> None:
        """Close the out-fences the C half still owns (shutdown)."""
        for commit in (self.K.pending, self.K.on_screen, self.K.retire):
            if commit.fence >= 0:
                try:
                    os.close(commit.fence)
                except OSError:
                    pass
                commit.fence = -1

    # ---------------------------------------------------------- commits
    def _committed(self, showing: int, fence, overlay: int = NONE) -> None:
        """Python made the commit (user_data tag + 1) showing the waiting
        frame (its buffer index) or a buffer of its own (OWN), with the
        drawing `overlay` (NONE: the plane kept its own); the C half owns
        the out-fence from now on."""
        fd = fence.detach() if fence is not None else -1
        self.queue.step(lib.sits_kms_committed, self.K, showing, overlay, fd, self.out.flipped_ns)

    def commit_next(self) -> None:
        """Commit the waiting frame from Python (SITS_KMS_ASK_COMMIT)."""
        q, K = self.queue, self.K
        if K.pending.index != NONE:
            return
        chosen = ffi.new("int32_t *")
        index = q.ask(lib.sits_kms_choose, K, chosen)   # the frame, and the drawing to show with it
        if index == NONE:
            return
        drawing = chosen[0]
        overlay_fb = self.overlay.framebuffer(drawing) if drawing != NONE else None
        wb = self.writeback
        wb_fb = wb.buffer.fb if wb is not None and wb.wanted(K.displayed, q.captured) else None
        dumb = lease = None
        if self.stage is None:
            fb = self.framebuffer(self.device.buffers[index])
            if wb_fb is not None:
                lease = q.frame(index).lease("verify")
        else:   # the display holds the stage's buffer while it is on screen, and no commit replaces it before the check
            dumb = self._dumb_of(index)
            fb = dumb.fb
        sequence = q.sequence(index)
        # what the overlay plane shows with this frame: held until the check
        # (no commit replaces it while a writeback is pending)
        drawn = None
        if self.overlay is not None and wb_fb is not None:
            drawn = self.overlay.pixels(drawing if drawing != NONE else K.overlay_shown)
        try:
            fences = self.out.flip(fb, writeback_fb=wb_fb, overlay_fb=overlay_fb, user_data=K.tag + 1)
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        self.commits += 1
        self._committed(index, fences.get("OUT_FENCE_PTR"), drawing)
        if wb_fb is not None:
            wb.pending = True
            self._watch_fence(fences.get("WRITEBACK_OUT_FENCE_PTR"),
                              lambda: self._written_back(sequence, lease, dumb, drawn))
        self.sync()

    def _written_back(self, sequence, lease, dumb, drawn=None) -> None:
        wb = self.writeback
        wb.pending = False
        try:
            wb.check(sequence, lease.frame if lease is not None else None, dumb, drawn)
        finally:
            if lease is not None:
                lease.release()
            self.sync()
            self.try_commit()

    def freeze(self, buffers) -> None:
        """Show a copy of the frame on screen (of a lost camera's `buffers`)
        as soon as no flip is in flight, so that the camera's buffers can go."""
        self._freeze_from = buffers
        self.try_freeze()

    def try_freeze(self) -> None:
        buffers = self._freeze_from
        if buffers is None or self.K.pending.index != NONE or (self.writeback and self.writeback.pending):
            return
        # numpy (convert) only now: the zero-copy path never needs it (seconds of a start in the test VM)
        from sits.pipeline import convert
        self._freeze_from = None
        index = self.K.on_screen.index
        if index < 0 or index >= len(buffers):
            return   # nothing of the camera's on screen (a conversion's buffer stays)
        buf = buffers[index]
        f = buf.format
        bpp = BY_V4L2[f.fourcc].bpp
        if self.freeze_buffer is None:
            self.freeze_buffer = DumbBuffer(self.card, f.width, f.height, drm_for_v4l2(f.fourcc), bpp=bpp)
        dumb = self.freeze_buffer
        row = f.width * bpp // 8
        try:
            with buf.dmabuf.cpu_access() as m:
                src = convert.rows(m, f.height, f.bytesperline, row)
                convert.rows(dumb.map(), dumb.height, dumb.pitch, row)[:] = src
        except OSError:
            pass  # the old buffer cannot be read: the freeze frame stays as it was
        fences = self.out.flip(dumb.fb, user_data=self.K.tag + 1)
        self._committed(OWN, fences.get("OUT_FENCE_PTR"))

    # ---------------------------------------------------------- the end
    def restore(self) -> None:
        self.out.restore()

    def close(self) -> None:
        if self.overlay is not None:
            self.overlay.close()   # its stage reads the camera's buffers
        if self.stage is not None:
            self.stage.close()     # before the buffers it reads and writes go
        for fb in self.framebuffers.values():
            fb.close()
        self.framebuffers = {}
        for dumb in self.dumbs + ([self.freeze_buffer] if self.freeze_buffer else []):
            dumb.close()
        self.dumbs, self.freeze_buffer = [], None
        if self.writeback is not None:
            self.writeback.close()
