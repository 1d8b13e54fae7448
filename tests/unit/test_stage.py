"""A stage in the C frame queue (stages/stage.c), driven one event at a
time: the timer source stands in for the camera (tests/unit/queue_steps.py's
Ticks, its buffers' bytes numpy arrays), the CPU conversion (stages/convert.c)
is the work, on its own thread, and a Python sink of the stage's frames
takes what it makes. The queue's conservation check ends every step."""
import select
import time

import numpy as np
import pytest

from sits._kernel import lib
from sits.pipeline import convert
from sits.pipeline.convert_stage import convert_stage
from sits.journey import record
from sits.pipeline.frame_queue import NONE, FrameQueue
from sits.pipeline.timeline import Timeline
from tests.unit.queue_steps import KmsStandIn, Ticks, closing

W, H = 16, 4
STRIDE, PITCH = W * 2 + 8, W * 4 + 16   # padded rows on both sides


class Chain:
    def __init__(self, fourcc="YUYV", nbufs=4, outputs=2, timeline=None, display=False):
        self.epoll = select.epoll()     # the steps below never wait on it
        self.q = FrameQueue(self.epoll.fileno())
        if timeline:
            self.q.record_timeline(Timeline(timeline))
        self.ticks = Ticks(self.q, nbufs)
        rng = np.random.default_rng(7)
        self.inputs = {i: rng.integers(0, 256, (H, STRIDE), np.uint8) for i in range(nbufs)}
        self.outputs = [np.zeros((H, PITCH), np.uint8) for _ in range(outputs)]
        self.stage = convert_stage(self.q, fourcc, W, H, STRIDE, self.inputs, self.outputs, PITCH)
        self.fourcc = fourcc
        self.display = KmsStandIn(self.q, takes=self.stage.source) if display else None
        if not display:
            self.sink = self.q.add_sink(None, None, "latest", 1, takes=self.stage.source)

    def frame(self) -> int:
        """A tick: the camera's frame, offered to the stage; its buffer."""
        self.ticks.tick()
        assert self.q.capture() == 0
        L = self.q.c_queue
        out = [i for i in self.q.buffers_of(self.q.camera) if not L.queued[i]]
        return max(out, key=lambda i: L.frames[i].sequence)

    def take_made(self) -> int:
        """The worker's next frame, taken by the stage's source: its code."""
        r, _, _ = select.select([self.stage.fileno()], [], [], 10)
        assert r, "the worker made no frame in 10 s"
        return self.q.capture(self.stage.source)

    def made(self):
        """The worker's next frame, taken by the stage's source: what the
        Python sink was handed (its buffer, or NONE)."""
        r, _, _ = select.select([self.stage.fileno()], [], [], 10)
        assert r, "the worker made no frame in 10 s"
        L = self.q.c_queue
        code = self.q.capture(self.stage.source)
        if code == lib.SITS_Q_DELIVER or L.delivered.index != NONE:
            index = L.delivered.index
            L.delivered.index = NONE
            return index
        lib.sits_queue_pump(L, self.sink)
        index = L.delivered.index
        L.delivered.index = NONE
        return index

    def expected(self, index: int) -> np.ndarray:
        src = convert.rows(self.inputs[index].tobytes(), H, STRIDE, W * 2)
        dst = np.zeros((H, W, 4), np.uint8)
        convert.CONVERTERS[self.fourcc](src, dst)
        return dst

    def output(self, index: int) -> np.ndarray:
        first = self.q.c_queue.sources[self.stage.source].first
        return self.outputs[index - first][:, :W * 4].reshape(H, W, 4)

    def close(self):
        self.stage.close()
        if self.display is not None:
            self.display.close()
        self.ticks.close()
        self.epoll.close()


@pytest.fixture
def chain():
    yield from closing(Chain)


@pytest.mark.parametrize("fourcc", ["YUYV", "UYVY"])
def test_a_stage_makes_each_frame_into_its_own_buffer_as_the_numpy_conversion_does(chain, fourcc):
    c = chain(fourcc=fourcc)
    L = c.q.c_queue
    for _ in range(3):
        cam = c.frame()
        seq, ts = L.frames[cam].sequence, L.frames[cam].timestamp_ns
        out = c.made()
        assert out in c.q.buffers_of(c.stage.source)
        assert (L.frames[out].sequence, L.frames[out].timestamp_ns) == (seq, ts)
        np.testing.assert_array_equal(c.output(out), c.expected(cam))
        lib.sits_queue_release(L, c.sink, out)
    assert c.stage.counts()["frames"] == 3


