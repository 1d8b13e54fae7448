"""V4L2 capture -> dma-buf -> KMS, driven by one poll loop.

Frame life: DQBUF gives a Frame with a "display" lease. If a plane can scan
out the camera format, the capture dma-buf itself is shown (PRIME import,
one cached framebuffer per capture buffer); otherwise the CPU converts into
a dumb buffer and the capture buffer is released at once. A shown frame's
lease is released when the commit that replaced it on screen has signalled
its out-fence; a frame picked for verification is also held by a "verify"
lease until the writeback fence signals and the pixels are compared.

One epoll over the V4L2 fd, the DRM fd, fence fds, the uevent socket and a
stop pipe (signals): no sleeps, no busy loops. The steady state of the
zero-copy path (frames only the display holds) runs in C on the same epoll
(fast_path.FlipLoop), which hands the state back for everything else.
"""
import os
import resource
import select
import time
from dataclasses import dataclass, field

from sits._kernel import lib
from sits.drm.card import Card, card_paths
from sits.drm.framebuffer import DumbBuffer, Framebuffer
from sits.drm.output import KmsOutput
from sits.errors import DeviceError, SitsError, UsageError
from sits.formats import BY_V4L2, drm_for_v4l2
from sits.pipeline.fast_path import STAYS, FlipLoop
from sits.v4l2.capture import CaptureDevice, CaptureStats, is_disconnect


QUIET_INTERVAL_S = 2.0   # loop wake-up without a status line; well under the stall timeout


@dataclass
class CaptureOptions:
    device: str | None = None
    card: str | None = None
    connector: str | None = None
    format: str | None = None
    size: tuple[int, int] | None = None
    fps: int | None = None
    frames: int | None = None
    duration: float | None = None
    memory: str = "mmap"
    buffers: int = 4
    verify: bool = False
    verify_every: int = 10
    snapshot: str | None = None
    reconnect: bool = False
    stall_timeout: float = 20.0   # no frame for this long while streaming: give up
    c_loop: bool = True           # the steady state in C (csrc/sits_flip_loop.h); False: all in Python


@dataclass
class Summary:
    frames_captured: int = 0
    frames_displayed: int = 0
    frames_dropped: int = 0
    buffer_errors: int = 0
    v4l2_errors: dict = field(default_factory=dict)
    zero_copy: bool = True
    cpu_copies_per_frame: int = 0
    memory: str = "mmap"
    format: str = ""
    display_format: str = ""
    size: str = ""
    mode: str = ""
    device: str = ""
    card: str = ""
    connector: str = ""
    verify: dict = field(default_factory=lambda: {"checked": 0, "mismatched": 0})
    latency_ms: dict = field(default_factory=dict)
    # DQBUF returned -> atomic commit issued: the span GStreamer's latency
    # tracer reports (v4l2src push -> kmssink), for a like-for-like comparison
    dequeue_to_commit_ms: dict = field(default_factory=dict)
    cpu_ms_per_frame: float = 0.0
    fps: float = 0.0
    duration_s: float = 0.0
    snapshot: str | None = None
    stopped_by: str = ""
    timestamp_anomalies: int = 0
    hotplug_events: int = 0
    disconnects: int = 0    # the camera vanished (with --reconnect the run goes on)
    reconnects: int = 0     # ... and came back
    c_loop_commits: int = 0  # frames the C flip loop committed (the rest went through Python)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def percentiles(values: list[float]) -> dict:
    """p50/p95/p99 with linear interpolation between the closest ranks
    (numpy.percentile's default), without numpy: the zero-copy path never
    touches pixels, so a capture run need not import it at all."""
    if not values:
        return {"p50": None, "p95": None, "p99": None}
    a = sorted(values)
    out = {}
    for q in (50, 95, 99):
        pos = (len(a) - 1) * q / 100
        lo = int(pos)
        hi = min(lo + 1, len(a) - 1)
        out[f"p{q}"] = round(a[lo] + (a[hi] - a[lo]) * (pos - lo), 3)
    return out


class _Shown:
    """A commit in flight or on screen: which frame (None for a freeze
    frame), which lease, its out-fence and the tag its flip event carries."""
    __slots__ = ("frame", "lease", "tag", "timestamp_ns", "fence")

    def __init__(self, frame, lease, fence, timestamp_ns, tag):
        self.frame, self.lease, self.fence = frame, lease, fence
        self.timestamp_ns = timestamp_ns
        self.tag = tag


