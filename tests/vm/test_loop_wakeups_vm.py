"""The steady state's cost in wake-ups, counted, not timed: at the display's
rate the loop wakes once a frame, twice when a frame must wait for the flip
before it (docs/capture.md), never more. A loop that wakes without
consuming what woke it (a busy loop, an fd watched the wrong way) shows here
on any machine, where a CPU figure would move with the emulator."""
import json

import pytest

pytestmark = pytest.mark.vm

FRAMES = 120
MAX_WAKEUPS_PER_FRAME = 3


def test_the_loop_wakes_at_most_three_times_a_frame_at_60_fps(sits, vivid_path, vkms_path):
    r = sits("capture", "--to-kms", "--device", vivid_path, "--card", vkms_path, "--format", "XR24",
             "--size", "640x360", "--fps", "60", "--frames", str(FRAMES), "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["frames_captured"] == FRAMES
    assert s["c_loop_commits"] > 0, "the C loop committed nothing: this measures the Python loop"
    w = s["wakeups"]
    per_frame = (w["c_loop"] + w["python"]) / s["frames_captured"]
    assert per_frame <= MAX_WAKEUPS_PER_FRAME, (w, s["frames_captured"], s["drops"])
