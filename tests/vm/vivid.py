"""vivid as the tests drive it: its controls (error injection, the
"Disconnect" cable pull) and a reload with tools/vm/guest-init.sh's
parameters, so that later tests find /dev/video0 again."""
import os
import subprocess
import time

from sits.v4l2 import raw
from sits.v4l2.device import VideoDevice
from tests.vm.conftest import EVENT_WAIT_S

VIVID = ["n_devs=1", "node_types=0x101", "vid_cap_nr=0", "vid_out_nr=1"]


def reload():
    subprocess.run(["rmmod", "vivid"], capture_output=True)
    subprocess.run(["modprobe", "vivid", *VIVID], check=True, capture_output=True)
    deadline = time.monotonic() + EVENT_WAIT_S
    while not os.path.exists("/dev/video0") and time.monotonic() < deadline:
        time.sleep(0.1)


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
