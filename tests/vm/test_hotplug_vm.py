"""The uevent monitor against the VM kernel's real messages."""
import select

import pytest

from sits.pipeline.hotplug import HotplugMonitor
from tests.vm.conftest import EVENT_WAIT_S

pytestmark = pytest.mark.vm


def test_monitor_reports_a_video4linux_uevent(vivid_path, no_leaks):
    name = vivid_path.rsplit("/", 1)[-1]
    with open(f"/sys/class/video4linux/{name}/uevent", "w") as f:
        mon = HotplugMonitor()
        try:
            f.write("change")   # the kernel sends a synthetic "change" uevent
            f.flush()
            events = []
            while not events and select.select([mon], [], [], EVENT_WAIT_S)[0]:
                events = mon.read()
        finally:
            mon.close()
    assert events, f"no uevent within {EVENT_WAIT_S} s"
    e = events[0]
    assert (e.action, e.subsystem, e.devname) == ("change", "video4linux", vivid_path)


def test_monitor_ignores_other_subsystems(vivid_path, vkms_path):
    """A video4linux uevent, then a drm one: a monitor of drm alone reads
    the second and never the first (it did arrive: the drm one came after)."""
    import glob
    mon = HotplugMonitor(subsystems=("drm",))
    try:
        with open(f"/sys/class/video4linux/{vivid_path.rsplit('/', 1)[-1]}/uevent", "w") as f:
            f.write("change")
        card = glob.glob(f"/sys/class/drm/{vkms_path.rsplit('/', 1)[-1]}/uevent")[0]
        with open(card, "w") as f:
            f.write("change")
        events = []
        while not events and select.select([mon], [], [], EVENT_WAIT_S)[0]:
            events = mon.read()
    finally:
        mon.close()
    assert events, f"no drm uevent within {EVENT_WAIT_S} s"
    assert {e.subsystem for e in events} == {"drm"}, events