def test_the_camera_buffer_is_held_until_its_frame_is_made_then_goes_back(chain):
    c = chain()
    L = c.q.c_queue
    cam = c.frame()
    # the worker may be done already; the loop has not taken its frame yet
    assert c.q.holds(c.stage.sink, cam) and not L.queued[cam]
    c.made()
    assert not L.holds[cam] and L.queued[cam]


def test_a_frame_waits_for_a_free_buffer_of_the_stage_and_is_made_once_one_comes_back(chain):
    c = chain(outputs=1)
    L = c.q.c_queue
    c.frame()
    held = c.made()                 # the sink holds the stage's one buffer
    waiting = c.frame()             # no buffer to make it into: it waits in the stage's port
    assert L.sinks[c.stage.sink].port_n == 1 and c.q.holds(c.stage.sink, waiting)
    newer = c.frame()               # the port keeps the newest (latest policy): the older goes back
    assert L.queued[waiting] and c.q.holds(c.stage.sink, newer)
    assert lib.sits_queue_release(L, c.sink, held) == 0     # its buffer back: the job starts
    out = c.made()
    assert out == held
    np.testing.assert_array_equal(c.output(out), c.expected(newer))
    assert c.stage.counts()["dropped"] == 1


def test_closing_the_stage_gives_back_what_it_holds(chain):
    c = chain()
    L = c.q.c_queue
    cam = c.frame()
    c.stage.close()
    assert not L.holds[cam] and L.queued[cam]


def test_a_made_frame_is_a_copy_in_its_record_which_stays_open_until_the_copy_leaves_the_screen(chain, tmp_path):
    path = str(tmp_path / "t.ndjson")
    c = chain(timeline=path, display=True)
    d = c.display
    flips = []
    for _ in range(2):
        c.frame()
        assert d.asked(c.take_made(), lib.SITS_KMS_ASK_COMMIT)    # the display takes the stage's frame
        d.commit(t := time.monotonic_ns())
        flips.append(d.flip(t))
        d.flip_events()
    summary = c.q.end_timeline()
    f1, f2 = record.read(path)
    assert summary["records"] == 2 and f1["sequence"] < f2["sequence"]
    assert f1["copied"] and f2["copied"]
    assert f1["dequeued_ns"] < f1["made_ns"] <= f1["requeued_ns"]   # the camera's buffer went back once made
    assert f1["made_ns"] < f1["committed_ns"] and f1["requeued_ns"] < f1["scanout_ns"] == flips[0]
    assert f1["replaced_ns"] == flips[1]      # the record lasted until its copy left the screen
    # both buffers: the camera's and the stage's (in its own numbering: two outputs, both on screen in turn)
    assert f1["source"] == f2["source"] == 0 and f1["buffer"] != f2["buffer"]
    assert {f1["made_buffer"], f2["made_buffer"]} == {0, 1}


def test_at_the_stop_the_frames_waiting_for_the_stage_are_dropped_and_the_one_being_made_still_comes(chain):
    c = chain()
    L = c.q.c_queue
    first = c.frame()               # with the worker (the loop has not taken its frame yet)
    second = c.frame()              # waits in the stage's port
    assert c.stage.busy() and c.q.holds(c.stage.sink, second)
    c.stage.drop_waiting()
    assert L.queued[second] and c.stage.counts()["dropped"] == 1
    out = c.made()
    assert L.frames[out].sequence == L.frames[first].sequence and not c.stage.busy()


def test_a_frame_keeps_its_identity_and_values_through_a_stage(chain):
    c = chain()
    q = c.q
    drawing, other = q.value_slot("drawing"), q.value_slot("other")
    assert q.value_slot("drawing") == drawing != other
    cam = c.frame()
    q.set_value(cam, drawing, 1234)     # a holder's value for a later one, set while the stage works
    out = c.made()
    assert q.identity(out) == q.identity(cam) == (q.camera, q.sequence(cam))
    assert (q.value(out, drawing), q.value(out, other)) == (1234, 0)
    lib.sits_queue_release(q.c_queue, c.sink, out)
    nxt = c.frame()                     # a new frame starts with none
    assert q.value(nxt, drawing) == 0


def test_at_most_the_queues_number_of_per_frame_values(chain):
    from sits.errors import UsageError
    q = chain().q
    for k in range(lib.SITS_Q_VALUES):
        q.value_slot(f"v{k}")
    with pytest.raises(UsageError, match="at most"):
        q.value_slot("one more")
