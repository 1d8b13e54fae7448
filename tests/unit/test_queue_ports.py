"""A sink's port, in the frame queue's C, driven one frame at a time: a
sink that cannot take a frame now (here: a Python sink whose last frame
Python has not taken) keeps up to `depth` frames waiting, and its policy
says what happens to more. Every frame is held while it waits; one the
port drops goes back to the source at once, counted as the sink's."""
import os
import select

import pytest

from sits._kernel import ffi, lib
from sits.pipeline.frame_queue import NONE, FrameQueue
from tests.unit.queue_steps import Ticks

BUFFERS = 6


class Queue:
    """A frame queue on the timer source with an eventfd for the timer (one
    write: one tick), and one Python sink with the policy under test."""

    def __init__(self, policy: str, depth: int):
        self.ep = select.epoll()
        self.q = q = FrameQueue(self.ep.fileno())
        self.c_queue = q.c_queue
        self.ticks = Ticks(q, BUFFERS)
        self.sink = q.add_sink(ffi.NULL, ffi.NULL, policy, depth)

    def tick(self) -> int:
        self.ticks.tick()
        return self.q.capture()

    def waiting(self) -> list[int]:
        """The sequence numbers waiting in the sink's port, oldest first."""
        s = self.c_queue.sinks[self.sink]
        return [self.c_queue.frames[s.port[i]].sequence for i in range(s.port_n)]

    def close(self):
        self.ticks.close()
        self.ep.close()


@pytest.fixture
def queue():
    made = []

    def make(policy, depth):
        made.append(Queue(policy, depth))
        return made[-1]
    yield make
    for q in made:
        q.close()


def run(queue, policy, depth, frames=5):
    """Frame 0 goes to Python (not taken), frames 1.. meet the port."""
    q = queue(policy, depth)
    for _ in range(frames):
        q.tick()
    assert q.c_queue.delivered.index != NONE and q.c_queue.delivered.sequence == 0
    return q


@pytest.mark.parametrize("policy,waiting,dropped", [
    ("drop-oldest", [3, 4], {1, 2}),
    ("drop-newest", [1, 2], {3, 4}),
    ("latest", [4], {1, 2, 3}),
])
def test_a_full_port_drops_as_its_policy_says(queue, policy, waiting, dropped):
    q = run(queue, policy, depth=2)
    assert q.waiting() == waiting
    counts = q.q.sink_counts(q.sink)
    assert counts["dropped"] == len(dropped) and counts["waiting"] == len(waiting)
    # a dropped frame's buffer went back to the source at once
    back = {q.c_queue.frames[i].sequence for i in range(BUFFERS) if q.c_queue.queued[i] and q.c_queue.frames[i].dequeued_ns}
    assert back == dropped
    held = {q.c_queue.frames[i].sequence for i in range(BUFFERS) if q.c_queue.holds[i]}
    assert held == {0, *waiting}


def test_block_stops_dequeuing_until_the_sink_takes_one(queue):
    q = run(queue, "block", depth=2, frames=4)
    assert q.waiting() == [1, 2] and q.q.blocked()
    captured = q.q.captured
    assert q.tick() == lib.SITS_Q_BLOCKED and q.q.captured == captured   # the source waits: no frame taken
    assert q.q.sink_counts(q.sink)["dropped"] == 0
    q.c_queue.delivered.index = NONE                               # Python takes frame 0 ...
    q.q.pump(q.sink)                                         # ... and the port hands it frame 1
    assert q.c_queue.delivered.sequence == 1 and q.waiting() == [2] and not q.q.blocked()
    q.tick()          # the three ticks that waited: one frame, the newest; two numbers skipped
    assert q.q.captured == captured + 1 and q.waiting() == [2, 5]
    assert q.q.source_counts()["sequence_gaps"] == 2


def test_a_python_sink_that_is_not_ready_is_handed_nothing_until_it_is(queue):
    """Python's consumer says it cannot take a frame (its `ready()`): its
    frames wait in its port, held; once ready, one is handed over."""
    q = queue("drop-oldest", depth=2)
    q.q.set_ready(q.sink, False)
    q.tick()
    q.tick()
    assert q.c_queue.delivered.index == NONE and q.waiting() == [0, 1]
    q.q.set_ready(q.sink, True)
    q.q.pump(q.sink)
    assert q.c_queue.delivered.sequence == 0 and q.waiting() == [1]


def test_a_frame_one_port_drops_stays_out_for_the_next_sinks_port(queue, monkeypatch):
    """Frame 2 meets a full drop-newest port first: it is the second sink's
    still, so it must not go back to the source in between."""
    monkeypatch.setenv("SITS_QUEUE_CHECK", "1")
    q = queue("drop-newest", 1)
    q.c_queue.check = 1
    second = q.q.add_sink(ffi.NULL, ffi.NULL, "latest", 1)
    codes = [q.tick() for _ in range(3)]
    assert lib.SITS_Q_ERROR not in codes, q.c_queue.err
    s = q.c_queue.sinks[second]
    index = s.port[0]
    assert s.port_n == 1 and q.c_queue.frames[index].sequence == 2 and not q.c_queue.queued[index]
    assert q.c_queue.sinks[q.sink].dropped == 1
