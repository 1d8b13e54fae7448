"""A raw Bayer camera (vivid's Bayer formats at 8, 10 and 12 bits) on vkms:
frames demosaiced into the display's buffers by the Bayer stage (OpenCV)
and committed by the C loop, the writeback matching what the stage made,
and the screen equal to an independent demosaic (the CUDA oracle's
convolutions, sits/cuda/reference.py) of a frame v4l2-ctl captured; black
level and gamma applied as sits.bayer says."""
import json
import subprocess

import numpy as np
import pytest

from sits.cuda import reference as R
from sits.cuda.formats import SourceFormat, format_info
from sits.formats import BY_V4L2
from tests.vm import screen, vivid

pytestmark = pytest.mark.vm

SIZE = (640, 360)
# The product narrows samples to 8 bits (rounded, or the high byte of packed
# ones), demosaics in integers and maps each channel through a table; the
# oracle demosaics the samples as they are. A shown value must lie where
# the same curve takes the oracle's value, give or take SLACK 8-bit levels
# (narrowing and the demosaic's rounding), and a level for the table's.
SLACK = 1.5
INNER = (slice(1, -1), slice(1, -1))   # OpenCV fills its edge rows its own way


@pytest.fixture
def still_vivid(vivid_path):
    """vivid drawing the same picture every frame: no text over it."""
    osd = vivid.control_id(vivid_path, "OSD Text Mode")
    vivid.set_control(vivid_path, osd, 2)    # "None"
    yield vivid_path
    vivid.set_control(vivid_path, osd, 0)    # "All", its default


def grab(path, code, tmp_path) -> np.ndarray:
    """One raw frame, captured by v4l2-ctl (not sits), as bytes; the second
    of two, which must equal the first (a still picture)."""
    out = tmp_path / "raw"
    subprocess.run(["v4l2-ctl", "-d", path, f"--set-fmt-video=width={SIZE[0]},height={SIZE[1]},pixelformat={code}",
                    "--stream-mmap", "--stream-count=2", f"--stream-to={out}"], check=True, capture_output=True)
    data = np.fromfile(out, np.uint8)
    first, second = np.split(data, 2)
    assert np.array_equal(first, second), "vivid's picture changes from frame to frame"
    return second


def bounds(frame, code, black=0, gamma=1.0) -> tuple[np.ndarray, np.ndarray]:
    """The least and most a pixel of the screen may be, R, G, B, from the
    oracle's demosaic of a raw frame."""
    f = BY_V4L2[code]
    src = SourceFormat(f.name, *SIZE)
    rgb = np.stack(R.demosaic(R.bayer_samples(frame, src), format_info(f.name).cfa), -1)
    unit = 1 << (f.bits - 8)                       # samples to an 8-bit level
    top = (1 << f.bits) - 1

    def curve(v):
        return np.rint(255 * np.clip((v - black) / (top - black), 0, 1) ** (1 / gamma))
    return curve(rgb - SLACK * unit)[INNER] - 1, curve(rgb + SLACK * unit)[INNER] + 1


def within(snap, b) -> bool:
    shown = screen.shown(snap, SIZE).astype(float)[INNER]
    return bool(np.all((shown >= b[0]) & (shown <= b[1])))


def capture(sits, path, code, vkms_path, *extra):
    r = sits("capture", "--device", path, "--format", code, "--size", f"{SIZE[0]}x{SIZE[1]}", "--to-kms",
             "--card", vkms_path, "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("code", ["RGGB", "BG10", "BA12"])   # 8-bit RGGB, 10-bit BGGR, 12-bit GRBG
def test_a_raw_camera_on_screen_equals_an_independent_demosaic(sits, no_leaks, still_vivid, vkms_path, tmp_path,
                                                               code):
    frame = grab(still_vivid, code, tmp_path)
    snap = str(tmp_path / "s.png")
    s = capture(sits, still_vivid, code, vkms_path, "--frames", "20", "--verify", "--verify-every", "3",
                "--snapshot", snap)
    assert s["format"] == code and s["zero_copy"] is False
    assert s["cpu_copies_per_frame"] == (1 if BY_V4L2[code].bits == 8 else 2)
    assert s["stages"]["demosaic"]["frames"] > 0 and s["stages"]["demosaic"]["errors"] == 0
    assert s["c_loop_commits"] > 0
    assert s["verify"]["checked"] >= 1 and s["verify"]["mismatched"] == 0, s["verify"]
    assert within(snap, bounds(frame, code))


def test_black_level_and_gamma(sits, no_leaks, still_vivid, vkms_path, tmp_path):
    code = "BG10"
    frame = grab(still_vivid, code, tmp_path)
    snap = str(tmp_path / "s.png")
    capture(sits, still_vivid, code, vkms_path, "--frames", "10", "--snapshot", snap,
            "--black-level", "64", "--gamma", "2.2")
    assert within(snap, bounds(frame, code, black=64, gamma=2.2))
    assert not within(snap, bounds(frame, code))      # which is not the picture without them


def test_raw_options_on_a_camera_that_is_not_raw(sits, vivid_path, vkms_path):
    r = sits("capture", "--device", vivid_path, "--format", "YUYV", "--to-kms", "--card", vkms_path,
             "--frames", "5", "--gamma", "2.2")
    assert r.returncode == 2 and "raw Bayer" in r.stderr and "Traceback" not in r.stderr
