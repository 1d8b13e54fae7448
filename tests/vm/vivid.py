"""vivid as the tests drive it: its controls (error injection, the
"Disconnect" cable pull) and a reload with tools/vm/guest-init.sh's
parameters, so that later tests find /dev/video0 again."""
import os
import subprocess
import time

from sits.v4l2 import raw
from sits.v4l2.device import VideoDevice
from tests.vm.conftest import EVENT_WAIT_S, run_until

VIVID = ["n_devs=1", "node_types=0x101", "vid_cap_nr=0", "vid_out_nr=1"]


def reload():
    subprocess.run(["rmmod", "vivid"], capture_output=True)
    subprocess.run(["modprobe", "vivid", *VIVID], check=True, capture_output=True)
    deadline = time.monotonic() + EVENT_WAIT_S
    while not os.path.exists("/dev/video0") and time.monotonic() < deadline:
        time.sleep(0.1)


def replug(stop=lambda: False) -> bool:
    """Unload vivid as soon as nothing holds it (rmmod is refused while one
    of its devices is open) and load it again: a camera plugged back in.
    False, with vivid left loaded, when `stop()` or EVENT_WAIT_S came first."""
    deadline = time.monotonic() + EVENT_WAIT_S
    while subprocess.run(["rmmod", "vivid"], capture_output=True).returncode != 0:
        if stop() or time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    subprocess.run(["modprobe", "vivid", *VIVID], check=True, capture_output=True)
    return True


def control_id(path, name) -> int:
    with VideoDevice.open(path) as dev:
        ctrl = [c for c in raw.controls(dev.fileno()) if c.name == name]
        assert ctrl, f"vivid has no control {name!r}"
        return ctrl[0].id


def set_control(path, ctrl: int, value: int = 1) -> None:
    fd = os.open(path, os.O_RDWR)  # from another fd, as a cable pull comes from outside
    try:
        raw.s_ctrl(fd, ctrl, value)
    finally:
        os.close(fd)


def pull_cable(path) -> None:
    set_control(path, control_id(path, "Disconnect"))


def inject_during(vivid_path, vkms_path, name, counted, **kw):
    """Run the chain (CaptureOptions `kw`), fire vivid's error control `name`
    once it is streaming, and stop once `counted(summary)` and 5 more frames
    came (survived); the summary."""
    from sits.pipeline.capture import CaptureOptions
    fired = []
    ctrl = control_id(vivid_path, name)

    def status(s):
        if not fired and s.frames_captured >= 2:
            set_control(vivid_path, ctrl)
            fired.append(s.frames_captured)

    def done(s):
        return bool(fired) and counted(s) and s.frames_captured >= fired[0] + 5

    # the C loop runs between writebacks: space them out so that it meets the errors
    s = run_until(CaptureOptions(device=vivid_path, card=vkms_path, display=True, format="XR24", size=(640, 480),
                                 verify=True, verify_every=8, **kw), done, on_status=status)
    assert fired, "the run ended before the error could be injected"
    assert s.stopped_by == "test", ("the error was never counted, or the chain stopped after it", s)
    assert s.c_loop_commits > 0
    return s
