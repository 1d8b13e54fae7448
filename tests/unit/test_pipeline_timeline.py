"""The pipeline's own frame records (--timeline), from the C frame queue,
without V4L2 or DRM: a timer source through a Pipeline for the capture and
requeue stages and the sequence gaps, and the queue driven step by step
with a pipe standing in for the DRM fd (flip events written by the test)
for the display's stages: scanout, replaced, vblanks, late, drops (a
frame made by a stage, copied: tests/unit/test_stage.py)."""
import contextlib
import os
import select
import time

import pytest

from sits._kernel import ffi, lib
from sits.journey import record
from sits.pipeline.consumer import Consumer
from sits.pipeline.frame_queue import FrameQueue
from sits.pipeline.pipeline import Pipeline
from sits.pipeline.synthetic import SyntheticCamera
from sits.pipeline.timeline import Timeline
from tests.unit.queue_steps import Fence, KmsStandIn

ASK_COMMIT, ASK_FENCE = lib.SITS_KMS_ASK_COMMIT, lib.SITS_KMS_ASK_FENCE



class Starve(Consumer):
    """Holds every frame until it holds all buffers, then three frame
    periods more: the source has no buffer for at least two ticks, whose
    sequence numbers are skipped."""

    name = "starve"

    def __init__(self, buffers: int, period_ns: int):
        self.buffers, self.period_s = buffers, period_ns / 1e9
        self.held, self.seen, self.until = [], [], None

    def take(self, frame, lease):
        self.seen.append(frame.sequence)
        self.held.append(lease)
        if len(self.held) == self.buffers:
            self.until = time.monotonic() + 3 * self.period_s

    def timeout(self):
        return None if self.until is None else self.until - time.monotonic()

    def tick(self):
        self.stop()

    def stop(self):
        self.until = None
        while self.held:
            self.held.pop().release()


@pytest.mark.parametrize("name", ["t.ndjson", "t.csv"])
def test_one_record_per_frame_in_capture_order_with_the_gaps(tmp_path, name):
    path = str(tmp_path / name)
    with SyntheticCamera("YUYV", (64, 32), fps=400, buffers=3) as cam:
        keep = Starve(3, cam.period_ns)
        s = Pipeline(cam, consumers=[keep], timeline=path).run(frames=40)
    recs = record.read(path)
    assert s.timeline == {"file": path, "records": 40, "lost": 0}
    assert len(recs) == s.frames_captured == 40
    assert [r["sequence"] for r in recs] == keep.seen            # capture order
    assert sum(r["skipped_before"] for r in recs) == s.drops["sequence_gap"] > 0
    for a, b in zip(recs, recs[1:]):
        assert b["skipped_before"] == b["sequence"] - a["sequence"] - 1
    first = recs[0]["captured_ns"] - recs[0]["sequence"] * cam.period_ns
    last_requeue = {}
    for r in recs:
        assert r["pid"] == os.getpid()
        assert r["captured_ns"] == first + r["sequence"] * cam.period_ns   # the tick's time
        assert r["captured_ns"] <= r["dequeued_ns"] <= r["requeued_ns"]
        assert r["committed_ns"] is r["scanout_ns"] is r["cuda_submitted_ns"] is None   # no display, no CUDA
        # a buffer is filled again only after it was queued again
        assert r["dequeued_ns"] >= last_requeue.get(r["buffer"], 0)
        last_requeue[r["buffer"]] = r["requeued_ns"]
    assert sorted(last_requeue) == [0, 1, 2]


def capture(q, cam, d) -> int:
    select.select([q.source_fd()], [], [], 5)
    code = q.capture()
    assert d.waiting() >= 0
    return code


@contextlib.contextmanager
def queue_on_display(path):
    """A frame queue fed by a started timer source, its timeline to `path`,
    and the display's C half on a pipe (KmsStandIn)."""
    ep = select.epoll()
    with SyntheticCamera("YUYV", (64, 32), fps=500, buffers=4) as cam:
        q = FrameQueue(ep.fileno())
        q.attach(cam)
        q.record_timeline(Timeline(path))
        d = KmsStandIn(q)
        cam.start()
        try:
            yield q, cam, d
        finally:
            cam.stop()
            d.close()
            ep.close()


