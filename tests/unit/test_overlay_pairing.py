"""The display's C half pairs frames with their drawings (sinks/kms.c): a
real drawing stage (stage.c's worker, a Python work that draws nothing)
makes each camera frame's drawing; the display's overlay port takes them;
the test plays the display's Python half (every commit is its own,
python_commits) and its flip events. The rules tested are the C ones
(sits_kms_choose, sits_kms_committed, the flip's release), through the
queue's own calls."""
import os
import select
import threading
import time

import pytest

from sits._kernel import ffi, lib
from sits.pipeline import python_work
from sits.pipeline.frame_queue import NONE, FrameQueue
from sits.pipeline.stage import Stage
from tests.unit.queue_steps import KmsStandIn, Ticks

NBUFS = 6


class Draws:
    """The drawing stage's work: each frame waits until the test lets its
    sequence through (or fails it)."""

    def __init__(self, queue):
        self.queue = queue
        self.allowed: set[int] = set()
        self.failing: set[int] = set()
        self.cv = threading.Condition()

    def allow(self, *sequences):
        with self.cv:
            self.allowed.update(sequences)
            self.cv.notify_all()

    def make(self, S, index, bytesused, out) -> int:
        seq = self.queue.c_queue.frames[index].sequence
        with self.cv:
            self.cv.wait_for(lambda: seq in self.allowed or seq in self.failing, timeout=5)
        return 5 if seq in self.failing else 0


class Rig:
    def __init__(self, policy: str, budget_ms: float = 1000.0, waiting: int = 2):
        self.ep = select.epoll()
        self.q = q = FrameQueue(self.ep.fileno())
        self.ticks = Ticks(q, NBUFS)
        port = ("drop-newest", waiting) if policy == "sync" else ("latest", 1)
        self.d = KmsStandIn(q, port=port)
        self.draws = Draws(q)
        self._in = {i: bytearray(16) for i in q.buffers_of(q.camera)}
        self._out = [bytearray(16) for _ in range(waiting + 3)]
        self.stage = Stage(q, "overlay", python_work.WORK, python_work.handle(self.draws), takes=q.camera,
                           inputs=self._in, outputs=self._out, out_bytes=16,
                           policy="drop-newest" if policy == "sync" else "latest", depth=waiting)
        K = self.K = self.d.K
        self.sink = q.add_sink(lib.sits_kms_overlay_sink(), K, "drop-oldest", len(self._out), half=self,
                               takes=self.stage.source)
        K.overlay_sink = self.sink
        K.overlay_policy = lib.SITS_OVERLAY_SYNC if policy == "sync" else lib.SITS_OVERLAY_LATEST
        K.overlay_budget_ns = int(budget_ms * 1e6)
        K.overlay_shown, K.overlay_seq = NONE, -1
        K.overlay_on = 1
        self.codes = []

    def frame(self) -> int:
        """A camera frame; the queue's code."""
        self.ticks.tick()
        return self.q.capture()

    def drawing(self, *sequences) -> int:
        """The drawings of `sequences` are made and come to the overlay port; the last code."""
        self.draws.allow(*sequences)
        code = 0
        for _ in sequences:
            select.select([self.stage.fileno()], [], [], 5)
            code = self.q.capture(self.stage.source) or code
        return code

    def choose(self) -> tuple[int, int]:
        chosen = ffi.new("int32_t *")
        index = self.q.ask(lib.sits_kms_choose, self.K, chosen)
        return index, chosen[0]

    def commit(self) -> tuple[int, int]:
        """The Python half's commit of what C chose: (frame seq, drawing seq or -1)."""
        index, drawing = self.choose()
        assert index != NONE
        pair = (self.q.sequence(index), self.q.sequence(drawing) if drawing != NONE else -1)
        self.q.step(lib.sits_kms_committed, self.K, index, drawing, -1, time.monotonic_ns())
        return pair

    def flip(self) -> int:
        self.d.flip(time.monotonic_ns())
        return self.d.flip_events()

    def overlay_holds(self, seq: int) -> bool:
        return any(self.q.holds(self.sink, i) and self.q.sequence(i) == seq
                   for i in self.q.buffers_of(self.stage.source))

    def close(self):
        self.draws.allow(*range(1000))
        self.stage.close()
        self.d.close()
        self.ticks.close()
        self.ep.close()


@pytest.fixture
def rig():
    made = []

    def make(*args, **kw):
        r = Rig(*args, **kw)
        made.append(r)
        return r
    os.environ.setdefault("SITS_QUEUE_CHECK", "1")
    yield make
    for r in made:
        r.close()


def asks_commit(rig, code) -> bool:
    return rig.d.asked(code, lib.SITS_KMS_ASK_COMMIT)


def test_sync_a_frame_waits_for_its_own_drawing_and_goes_with_it(rig):
    r = rig("sync")
    assert r.frame() == 0                   # its drawing is not made: no commit asked
    assert r.choose()[0] == NONE
    assert asks_commit(r, r.drawing(0))     # the drawing came: the commit is asked for
    assert r.commit() == (0, 0)
    assert r.K.with_own == 1 and r.K.with_older == 0


def test_sync_a_drawing_leaves_the_plane_at_the_flip_that_replaced_it(rig):
    r = rig("sync")
    r.frame()
    r.drawing(0)
    r.commit()
    r.flip()
    assert r.overlay_holds(0)               # on the plane
    r.frame()
    assert asks_commit(r, r.drawing(1))
    assert r.commit() == (1, 1)
    assert r.overlay_holds(0)               # committed over, not yet flipped: still scanned out
    r.flip()
    assert not r.overlay_holds(0) and r.overlay_holds(1)


def test_sync_a_frame_whose_budget_passes_is_shown_with_the_last_drawing(rig):
    r = rig("sync", budget_ms=20)
    r.frame()
    r.drawing(0)
    r.commit()
    r.flip()
    r.frame()                               # frame 1's drawing never comes in time
    assert r.choose()[0] == NONE
    assert r.q.next_deadline() is not None  # the display's deadline is its budget
    time.sleep(0.03)
    assert asks_commit(r, r.q.deadlines())
    assert r.commit() == (1, -1)            # the plane keeps drawing 0
    assert r.K.with_older == 1 and r.K.age_max == 1


def test_sync_a_waiting_frame_is_dropped_when_a_newer_ones_drawing_is_ready(rig):
    r = rig("sync", budget_ms=20, waiting=2)
    r.draws.failing.add(0)                  # frame 0's drawing fails
    r.frame()
    r.frame()
    r.drawing(0)
    r.drawing(1)
    time.sleep(0.03)
    code = r.q.deadlines()
    assert asks_commit(r, code) or asks_commit(r, r.d.try_commit())
    assert r.commit() == (1, 1)
    assert r.K.dropped_waiting == 1 and r.K.with_own == 1


def test_latest_the_newest_drawing_goes_with_the_newest_frame(rig):
    r = rig("latest")
    r.frame()
    assert asks_commit(r, r.d.try_commit())     # no drawing yet: the frame goes alone
    assert r.commit() == (0, -1)
    r.drawing(0)
    r.flip()
    r.frame()
    assert r.commit() == (1, 0)                 # the newest drawing is frame 0's
    r.frame()                                   # frame 2 waits for the flip
    r.drawing(1, 2)
    assert asks_commit(r, r.flip())
    assert r.commit() == (2, 2)
    K = r.K
    assert (K.with_none, K.with_older, K.with_own, K.age_max) == (1, 1, 1, 1)
