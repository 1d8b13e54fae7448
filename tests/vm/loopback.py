"""An MJPEG camera for the VM tests: v4l2loopback (tools/vm/setup builds it;
tools/vm/guest-init.sh says where, SITS_VM_V4L2LOOPBACK), loaded for a test
and unloaded after it, and a writer that feeds it JPEG frames from a
thread at a frame rate, as a UVC camera's frames come. v4l2loopback cannot
export its buffers (no VIDIOC_EXPBUF): sits reads the frames from their
mappings."""
import os
import subprocess
import threading
import time

import pytest

from sits._kernel import lib
from sits.formats import fourcc
from sits.pipeline.synthetic import block_image
from sits.v4l2 import raw

NODE = 9                     # /dev/video9: far from vivid's 0 and 1
PATH = f"/dev/video{NODE}"


def load():
    """The module loaded (skips where the VM has none); the node's path."""
    ko = os.environ.get("SITS_VM_V4L2LOOPBACK")
    if not ko or not os.path.exists(ko):
        pytest.skip("no v4l2loopback.ko (run tools/vm/setup: it builds one)")
    r = subprocess.run(["insmod", ko, "devices=1", f"video_nr={NODE}", "exclusive_caps=0",
                        "card_label=sits-mjpeg", "max_buffers=4"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 10
    while not os.path.exists(PATH):
        assert time.monotonic() < deadline, f"{PATH} did not appear"
        time.sleep(0.05)
    return PATH


def unload():
    for _ in range(100):   # refused while the node is open: the writer's close may be a moment behind
        if subprocess.run(["rmmod", "v4l2loopback"], capture_output=True).returncode == 0:
            return
        time.sleep(0.05)


def frames(size: tuple[int, int], count: int, quality: int = 85, subsampling: str = "422") -> list[bytes]:
    """`count` distinct JPEG frames (random 16x16 blocks)."""
    import simplejpeg
    return [simplejpeg.encode_jpeg(block_image(size, seed), quality=quality, colorsubsampling=subsampling)
            for seed in range(count)]


def truncated(jpeg: bytes) -> bytes:
    """The frame cut a few bytes into its scan: libjpeg-turbo warns and would fill the rest grey."""
    return jpeg[:jpeg.index(b"\xff\xda") + 24]


class Feeder:
    """Writes `frames` (cycling) to the loopback node at `fps` from a thread
    until stopped; the first is written before the constructor returns, so
    that a reader finds the format set and a frame there."""

    def __init__(self, size: tuple[int, int], frames: list[bytes], fps: float = 30.0):
        self.frames, self.period = frames, 1.0 / fps
        self.fd = os.open(PATH, os.O_RDWR | os.O_CLOEXEC)
        raw.s_fmt(self.fd, fourcc("MJPG"), *size, buf_type=lib.V4L2_BUF_TYPE_VIDEO_OUTPUT)
        # the rate a reader is told (GStreamer's caps ask for it)
        raw.s_fps(self.fd, round(fps), buf_type=lib.V4L2_BUF_TYPE_VIDEO_OUTPUT)
        self.written = 0
        self._write()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _write(self) -> None:
        os.write(self.fd, self.frames[self.written % len(self.frames)])
        self.written += 1

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            next_at += self.period
            self._stop.wait(max(0.0, next_at - time.monotonic()))
            if not self._stop.is_set():
                self._write()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        os.close(self.fd)
