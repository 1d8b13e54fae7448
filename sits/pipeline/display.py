"""KmsDisplay: the display consumer of a capture pipeline.

Its frame queue (next -> committed -> on screen -> leaving the screen) is
the C frame queue's (frame_queue.c), which commits the steady state itself.
What is left here is what only Python does: the first commit (a modeset),
commits that carry a writeback (--verify, --snapshot), the CPU conversion
when no plane shows the camera's format, the freeze frame of a lost camera,
and picking the mode again after a hotplug. Framebuffers are made once per
capture buffer (PRIME import of its dma-buf).
"""

from sits._kernel import lib
from sits.drm.framebuffer import DumbBuffer, Framebuffer
from sits.formats import BY_V4L2, drm_for_v4l2
from sits.pipeline.frame_queue import COPY, NONE, OWN


class KmsDisplay:
    name = "display"

    def __init__(self, card, out, fmt, zero_copy: bool, writeback=None):
        self.card, self.out, self.zero_copy, self.writeback = card, out, zero_copy, writeback
        self.format = fmt
        # V4L2 buffers are linear: say so where the driver takes modifiers
        self.modifier = lib.DRM_FORMAT_MOD_LINEAR if card.cap(lib.DRM_CAP_ADDFB2_MODIFIERS) else None
        self.framebuffers: dict[int, Framebuffer] = {}   # capture buffer index -> its framebuffer
        # on screen + in flight + being written: three are always enough
        self.dumbs = [] if zero_copy else [DumbBuffer(card, fmt.width, fmt.height, "XR24") for _ in range(3)]
        self._dumb_i = 0
        self.freeze_buffer = None
        self._freeze_from = None   # a lost camera's buffers, one of which is on screen
        self.paused = False        # no display connected (hotplug)
        self.commits = 0           # commits made here (the rest are the frame queue's)
        self.queue = self.device = None
        self._watch_fence = self._handle = None

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
    def attach(self, queue, cap, watch_fence, handle) -> None:
        """Show `cap`'s frames through `queue`; `watch_fence(fence, cb)` and
        `handle(code)` are the pipeline's."""
        self.queue, self.device = queue, cap
        self._watch_fence, self._handle = watch_fence, handle
        L, out, card = queue.L, self.out, self.card
        L.display, L.dfd = 1, card.fileno()
        L.plane_id, L.crtc_id = out.plane_id, out.crtc_id
        L.fb_prop = card.prop_id(out.plane_id, "FB_ID")
        if self.zero_copy:
            for b in cap.buffers:
                L.fb_id[b.index] = self.framebuffer(b).id
        self.sync()

    def forget_device(self) -> list:
        """The camera went: its framebuffers, to close once nothing shows them."""
        fbs, self.framebuffers, self.device = list(self.framebuffers.values()), {}, None
        return fbs

    def sync(self) -> None:
        """The queue's view of what Python must do: every commit until the
        first (a modeset) and on the conversion path, a writeback when due."""
        L = self.queue.L
        L.python_commits = int(not self.zero_copy or not self.out.configured)
        # the vblank grid the timeline's late rule reads; a modeset starts a new one
        L.vblank_period_ns = self.out.mode.frame_ns
        if not self.out.configured:
            L.last_vblank_ns = 0
        L.paused = int(self.paused)
        L.hold_commits = int(self.writeback is not None and self.writeback.pending)
        if self.writeback is not None:
            L.hand_back_displayed, L.hand_back_captured = self.writeback.due(L.displayed, L.captured)

    def repick(self) -> None:
        """A connector changed: choose the mode again (paused while none is connected)."""
        self.paused = not self.out.repick()
        self.sync()

    # ---------------------------------------------------------- commits
    def commit_next(self) -> None:
        """Commit the queue's next frame from Python (SITS_Q_HAND_BACK)."""
        q = self.queue
        L = q.L
        slot = L.next
        if slot.index == NONE or L.pending.index != NONE:
            return
        wb = self.writeback
        wb_fb = wb.buffer.fb if wb is not None and wb.wanted(L.displayed, L.captured) else None
        buf = self.device.buffers[slot.index]
        dumb = lease = None
        if self.zero_copy:
            kind, fb = slot.index, self.framebuffer(buf)
            if wb_fb is not None:
                lease = q.frame(slot).lease("verify")
        else:
            kind, dumb = COPY, self._convert(buf)
            fb = dumb.fb
        sequence = slot.sequence
        try:
            fences = self.out.flip(fb, writeback_fb=wb_fb, user_data=L.tag + 1)
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        self.commits += 1
        q.committed(kind, fences.get("OUT_FENCE_PTR"), self.out.flipped_ns)
        if wb_fb is not None:
            wb.pending = True
            self._watch_fence(fences.get("WRITEBACK_OUT_FENCE_PTR"),
                              lambda: self._written_back(sequence, lease, dumb))
        self.sync()

    def _written_back(self, sequence, lease, dumb) -> None:
        wb = self.writeback
        wb.pending = False
        try:
            wb.check(sequence, lease.frame if lease is not None else None, dumb)
        finally:
            if lease is not None:
                lease.release()
            self.sync()
            self._handle(self.queue.try_commit())

    def _convert(self, buf) -> DumbBuffer:
        from sits.pipeline import convert
        dumb = self.dumbs[self._dumb_i % len(self.dumbs)]
        self._dumb_i += 1
        f = buf.format
        with buf.dmabuf.cpu_access() as m:
            src = convert.rows(m, f.height, f.bytesperline, f.width * 2)
            # the mapping is whole pages: the image is its first height x pitch bytes
            dst = convert.rows(dumb.map(), dumb.height, dumb.pitch, f.width * 4)
            convert.CONVERTERS[f.fourcc](src, dst.reshape(f.height, f.width, 4))
        return dumb

    def freeze(self, buffers) -> None:
        """Show a copy of the frame on screen (of a lost camera's `buffers`)
        as soon as no flip is in flight, so that the camera's buffers can go."""
        self._freeze_from = buffers
        self.try_freeze()

    def try_freeze(self) -> None:
        q, buffers = self.queue, self._freeze_from
        if buffers is None or q.L.pending.index != NONE or (self.writeback and self.writeback.pending):
            return
        # numpy (convert) only now: the zero-copy path never needs it (seconds of a start in the test VM)
        from sits.pipeline import convert
        self._freeze_from = None
        index = q.L.on_screen.index
        if index < 0:
            return   # nothing of the camera's on screen
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
        fences = self.out.flip(dumb.fb, user_data=q.L.tag + 1)
        q.committed(OWN, fences.get("OUT_FENCE_PTR"), self.out.flipped_ns)

    # ---------------------------------------------------------- the end
    def restore(self) -> None:
        self.out.restore()

    def close(self) -> None:
        for fb in self.framebuffers.values():
            fb.close()
        self.framebuffers = {}
        for dumb in self.dumbs + ([self.freeze_buffer] if self.freeze_buffer else []):
            dumb.close()
        self.dumbs, self.freeze_buffer = [], None
        if self.writeback is not None:
            self.writeback.close()
