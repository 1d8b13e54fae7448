"""The C frame queue driven one event at a time, without V4L2, DRM or a GPU,
for the unit tier: what each event made it do (buffers queued again, in
order; commits; frames delivered to Python; CUDA launches).

Stand-ins for the devices, each reaching the queue's real C:
- the source is the queue's timer source on an eventfd: one write is one
  tick, the queue fills the buffer queued longest ago (as drivers do);
- the DRM fd is a pipe the driver writes flip events into; commits are the
  driver's (the queue hands every commit back), each with an out-fence
  that is a pipe's read end (readable once signalled, as a sync_file);
- the CUDA launch and stream query are C callbacks into Python; a launch
  completes when the driver writes its end stamp.

`python -m tests.unit.queue_steps DIR` records seeded random runs as
traces (each event and what it made the queue do) into DIR; the replay
test drives the queue through each trace's events and expects the same.
"""
from __future__ import annotations

import json
import os
import random
import select
import sys
import types

from sits._kernel import ffi, lib
from sits.ebpf.histogram import SLOTS
from sits.pipeline.frame_queue import NONE, FrameQueue

CONFIGS = {  # the holders a trace's frames meet
    "display": dict(display=True),
    "display+python": dict(display=True, python=True),
    "display+cuda": dict(display=True, cuda=True),
    "cuda+python": dict(cuda=True, python=True),
    "all": dict(display=True, cuda=True, python=True),
    "display-lazy": dict(display=True, lazy_flips=True),
    "all-lazy": dict(display=True, cuda=True, python=True, lazy_flips=True),
}


def closing(cls):
    """A fixture's body: yields a maker of `cls` objects, each closed when the test ends."""
    made = []

    def make(*args, **kw):
        obj = cls(*args, **kw)
        made.append(obj)
        return obj
    yield make
    for obj in made:
        obj.close()


class Ticks:
    """The stand-in source: the frame queue's timer source on an eventfd
    (one write: one tick), attached as a SyntheticCamera is."""

    def __init__(self, q, nbufs: int, bytesused: dict[int, int] | None = None):
        self.fd = self.timer_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.buffers = [types.SimpleNamespace(index=i) for i in range(nbufs)]
        self.queue_owner = None
        q.attach(self)
        q.requeue_idle()    # every buffer given to the source, 0 first, as at STREAMON
        q.source.started(1_000_000_000, 10_000_000, bytesused)

    def fileno(self) -> int:
        return self.fd

    def tick(self) -> None:
        os.eventfd_write(self.fd, 1)

    def close(self) -> None:
        os.close(self.fd)


class Fence:
    """A commit's out-fence: a pipe's read end, readable once signalled."""

    def __init__(self, signalled: bool):
        self.r, self.w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        if signalled:
            self.signal()

    def detach(self) -> int:
        return self.r   # the queue owns and closes it from now on

    def signal(self) -> None:
        if self.w >= 0:
            try:
                os.write(self.w, b"x")
            except BrokenPipeError:
                pass   # the queue closed its end: nothing waits for it
            os.close(self.w)
            self.w = -1


