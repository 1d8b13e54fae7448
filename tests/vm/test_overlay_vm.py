"""The overlay layer on vkms: what a callback draws for a frame goes on the
overlay plane in the same commit as that frame (the writeback, blended as
vkms blends a premultiplied plane, equals the frame under its drawing), the
C loop's commits change the overlay plane's framebuffer (a second DRM
client reads it), and a callback that raises ends the run with one line,
the display as it was."""
import json
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.vm import overlay_callbacks as cb, screen, vivid
from tests.vm.conftest import EVENT_WAIT_S
from tests.vm.kms_observer import display_state, observer, showing_sits

pytestmark = pytest.mark.vm

SIZE = (640, 360)
SITS = [sys.executable, "-m", "sits.cli.app"]


@pytest.fixture
def noisy_vivid(vivid_path):
    """vivid drawing noise, a new picture every frame, with no text over it."""
    pattern, osd = vivid.control_id(vivid_path, "Test Pattern"), vivid.control_id(vivid_path, "OSD Text Mode")
    yield vivid_path
    vivid.set_control(vivid_path, pattern, 0)
    vivid.set_control(vivid_path, osd, 0)


def capture(sits, path, vkms_path, *extra):
    return sits("capture", "--device", path, "--format", "XR24", "--size", f"{SIZE[0]}x{SIZE[1]}", "--to-kms",
                "--card", vkms_path, "--json", *extra)


def test_a_frame_is_shown_with_its_own_drawing_in_one_commit(sits, no_leaks, noisy_vivid, vkms_path, tmp_path):
    snap = tmp_path / "shown.png"
    r = capture(sits, noisy_vivid, vkms_path, "--control", "Test Pattern=Noise", "--control", "OSD Text Mode=None",
                "--buffers", "6", "--fps", "30", "--frames", "40",
                "--overlay", "tests.vm.overlay_callbacks:repeat_probe",
                "--overlay-policy", "sync", "--overlay-budget-ms", "5000", "--verify", "--verify-every", "4",
                "--snapshot", str(snap))
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    ov = s["overlay"]
    # every check's writeback equals the frame under the drawing committed with it
    assert s["verify"]["checked"] >= 3 and s["verify"]["mismatched"] == 0, s["verify"]
    assert ov["shown_with_own"] >= 3 and ov["shown_with_none"] == 0, ov
    # ... and that drawing is the frame's own: its box repeats the probe of
    # the frame around it on screen (the last check's), pixel for pixel
    shown = screen.shown(str(snap), SIZE).astype(int)
    x, y, w, h = cb.PROBE
    probe = tuple(int(shown[y:y + h, x:x + w, c].sum()) // (w * h) for c in range(3))
    x0, y0, x1, y1 = cb.BOX
    box = tuple(int(v) for v in shown[(y0 + y1) // 2, (x0 + x1) // 2])
    assert box == probe, f"the box shows {box}, its frame's probe is {probe}: a drawing of another frame"


def overlay_fbs(state, planes_before) -> set:
    """The framebuffers on planes that showed nothing before sits."""
    idle = {p[0] for p in planes_before if p[2] == 0}
    return {fb for plane, _, fb in state[0] if plane in idle and fb}


def test_the_c_loop_commits_each_drawing_onto_the_overlay_plane(noisy_vivid, vkms_path):
    with observer(vkms_path) as obs:
        before = display_state(obs)
        proc = subprocess.Popen([*SITS, "capture", "--to-kms", "--device", noisy_vivid, "--card", vkms_path,
                                 "--format", "XR24", "--size", f"{SIZE[0]}x{SIZE[1]}", "--buffers", "6",
                                 "--overlay", "tests.vm.overlay_callbacks:repeat_probe", "--overlay-policy", "latest",
                                 "--duration", "300", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert showing_sits(obs, before, proc), "sits never showed a frame"
            seen = set()
            deadline = time.monotonic() + EVENT_WAIT_S
            while len(seen) < 3 and time.monotonic() < deadline and proc.poll() is None:
                seen |= overlay_fbs(display_state(obs), before[0])
                time.sleep(0.02)
            proc.terminate()
            out, err = proc.communicate(timeout=EVENT_WAIT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        s = json.loads(out)
        assert len(seen) >= 3, f"the overlay plane showed {len(seen)} framebuffers: {seen}"
        assert s["overlay"]["drawings"] >= 3
        assert display_state(obs) == before


def test_a_callback_that_raises_ends_the_run_with_one_line(sits, no_leaks, vivid_path, vkms_path):
    with observer(vkms_path) as obs:
        before = display_state(obs)
        r = capture(sits, vivid_path, vkms_path, "--frames", "300", "--overlay", "tests.vm.overlay_callbacks:raises")
        assert r.returncode == 1, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "overlay callback" in lines[0] and "ValueError: no model loaded" in lines[0], lines
        assert display_state(obs) == before


@pytest.mark.parametrize("policy", ["sync", "latest"])
def test_a_callback_slower_than_the_camera_holds_back_its_drawings_not_the_video(sits, no_leaks, vivid_path,
                                                                                 vkms_path, policy):
    r = capture(sits, vivid_path, vkms_path, "--fps", "30", "--duration", "6", "--buffers", "6",
                "--overlay", "tests.vm.overlay_callbacks:slow", "--overlay-policy", policy,
                "--overlay-budget-ms", "20")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    ov = s["overlay"]
    # one drawing in 0.3 s, yet the frames go on at the camera's pace (30 fps: nine a drawing)
    assert s["frames_displayed"] >= 3 * max(1, ov["drawings"]), (s["frames_displayed"], ov)


def test_gpu_drawing_without_a_gpu_is_one_line_before_streaming(sits, no_leaks, vivid_path, vkms_path):
    # the VM has no GPU: the overlay's udmabuf buffers are made and imported,
    # then registering them with CUDA fails, and all of it is undone
    with observer(vkms_path) as obs:
        before = display_state(obs)
        r = capture(sits, vivid_path, vkms_path, "--frames", "30", "--overlay-demo", "--overlay-render", "gpu")
        assert r.returncode == 1, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and ("CUDA" in lines[0] or "cupy" in lines[0].lower()), lines
        assert display_state(obs) == before


def test_an_mjpeg_cameras_frames_are_drawn_as_the_display_shows_them(sits, no_leaks, vkms_path):
    # the callback sees the decode stage's XRGB8888 frames (the demo reads
    # their brightness), and each goes on screen with its drawing
    from tests.vm import loopback
    path = loopback.load()
    feeder = loopback.Feeder((320, 240), loopback.frames((320, 240), 1), 30.0)
    try:
        r = sits("capture", "--device", path, "--format", "MJPG", "--size", "320x240", "--to-kms", "--card",
                 vkms_path, "--json", "--frames", "40", "--buffers", "6", "--overlay-demo", "--overlay-budget-ms",
                 "5000", "--verify", "--verify-every", "3")
    finally:
        feeder.close()
        loopback.unload()
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    ov = s["overlay"]
    assert s["stages"]["decode"]["frames"] > 0 and ov["drawing_errors"] == 0 and ov["shown_with_own"] >= 1, ov
    assert s["verify"]["checked"] >= 1 and s["verify"]["mismatched"] == 0, s["verify"]