class CaptureToKms:
    """Build with options, then run(); run() always cleans up (CRTC restored,
    every lease released, every fd closed), also on errors and signals."""

    def __init__(self, opts: CaptureOptions, on_status=None, status_interval: float = 0.5):
        self.opts = opts
        self.on_status = on_status
        self.status_interval = status_interval
        self.summary = Summary(memory=opts.memory)
        self._stop_r, self._stop_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._stop_reason = None
        self._latencies: list[float] = []
        self._submit_ms: list[float] = []
        self._closers = []

    # ------------------------------------------------------------- control
    def request_stop(self, reason: str = "signal") -> None:
        """Safe from a signal handler: wakes the loop, which winds down."""
        self._stop_reason = self._stop_reason or reason
        try:
            os.write(self._stop_w, b"x")
        except OSError:
            pass

    # --------------------------------------------------------------- setup
    def _open_capture(self) -> CaptureDevice:
        o = self.opts
        cap = CaptureDevice.open(o.device) if o.device else CaptureDevice.first()
        self._closers.append(cap)
        return cap

    def _open_card(self) -> Card:
        o = self.opts
        paths = [o.card] if o.card else card_paths()
        if not paths:
            raise DeviceError("no DRM card found (/dev/dri/card*)")
        last = None
        for path in paths:
            card = Card.open(path)
            try:
                if card.atomic and any(c.connected and not c.is_writeback for c in card.connectors()):
                    self._closers.append(card)
                    return card
                last = DeviceError(f"{path}: no connected connector" if card.atomic
                                   else f"{path}: no atomic modesetting")
            except BaseException:
                card.close()
                raise
            card.close()
        raise last

    def _choose_format(self, cap: CaptureDevice, card: Card) -> str:
        """The camera format: the one asked for, else the first the camera
        offers that a plane can show, else one we can convert."""
        o = self.opts
        if o.format:
            return o.format
        showable = KmsOutput.supported_formats(card, o.connector)
        offered = [f.fourcc for f in cap.formats()]
        # our table's order is the preference: 32-bit RGB first
        for code in BY_V4L2:
            if code in offered and drm_for_v4l2(code) in showable:
                return code
        from sits.pipeline import convert
        for code in offered:
            if code in convert.CONVERTERS:
                return code
        raise UsageError(f"camera offers {' '.join(offered)}; none can be shown or converted")

    # ----------------------------------------------------------------- run
    def run(self) -> Summary:
        try:
            summary = self._run()
        except BaseException:
            self._cleanup(quiet=True)  # the first error is the one to report
            raise
        self._cleanup()
        return summary

    def _run(self) -> Summary:
        o, s = self.opts, self.summary
        cap = self._open_capture()
        card = self._open_card()
        code = self._choose_format(cap, card)
        fmt = cap.configure(code, o.size, o.fps)
        drm_code = drm_for_v4l2(code)
        showable = KmsOutput.supported_formats(card, o.connector)
        self.zero_copy = drm_code in showable
        if not self.zero_copy:
            from sits.pipeline import convert  # numpy: only the conversion path needs it
            if code not in convert.CONVERTERS:
                raise UsageError(f"no plane shows {code} and sits cannot convert it; "
                                 f"planes show {' '.join(showable)}")
        display_code = drm_code if self.zero_copy else "XR24"
        out = KmsOutput(card, display_code, fmt.size, o.connector, writeback=o.verify or bool(o.snapshot))
        self.out = out
        if (o.verify or o.snapshot) and out.writeback is None:
            raise DeviceError(f"{card.path}: --verify/--snapshot need a writeback connector, and it has none")
        s.zero_copy = self.zero_copy
        s.cpu_copies_per_frame = 0 if self.zero_copy else 1
        s.format, s.display_format = code, display_code
        s.size, s.mode = f"{fmt.width}x{fmt.height}", str(out.mode)
        s.device, s.card, s.connector = cap.path, card.path, out.connector.name

        cap.allocate(o.buffers, o.memory)
        self.cap, self.card = cap, card
        self._fmt = fmt
        self._fbs: dict[int, Framebuffer] = {}
        # V4L2 buffers are linear: say so where the driver takes modifiers
        self._modifier = lib.DRM_FORMAT_MOD_LINEAR if card.cap(lib.DRM_CAP_ADDFB2_MODIFIERS) else None
        self._dumbs = []
        if not self.zero_copy:
            # on screen + in flight + being written: three are always enough
            self._dumbs = [DumbBuffer(card, fmt.width, fmt.height, "XR24") for _ in range(3)]
            self._closers.extend(self._dumbs)
        self._wb = None
        self._snap = None                     # the last writeback image, for --snapshot
        if out.writeback is not None:
            self._wb = DumbBuffer(card, out.mode.width, out.mode.height, "XR24")
            self._closers.append(self._wb)
        if o.verify or o.snapshot:
            # numpy and the checks load now, not at the first writeback
            # inside the loop (where cpu_ms_per_frame would count them)
            from sits.pipeline import png, verify  # noqa: F401
        first_fb = self._fb_for_buffer(cap.buffers[0]) if self.zero_copy else self._dumbs[0].fb
        out.test(first_fb, writeback_fb=self._wb.fb if self._wb else None)

        self._hotplug = None
        try:
            from sits.pipeline.hotplug import HotplugMonitor
            self._hotplug = HotplugMonitor()
            self._closers.append(self._hotplug)
        except Exception:  # noqa: BLE001 - hotplug is a nicety; the chain works without it
            self._hotplug = None
        return self._loop()

    def _fb_for_buffer(self, buf) -> Framebuffer:
        fb = self._fbs.get(buf.index)
        if fb is None:
            f = buf.format
            fb = Framebuffer.from_dmabuf(self.card, buf.dmabuf, f.width, f.height,
                                         drm_for_v4l2(f.fourcc), f.bytesperline, modifier=self._modifier)
            self._fbs[buf.index] = fb
            self._closers.append(fb)
        return fb

    # ---------------------------------------------------------------- loop
    def _loop(self) -> Summary:
        o, s, card = self.opts, self.summary, self.card
        # epoll, not poll(): the fds are registered once instead of being
        # walked and hooked into their wait queues at every wake-up (two a frame).
        self._poller = poller = select.epoll()
        self._closers.append(poller)
        poller.register(card.fileno(), select.EPOLLIN)
        poller.register(self._stop_r, select.EPOLLIN)
        if self._hotplug:
            poller.register(self._hotplug.fileno(), select.EPOLLIN)
        self._fences: dict[int, tuple] = {}   # polled fence fd -> (SyncFile, kind, payload)
        self._stale: set[int] = set()          # fence fds closed during this poll round
        # vkms composes a writeback job after the vblank, from the newest
        # state: a commit made before its fence signals would be what it
        # writes back. So no commit while a writeback is in flight.
        self._wb_pending = False
        self.display_paused = False
        self._pending = None                  # committed, flip event not yet seen
        self._on_screen = None
        self._next = None                     # newest frame waiting for a commit
        self._dumb_i = 0
        self._tag = 0                         # user_data of the flip events
        self._lost = []                       # (device, its framebuffers) of a vanished camera
        self._wait_id = None                  # identity of the camera --reconnect waits for
        self._freeze_wanted = False
        self._freeze = None
        self._stats_base = CaptureStats()
        self._capturing = True
        self._c = FlipLoop(self) if o.c_loop and self.zero_copy else None
        start = time.monotonic()
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        deadline = start + o.duration if o.duration else None
        last_status = start
        self._last_frame = start
        self._start_capture(self.cap)
        python_turn = False

        while True:
            now = time.monotonic()
            if self._capturing and self._stop_reason is None:
                if o.frames and s.frames_captured >= o.frames:
                    self._stop_reason = "frames"
                elif deadline and now >= deadline:
                    self._stop_reason = "duration"
            cap = self.cap
            if (self._capturing and cap is not None and self._stop_reason is None
                    and now - self._last_frame > o.stall_timeout):
                raise DeviceError(f"{cap.path}: no frame for {o.stall_timeout:.0f} s; the camera stalled")
            c = self._c
            if c is not None and c.active and (self._stop_reason or cap is None):
                c.leave()
            if self._stop_reason and self._capturing:
                self._capturing = False
                if cap is not None:
                    poller.unregister(cap.fileno())
                    cap.stop()
                self._drop_next()
            if not self._capturing and self._pending is None and not self._fences:
                break
            # without a status line the loop needs waking only for its
            # limits (deadline, stall): fewer Python passes per frame
            timeout = 1000 * (self.status_interval if self.on_status else QUIET_INTERVAL_S)
            if deadline and self._capturing:
                timeout = min(timeout, max(0, (deadline - now) * 1000))
            if self._wait_id is not None:
                timeout = min(timeout, 1000)  # look for the camera at least once a second
            if not self._capturing:
                timeout = 2000  # last flip / fences: bounded wait
            if c is not None and not python_turn and (c.active or c.usable()):
                if not c.active:
                    c.enter()
                code = c.run(timeout)
                if code not in STAYS:
                    # what stopped C is Python's: one pass of the loop
                    # (limits first, then its poll) before C runs again
                    c.leave(code)
                    self._try_commit()
                    python_turn = True
                events = []
            else:
                python_turn = False
                events = poller.poll(timeout / 1000)
            if not events and not self._capturing:
                break  # a fence that never signals must not hang shutdown
            self._stale.clear()
            for fd, ev in events:
                if fd in self._stale:
                    continue  # closed (and its number maybe reused) earlier in this round
                cap = self.cap
                if cap is not None and fd == cap.fileno():
                    self._on_capture(ev)
                elif fd == card.fileno():
                    self._on_flip_events()
                elif fd in self._fences:
                    fence, kind, payload = self._unwatch(fd)
                    self._on_fence(kind, payload)
                elif fd == self._stop_r:
                    os.read(self._stop_r, 64)
                elif self._hotplug and fd == self._hotplug.fileno():
                    self._on_uevents()
            if self._lost:
                self._reap_lost()
            if self._wait_id is not None and self._capturing and not events:
                self._reopen(self._wait_id[0])
            now = time.monotonic()
            if self.on_status and now - last_status >= self.status_interval:
                last_status = now
                self._finish(start, cpu0)
                self.on_status(self.summary)
        for fd in list(self._fences):
            fence, kind, payload = self._unwatch(fd)
            if kind == "writeback" and payload[1] is not None:
                payload[1].release()
        self._finish(start, cpu0)
        s.stopped_by = self._stop_reason or "fence timeout"
        if self._snap is not None:
            from sits.pipeline.png import write_png
            write_png(o.snapshot, self._snap)
            s.snapshot = o.snapshot
        return s

    # -------------------------------------------------------------- events
    def _start_capture(self, cap) -> None:
        cap.start()
        self._poller.register(cap.fileno(), select.EPOLLIN | select.EPOLLPRI)

    def _on_capture(self, ev: int) -> None:
        """One DQBUF per wake-up: when more buffers are ready, poll() says so
        at once, and no DQBUF is spent on EAGAIN."""
        cap, s = self.cap, self.summary
        if ev & (select.EPOLLERR | select.EPOLLHUP) and not ev & select.EPOLLIN and not os.path.exists(cap.path):
            self._camera_lost(None)
            return
        try:
            frame = cap.dequeue()
        except OSError as exc:
            if is_disconnect(exc):
                self._camera_lost(exc)
                return
            raise
        if frame is None:
            return
        self._last_frame = time.monotonic()
        s.frames_captured += 1
        if self._next is not None:      # a newer frame came first
            self._next[1].release()
            s.frames_dropped += 1
        self._next = (frame, frame.lease("display"))
        self._try_commit()

    def _dequeue_failed(self, exc) -> None:
        """A DQBUF of the C loop failed: handled as cap.dequeue() would."""
        try:
            self.cap.dequeue_failed(exc)
        except OSError as err:
            if not is_disconnect(err):
                raise
            self._camera_lost(err)

    def _on_flip_events(self) -> None:
        s = self.summary
        for e in self.card.read_events():
            shown = self._pending
            if shown is None or e.user_data != shown.tag:
                continue
            if shown.frame is not None:
                s.frames_displayed += 1
                flip_ns = e.timestamp_ns
                if flip_ns < shown.timestamp_ns:
                    # a vblank clock behind the capture clock (vkms's
                    # overrun hrtimer in a slow VM): use arrival time
                    s.timestamp_anomalies += 1
                    flip_ns = time.monotonic_ns()
                self._latencies.append((flip_ns - shown.timestamp_ns) / 1e6)
            previous, self._on_screen, self._pending = self._on_screen, shown, None
            self._retire(shown.fence, previous)
        self._try_commit()

    def _retire(self, fence, previous) -> None:
        """The commit carrying `fence` is on screen: the frame it replaced
        goes back once that out-fence has signalled. The kernel signals it
        before it sends the flip event, so this is almost always at once,
        without a poll wake-up of its own; otherwise the fence is polled."""
        if fence is not None and fence.status() != 1:  # one ioctl, no poll
            self._watch(fence, "retire", previous)
            return
        if fence is not None:
            fence.close()
        self._on_fence("retire", previous)

    def _watch(self, fence, kind, payload) -> None:
        if fence is None:
            self._on_fence(kind, payload)
            return
        self._fences[fence.fileno()] = (fence, kind, payload)
        self._poller.register(fence.fileno(), select.EPOLLIN)

    def _unwatch(self, fd):
        entry = self._fences.pop(fd)
        self._poller.unregister(fd)
        entry[0].close()
        self._stale.add(fd)
        return entry

    def _on_fence(self, kind, payload) -> None:
        if kind == "retire":            # the commit that replaced it is on screen
            if payload is not None and payload.lease is not None:
                payload.lease.release()
        elif kind == "writeback":
            self._wb_pending = False
            try:
                self._check_writeback(payload)
            finally:
                self._try_commit()

    # ------------------------------------------------------------- commits
    def _try_commit(self) -> None:
        if self._pending is not None or self._wb_pending:
            return
        if self._freeze_wanted:
            self._freeze_wanted = False
            if self._commit_freeze():
                return
        if self._next is None:
            return
        if self.display_paused:
            self._drop_next()             # no display: the frame is dropped
            return
        (frame, lease), self._next = self._next, None
        self._commit(frame, lease)

    def _drop_next(self) -> None:
        if self._next is not None:
            self._next[1].release()
            self._next = None
            self.summary.frames_dropped += 1

    def _commit(self, frame, lease) -> None:
        s = self.summary
        wb_fb = None
        if self._wb is not None and self._want_writeback():
            wb_fb = self._wb.fb
        dumb = None
        if self.zero_copy:
            fb = self._fb_for_buffer(frame.buffer)
        else:
            import numpy as np

            from sits.pipeline import convert
            dumb = self._dumbs[self._dumb_i % len(self._dumbs)]
            self._dumb_i += 1
            with frame.dmabuf.cpu_access() as m:
                f = frame.format
                src = convert.rows(m, f.height, f.bytesperline, f.width * 2)
                dst = np.frombuffer(dumb.map(), np.uint8).reshape(dumb.height, dumb.pitch)[:, :f.width * 4]
                convert.CONVERTERS[f.fourcc](src, dst.reshape(f.height, f.width, 4))
            fb = dumb.fb
        verify_lease = frame.lease("verify") if wb_fb is not None else None
        fences_out = self._flip(fb, wb_fb, frame, lease)
        if not self.zero_copy:
            lease.release()             # the CPU copy is done with it
            self._pending.lease = None
        if wb_fb is not None:
            self._wb_pending = True
            self._watch(fences_out.get("WRITEBACK_OUT_FENCE_PTR"), "writeback", (frame, verify_lease, dumb))

    def _flip(self, fb, wb_fb, frame, lease) -> dict:
        self._tag += 1
        if frame is not None:
            self._submit_ms.append((time.monotonic_ns() - frame.dequeued_ns) / 1e6)
        fences_out = self.out.flip(fb, writeback_fb=wb_fb, user_data=self._tag)
        ts = self._capture_time(frame) if frame is not None else 0
        # commits wait for the last flip, so nothing is pending here
        self._pending = _Shown(frame, lease, fences_out.get("OUT_FENCE_PTR"), ts, self._tag)
        return fences_out

    # ----------------------------------------------------------- reconnect
    def _camera_lost(self, exc) -> None:
        """The camera vanished. Without --reconnect that ends the run. With
        it, the last frame stays on screen (copied once into a buffer of our
        own, so nothing of the old device is held), the old device is closed
        as soon as no commit uses its buffers, and the loop waits for the
        camera to come back."""
        cap, s = self.cap, self.summary
        if not self._capturing:
            return  # stopping anyway
        if not self.opts.reconnect:
            raise DeviceError(f"{cap.path} disconnected") from exc
        s.disconnects += 1
        self._poller.unregister(cap.fileno())
        try:
            cap.stop()
        except OSError:
            pass  # gone: STREAMOFF has nothing left to stop
        self._stats_base.add(cap.stats)   # counts of the devices before this one
        self._lost.append((cap, self._fbs))
        self._fbs = {}
        self.cap = None
        self._wait_id = (cap.path, cap.cap.driver, cap.cap.card, cap.cap.bus_info)
        self._drop_next()
        self._freeze_wanted = self.zero_copy
        self._try_commit()
        self._reap_lost()

    def _commit_freeze(self) -> bool:
        """Show a copy of the old camera's last frame; False when there is none."""
        shown = self._on_screen
        if shown is None or shown.frame is None or not shown.frame.buffer.leased:
            return False
        import numpy as np

        from sits.pipeline import convert
        frame = shown.frame
        f = frame.format
        bpp = BY_V4L2[f.fourcc].bpp
        if self._freeze is None:
            self._freeze = DumbBuffer(self.card, f.width, f.height, drm_for_v4l2(f.fourcc), bpp=bpp)
            self._closers.append(self._freeze)
        dumb = self._freeze
        row = f.width * bpp // 8
        try:
            with frame.dmabuf.cpu_access() as m:
                src = convert.rows(m, f.height, f.bytesperline, row)
                np.frombuffer(dumb.map(), np.uint8).reshape(dumb.height, dumb.pitch)[:, :row] = src
        except OSError:
            pass  # the old buffer cannot be read: the freeze frame stays as it was
        self._flip(dumb.fb, None, None, None)
        return True

    def _reap_lost(self) -> None:
        """Close vanished devices once no frame of theirs is in use."""
        for entry in self._lost[:]:
            cap, fbs = entry
            if any(b.leased for b in cap.buffers):
                continue
            self._lost.remove(entry)
            for fb in fbs.values():
                fb.close()
                self._closers.remove(fb)
            cap.close()
            self._closers.remove(cap)

    def _reopen(self, path: str) -> None:
        """Open `path` if it is the camera we lost (same driver, card and
        bus), configure it as before and stream again. Failures are quiet:
        the next uevent or the next second tries again."""
        if self._lost or not os.path.exists(path):
            return  # first let the old device go: its driver may need that to come back
        try:
            cap = CaptureDevice.open(path)
        except (SitsError, OSError):
            return
        try:
            if (cap.cap.driver, cap.cap.card, cap.cap.bus_info) != self._wait_id[1:]:
                cap.close()
                return
            f, o = self._fmt, self.opts
            cap.configure(f.fourcc, f.size, o.fps)
            cap.allocate(o.buffers, o.memory)
            self._start_capture(cap)
        except (SitsError, OSError):
            cap.close()
            return
        self._closers.append(cap)
        self.cap = cap
        self._wait_id = None
        self._last_frame = time.monotonic()
        self.summary.reconnects += 1

    def _capture_time(self, frame) -> int:
        """The frame's V4L2 timestamp (CLOCK_MONOTONIC). A driver whose
        timestamp lies after the moment we dequeued the buffer (vivid's
        schedule-based clock in a slow VM does) cannot be believed: the
        dequeue time is used instead and the anomaly counted."""
        if frame.timestamp_ns <= 0 or frame.timestamp_ns > frame.dequeued_ns:
            self.summary.timestamp_anomalies += 1
            return frame.dequeued_ns
        return frame.timestamp_ns

    def _writeback_due(self) -> tuple[int, int]:
        """When a commit carries a writeback: the displayed count at which
        the next one does (-1: none), and the captured count from which every
        one does (0: none). The Python loop asks at each commit; the C loop
        takes both numbers and hands such a commit back."""
        o, s = self.opts, self.summary
        if self._wb is None:
            return -1, 0
        due = -1
        if o.verify:  # every verify_every-th displayed frame
            every = max(1, o.verify_every)
            due = -(-s.frames_displayed // every) * every
        # the snapshot: the first frame (as a start) and the last of a --frames run
        if o.snapshot and self._snap is None and s.frames_displayed == 0:
            due = 0
        return due, (o.frames or 0) if o.snapshot else 0

    def _want_writeback(self) -> bool:
        due, from_captured = self._writeback_due()
        s = self.summary
        return s.frames_displayed == due or bool(from_captured) and s.frames_captured >= from_captured

    def _check_writeback(self, payload) -> None:
        import numpy as np

        from sits.pipeline import verify
        frame, lease, dumb = payload
        s, o = self.summary, self.opts
        wb = self._wb
        try:
            shown_all = verify.to_rgb(wb.map(), "XR24", wb.width, wb.height, wb.pitch)
            x, y, w, h = self.out.placement.dst
            sx, sy, _, _ = self.out.placement.src
            shown = shown_all[y:y + h, x:x + w]
            if o.snapshot:
                # kept, and written once when the run ends: a PNG at every
                # check cost 0.12 s of CPU each in the test VM (zlib)
                if self._snap is None:
                    self._snap = np.empty(shown_all.shape, np.uint8)
                np.copyto(self._snap, shown_all)
            if o.verify:
                f = frame.format
                if dumb is None:
                    with frame.dmabuf.cpu_access() as m:
                        expected = verify.to_rgb(m, drm_for_v4l2(f.fourcc), f.width, f.height, f.bytesperline)
                        expected = expected[sy:sy + h, sx:sx + w]
                        bad = verify.mismatches(shown, expected)
                else:
                    expected = verify.to_rgb(dumb.map(), "XR24", dumb.width, dumb.height, dumb.pitch)
                    bad = verify.mismatches(shown, expected[sy:sy + h, sx:sx + w])
                s.verify["checked"] += 1
                if bad:
                    s.verify["mismatched"] += 1
                    s.verify.setdefault("first_mismatch", {"sequence": frame.sequence, "pixels": bad})
        finally:
            if lease is not None:
                lease.release()

    def _on_uevents(self) -> None:
        for ev in self._hotplug.read():
            if ev.subsystem == "video4linux":
                if ev.action == "remove" and self.cap is not None and ev.devname == self.cap.path:
                    self._camera_lost(None)
                elif ev.action == "add" and self._wait_id is not None and ev.devname and self._capturing:
                    # the camera may come back under another node: _reopen checks who it is
                    self._reap_lost()
                    self._reopen(ev.devname)
                continue
            # HOTPLUG=1 from the driver; any "change" of our card is worth a
            # re-probe too (it is cheap, and synthetic uevents look so).
            if ev.subsystem == "drm" and (ev.hotplug or ev.action == "change"):
                self.summary.hotplug_events += 1
                self.display_paused = not self.out.repick()

    def _finish(self, start, cpu0) -> None:
        s = self.summary
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        s.duration_s = round(time.monotonic() - start, 3)
        s.cpu_ms_per_frame = round(1000 * cpu / max(1, s.frames_captured), 3)
        s.fps = round(s.frames_displayed / s.duration_s, 2) if s.duration_s else 0.0
        st = CaptureStats().add(self._stats_base)
        if self.cap is not None:
            st.add(self.cap.stats)
        s.buffer_errors = st.buffer_errors
        s.v4l2_errors = {"requeue": st.requeue_errors, "dequeue": st.dequeue_errors,
                         "setup_retries": st.setup_retries, "stream_restarts": st.stream_restarts}
        s.latency_ms = percentiles(self._latencies)
        s.c_loop_commits = self._c.commits if getattr(self, "_c", None) is not None else 0
        s.dequeue_to_commit_ms = percentiles(self._submit_ms)

    # ------------------------------------------------------------- cleanup
    def _cleanup(self, quiet: bool = False) -> None:
        errors = []
        c = getattr(self, "_c", None)
        if c is not None and c.active:
            c.leave()  # its buffers and fences become Python's, released below
        out = getattr(self, "out", None)
        if out is not None:
            try:
                out.restore()
            except Exception as exc:  # noqa: BLE001 - keep closing the rest
                errors.append(exc)
        pending = getattr(self, "_next", None)
        if pending is not None:
            pending[1].release()
        for name in ("_pending", "_on_screen"):
            shown = getattr(self, name, None)
            if shown is not None:
                if shown.lease is not None:
                    shown.lease.release()
                if shown.fence is not None:
                    shown.fence.close()  # the pending commit's out-fence, never retired
        for fence, _, _ in getattr(self, "_fences", {}).values():
            fence.close()
        cap = getattr(self, "cap", None)
        if cap is not None and cap.streaming:
            try:
                cap.stop()
            except OSError:
                pass
        for obj in reversed(self._closers):
            try:
                obj.close()
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)
        self._closers.clear()
        for fd in (self._stop_r, self._stop_w):
            try:
                os.close(fd)
            except OSError:
                pass
        if errors and not quiet and not isinstance(errors[0], SitsError):
            raise errors[0]
