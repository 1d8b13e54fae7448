"""Pipeline: sources, any number of consumers, one event loop.

    pipeline = Pipeline(camera, display=display, consumers=[(cuda, "drop-oldest", 2)])
    summary = pipeline.run(frames=300)

Several sources (a list: the first is the camera, which the display shows,
and the one a reconnect waits for) stream into the same loop, each with its
own buffers; a consumer takes the first source's frames, or those its Port
names (`Port(c, takes=(cam, synthetic))`), each frame telling its source
(`frame.source`: its place in the list).

Each dequeued frame is offered to every consumer's port (consumer.py); the
buffer goes back to the driver only when the display and every consumer
have released it. A V4L2 source's buffers are kept by the C frame queue
(frame_queue.c): the display's flips and the requeue rule live there, and
`sits_queue_run()` runs the steady state on this loop's epoll fd with one
wake-up a frame, handing frames to Python's consumers as it goes
(SITS_Q_DELIVER) and waking for their fds (a CUDA completion, an eventfd)
like for any other. Any other source (a memfd producer) is dequeued here.

One epoll over the source fd, the DRM fd, fences, consumers' fds, uevents
and a stop pipe (signals): no sleeps, no busy loops. run() always cleans up
(CRTC restored, every lease released, every fd closed), also on errors and
signals.
"""
import contextlib
import os
import resource
import select
import time

from sits._kernel import lib
from sits.errors import DeviceError, SitsError, UsageError
from sits.pipeline.consumer import PipelineContext, Port
from sits.pipeline.frame_queue import FrameQueue, QueueError
from sits.pipeline.stats import Summary
from sits.v4l2.capture import CaptureDevice, CaptureStats, is_disconnect

QUIET_INTERVAL_S = 2.0   # loop wake-up without a status line; well under the stall timeout
# frames a stage failed to make before it made any: a camera that sends
# nothing it can use (all corrupt, another size) ends the run
HOPELESS_FRAMES = 10
STOP_WAIT_S = 2.0        # the last flip, fences and consumers' work at the end: bounded
# a writeback in flight at the end is waited for much longer: under the test
# VM's emulated CPU vkms takes seconds to compose a 1080p frame, and a run
# that ends before its check lands would have checked nothing
WRITEBACK_WAIT_S = 60.0


class ConsumerError(SitsError):
    """A consumer raised: the run stops; the message names the consumer."""


