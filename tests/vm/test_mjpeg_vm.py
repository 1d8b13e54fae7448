"""An MJPEG camera (v4l2loopback fed JPEG frames, which cannot export its
buffers: sits reads them from their mappings, with the driver's bytesused)
on vkms, through the JPEG decode stage: frames decoded into the display's
buffers and committed by the C loop, the writeback matching; corrupt frames
counted as decode errors with the run going on; a camera of only corrupt
frames ends with one line and exit 1; nothing leaks."""
import json

import numpy as np
import pytest

from tests.vm import loopback, screen

pytestmark = pytest.mark.vm

SIZE = (320, 240)


@pytest.fixture
def mjpeg_camera():
    path = loopback.load()
    feeders = []

    def feed(frames, fps=30.0):
        feeders.append(loopback.Feeder(SIZE, frames, fps))
        return path
    yield feed
    for f in feeders:
        f.close()
    loopback.unload()


def capture(sits, path, vkms_path, *extra):
    return sits("capture", "--device", path, "--format", "MJPG", "--size", f"{SIZE[0]}x{SIZE[1]}", "--to-kms",
                "--card", vkms_path, "--json", *extra)


def test_mjpeg_frames_are_decoded_into_the_displays_buffers(sits, no_leaks, mjpeg_camera, vkms_path):
    # one frame written again and again: v4l2loopback's writer overwrites
    # buffers its reader still decodes (a real camera never does), and the
    # same bytes over the same bytes tear nothing
    path = mjpeg_camera(loopback.frames(SIZE, 1))
    r = capture(sits, path, vkms_path, "--frames", "30", "--verify", "--verify-every", "2")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["format"] == "MJPG" and s["zero_copy"] is False and s["cpu_copies_per_frame"] == 1
    assert s["stages"]["decode"]["frames"] > 0 and s["drops"]["decode_error"] == 0
    assert s["frames_displayed"] > 0 and s["c_loop_commits"] > 0
    assert s["verify"]["checked"] >= 1 and s["verify"]["mismatched"] == 0, s["verify"]


def test_the_screen_shows_the_cameras_frame_as_libjpeg_turbo_decodes_it(sits, no_leaks, mjpeg_camera, vkms_path,
                                                                       tmp_path):
    import simplejpeg
    frame = loopback.frames(SIZE, 1)[0]
    path = mjpeg_camera([frame])
    snap = str(tmp_path / "s.png")
    r = capture(sits, path, vkms_path, "--frames", "10", "--snapshot", snap)
    assert r.returncode == 0, r.stderr
    shown = screen.shown(snap, SIZE).astype(int)
    assert np.abs(shown - simplejpeg.decode_jpeg(frame, colorspace="RGB")).max() <= 1


def test_corrupt_frames_are_decode_errors_and_the_run_goes_on(sits, no_leaks, mjpeg_camera, vkms_path):
    good = loopback.frames(SIZE, 2)
    path = mjpeg_camera([good[0], loopback.truncated(good[1]), good[1]])
    r = capture(sits, path, vkms_path, "--frames", "30")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    decode = s["stages"]["decode"]
    assert decode["errors"] >= 1 and s["drops"]["decode_error"] == decode["errors"]
    assert decode["frames"] >= 1 and s["frames_displayed"] >= 1
    # every frame captured is shown, dropped for a newer one, or a decode error
    assert s["frames_displayed"] + s["frames_dropped"] == s["frames_captured"]


def test_a_camera_of_only_corrupt_frames_ends_with_one_line(sits, no_leaks, mjpeg_camera, vkms_path):
    path = mjpeg_camera([loopback.truncated(f) for f in loopback.frames(SIZE, 2)])
    r = capture(sits, path, vkms_path, "--frames", "300")
    assert r.returncode == 1
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "could be made" in lines[0] and "decode errors" in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_the_timeline_shows_each_frames_decode(sits, no_leaks, mjpeg_camera, vkms_path, tmp_path):
    # v4l2loopback is not built on videobuf2: the kernel's journey hooks do
    # not fire for it, and sits' own records carry the decode
    from sits.journey import record
    path = mjpeg_camera(loopback.frames(SIZE, 1))
    timeline = str(tmp_path / "t.ndjson")
    r = capture(sits, path, vkms_path, "--frames", "20", "--timeline", timeline)
    assert r.returncode == 0, r.stderr
    shown = [rec for rec in record.read(timeline) if rec["committed_ns"]]
    assert shown
    for rec in shown:
        assert rec["dequeued_ns"] <= rec["made_ns"] <= rec["committed_ns"], rec
        assert rec["made_buffer"] is not None and rec["copied"]
