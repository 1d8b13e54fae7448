import glob
import os
import subprocess

import pytest


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def dmabuf_count() -> int:
    """dma-bufs alive system-wide (debugfs bufinfo), or -1 without debugfs."""
    path = "/sys/kernel/debug/dma_buf/bufinfo"
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return -1
    for line in lines:
        if line.startswith("Total") and "objects" in line:
            return int(line.split()[1])
    return -1


@pytest.fixture
def sits(capsys):
    """Run the CLI in this process (a Python start costs ~25 s under TCG);
    only the signal and permission tests need a child process."""
    from sits.cli.app import main

    def run(*args):
        code = main(list(args))
        out = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out.out, out.err)
    return run


@pytest.fixture
def no_leaks():
    """Asserts the test left no fd and no dma-buf behind."""
    import gc
    gc.collect()
    fds, bufs = fd_count(), dmabuf_count()
    yield
    gc.collect()
    assert fd_count() == fds, "file descriptors leaked"
    # The kernel drops a removed framebuffer's buffer from a worker
    # (drm_mode_rmfb_work_fn): give deferred releases a moment.
    import time
    deadline = time.monotonic() + 5
    while dmabuf_count() != bufs and time.monotonic() < deadline:
        time.sleep(0.1)
    assert dmabuf_count() == bufs, "dma-bufs leaked"


def _need(path_glob: str):
    if not glob.glob(path_glob):
        pytest.skip(f"{path_glob} not present (is this the test VM?)")


@pytest.fixture
def vivid_path():
    from sits.v4l2.device import VideoDevice, video_paths
    for path in video_paths():
        with VideoDevice.open(path) as dev:
            if dev.cap.driver == "vivid" and dev.cap.is_capture:
                return path
    pytest.skip("no vivid capture device")


@pytest.fixture
def vkms_path():
    _need("/dev/dri/card*")
    from sits.drm.card import Card, card_paths
    for path in card_paths():
        with Card.open(path) as card:
            if card.driver == "vkms":
                return path
    pytest.skip("no vkms card")
