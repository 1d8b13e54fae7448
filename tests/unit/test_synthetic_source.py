"""The synthetic memfd source: the formats it reports, buffers written once,
what it needs to run, the one memfd type. Its frames (the C frame queue's
timer source: sequence numbers, timestamps, lost ticks, leases) are tested
through the queue in test_pipeline_timer_source.py and below."""
import fcntl
import gc
import os
import weakref

import numpy as np
import pytest

from sits.dmabuf.udmabuf import MemFd
from sits.errors import UsageError
from sits.pipeline.consumer import Consumer
from sits.pipeline.pipeline import Pipeline
from sits.pipeline.synthetic import SyntheticCamera, synthetic_format

FPS = 500.0


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class Each(Consumer):
    """Calls fn(frame, lease) for every frame."""

    name = "each"

    def __init__(self, fn):
        self.fn = fn

    def take(self, frame, lease):
        self.fn(frame, lease)


def test_formats_as_a_driver_reports_them():
    f = synthetic_format("YUYV", 1920, 1080)
    assert (f.bytesperline, f.sizeimage) == (3840, 3840 * 1080)
    f = synthetic_format("NV12", 1920, 1080)
    assert (f.bytesperline, f.sizeimage) == (1920, 1920 * 1080 * 3 // 2)
    f = synthetic_format("NV16", 64, 48, bytesperline=128)
    assert f.sizeimage == 128 * 48 * 2
    f = synthetic_format("MJPG", 64, 48)     # compressed: no rows, room for two bytes a pixel
    assert (f.bytesperline, f.sizeimage) == (0, 64 * 48 * 2)
    with pytest.raises(UsageError, match="format H264 unknown; supported: .*YUYV"):
        synthetic_format("H264", 64, 48)
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
        seen = []

        def check(frame, lease):
            seen.append(int(frame.buffer.memfd.array[0]))
            lease.release()
        Pipeline(cam, consumers=[Each(check)]).run(frames=6)
        assert len(seen) == 6 and set(seen) <= {1, 2, 3}
        assert calls == [0, 1, 2]  # frames landing cost the CPU nothing


def test_a_buffer_goes_back_only_with_its_last_lease():
    with SyntheticCamera("YUYV", (64, 48), FPS, buffers=3) as cam:
        checked = []

        def two_holders(frame, lease):
            q, i = cam.queue_owner.queue, frame.buffer.index
            other = frame.lease("cuda")
            lease.release()
            held_by_one = q.held(i)
            other.release()
            other.release()  # idempotent
            checked.append((held_by_one, q.held(i), frame.holders))
        Pipeline(cam, consumers=[Each(two_holders)]).run(frames=3)
    assert checked == [(True, False, [])] * 3


def test_a_frame_queue_drives_it():
    with SyntheticCamera("YUYV", (64, 48), FPS) as cam:
        with pytest.raises(UsageError, match="frame queue"):
            cam.start()
        assert not cam.streaming


def test_close_returns_every_fd():
    before = open_fds()
    cam = SyntheticCamera("NV12", (64, 48), FPS, buffers=4)
    Pipeline(cam, consumers=[Each(lambda f, lease: lease.release())]).run(frames=5)
    assert not cam.streaming and not any(b.queued for b in cam.buffers)
    ref = weakref.ref(cam)
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


def test_a_jpeg_source_carries_each_frames_length():
    simplejpeg = pytest.importorskip("simplejpeg")
    with SyntheticCamera("MJPG", (64, 48), FPS, buffers=3) as cam:
        seen = []

        def check(frame, lease):
            data = frame.buffer.memfd.array[:frame.bytesused].tobytes()
            seen.append((frame.buffer.index, frame.bytesused, simplejpeg.decode_jpeg(data).shape))
            lease.release()
        Pipeline(cam, consumers=[Each(check)]).run(frames=6)
    assert len(seen) == 6
    for index, used, shape in seen:
        assert used == cam.bytesused[index] < cam.format.sizeimage and shape == (48, 64, 3)
    assert len(set(cam.bytesused)) > 1   # each buffer its own frame
