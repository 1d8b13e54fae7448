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


# Waits for something the kernel does by itself (a worker's release, a
# uevent): passed as soon as it happens, so the bound is only a hang guard
# and is far above what a slow or busy host needs.
EVENT_WAIT_S = 120
# A run that stops on an event (run_until) ends by this duration only when
# the event never comes.
BACKSTOP_S = 600


def run_until(opts, done, **build_kw):
    """Build and run a capture pipeline that stops once `done(summary)` is
    true on a status pass (the outcome is decided by the events the run
    counts, not by how many frames a host manages in a fixed count)."""
    import dataclasses

    from sits.pipeline.capture import build
    if not opts.frames and not opts.duration:
        opts = dataclasses.replace(opts, duration=BACKSTOP_S)
    on_status = build_kw.pop("on_status", None)
    p = None

    def status(s):
        if on_status is not None:
            on_status(s)
        if not p.stopping and done(s):
            p.request_stop("test")
    p = build(opts, on_status=status, status_interval=build_kw.pop("status_interval", 0.05), **build_kw)
    return p.run()


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
    deadline = time.monotonic() + EVENT_WAIT_S
    while dmabuf_count() != bufs and time.monotonic() < deadline:
        time.sleep(0.1)
    assert dmabuf_count() == bufs, "dma-bufs leaked"


def kernel_has_dma_heaps() -> bool:
    """Whether the kernel was built with dma-heaps (their class exists from
    boot; guest-init.sh asks the same). Debian's arm64 6.12 was not. Where
    it was, a missing system heap is a failure, not a skip."""
    return os.path.isdir("/sys/class/dma_heap")


@pytest.fixture
def need_dma_heaps():
    if not kernel_has_dma_heaps():
        pytest.skip("this kernel has no dma-heaps (CONFIG_DMABUF_HEAPS unset, as in Debian's arm64 6.12)")


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


@pytest.fixture
def udmabuf_path():
    _need("/dev/udmabuf")
    return "/dev/udmabuf"
