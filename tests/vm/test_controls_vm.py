"""Camera controls against vivid: `--control` values set after the format
and before streaming, read back with v4l2-ctl (not sits); a bad value or
an unknown name refused with one line before anything streams or is set;
the camera opened by udev's by-path link, and after a replug the link
resolved again and the controls set again. vivid's controls reset to their
defaults when it is reloaded; each test puts back what it changed."""
import os
import subprocess
import time

import pytest

from sits.errors import UsageError
from sits.pipeline.capture import CaptureOptions, build
from sits.v4l2 import raw
from sits.v4l2.device import VideoDevice
from tests.vm import vivid
from tests.vm.conftest import EVENT_WAIT_S
from tests.vm.test_capture_cli_vm import one_line_error

pytestmark = pytest.mark.vm

BY_PATH = "/dev/v4l/by-path/platform-vivid.0-video-index0"   # udev's 60-persistent-v4l.rules
TOUCHED = ("Brightness", "Contrast", "Menu", "Integer 64 Bits", "Boolean", "Integer Menu", "String")


def v4l2_ctl(path: str, *names: str) -> dict:
    """The controls' current values as v4l2-ctl reads them: {name: text}."""
    r = subprocess.run(["v4l2-ctl", "-d", path, "-C", ",".join(names)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (path, r.stdout, r.stderr)
    return {k.strip(): v.strip() for k, sep, v in (ln.partition(":") for ln in r.stdout.splitlines()) if sep}


@pytest.fixture
def restored(vivid_path):
    """Puts back, after the test, the values the controls it sets had."""
    with VideoDevice.open(vivid_path) as dev:
        before = [(c, raw.g_ext_ctrl(dev.fileno(), c)) for c in raw.controls(dev.fileno()) if c.name in TOUCHED]
    yield
    if not os.path.exists(vivid_path):
        vivid.reload()   # a test that replugged left vivid elsewhere: a reload is the defaults
        return
    with VideoDevice.open(vivid_path) as dev:
        for c, value in before:
            raw.s_ext_ctrl(dev.fileno(), c, value)


def opts(path, vkms_path, **kw):
    return CaptureOptions(device=path, card=vkms_path, display=True, format="XR24", size=(640, 480), **kw)


def test_controls_are_set_before_streaming_and_read_back_with_v4l2_ctl(vivid_path, vkms_path, restored):
    # built, not yet streaming (run() streams): the values are already the camera's
    p = build(opts(vivid_path, vkms_path, frames=3, controls=[
        "brightness=200", "Menu=Menu Item 4", "integer_64_bits=-5000000000", "boolean=false", "contrast=0x20"]))
    try:
        before_streaming = v4l2_ctl(vivid_path, "brightness", "menu", "integer_64_bits", "boolean", "contrast")
    finally:
        s = p.run()
    assert before_streaming == {"brightness": "200", "menu": "4 (Menu Item 4)", "integer_64_bits": "-5000000000",
                                "boolean": "0", "contrast": "32"}
    assert s.frames_captured >= 3


def test_the_cli_sets_controls_of_every_kind(sits, vivid_path, vkms_path, restored):
    r = sits("capture", "--to-kms", "--device", vivid_path, "--card", vkms_path, "--format", "XR24",
             "--size", "640x480", "--frames", "3", "--json", "--control", "brightness=17",
             "--control", "integer_menu=8", "--control=string=abcd")
    assert r.returncode == 0, r.stderr
    got = v4l2_ctl(vivid_path, "brightness", "integer_menu", "string")
    assert got == {"brightness": "17", "integer_menu": "8 (42 0x2a)", "string": "'abcd'"}, got


@pytest.mark.parametrize("args,code,line", [
    (["--control", "contrast=100", "--control", "brightness=300"], 2,
     "control brightness=300 is not valid: brightness (int) takes 0 to 255"),
    (["--control", "contrast=100", "--control", "menu=2"], 2,
     "control menu=2 is not valid: menu (menu) takes one of 1 (Menu Item 1), 3 (Menu Item 3), 4 (Menu Item 4)"),
    (["--control", "contrast=100", "--control", "brightnes=3"], 2, "no control named 'brightnes'; its controls: "),
    (["--control", "contrast=100", "--control", "read_only_integer_32_bits=1"], 2,
     "control read_only_integer_32_bits is read-only"),
])
def test_a_bad_control_is_one_line_and_nothing_is_set_or_streamed(sits, vivid_path, vkms_path, restored,
                                                                   args, code, line):
    contrast = v4l2_ctl(vivid_path, "contrast")["contrast"]
    r = sits("capture", "--to-kms", "--device", vivid_path, "--card", vkms_path, "--format", "XR24",
             "--size", "640x480", "--frames", "3", "--json", *args)
    lines = one_line_error(r, code, line)
    assert len(lines) == 1 and r.stdout == "", (lines, r.stdout)   # no summary: nothing ran
    assert v4l2_ctl(vivid_path, "contrast")["contrast"] == contrast != "100"   # the good one was not set either


def test_a_bad_value_is_refused_before_streaming_by_the_library_too(vivid_path, vkms_path, restored):
    # build() opens and configures but never streams: the refusal comes from it
    with pytest.raises(UsageError, match="brightness \\(int\\) takes 0 to 255"):
        build(opts(vivid_path, vkms_path, frames=3, controls={"contrast": 100, "brightness": -1}))
    assert v4l2_ctl(vivid_path, "contrast")["contrast"] != "100"


@pytest.fixture
def by_path(vivid_path):
    if not os.path.islink(BY_PATH):
        pytest.skip(f"no udev link {BY_PATH} (is udevd running in this VM?)")
    assert os.path.realpath(BY_PATH) == os.path.realpath(vivid_path)
    return BY_PATH


def test_the_camera_opens_by_its_by_path_link(sits, by_path, vkms_path):
    import json
    r = sits("capture", "--to-kms", "--device", by_path, "--card", vkms_path, "--format", "XR24",
             "--size", "640x480", "--frames", "3", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["device"] == by_path


def run_through_a_replug(o, params, monkeypatch, watch=lambda p, s: None, between=lambda: None):
    """Run `o` (reconnect on); once 3 frames are shown pull vivid's cable,
    unload vivid as soon as sits let go of the old device, call between()
    and load vivid with `params`; stop 10 frames after the camera came
    back; (summary, state). sits looks for its camera only once vivid is
    unloaded, as for a camera unplugged until then: vivid registers a
    pulled device again by itself once its last user closes it, which a
    real camera does not."""
    import threading

    from sits.pipeline.reconnect import Reconnect
    state = {"pulled": False, "shown_at_return": None, "replug_error": None}
    p = None
    ctrl = vivid.control_id(o.device, "Disconnect")
    path = os.path.realpath(o.device)
    unplugged = threading.Event()
    reopen = Reconnect.reopen
    monkeypatch.setattr(Reconnect, "reopen", lambda self, *a: reopen(self, *a) if unplugged.is_set() else None)

    def unplug():
        unplugged.set()
        between()

    def replug_when_released():
        deadline = time.monotonic() + EVENT_WAIT_S
        while p.summary.disconnects == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        if not replug_as(params, unplug, lambda: p.stopping):
            state["replug_error"] = "rmmod vivid kept failing: the old device is still in use"
            p.request_stop("test")

    def status(s):
        if not state["pulled"] and s.frames_displayed >= 3:
            state["pulled"] = True
            vivid.set_control(path, ctrl)
        if s.reconnects and state["shown_at_return"] is None:
            state["shown_at_return"] = s.frames_displayed
            watch(p, state)
        if state["shown_at_return"] is not None and s.frames_displayed >= state["shown_at_return"] + 10:
            p.request_stop("test")

    p = build(o, on_status=status, status_interval=0.05)
    replugger = threading.Thread(target=replug_when_released, daemon=True)
    replugger.start()
    try:
        s = p.run()
    finally:
        replugger.join(EVENT_WAIT_S + 10)
    assert state["replug_error"] is None, state["replug_error"]
    assert s.stopped_by == "test" and (s.disconnects, s.reconnects) == (1, 1), s
    return s, state


def test_after_a_replug_the_link_is_resolved_again_and_the_controls_set_again(by_path, vkms_path, restored,
                                                                             monkeypatch):
    def seen(p, state):   # the camera come back, while it streams
        state["values"] = v4l2_ctl(p.source.node, "brightness", "menu")
        state["node"] = p.source.node
    try:
        s, state = run_through_a_replug(opts(by_path, vkms_path, duration=240, reconnect=True, verify=True,
                                             verify_every=5, controls=["brightness=200", "menu=Menu Item 1"]),
                                        vivid.VIVID, monkeypatch, seen)
    finally:
        if not os.path.exists("/dev/video0"):
            vivid.reload()
    # a reloaded vivid starts at brightness 128, menu 3: these are sits' again
    assert state["values"] == {"brightness": "200", "menu": "1 (Menu Item 1)"}, state["values"]
    assert state["node"] == "/dev/video0"
    assert s.verify["checked"] >= 1 and s.verify["mismatched"] == 0, s.verify


def replug_as(params, between=lambda: None, stop=lambda: False) -> bool:
    """vivid.replug() with vivid loaded back with `params`, `between()`
    called once the old device is gone (rmmod done) and before the load."""
    deadline = time.monotonic() + EVENT_WAIT_S
    while subprocess.run(["rmmod", "vivid"], capture_output=True).returncode != 0:
        if stop() or time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    between()
    subprocess.run(["modprobe", "vivid", *params], check=True, capture_output=True)
    return True


def back_on(link, vkms_path, params, monkeypatch, between=lambda: None):
    """Through a replug, with the camera opened by `link`: the node, bus
    and brightness (set by --control) of the camera sits came back on."""
    def seen(p, state):
        state["node"], state["bus"] = p.source.node, p.source.cap.bus_info
    try:
        _, state = run_through_a_replug(opts(link, vkms_path, duration=240, reconnect=True,
                                             controls=["brightness=201"]), params, monkeypatch, seen, between)
        # vivid keeps its controls' values until it is unloaded
        state["brightness"] = {n: v4l2_ctl(n, "brightness").get("brightness") for n in ("/dev/video0", "/dev/video2")}
    finally:
        vivid.reload()   # back to guest-init.sh's one instance
    return state


def test_a_new_link_names_its_camera_even_on_another_bus(vivid_path, vkms_path, tmp_path, monkeypatch):
    """A link of the user's own (as a by-id link names a USB camera by its
    serial, wherever it is plugged), made again while the camera was away:
    it now names a camera on another bus (vivid's second instance, at
    /dev/video2) while the old node is a camera with the old driver, card
    and bus. sits comes back on the link's camera, with its controls."""
    link = str(tmp_path / "camera")
    os.symlink(vivid_path, link)

    def remake_link():
        os.unlink(link)
        os.symlink("/dev/video2", link)
    state = back_on(link, vkms_path, ["n_devs=2", "node_types=0x101,0x101", "vid_cap_nr=0,2", "vid_out_nr=1,3"],
                    monkeypatch, remake_link)
    assert (state["node"], state["bus"]) == ("/dev/video2", "platform:vivid-001"), state
    assert state["brightness"] == {"/dev/video2": "201", "/dev/video0": "128"}, state


def test_a_stale_link_is_not_trusted(vivid_path, vkms_path, tmp_path, monkeypatch):
    """The link as it was when the camera went (udev has not removed it
    yet) points at a node another camera took (vivid's second instance at
    /dev/video0): sits does not take that camera, and comes back on its
    own (same driver, card and bus) at its new node."""
    link = str(tmp_path / "camera")
    os.symlink(vivid_path, link)
    state = back_on(link, vkms_path, ["n_devs=2", "node_types=0x101,0x101", "vid_cap_nr=2,0", "vid_out_nr=3,1"],
                    monkeypatch)
    assert (state["node"], state["bus"]) == ("/dev/video2", "platform:vivid-000"), state
    assert state["brightness"] == {"/dev/video2": "201", "/dev/video0": "128"}, state
