"""Soak and fault matrix (marker `soak`): a long verified run whose fds,
dma-bufs and RSS must stay flat, start/stop cycles, every vivid
error-injection control with every memory kind, a second process holding
DRM master, the camera removed mid-commit.

The suite runs the short form; SITS_SOAK=long runs the long one (10,000
frames, 200 cycles, every control x every memory kind):

    SITS_SOAK=long .venv/bin/python -m pytest -m soak tests/vm -vv   # -vv echoes the guest: the figures
"""
import os

import pytest

from sits.pipeline.capture import CaptureOptions, build
from tests.vm import vivid
from tests.vm.conftest import dmabuf_count, fd_count, run_until
from tests.vm.kms_observer import display_state, observer
from tests.vm.procfs import fd_targets, wait_for
from tests.vm.sits_child import Child

LONG = os.environ.get("SITS_SOAK") == "long"
pytestmark = [pytest.mark.vm, pytest.mark.soak]

FRAMES, FLAT_FROM, SAMPLE_EVERY = (10_000, 1_000, 1_000) if LONG else (1_500, 500, 250)
CYCLES = 200 if LONG else 20
MEMORIES = ("mmap", "heap", "udmabuf")
RSS_GROWTH_KB = 2048   # what "flat" allows the allocator between the first and the last sample


def rss_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def steady_fds() -> int:
    """This process's fds but the out-fences (sync_files) of Python's
    commits in flight: those come and go with the flips."""
    return sum(t != "anon_inode:sync_file" for t in fd_targets("self"))


def say(capsys, line: str) -> None:
    """Figures to the terminal as they come (they are also progress for the
    host's stall bound on a long run)."""
    with capsys.disabled():
        print(f"soak: {line}", flush=True)


@pytest.mark.timeout(0 if LONG else 900)
def test_long_run_verified_with_fds_dmabufs_and_rss_flat(vivid_path, vkms_path, no_leaks, capsys):
    marks = list(range(FLAT_FROM, FRAMES, SAMPLE_EVERY)) + [FRAMES - 50]
    samples = []   # (frame, fds, dma-bufs, RSS kB) while it runs

    def status(s):
        if len(samples) < len(marks) and s.frames_captured >= marks[len(samples)]:
            samples.append((s.frames_captured, steady_fds(), dmabuf_count(), rss_kb()))
            say(capsys, "frame %d: fds %d, dma-bufs %d, RSS %d kB" % samples[-1])
    s = build(CaptureOptions(device=vivid_path, card=vkms_path, display=True, format="XR24", size=(640, 480), fps=60,
                             frames=FRAMES, verify=True, verify_every=100),
              on_status=status, status_interval=0.05).run()
    say(capsys, f"{s.frames_captured} captured, {s.frames_displayed} shown, verify {s.verify}, "
                f"{s.duration_s} s")
    assert s.frames_captured == FRAMES
    assert s.verify["mismatched"] == 0 and s.verify["checked"] >= s.frames_displayed // 100, s.verify
    assert len(samples) == len(marks), samples
    frames, fds, bufs, rss = zip(*samples)
    # --verify maps a capture buffer the first time it reads one, once:
    # Python's mmap keeps a dup of its fd, and the pages read count in RSS;
    # so each of the 4 buffers may add one fd and its size once, no more
    # (a leak per verified frame would be one per 100 frames)
    mapped_kb = 4 * 640 * 480 * 4 // 1024
    assert sorted(fds) == list(fds) and fds[-1] - fds[0] <= 4, f"fds moved after frame {FLAT_FROM}: {samples}"
    assert len(set(bufs)) == 1, f"dma-bufs moved after frame {FLAT_FROM}: {samples}"
    assert rss[-1] - rss[0] <= RSS_GROWTH_KB + mapped_kb, \
        f"RSS grew {rss[-1] - rss[0]} kB after frame {FLAT_FROM}: {samples}"


@pytest.mark.timeout(0 if LONG else 900)
def test_start_stop_cycles(vivid_path, vkms_path, no_leaks, capsys):
    with observer(vkms_path) as obs:
        before = display_state(obs)
        fds = bufs = None
        for i in range(CYCLES):
            s = build(CaptureOptions(device=vivid_path, card=vkms_path, display=True, format="XR24", size=(640, 480),
                                     memory=MEMORIES[i % 3], frames=3)).run()
            assert s.frames_captured == 3 and s.frames_displayed >= 1, s
            assert display_state(obs) == before, f"cycle {i}: the display was not given back"
            if i == 2:   # every memory kind has run once
                fds, bufs = fd_count(), dmabuf_count()
            if i % 10 == 9:
                say(capsys, f"cycle {i + 1}: fds {fd_count()}, dma-bufs {dmabuf_count()}")
        say(capsys, f"{CYCLES} cycles: fds {fds} -> {fd_count()}, dma-bufs {bufs} -> {dmabuf_count()}")
        assert (fd_count(), dmabuf_count()) == (fds, bufs)


