"""The synthetic source on a real display (`sits capture --device synthetic
--memory udmabuf --to-kms`, GStreamer's `videotestsrc ! kmssink`): its
memfd buffers wrapped as udmabufs, imported by vkms where a plane shows the
format, else made into the display's buffers by the conversion stage; the
writeback holds what was on screen against the frames."""
import json

import pytest

pytestmark = pytest.mark.vm


@pytest.mark.parametrize("fmt, stage", [("XR24", None), ("YUYV", "convert"), ("MJPG", "decode")],
                         ids=["zero-copy", "conversion", "jpeg"])
def test_synthetic_frames_reach_the_screen_as_they_were_made(sits, vkms_path, udmabuf_path, fmt, stage, no_leaks):
    zero_copy = stage is None
    r = sits("capture", "--device", "synthetic", "--memory", "udmabuf", "--to-kms", "--card", vkms_path,
             "--format", fmt, "--size", "320x180", "--fps", "30", "--frames", "40", "--verify",
             "--verify-every", "2", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["zero_copy"] is zero_copy and s["memory"] == "udmabuf"
    assert s["frames_captured"] == 40 and s["frames_displayed"] > 0
    assert s["verify"]["checked"] >= 1 and s["verify"]["mismatched"] == 0, s["verify"]
    assert s["c_loop_commits"] > 0          # the steady state is the C loop's for a synthetic source too
    assert list(s["stages"]) == ([] if zero_copy else [stage])
