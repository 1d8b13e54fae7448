"""The synthetic memfd source: frames on a timer, V4L2's sequence and
timestamp rules, lost ticks, lease accounting, the one memfd type."""
import fcntl
import gc
import os
import select
import weakref

import numpy as np
import pytest

from sits.dmabuf.udmabuf import MemFd
from sits.errors import UsageError
from sits.pipeline.synthetic import SyntheticCamera, synthetic_format

FPS = 500.0


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def next_frame(cam, timeout_s: float = 1.0):
    """Wait on fileno() as a pipeline's loop does, then dequeue."""
    ep = select.epoll()
    try:
        ep.register(cam.fileno(), select.EPOLLIN)
        for _ in range(100):
            assert ep.poll(timeout_s), "no frame landed"
            frame = cam.dequeue()
            if frame is not None:
                return frame
    finally:
        ep.close()
    raise AssertionError("readable, but never a frame")


def test_formats_as_a_driver_reports_them():
    f = synthetic_format("YUYV", 1920, 1080)
    assert (f.bytesperline, f.sizeimage) == (3840, 3840 * 1080)
    f = synthetic_format("NV12", 1920, 1080)
    assert (f.bytesperline, f.sizeimage) == (1920, 1920 * 1080 * 3 // 2)
    f = synthetic_format("NV16", 64, 48, bytesperline=128)
    assert f.sizeimage == 128 * 48 * 2
    with pytest.raises(UsageError, match="format MJPG unknown; supported: .*YUYV"):
        synthetic_format("MJPG", 64, 48)
    with pytest.raises(UsageError, match="smaller than a row"):
        synthetic_format("YUYV", 64, 48, bytesperline=100)


def test_buffers_are_memfds_written_once():
    calls = []

    def fill(index, pixels):
        calls.append(index)
        pixels[:] = index + 1

    with SyntheticCamera("YUYV", (64, 48), FPS, buffers=3, fill=fill) as cam:
        assert cam.memory == "memfd"
        assert calls == [0, 1, 2]
        for b in cam.buffers:
            assert b.dmabuf is None and isinstance(b.memfd, MemFd)
            assert b.memfd.size == cam.format.sizeimage
            assert b.memfd.address % 4096 == 0
            assert (b.memfd.array == b.index + 1).all()
        cam.start()
        for _ in range(6):
            next_frame(cam).lease("t").release()
        assert calls == [0, 1, 2]  # frames landing cost the CPU nothing


def test_paint_writes_each_frame():
    painted = []

    def paint(pixels, sequence):
        pixels[:4] = np.frombuffer(sequence.to_bytes(4, "little"), np.uint8)
        painted.append(sequence)

    with SyntheticCamera("NV12", (64, 48), FPS, buffers=2, paint=paint) as cam:
        cam.start()
        for _ in range(4):
            frame = next_frame(cam)
            assert int.from_bytes(bytes(frame.buffer.memfd.array[:4]), "little") == frame.sequence
            frame.lease("t").release()
        assert painted[:1] == [0] and len(painted) >= 4


def test_sequence_and_timestamps_follow_the_ticks():
    with SyntheticCamera("YUYV", (64, 48), FPS, buffers=4) as cam:
        cam.start()
        period = cam.period_ns
        seen = []
        for _ in range(20):
            frame = next_frame(cam)
            seen.append((frame.sequence, frame.timestamp_ns))
            assert frame.dequeued_ns >= frame.timestamp_ns  # it landed before we took it
            frame.lease("t").release()
        first = seen[0][1] - seen[0][0] * period
        for seq, ts in seen:
            assert ts == first + seq * period  # the tick's expiry, exactly
        seqs = [s for s, _ in seen]
        assert seqs == sorted(set(seqs))
        # every number missing between the frames taken was a lost tick; a
        # loaded host may also lose ticks after the last one taken (they
        # landed with frames still waiting), counted too: hence <=
        # (test_ticks_without_a_queued_buffer_skip_sequence_numbers counts exactly)
        assert seqs[-1] - seqs[0] + 1 - len(seqs) <= cam.skipped
        assert cam.stats.dequeued == 20


def test_ticks_without_a_queued_buffer_skip_sequence_numbers():
    with SyntheticCamera("YUYV", (64, 48), FPS, buffers=2) as cam:
        cam.start()
        held = [next_frame(cam), next_frame(cam)]
        leases = [f.lease("t") for f in held]
        assert not any(b.queued for b in cam.buffers)
        # No buffer for the driver: ticks are lost while we hold both.
        while cam.skipped < 5:
            assert cam.dequeue() is None
            select.select([], [], [], cam.period_ns / 1e9)
        last = held[-1].sequence
        for lease in leases:
            lease.release()
        frame = next_frame(cam)
        gap = frame.sequence - last - 1
        assert gap >= 5 and gap == cam.skipped
        frame.lease("t").release()


def test_a_buffer_goes_back_only_with_its_last_lease():
    with SyntheticCamera("YUYV", (64, 48), FPS, buffers=3) as cam:
        cam.start()
        frame = next_frame(cam)
        buf = frame.buffer
        a, b = frame.lease("display"), frame.lease("cuda")
        assert buf.leased and not buf.queued
        a.release()
        assert buf.leased and not buf.queued  # "cuda" still holds it
        a.release()  # idempotent
        b.release()
        assert not buf.leased and buf.queued
        assert frame.holders == []


def test_readable_while_frames_wait():
    with SyntheticCamera("YUYV", (64, 48), FPS, buffers=4) as cam:
        cam.start()
        select.select([], [], [], 3.5 * cam.period_ns / 1e9)  # three frames land
        first = cam.dequeue()
        assert first is not None
        r, _, _ = select.select([cam], [], [], 0)
        assert r == [cam] and cam.dequeue() is not None


def test_stop_returns_buffers_and_close_returns_every_fd():
    before = open_fds()
    cam = SyntheticCamera("NV12", (64, 48), FPS, buffers=4)
    cam.start()
    held = next_frame(cam)
    lease = held.lease("t")
    cam.stop()
    assert not any(b.queued for b in cam.buffers)
    assert held.buffer.leased  # a leased frame stays valid after STREAMOFF
    lease.release()
    assert not held.buffer.queued  # not streaming: nothing to queue it into
    assert cam.dequeue() is None
    ref = weakref.ref(cam)
    del held, lease
    cam.close()
    del cam
    gc.collect()
    assert ref() is None
    assert open_fds() == before


def test_memfd_is_sealed_and_maps_once():
    with MemFd.create(8192) as m:
        assert fcntl.fcntl(m.fileno(), fcntl.F_GET_SEALS) & fcntl.F_SEAL_SHRINK
        with pytest.raises(OSError):
            os.ftruncate(m.fileno(), 4096)
        assert m.address == m.address and m.map() is m.map()
        m.array[:5] = np.frombuffer(b"frame", np.uint8)
        assert os.pread(m.fileno(), 5, 0) == b"frame"
    assert m.closed


def test_bad_arguments_are_refused():
    with pytest.raises(UsageError, match="frame rate"):
        SyntheticCamera("YUYV", (64, 48), 0)
    with pytest.raises(UsageError, match="at least one"):
        SyntheticCamera("YUYV", (64, 48), FPS, buffers=0)