# every error-injection control of vivid: how it is fired and how sits counts it
MID_RUN = {
    "Inject V4L2_BUF_FLAG_ERROR": lambda s: s.buffer_errors >= 1,
    "Inject VIDIOC_QBUF Error": lambda s: s.v4l2_errors["requeue"] >= 1,
    "Inject Fatal Streaming Error": lambda s: s.v4l2_errors["stream_restarts"] >= 1,
}
AT_START = {"Inject VIDIOC_REQBUFS Error": "setup_retries", "Inject VIDIOC_STREAMON Error": "setup_retries"}
DROPPED = "Percentage of Dropped Buffers"
# fires only for media requests, which sits does not use
NOT_USED = {"Inject req_validate() Error"}
CONTROLS = [*MID_RUN, *AT_START, DROPPED]
MATRIX = ([(c, m) for c in CONTROLS for m in MEMORIES] if LONG
          else [(c, MEMORIES[i % 3]) for i, c in enumerate(CONTROLS)])


def test_the_matrix_has_every_injection_control(vivid_path):
    from sits.v4l2 import raw
    from sits.v4l2.device import VideoDevice
    with VideoDevice.open(vivid_path) as dev:
        names = {c.name for c in raw.controls(dev.fileno())}
    injecting = {n for n in names if n.startswith("Inject ") or n == DROPPED}
    assert injecting - NOT_USED == set(CONTROLS), injecting


@pytest.mark.parametrize("control,memory", MATRIX, ids=[f"{c}-{m}" for c, m in MATRIX])
def test_injected_error_counted_and_survived(control, memory, vivid_path, vkms_path, no_leaks):
    if control in MID_RUN:
        s = vivid.inject_during(vivid_path, vkms_path, control, MID_RUN[control], memory=memory)
        assert s.verify["mismatched"] == 0, s.verify
        return
    ctrl = vivid.control_id(vivid_path, control)
    opts = CaptureOptions(device=vivid_path, card=vkms_path, display=True, format="XR24", size=(640, 480), memory=memory)
    if control in AT_START:
        vivid.set_control(vivid_path, ctrl)
        s = run_until(opts, lambda s: s.frames_captured >= 6)
        assert s.v4l2_errors[AT_START[control]] >= 1, s.v4l2_errors
    else:
        vivid.set_control(vivid_path, ctrl, 30)
        try:
            s = run_until(opts, lambda s: s.drops["sequence_gap"] >= 1 and s.frames_captured >= 10)
        finally:
            vivid.set_control(vivid_path, ctrl, 0)
    assert s.stopped_by == "test", ("not counted, or not survived", s)


def test_a_second_process_holding_drm_master_is_one_line(vivid_path, vkms_path, capsys):
    from sits.cli.app import main
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:   # the other process: master of the card until told to go
        code = 1
        try:
            from sits._kernel import lib
            from sits.drm.card import Card
            with Card.open(vkms_path) as card:
                code = lib.drmSetMaster(card.fileno())
                os.write(ready_w, b"%d" % code)
                os.read(go_r, 1)
        finally:
            os._exit(code)
    try:
        assert os.read(ready_r, 8) == b"0", "the other process did not become master"
        code = main(["capture", "--to-kms", "--device", vivid_path, "--card", vkms_path, "--format", "XR24",
                     "--size", "640x480", "--frames", "3"])
    finally:
        os.write(go_w, b"x")
        os.waitpid(pid, 0)
        for fd in (ready_r, ready_w, go_r, go_w):
            os.close(fd)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1 and "another process holds DRM master" in lines[0], (code, err)


def test_the_camera_removed_mid_commit(vivid_path, vkms_path, no_leaks):
    """vivid's platform device unbound while the first commit is in flight
    (its out-fence among the fds: Python's commits carry one): one line naming the loss, exit 1, the display
    given back, nothing left; vivid is loaded again afterwards."""
    unbind = "/sys/bus/platform/drivers/vivid/unbind"
    with observer(vkms_path) as obs:
        before = display_state(obs)
        child = Child(["capture", "--to-kms", "--device", vivid_path, "--card", vkms_path, "--format", "XR24",
                       "--size", "640x480", "--duration", "600", "--json"], new_interpreter=False)
        try:
            wait_for(child.alive, lambda: "anon_inode:sync_file" in fd_targets(child.pid), "an out-fence")
            with open(unbind, "w") as f:
                f.write("vivid.0")
            code, out, err = child.finish()
        finally:
            child.close()
            vivid.reload()
        after = display_state(obs)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1 and "disconnected" in lines[0], (code, out, err)
    assert after == before, "the display was not given back as it was"
