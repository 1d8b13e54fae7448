"""vivid's "Disconnect" control unregisters the device under a running
capture: the chain must stop with one clear error and leak nothing. The
test reloads vivid afterwards (same parameters as tools/vm/guest-init.sh),
so later tests find /dev/video0 again."""
import os
import subprocess
import time

import pytest

from sits.errors import DeviceError
from sits.pipeline.capture_to_kms import CaptureOptions, CaptureToKms
from sits.v4l2 import raw
from sits.v4l2.device import VideoDevice

pytestmark = pytest.mark.vm

VIVID = ["n_devs=1", "node_types=0x101", "vid_cap_nr=0", "vid_out_nr=1"]


def _reload_vivid():
    subprocess.run(["rmmod", "vivid"], capture_output=True)
    subprocess.run(["modprobe", "vivid", *VIVID], check=True, capture_output=True)
    deadline = time.monotonic() + 30
    while not os.path.exists("/dev/video0") and time.monotonic() < deadline:
        time.sleep(0.1)


def test_disconnect_stops_cleanly(vivid_path, vkms_path):
    from tests.vm.conftest import fd_count
    import gc
    gc.collect()
    fds = fd_count()
    with VideoDevice.open(vivid_path) as dev:
        disconnect = [c for c in raw.controls(dev.fileno()) if c.name == "Disconnect"][0].id
    fired = []

    def status(s):
        if not fired and s.frames_displayed >= 2:
            # from another fd, as a cable pull would come from outside
            fd = os.open(vivid_path, os.O_RDWR)
            try:
                raw.s_ctrl(fd, disconnect, 1)
            finally:
                os.close(fd)
            fired.append(True)

    try:
        p = CaptureToKms(CaptureOptions(device=vivid_path, card=vkms_path, format="XR24", size=(640, 480),
                                        frames=200), on_status=status, status_interval=0.05)
        with pytest.raises(DeviceError, match="disconnected"):
            p.run()
        assert fired
        gc.collect()
        assert fd_count() == fds, "file descriptors leaked"
    finally:
        _reload_vivid()
    assert os.path.exists("/dev/video0")
