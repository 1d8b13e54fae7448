"""vivid's "Disconnect" control unregisters the device under a running
capture: the chain must stop with one clear error and leak nothing. The
test reloads vivid afterwards (same parameters as tools/vm/guest-init.sh),
so later tests find /dev/video0 again."""
import os
import time

import pytest

from sits.errors import DeviceError
from sits.pipeline.capture import CaptureOptions, build
from tests.vm import vivid
from tests.vm.conftest import EVENT_WAIT_S

pytestmark = pytest.mark.vm

def test_disconnect_stops_cleanly(vivid_path, vkms_path):
    from tests.vm.conftest import fd_count
    import gc
    gc.collect()
    fds = fd_count()
    disconnect = vivid.control_id(vivid_path, "Disconnect")
    fired = []

    def status(s):
        if not fired and s.frames_displayed >= 2:
            vivid.set_control(vivid_path, disconnect)
            fired.append(True)

    try:
        p = build(CaptureOptions(device=vivid_path, card=vkms_path, display=True, format="XR24", size=(640, 480),
                                        frames=200), on_status=status, status_interval=0.05)
        with pytest.raises(DeviceError, match="disconnected"):
            p.run()
        assert fired
        gc.collect()
        assert fd_count() == fds, "file descriptors leaked"
    finally:
        vivid.reload()
    assert os.path.exists("/dev/video0")


def test_reconnect_waits_for_the_camera_and_resumes(vivid_path, vkms_path, no_leaks):
    """--reconnect: vivid disconnects after a few frames; a thread reloads
    vivid as soon as sits has let go of the old device (rmmod is refused
    while it is in use); the run must resume on the new device, verified by
    writeback, and leak nothing."""
    import threading
    ctrl = vivid.control_id(vivid_path, "Disconnect")
    state = {"pulled": False, "shown_at_return": None, "reload_error": None}
    p = None

    def reload_when_released():
        deadline = time.monotonic() + EVENT_WAIT_S
        while p.summary.disconnects == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        if not vivid.replug():
            state["reload_error"] = "rmmod vivid kept failing: the old device is still in use"
            p.request_stop("test")

    def status(s):
        if not state["pulled"] and s.frames_displayed >= 3:
            state["pulled"] = True
            vivid.set_control(vivid_path, ctrl)
        if s.reconnects and state["shown_at_return"] is None:
            state["shown_at_return"] = s.frames_displayed
        if state["shown_at_return"] is not None and s.frames_displayed >= state["shown_at_return"] + 15:
            p.request_stop("test")

    p = build(CaptureOptions(device=vivid_path, card=vkms_path, display=True, format="XR24", size=(640, 480),
                                    duration=240, reconnect=True, verify=True, verify_every=5),
                     on_status=status, status_interval=0.05)
    reloader = threading.Thread(target=reload_when_released, daemon=True)
    reloader.start()
    try:
        s = p.run()
    finally:
        reloader.join(EVENT_WAIT_S + 10)
        if not os.path.exists("/dev/video0"):
            vivid.reload()
    assert state["reload_error"] is None, state["reload_error"]
    assert s.stopped_by == "test"
    assert (s.disconnects, s.reconnects) == (1, 1)
    assert s.frames_displayed >= state["shown_at_return"] + 15
    assert s.verify["checked"] >= 4 and s.verify["mismatched"] == 0, s.verify
    assert os.path.exists("/dev/video0")


def test_cli_reconnect_is_accepted_and_reports(vivid_path, vkms_path, capsys):
    """The CLI takes --reconnect (a run without a disconnect reports 0/0)."""
    import json
    from sits.cli.app import main
    code = main(["capture", "--to-kms", "--device", vivid_path, "--card", vkms_path, "--format", "XR24",
                 "--size", "640x480", "--frames", "10", "--reconnect", "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["disconnects"], data["reconnects"]) == (0, 0)
    assert data["frames_displayed"] > 0