class KmsStandIn:
    """The KMS sink's C half on a pipe for the DRM fd: flip events are
    written by the test, every commit is the test's (python_commits)."""

    def __init__(self, q, lazy_flips: bool = False, takes: int = 0, port: tuple[str, int] = ("latest", 1)):
        self.q = q
        self.r, self.w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        K = self.K = ffi.new("struct sits_kms *")
        K.dfd, K.python_commits, K.hand_back_displayed = self.r, 1, -1
        for commit in (K.pending, K.on_screen, K.retire):
            commit.index, commit.fence, commit.overlay = NONE, -1, NONE
        self._slots = [ffi.new("uint32_t[]", SLOTS) for _ in range(2)]
        K.latency.slots, K.submit.slots = self._slots
        self.sink = K.sink = q.add_sink(lib.sits_kms_sink(), K, *port, half=self, takes=takes)
        q.sink_fd(self.sink, self.r)
        q.sink_fd_watched(self.sink, not lazy_flips)   # lazy: the next frame reads the event
        self.vblank = 1000

    def asked(self, code: int, what: int) -> bool:
        return code == lib.SITS_Q_SINK and self.K.asks == what

    def waiting(self) -> int:
        """The buffer of the frame waiting for a commit (NONE: none)."""
        return lib.sits_kms_waiting(self.q.c_queue, self.K)

    def waiting_dequeued_ns(self) -> int:
        return self.q.c_queue.frames[self.waiting()].dequeued_ns

    def commit(self, started_ns: int, showing: int | None = None, fence=None) -> None:
        """The test's commit of the waiting frame (showing: OWN instead)."""
        fd = fence.detach() if fence is not None else -1
        self.q.step(lib.sits_kms_committed, self.K, self.waiting() if showing is None else showing, NONE, fd,
                    started_ns)

    def flip(self, after_ns: int, vblanks: int = 1) -> int:
        """The pending commit's flip event, `vblanks` after the last, at the
        first microsecond (an event's resolution) after `after_ns`; its time."""
        self.vblank += vblanks
        t = (after_ns // 1000 + 1) * 1000
        ev = ffi.new("struct drm_event_vblank *")
        ev.base.type, ev.base.length = lib.DRM_EVENT_FLIP_COMPLETE, ffi.sizeof(ev[0])
        ev.user_data, ev.sequence = self.K.pending.tag, self.vblank
        ev.tv_sec, ev.tv_usec = t // 10**9, t % 10**9 // 1000
        os.write(self.w, bytes(ffi.buffer(ev)))
        return t

    def flip_events(self) -> int:
        return self.q.step(lib.sits_kms_flip_events, self.K)

    def retired(self) -> int:
        return self.q.step(lib.sits_kms_retired, self.K)

    def try_commit(self) -> int:
        return self.q.step(lib.sits_kms_try_commit, self.K)

    def holds(self, index: int) -> bool:
        return self.q.holds(self.sink, index)

    def close(self) -> None:
        for commit in (self.K.pending, self.K.on_screen, self.K.retire):
            if commit.fence >= 0:
                os.close(commit.fence)
                commit.fence = -1
        os.close(self.r)
        os.close(self.w)


class Steps:
    """One queue and its stand-ins; each method is one event and returns
    what it made the queue do."""

    def __init__(self, nbufs: int = 4, display=False, cuda=False, python=False, lazy_flips=False,
                 commit_after_retire=False):
        self.nbufs = nbufs
        # display.py's retired() tries a commit at once (the recorded traces' stand-in did not)
        self.commit_after_retire = commit_after_retire
        self.ep = select.epoll()
        self.q = q = FrameQueue(self.ep.fileno())
        L = self.c_queue = q.c_queue
        self.ticks = Ticks(q, nbufs)
        self.d = KmsStandIn(q, lazy_flips) if display else None
        self.lazy_flips = lazy_flips
        self.fences: list[Fence] = []   # out-fences made unsignalled, oldest first
        self.held: list[int] = []       # buffers Python holds, oldest first
        q.offer(q.python_sink, python)
        self.launched: list[int] = []   # CUDA launches not yet stamped, oldest first
        self.cuda = None
        if cuda:
            from sits.pipeline.cuda_queue import QueueCuda
            self._stamps = ffi.new("uint64_t[]", lib.SITS_Q_MAX_BUFS * lib.SITS_CU_STAMP_WORDS)
            self._launch = ffi.callback("int(uint64_t, uint64_t)", self._on_launch)
            self._query = ffi.callback("int(uint64_t)", lambda stream: lib.SITS_CU_NOT_READY)
            entry_points = (int(ffi.cast("uintptr_t", self._launch)), int(ffi.cast("uintptr_t", self._query)))
            self.cuda = QueueCuda(q, {i: 100 + i for i in range(nbufs)}, 0, entry_points,
                                  int(ffi.cast("uintptr_t", self._stamps)))
        self.gpu_ns = 0
        self.out: dict = {}

    def _on_launch(self, graph: int, stream: int) -> int:
        self.launched.append(graph - 100)
        self.out.setdefault("launch", []).append(graph - 100)
        return 0

    # ------------------------------------------------------------ events
    def _step(self, fn) -> dict:
        L = self.c_queue
        before = [L.queued[i] for i in range(self.nbufs)]
        self.out = {}
        code = fn()
        self._settle(code)
        queued = [i for i in range(self.nbufs) if L.queued[i] and not before[i]]
        if queued:
            self.out["qbuf"] = sorted(queued, key=lambda i: self.q.source.state.given_order[i])
        return self.out

    def _settle(self, code: int) -> None:
        """What the pipeline does with a step's code: take the frame
        delivered to Python, make the commit the display asks for, note a
        flip that waits for its fence."""
        L, d = self.c_queue, self.d
        while True:
            if L.delivered.index != NONE:
                self.held.append(L.delivered.index)
                self.out.setdefault("deliver", []).append([L.delivered.index, L.delivered.sequence])
                L.delivered.index = NONE
            if d is not None and d.asked(code, lib.SITS_KMS_ASK_COMMIT) and d.waiting() != NONE \
                    and d.K.pending.index == NONE:
                self._commit()
                code = d.try_commit()
                continue
            if d is not None and d.asked(code, lib.SITS_KMS_ASK_FENCE):
                self.out["retire_wait"] = d.K.retire.index
            return

    def _commit(self) -> None:
        d = self.d
        index = d.waiting()
        signalled = self.rng_fence()
        fence = Fence(signalled)
        if not signalled:
            self.fences.append(fence)
        self.out.setdefault("commit", []).append([index, self.c_queue.frames[index].sequence, int(signalled)])
        d.commit(d.waiting_dequeued_ns() + 1, fence=fence)

    rng_fence = staticmethod(lambda: True)   # the recorder draws it; the replay reads it

    def tick(self) -> dict:
        """The source fills a buffer; the queue takes it."""
        def fn():
            self.ticks.tick()
            return self.q.capture()
        return self._step(fn)

    def flip(self) -> dict:
        """The pending commit's flip event (lazy: read at the next tick)."""
        d = self.d
        d.flip(d.K.pending.shown_from_ns + 5_000_000)
        if self.lazy_flips and not self.stopping:
            return self._step(lambda: 0)
        return self._step(d.flip_events)

    def flip_read(self) -> dict:
        """A flip event that waited for the next frame is read (stopping: Python's loop reads it)."""
        return self._step(self.d.flip_events)

    def signal(self) -> dict:
        """The oldest unsignalled out-fence signals."""
        fence = self.fences.pop(0)
        fence.signal()
        d = self.d
        if d.K.retire.index != NONE and d.K.on_screen.fence == fence.r:
            if self.commit_after_retire:
                return self._step(lambda: d.retired() or d.try_commit())
            return self._step(d.retired)
        return self._step(lambda: 0)

    def release(self, which: int) -> dict:
        """Python lets go of the `which`-th buffer it holds."""
        index = self.held.pop(which)
        return self._step(lambda: lib.sits_queue_release(self.c_queue, self.q.python_sink, index))

    def cuda_done(self) -> dict:
        """The oldest launch writes its stamps; the queue looks."""
        index = self.launched.pop(0)
        self.gpu_ns += 1000
        self._stamps[2 * index] = self.gpu_ns
        self._stamps[2 * index + 1] = self.gpu_ns + 500
        return self._step(lambda: self.q.step(lib.sits_cuda_done, self.cuda.C))

    def disconnect(self) -> dict:
        """The source goes away: nothing is queued into it any more."""
        self.gone = self.stopping = True
        return self._step(lambda: (self.q.detach(), 0)[1])

    gone = False        # the source went away
    stopping = False    # no more frames: Python's loop reads the DRM fd (Pipeline._watch_display)

    # ------------------------------------------------------- what is valid
    def can(self) -> list[str]:
        kinds = [] if self.stopping else ["tick"]
        if self.d is not None and self.d.K.pending.index != NONE and not self._flip_waiting():
            kinds.append("flip")
        elif self.stopping and self.d is not None and self._flip_waiting():
            kinds.append("flip_read")
        if self.fences and self.fences[0].w >= 0:
            kinds.append("signal")
        if self.held:
            kinds.append("release")
        if self.launched:
            kinds.append("cuda_done")
        return kinds

    def _flip_waiting(self) -> bool:
        return bool(select.select([self.d.r], [], [], 0)[0])

    def close(self) -> None:
        for fence in self.fences:
            fence.signal()
        if self.d is not None:
            self.d.close()
        self.ticks.close()
        self.ep.close()


def run_events(steps: Steps, events: list) -> list:
    """Drive `steps` through recorded events; what each made the queue do."""
    outs = []
    fences = iter([e["fence"] for e in events if "fence" in e])
    steps.rng_fence = lambda: bool(next(fences))
    for e in events:
        kind = e["do"]
        out = steps.release(e["which"]) if kind == "release" else getattr(steps, kind)()
        outs.append(out)
    return outs


def record(config: str, seed: int, n: int = 400) -> dict:
    rng = random.Random(seed)
    steps = Steps(**CONFIGS[config])
    events, draws = [], []
    steps.rng_fence = lambda: draws.append(rng.random() < 0.7) or draws[-1]
    try:
        for _ in range(n):
            kinds = steps.can()
            kind = rng.choice(kinds)
            e = {"do": kind}
            if kind == "release":
                e["which"] = rng.randrange(len(steps.held))
            del draws[:]
            out = steps.release(e["which"]) if kind == "release" else getattr(steps, kind)()
            for d in draws:
                e.setdefault("fence", int(d))
            if len(draws) > 1:
                raise AssertionError("two commits in one event")
            e["out"] = out
            events.append(e)
    finally:
        steps.close()
    return {"config": config, "seed": seed, "events": events}


def main(argv) -> int:
    out_dir = argv[0]
    os.makedirs(out_dir, exist_ok=True)
    for config in CONFIGS:
        for seed in (1, 2):
            trace = record(config, seed)
            path = os.path.join(out_dir, f"{config}-{seed}.json")
            with open(path, "w") as f:
                json.dump(trace, f, separators=(",", ":"))
                f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