def test_display_stages_scanout_replaced_vblanks_late_and_drops(tmp_path):
    path = str(tmp_path / "t.ndjson")
    with queue_on_display(path) as (q, cam, d):
        assert d.asked(capture(q, cam, d), ASK_COMMIT)          # F1: the display is idle
        d.commit(c1 := time.monotonic_ns())                     # zero-copy
        v1 = d.flip(c1)
        d.flip_events()
        assert d.asked(capture(q, cam, d), ASK_COMMIT)          # F2
        d.commit(c2 := time.monotonic_ns())
        capture(q, cam, d)                                      # F3 waits for F2's flip ...
        capture(q, cam, d)                                      # ... and F4 comes first: F3 dropped
        v2 = d.flip(d.waiting_dequeued_ns(), vblanks=2)         # F1 shown for two vblanks
        assert d.asked(d.flip_events(), ASK_COMMIT)             # F4 could have made v2
        d.commit(c4 := time.monotonic_ns())
        v3 = d.flip(c4)
        q.sink_fd_watched(d.sink, False)   # the C loop's way: the last flip's event is read at the next dequeue
        assert d.asked(capture(q, cam, d), ASK_COMMIT)          # F5, dequeued after v3
        d.commit(c5 := time.monotonic_ns())
        displayed, dropped = d.K.displayed, q.sink_counts(d.sink)["dropped"]
        summary = q.end_timeline()
    f1, f2, f3, f4, f5 = recs = record.read(path)
    assert summary["records"] == 5
    assert [r["sequence"] for r in recs] == sorted(r["sequence"] for r in recs)
    assert sum(r["scanout_ns"] is not None for r in recs) == displayed == 3
    assert sum(r["committed_ns"] is None for r in recs) == dropped == 1
    assert (f1["committed_ns"], f1["scanout_ns"], f1["replaced_ns"], f1["vblanks"]) == (c1, v1, v2, 2)
    assert not f1["copied"] and f1["late_ns"] is None
    assert f1["replaced_ns"] <= f1["requeued_ns"]      # zero-copy: the buffer back once off screen
    assert (f2["committed_ns"], f2["scanout_ns"], f2["replaced_ns"], f2["vblanks"]) == (c2, v2, v3, 1)
    assert not f2["copied"] and f2["replaced_ns"] <= f2["requeued_ns"]
    assert f2["late_ns"] is None       # v1 came before its dequeue: not one it could have made
    assert f3["committed_ns"] is None and f3["scanout_ns"] is None and f3["requeued_ns"] is not None
    assert f4["late_ns"] == c4 - v2 and f4["scanout_ns"] == v3
    assert f4["replaced_ns"] is None and f4["vblanks"] is None and f4["requeued_ns"] is None   # still on screen
    assert f5["committed_ns"] == c5 and f5["late_ns"] is None    # v3, read after its dequeue, came before it
    assert f5["scanout_ns"] is None                               # its flip never came
    assert len({r["buffer"] for r in (f1, f2, f3, f4)}) == 4


def test_late_counts_a_vblank_no_flip_event_told_of(tmp_path):
    """Flip events tell of the vblanks that completed a commit; a vblank
    that came while the display was idle, between a frame's dequeue and its
    commit, is on the mode's grid through them (what the kernel's journey
    sees as every vblank), and makes that frame late."""
    path = str(tmp_path / "t.ndjson")
    period = 1_000_000
    with queue_on_display(path) as (q, cam, d):
        d.K.vblank_period_ns = period
        capture(q, cam, d)                                       # F1
        d.commit(c1 := time.monotonic_ns())
        v1 = d.flip(c1)
        d.flip_events()
        capture(q, cam, d)                                       # F2, dequeued with the display idle
        t2 = d.waiting_dequeued_ns()
        grid2 = v1 + ((t2 - v1) // period + 1) * period          # the first vblank after its dequeue
        d.commit(c2 := grid2 + period + 300_000)                 # two vblanks later
        v2 = d.flip(c2)
        d.flip_events()
        capture(q, cam, d)                                       # F3, committed before the next vblank
        t3 = d.waiting_dequeued_ns()
        grid3 = v2 + ((t3 - v2) // period + 1) * period
        d.commit(grid3 - 1)
        q.end_timeline()
    f1, f2, f3 = record.read(path)
    assert f2["late_ns"] == 300_000          # from the last vblank before its commit
    assert f3["late_ns"] is None


def test_timeline_path_is_checked_before_any_device(capsys, tmp_path):
    from sits.cli.app import main
    assert main(["capture", "--to-kms", "--timeline", "/no/such/dir/t.ndjson"]) == 2
    err = capsys.readouterr().err
    assert "--timeline /no/such/dir/t.ndjson: no such directory /no/such/dir" in err
    assert "Traceback" not in err
    assert main(["capture", "--to-kms", "--timeline", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_a_buffer_leaves_the_screen_only_once_the_out_fence_has_signalled(tmp_path):
    """A commit of Python's carries an out-fence (a pipe's read end stands
    in for the sync_file: readable once signalled, as poll() asks)."""
    with queue_on_display(str(tmp_path / "t.ndjson")) as (q, cam, d):
        K = d.K
        capture(q, cam, d)                                       # F1 on screen
        first = d.waiting()
        d.commit(c1 := time.monotonic_ns())
        d.flip(c1)
        d.flip_events()
        capture(q, cam, d)                                       # F2 replaces it, its out-fence unsignalled
        fence = Fence(signalled=False)
        d.commit(c2 := time.monotonic_ns(), fence=fence)
        d.flip(c2)
        assert d.asked(d.flip_events(), ASK_FENCE)
        assert K.retire.index == first and not q.c_queue.queued[first] and d.holds(first)
        fence.signal()
        d.retired()                                              # the pipeline's call once the fence fd is readable
        assert K.retire.index == -1 and q.c_queue.queued[first] and K.on_screen.fence == -1
        capture(q, cam, d)                                       # F3, its out-fence signalled by its flip: F2 goes at once
        second = K.on_screen.index
        d.commit(c3 := time.monotonic_ns(), fence=Fence(signalled=True))
        d.flip(c3)
        assert not d.asked(d.flip_events(), ASK_FENCE)
        assert q.c_queue.queued[second] and K.retire.index == -1
        q.end_timeline()