class Pipeline:
    def __init__(self, source, *, display=None, consumers=(), on_status=None, status_interval: float = 0.5,
                 stall_timeout: float = 20.0, reconnect=None, closers=(),
                 frames: int | None = None, duration: float | None = None, summary: Summary | None = None,
                 timeline: str | None = None):
        #: every source, the camera first (a frame's `source` is its place here)
        self.sources = list(source) if isinstance(source, (list, tuple)) else [source]
        if not self.sources:
            raise UsageError("a pipeline needs a source")
        source = self.source = self.sources[0]   # the camera (None while a lost one is waited for)
        self.display = display
        self.ports = [c if isinstance(c, Port) else Port(*c) if isinstance(c, tuple) else Port(c)
                      for c in consumers]
        self.on_status, self.status_interval = on_status, status_interval
        self.stall_timeout = stall_timeout
        self.reconnect = reconnect            # a Reconnect (reconnect.py), or None
        self.summary = summary or Summary(memory=getattr(source, "memory", ""), device=source.path)
        self.frames, self.duration = frames, duration     # run()'s default limits
        self.timeline = timeline              # a file for every frame's record (timeline.py), or None
        self._closers = list(closers)         # owned: closed at the end, last first
        self._stop_r, self._stop_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._stop_reason = None
        self._watched: set[int] = set()       # the sources whose fd is in the loop
        self._error = None
        self._handlers: dict[int, object] = {}
        self._fences: set[int] = set()        # fence fds watched: work in flight
        self._stale: set[int] = set()
        self._poller = None
        self.queue: FrameQueue | None = None
        self._stats_base = CaptureStats()
        self._passes = None
        self._python_passes = 0

    # ------------------------------------------------------------- control
    def request_stop(self, reason: str = "signal") -> None:
        """Safe from a signal handler: wakes the loop, which winds down."""
        self._stop_reason = self._stop_reason or reason
        try:
            os.write(self._stop_w, b"x")
        except OSError:
            pass

    def watch(self, fd: int, callback) -> None:
        """Call `callback()` from the loop while `fd` is readable."""
        self._handlers[fd] = callback
        self._poller.register(fd, select.EPOLLIN)

    def watch_stage(self, stage) -> None:
        """Take what `stage` makes from the loop (it makes frames of a source of its own)."""
        self.watch(stage.fileno(), lambda: self.handle(self.queue.capture(stage.source)))

    def unwatch(self, fd: int) -> None:
        if self._handlers.pop(fd, None) is not None:
            try:
                self._poller.unregister(fd)
            except OSError:
                pass   # its owner closed it already: the kernel took it out of the set
            self._stale.add(fd)   # its number may be reused within this poll round

    def watch_fence_fd(self, fd: int, callback) -> None:
        """`callback()` once the fence `fd` (not the loop's: its owner
        closes it) signals; until then it counts as work in flight."""
        def signalled():
            self.unwatch(fd)
            self._fences.discard(fd)
            callback()
        self.watch(fd, signalled)
        self._fences.add(fd)

    def watch_fence(self, fence, callback) -> None:
        """`callback()` once `fence` (a SyncFile, now the loop's) signals; None: at once."""
        if fence is None:
            callback()
            return

        def signalled():
            fence.close()
            callback()
        self.watch_fence_fd(fence.fileno(), signalled)

    @property
    def stopping(self) -> bool:
        return self._stop_reason is not None

    def fail(self, exc: BaseException) -> None:
        self._error = self._error or exc
        self.request_stop("error")

    # ----------------------------------------------------------------- run
    def run(self, frames: int | None = None, duration: float | None = None) -> Summary:
        """Stream until `frames` were captured, `duration` passed, or
        request_stop(); the summary."""
        with self.started(frames, duration):
            while self.step():
                pass
        return self.summary

    @contextlib.contextmanager
    def started(self, frames: int | None = None, duration: float | None = None):
        """Streaming inside the block; step() runs one pass of the loop. On
        the way out everything is cleaned up (display restored, leases
        released, fds closed) and an error a consumer reported is raised."""
        try:
            self._start()
            self._passes = self._loop(frames or self.frames, duration or self.duration)
            yield self
        except BaseException:
            self._cleanup(quiet=True)  # the first error is the one to report
            raise
        if self._passes is not None:   # left early: wind down as a stop would
            self.request_stop(self._stop_reason or "closed")
            try:
                for _ in self._passes:
                    pass
            except BaseException:
                self._cleanup(quiet=True)
                raise
        self._cleanup()
        if self._error is not None:
            raise self._error
        for port in self.ports:   # what the stop released counts too
            self.summary.consumers[port.consumer.name] = port.counts()

    def step(self) -> bool:
        """One pass of the event loop (waits for the next event); False once the run has ended."""
        try:
            next(self._passes)
            return True
        except StopIteration:
            self._passes = None
            return False

    def _start(self) -> None:
        self._poller = select.epoll()
        self._closers.append(self._poller)
        self.watch(self._stop_r, lambda: os.read(self._stop_r, 64))
        src = self.source
        v4l2 = isinstance(src, CaptureDevice)
        for s in self.sources:
            if not isinstance(s, CaptureDevice) and getattr(s, "timer_fd", None) is None:
                raise UsageError(f"{s.path}: a pipeline's source is a V4L2 device or a timer source "
                                 "(the frame queue drives it)")
        self.queue = FrameQueue(self._poller.fileno())
        self.queue.attach(src)
        for s in self.sources[1:]:   # numbered in the list's order: a frame's source is its place there
            self.queue.add_device(s)
        if self.timeline is not None:
            from sits.pipeline.timeline import Timeline
            timeline = Timeline(self.timeline)
            self._closers.append(timeline)   # closed here too when the run fails before its end
            self.queue.record_timeline(timeline)
        if self.display is not None:
            if self.display.zero_copy and any(b.dmabuf is None for b in src.buffers):
                raise DeviceError(f"{src.path}: a display imports dma-bufs, and this source's buffers are not")
            self.display.attach(self.queue, src, self)
        for port in self.ports:
            takes = self._takes(port)
            ctx = PipelineContext(self.sources[takes[0]], self._consumer_watch(port), self.unwatch, self.fail,
                                  self.queue, sources={i: self.sources[i] for i in takes},
                                  watch_stage=self.watch_stage)
            self._guard(port, port.consumer.start, ctx)
            if not port.consumer.in_queue:   # one that works in Python: a sink of its own
                port.attach(self.queue, takes)
        if v4l2:
            self._monitor()
        self.start_source(src)
        for i, s in enumerate(self.sources[1:], 1):
            s.start()
            self._watch_source(i, True)
        if self.display is not None:
            self._handlers[self.display.card.fileno()] = self.display.flip_events

    def _watch_display(self) -> None:
        """Python's own poll reads every flip event: the DRM fd in the epoll
        set (C's run() takes it out and puts it back as it needs)."""
        if self.display is not None and not self.display.watching_fd():
            self._poller.register(self.display.card.fileno(), select.EPOLLIN)
            self.display.watching_fd(True)

    def _takes(self, port) -> tuple[int, ...]:
        """The ids of the sources `port`'s consumer takes frames from."""
        wanted = port.takes if port.takes is not None else (self.source,)
        ids = []
        for s in (wanted if isinstance(wanted, (list, tuple)) else (wanted,)):
            found = ([s] if isinstance(s, int) and 0 <= s < len(self.sources)
                     else [i for i, mine in enumerate(self.sources) if mine is s])
            if not found:
                raise UsageError(f"consumer {port.consumer.name}: it takes frames from "
                                 f"{getattr(s, 'path', s)}, which is no source of this pipeline")
            ids.append(found[0])
        return tuple(ids)

    def _consumer_watch(self, port):
        def watch(fd, callback):
            self.watch(fd, lambda: self._guard(port, callback))
        return watch

    def _monitor(self) -> None:
        """Uevents: the camera going and coming back, connectors changing."""
        try:
            from sits.pipeline.hotplug import HotplugMonitor
            mon = HotplugMonitor()
        except Exception:  # noqa: BLE001 - hotplug is a nicety; the chain works without it
            return
        self._closers.append(mon)
        self.watch(mon.fileno(), lambda: self._on_uevents(mon))

    def _on_uevents(self, mon) -> None:
        for ev in mon.read():
            if ev.subsystem == "video4linux":
                cap = self.source
                if ev.action == "remove" and cap is not None and ev.devname == cap.node:   # the node a link led to
                    self._camera_lost(None)
                elif ev.action == "add" and ev.devname and self.reconnect is not None:
                    self.reconnect.added(self, ev.devname)   # it checks who the camera is
                continue
            # HOTPLUG=1 from the driver; any "change" of our card is worth a
            # re-probe too (it is cheap, and synthetic uevents look so).
            if ev.subsystem == "drm" and (ev.hotplug or ev.action == "change") and self.display is not None:
                self.summary.hotplug_events += 1
                self.display.repick()
                self.display.sync()
                self.display.try_commit()

    def _camera_lost(self, exc) -> None:
        if self._stop_reason is not None:
            return  # stopping anyway
        if self.reconnect is None:
            raise DeviceError(f"{self.source.path} disconnected") from exc
        self.reconnect.lost(self)

    def start_source(self, src) -> None:
        """Stream from `src` (the camera, or a camera come back)."""
        self.source = self.sources[0] = src
        self._last_frame = time.monotonic()
        src.start()
        self._watched.discard(self.queue.camera)
        self._watch_source(self.queue.camera, True)

    def source_gone(self) -> None:
        """The camera vanished: its counts are kept, its fd leaves the loop."""
        cap = self.source
        self._watch_source(self.queue.camera, False)
        self._stats_base.add(cap.stats)
        self.source = self.sources[0] = None

    def _watch_source(self, source: int, on: bool) -> None:
        """Source `source`'s fd in the loop, or out of it while a consumer blocks."""
        if on == (source in self._watched) or self.sources[source] is None:
            return
        fd = self.queue.source_fd(source)
        if on:
            self._handlers[fd] = lambda: self._step(lambda: self.queue.capture(source))
            self._poller.register(fd, select.EPOLLIN | select.EPOLLPRI)
            self._watched.add(source)
        else:
            self.unwatch(fd)
            self._watched.discard(source)

    def _watch_sources(self, capturing: bool) -> None:
        """Each source's fd in the loop while it streams and no blocking consumer's port is full."""
        for i, s in enumerate(self.sources):
            self._watch_source(i, capturing and s is not None and not self.queue.blocked(i))

    # ---------------------------------------------------------------- loop
    def _loop(self, frames, duration):
        """The event loop, one pass per next()."""
        s = self.summary
        start = time.monotonic()
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        deadline = start + duration if duration else None
        last_status = start
        self._last_frame = start
        capturing = True
        stop_deadline = None
        self._python_passes = 0
        while True:
            self._python_passes += 1
            now = time.monotonic()
            if capturing and self._stop_reason is None:
                if frames and self._captured() >= frames:
                    self._stop_reason = "frames"
                elif deadline and now >= deadline:
                    self._stop_reason = "duration"
            if (capturing and self.source is not None and self._stop_reason is None
                    and now - self._last_seen() > self.stall_timeout):
                raise DeviceError(f"{self.source.path}: no frame for {self.stall_timeout:.0f} s; "
                                  "the camera stalled")
            if self._stop_reason and capturing:
                capturing = False
                stop_deadline = now + STOP_WAIT_S
                self._stop_capture()
            if not capturing and (not self._busy() or now >= stop_deadline + self._writeback_grace()):
                break
            if self.queue.failed is not None:
                failed, self.queue.failed = self.queue.failed, None
                self._on_queue_error(failed)
            self._check_stage()
            self._watch_sources(capturing)
            timeout = self._timeout(now, deadline if capturing else stop_deadline + self._writeback_grace())
            if self.source is not None:   # the steady state: the C frame queue's loop
                self.queue.frames_limit = frames if capturing and frames else 0
                if self.display is not None:
                    self.display.sync()
                code = self.queue.run(timeout * 1000)
                code = self.handle(code)
                events = self._poller.poll(0) if code == lib.SITS_Q_WAKE else []
            else:   # no source (a camera lost): Python's epoll alone
                self._watch_display()
                due = self.queue.next_deadline()   # C halves' deadlines
                events = self._poller.poll(timeout if due is None else min(timeout, due))
            self._stale.clear()
            for fd, _ in events:
                if fd in self._stale:
                    continue  # closed (and its number maybe reused) earlier in this round
                handler = self._handlers.get(fd)
                if handler is not None:
                    handler()
            if self.source is None:
                self._step(self.queue.deadlines)
            self._tick()
            if self.reconnect is not None:
                self.reconnect.poll(self, bool(events))
            now = time.monotonic()
            if self.on_status and now - last_status >= self.status_interval:
                last_status = now
                self._finish(start, cpu0)
                self.on_status(s)
            yield
        self._finish(start, cpu0)
        s.stopped_by = self._stop_reason or "fence timeout"
        wb = self.display.writeback if self.display is not None else None
        if wb is not None:
            if wb.pending:   # the bound passed: counted, not silently dropped
                wb.counts["unfinished"] = 1
                s.verify = dict(wb.counts)
            s.snapshot = wb.finish()

    def _check_stage(self) -> None:
        """A stage (the display's, a consumer's) that has made nothing of
        HOPELESS_FRAMES frames ends the run."""
        for stage in self.queue.stages():
            c = stage.counts()
            if c["frames"] == 0 and c["errors"] >= HOPELESS_FRAMES:
                raise DeviceError(f"{self.source.path if self.source else 'the camera'}: none of its first "
                                  f"{c['errors']} frames could be made by the {stage.name} stage ({stage.name} "
                                  f"errors: {stage.why()})")

    def _timeout(self, now: float, deadline: float | None) -> float:
        """Seconds the loop may wait: the status line, the run's deadline,
        the consumers' deadlines, the reconnect's second."""
        t = self.status_interval if self.on_status else QUIET_INTERVAL_S
        if deadline:
            t = min(t, max(0.0, deadline - now))
        for port in self.ports:
            c = port.consumer.timeout()
            if c is not None:
                t = min(t, max(0.0, c))
        if self.reconnect is not None and self.reconnect.waiting:
            t = min(t, 1.0)   # look for the camera at least once a second
        return t

    def _tick(self) -> None:
        for port in self.ports:
            t = port.consumer.timeout()
            if t is not None and t <= 0:
                self._guard(port, port.consumer.tick)
            self._guard(port, port.ready_changed)
        self._deliver_all()

    def _writeback_grace(self) -> float:
        wb = self.display.writeback if self.display is not None else None
        return WRITEBACK_WAIT_S - STOP_WAIT_S if wb is not None and wb.pending else 0.0

    def _busy(self) -> bool:
        """Work still in flight at the end: a flip, a fence, a consumer's."""
        if self.display is not None and self.display.busy():
            return True
        return bool(self._fences) or any(p.consumer.busy() for p in self.ports)

    def _guard(self, port, fn, *args):
        """Run a consumer's code; what it raises stops the run, named."""
        try:
            return fn(*args)
        except SitsError:
            raise
        except Exception as exc:
            raise ConsumerError(f"consumer {port.consumer.name}: {type(exc).__name__}: {exc}") from exc

    # -------------------------------------------------------------- frames
    def _step(self, fn) -> int:
        """One step of the frame queue, with the display's numbers current."""
        if self.display is not None:
            self.display.sync()
        return self.handle(fn())

    def handle(self, code: int) -> int:
        """Act on what a step of the frame queue reported."""
        q = self.queue
        self._deliver_all()
        if self.display is not None:
            self.display.try_freeze()
        if code == lib.SITS_Q_SINK:
            q.asking().on_ask()
        elif code == lib.SITS_Q_ERROR:
            err = q.error()
            if err.op == lib.SITS_OP_ATOMIC:
                self.display.commit_next()   # Python's commit retries it and reports a failure
            elif err.op in (lib.SITS_OP_DQBUF, lib.SITS_OP_QBUF):
                self._on_queue_error(err)
            else:
                raise err.error
        elif code == lib.SITS_Q_FRAMES:
            self._stop_reason = self._stop_reason or "frames"
        return code

    def _deliver_all(self) -> None:
        """The frames the queue hands to the consumers that work in Python."""
        for frame, sink in self.queue.deliveries():
            self._last_frame = time.monotonic()
            port = self.queue.half(sink)
            try:
                self._guard(port, port.give, frame)
            finally:
                if not frame.holders:    # it did not keep it
                    frame.lease("pipeline").release()

    def _on_queue_error(self, exc: QueueError) -> None:
        """A DQBUF or QBUF of the frame queue failed."""
        if exc.source != self.queue.camera:
            # another source: no reconnect waits for it, and its run cannot go on as asked
            other = self.sources[exc.source]
            if is_disconnect(exc.error):
                raise DeviceError(f"{other.path} disconnected") from exc.error
            raise exc.error
        cap = self.source
        if cap is None:
            return   # a lost camera's buffer: nothing to queue it into
        if is_disconnect(exc.error):
            self._camera_lost(exc.error)
            return
        if exc.op == lib.SITS_OP_DQBUF and isinstance(cap, CaptureDevice):
            cap.dequeue_failed(exc.error)   # a fatal queue error: the queue restarts
            return
        raise exc.error

    def _stop_capture(self) -> None:
        self._watch_sources(False)
        self._stop_sources()
        if self.display is not None:
            self.display.drop_waiting()

    def _stop_sources(self) -> None:
        """Every source that streams stops (STREAMOFF, the timer off); one
        that is gone has nothing left to stop."""
        for src in self.sources:
            if src is not None and src.streaming:
                try:
                    src.stop()
                except OSError:
                    pass

    # ------------------------------------------------------------ counters
    def _captured(self) -> int:
        return self.queue.captured

    def _last_seen(self) -> float:
        if self.queue.last_frame_ns:
            return max(self._last_frame, self.queue.last_frame_ns / 1e9)
        return self._last_frame

    def _finish(self, start, cpu0) -> None:
        s = self.summary
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        st = CaptureStats().add(self._stats_base)
        src = self.source
        if src is not None:
            st.add(src.stats)
        q = self.queue
        s.frames_captured = q.captured
        stage, display_dropped = None, 0
        if self.display is not None and self.display.K is not None:
            d = self.display.counts()
            display_dropped = d["dropped"]
            s.frames_displayed, s.frames_dropped = d["displayed"], d["dropped"]
            s.timestamp_anomalies = d["anomalies"]
            s.c_loop_commits = self.display.c_commits()
            s.latency_ms = self.display.latency_ms()
            s.dequeue_to_commit_ms = self.display.submit_ms()
            made_by = self.display.stage
            stage = made_by.counts() if made_by is not None else None
            if stage is not None:   # its frames that never reached the display are the display's drops too
                s.stages = {made_by.name: stage}
                s.frames_dropped += stage["dropped"] + stage["errors"]
        s.wakeups = {"c_loop": q.wakeups, "python": self._python_passes}
        s.duration_s = round(time.monotonic() - start, 3)
        s.cpu_ms_per_frame = round(1000 * cpu / max(1, s.frames_captured), 3)
        s.fps = round(s.frames_displayed / s.duration_s, 2) if s.duration_s else 0.0
        s.capture_fps = round(q.capture_fps, 2)
        counts = [q.source_counts(i) for i in range(len(self.sources))]
        s.buffer_errors = sum(c["buffer_errors"] for c in counts)
        s.v4l2_errors = {"requeue": sum(c["requeue_errors"] for c in counts), "dequeue": st.dequeue_errors,
                         "setup_retries": st.setup_retries, "stream_restarts": st.stream_restarts}
        s.drops = {"sequence_gap": sum(c["sequence_gaps"] for c in counts)}
        unqueued = sum(c["unqueued_fills"] for c in counts)
        if unqueued:   # a driver that fills buffers it was not given (v4l2loopback)
            s.drops["unqueued_fill"] = unqueued
        s.sources = [{"device": src.path if src is not None else s.device, "captured": c["captured"],
                      "sequence_gap": c["sequence_gaps"], "buffer_errors": c["buffer_errors"],
                      "requeue_errors": c["requeue_errors"]} for src, c in zip(self.sources, counts)]
        if self.display is not None:
            s.drops["display"] = display_dropped
        if stage is not None:
            s.drops[made_by.name], s.drops[f"{made_by.name}_error"] = stage["dropped"], stage["errors"]
        if self.display is not None and self.display.writeback is not None:
            s.verify = dict(self.display.writeback.counts)
        if self.display is not None and self.display.overlay is not None:
            s.sections["overlay"] = self.display.overlay.report()
        for port in self.ports:
            s.drops[port.consumer.name] = port.drops
            s.consumers[port.consumer.name] = port.counts()
            report = port.consumer.report()
            if report is not None:
                s.sections[report[0]] = report[1]

    # ------------------------------------------------------------- cleanup
    def _cleanup(self, quiet: bool = False) -> None:
        errors = []
        for port in self.ports:
            port.clear()
            try:
                port.consumer.stop()
            except Exception as exc:  # noqa: BLE001 - keep closing the rest
                errors.append(exc)
        if self.display is not None:
            try:
                self.display.restore()
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)
        q = self.queue
        if self.display is not None and self.display.K is not None:
            self.display.close_fences()
        if q is not None:
            for source in list(q.devices):
                q.detach(source)
            # after the consumers' last releases; nothing changes the frames' records any more
            self.summary.timeline = q.end_timeline()
        if self.display is not None:
            self._handlers.pop(self.display.card.fileno(), None)   # in the epoll set or not: C's say
        for fd in [fd for fd in self._handlers if fd != self._stop_r]:
            self.unwatch(fd)
        self._stop_sources()
        if self.reconnect is not None:
            self.reconnect.close()
        if self.display is not None:
            self.display.close()
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
