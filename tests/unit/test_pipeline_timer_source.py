"""A timer source (SyntheticCamera) driven by the C frame queue through a
Pipeline: the same Frame/Lease objects, V4L2's sequence rules (a tick that
finds no queued buffer is a skipped sequence number, counted), a buffer
back only when its consumer let go, nothing leaked. No GPU, no V4L2."""
import os

from sits.pipeline.consumer import Consumer
from sits.pipeline.pipeline import Pipeline
from sits.pipeline.synthetic import SyntheticCamera


class Keep(Consumer):
    """Holds each frame's lease until `hold` more frames have come."""

    name = "keep"

    def __init__(self, hold: int):
        self.hold, self.held, self.seen = hold, [], []

    def take(self, frame, lease):
        assert not self.held or all(f.buffer is not frame.buffer for f, _ in self.held), \
            "a buffer came back while a lease on it was held"
        self.seen.append(frame.sequence)
        self.held.append((frame, lease))
        while len(self.held) > self.hold:
            self.held.pop(0)[1].release()

    def stop(self):
        while self.held:
            self.held.pop(0)[1].release()


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_timer_source_through_the_frame_queue_counts_every_tick():
    before = fds()
    with SyntheticCamera("YUYV", (64, 32), fps=400, buffers=3) as cam:
        keep = Keep(hold=2)   # two of three buffers held: the third alone takes ticks
        s = Pipeline(cam, consumers=[keep]).run(frames=60)
    assert s.wakeups["c_loop"] > 0   # the C frame queue's loop ran it
    assert s.frames_captured == 60 == len(keep.seen)
    assert keep.seen == sorted(keep.seen) and len(set(keep.seen)) == 60
    # every sequence number between the first and the last frame was a frame or a counted skip
    assert s.drops["sequence_gap"] == keep.seen[-1] - keep.seen[0] + 1 - 60
    assert s.consumers["keep"] == {"taken": 60, "dropped": 0, "left": 0}
    assert fds() == before


def test_timer_source_timestamps_are_the_ticks():
    with SyntheticCamera("NV12", (64, 32), fps=200, buffers=2) as cam:
        stamps = []

        class Stamp(Consumer):
            name = "stamp"

            def take(self, frame, lease):
                stamps.append((frame.sequence, frame.timestamp_ns))
                lease.release()
        Pipeline(cam, consumers=[Stamp()]).run(frames=10)
    (s0, t0) = stamps[0]
    for seq, ts in stamps:
        assert ts - t0 == (seq - s0) * cam.period_ns
