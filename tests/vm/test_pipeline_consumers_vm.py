"""A pipeline with the display and a second consumer, on vivid + vkms: a
buffer goes back to the driver only when both have released it (the
driver's own QUERYBUF flags say so), the C loop keeps committing with the
second consumer attached, writeback still matches, nothing leaks; and each
drop policy counts every frame exactly."""
import collections
import os
import queue
import threading
import time

import pytest

from sits._kernel import lib
from sits.pipeline.capture import CaptureOptions, build
from sits.pipeline.consumer import Consumer
from sits.v4l2 import raw

pytestmark = pytest.mark.vm


def driver_has(cap, frame) -> bool:
    """The driver's own word: is this buffer with it (queued, or filled and
    waiting for DQBUF), or was it filled again since `frame`?"""
    b = raw.querybuf(cap.fileno(), frame.buffer.index, cap.memory_type)
    return bool(b.flags & (lib.V4L2_BUF_FLAG_QUEUED | lib.V4L2_BUF_FLAG_DONE)) or b.sequence != frame.sequence


class SlowConsumer(Consumer):
    """Holds each frame's lease for `hold_s` in a worker thread, then hands
    it back through an eventfd; the lease is released on the loop's thread.
    While holding `depth` frames it is not ready (back-pressure)."""

    name = "slow"

    def __init__(self, hold_s: float, depth: int = 8):
        self.hold_s, self.depth = hold_s, depth
        self.todo, self.done = queue.Queue(), collections.deque()
        self.held = 0
        self.seen, self.queued_while_held, self.after_display = [], 0, 0
        self.pipeline = self.display = None   # to ask the display whether it holds a buffer
        self.worker = threading.Thread(target=self._work, daemon=True)

    def start(self, ctx):
        self.src = ctx.source
        self.display = self.pipeline.display if self.pipeline is not None else None
        self.efd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        ctx.watch(self.efd, self._released)
        self.worker.start()

    def ready(self):
        return self.held < self.depth

    def take(self, frame, lease):
        assert not driver_has(self.src, frame)
        self.held += 1
        self.seen.append(frame.sequence)
        self.todo.put((frame, lease))

    def _work(self):
        while True:
            item = self.todo.get()
            if item is None:
                return
            time.sleep(self.hold_s)
            self.done.append(item)
            os.eventfd_write(self.efd, 1)

    def _released(self):
        try:
            os.eventfd_read(self.efd)
        except BlockingIOError:
            pass   # stop(): what is done, without a wake-up
        while self.done:
            frame, lease = self.done.popleft()
            if driver_has(self.src, frame):
                self.queued_while_held += 1
            if self.display is not None and not self.display.holds(frame.buffer.index):
                # the display let go first: only this lease keeps it from the driver
                self.after_display += 1
            lease.release()
            self.held -= 1

    def busy(self):
        return self.held > 0

    def stop(self):
        self.todo.put(None)
        self.worker.join(5)
        self._released()
        os.close(self.efd)


def fd_leak_check(fn):
    from tests.vm.conftest import EVENT_WAIT_S, dmabuf_count, fd_count
    import gc
    gc.collect()
    fds, bufs = fd_count(), dmabuf_count()
    out = fn()
    gc.collect()
    assert fd_count() == fds
    deadline = time.monotonic() + EVENT_WAIT_S
    while dmabuf_count() != bufs and time.monotonic() < deadline:
        time.sleep(0.1)
    assert dmabuf_count() == bufs
    return out


@pytest.mark.parametrize("memory", ["mmap", "udmabuf"])
def test_buffer_goes_back_only_when_display_and_consumer_released(memory, vivid_path, vkms_path):
    # held long enough that the display has moved on before most releases
    slow = SlowConsumer(hold_s=0.4)

    def go():
        p = build(CaptureOptions(device=vivid_path, card=vkms_path, display=True, format="XR24", size=(640, 480),
                                 memory=memory, frames=16, buffers=6, verify=True, verify_every=4),
                  consumers=[(slow, "block", 1)])
        slow.pipeline = p
        return p.run()
    s = fd_leak_check(go)
    assert s.frames_captured == 16
    assert len(slow.seen) == 16, "block: the consumer gets every frame"
    assert slow.queued_while_held == 0, "a buffer went back to the driver while the consumer held it"
    assert slow.after_display > 0, "the consumer never outlived the display's hold: nothing was shown"
    assert s.verify["checked"] >= 2 and s.verify["mismatched"] == 0, s.verify
    assert s.c_loop_commits > 0, "the C loop stopped committing with a second consumer attached"
    assert s.consumers["slow"] == {"taken": 16, "dropped": 0, "left": 0}


@pytest.mark.parametrize("policy", ["drop-oldest", "drop-newest", "block"])
def test_drop_policies_count_every_frame(policy, vivid_path, vkms_path, no_leaks):
    # 30 fps from vivid, a consumer that needs 0.2 s a frame and holds one at a time
    slow = SlowConsumer(hold_s=0.2, depth=1)
    p = build(CaptureOptions(device=vivid_path, card=vkms_path, display=True, format="XR24", size=(320, 180), fps=30,
                             frames=30, buffers=4), consumers=[(slow, policy, 1)])
    s = p.run()
    c = s.consumers["slow"]
    # every frame dequeued was offered to the consumer once: taken, dropped by its policy, or left at the stop
    assert c["taken"] + c["dropped"] + c["left"] == s.frames_captured == 30, (c, s)
    assert c["taken"] == len(slow.seen)
    assert s.drops["slow"] == c["dropped"]
    if policy == "block":
        assert c["dropped"] == 0 and c["left"] <= 1
        # the driver ran out of buffers and skipped frames itself: counted from its sequence numbers
        assert s.drops["sequence_gap"] == slow.seen[-1] - slow.seen[0] + 1 - len(slow.seen) > 0, (slow.seen, s.drops)
    else:
        assert c["dropped"] > 0
        assert slow.seen == sorted(slow.seen)


def test_open_chain_runs_user_code_beside_the_display_and_cleans_up(vivid_path, vkms_path, no_leaks):
    import sits
    from sits.errors import UsageError
    got = []
    with sits.open_chain(vivid_path, display=True, card=vkms_path, format="XR24", size=(320, 180), frames=12,
                         on_frame=lambda f: got.append((f.sequence, f.holders))) as chain:
        with pytest.raises(UsageError, match="no CUDA output"):
            next(chain.batches())
        s = chain.run()
    assert s.frames_captured == 12 and len(got) == 12
    assert all(holders == ["callback"] for _, holders in got)   # its own lease while it runs
    assert s.consumers["callback"] == {"taken": 12, "dropped": 0, "left": 0}
    assert s.frames_displayed >= 1


def test_open_chain_left_early_stops_and_cleans_up(vivid_path, vkms_path, no_leaks):
    """Leaving the block mid-run (no frame limit) winds the run down like a stop."""
    import sits
    seen = []
    with sits.open_chain(vivid_path, display=True, card=vkms_path, format="XR24", size=(320, 180),
                         on_frame=lambda f: seen.append(f.sequence)) as chain:
        while len(seen) < 3:
            assert chain.pipeline.step()
    assert chain.summary.stopped_by == "closed"
    assert chain.summary.frames_captured == len(seen) >= 3
