"""Two sources in one pipeline on vivid + vkms: the camera on the display,
a synthetic source to a consumer of its own, and one consumer taking both;
each frame carries its source, the display shows only the camera's, every
buffer of both goes back, nothing leaks."""
import pytest

from sits.pipeline.capture import CaptureOptions, build
from sits.pipeline.consumer import Consumer, Port
from sits.pipeline.synthetic import SyntheticCamera

pytestmark = pytest.mark.vm


class Seen(Consumer):
    def __init__(self, name):
        self.name = name
        self.frames = []

    def take(self, frame, lease):
        self.frames.append((frame.source, frame.sequence, frame.buffer))
        lease.release()


def test_camera_on_the_display_and_a_synthetic_source_beside_it(vivid_path, vkms_path, no_leaks):
    with SyntheticCamera("YUYV", (160, 120), 30, buffers=3) as synth:
        own, both = Seen("synthetic"), Seen("both")
        p = build(CaptureOptions(device=vivid_path, card=vkms_path, display=True, format="XR24", size=(320, 180),
                                 fps=30, frames=60, buffers=4),
                  sources=[synth], consumers=[Port(own, "drop-oldest", 4, takes=synth),
                                              Port(both, "drop-oldest", 4, takes=(0, synth))])
        camera_buffers = list(p.source.buffers)   # closed with the run
        s = p.run()
        cam, syn = s.sources
        assert cam["device"] == vivid_path and syn["device"] == synth.path
        assert cam["captured"] > 0 and syn["captured"] > 0
        assert cam["captured"] + syn["captured"] == s.frames_captured >= 60
        # the display shows the camera's frames only; each is shown or dropped for a newer one
        assert s.frames_displayed > 0 and s.c_loop_commits > 0
        assert s.frames_displayed + s.frames_dropped == cam["captured"]
        assert {src for src, _, _ in own.frames} == {1} and all(b in synth.buffers for _, _, b in own.frames)
        assert len(own.frames) == syn["captured"]
        assert [f for f in both.frames if f[0] == 1] == own.frames
        camera_frames = [f for f in both.frames if f[0] == 0]
        assert len(camera_frames) == cam["captured"] and all(b in camera_buffers for _, _, b in camera_frames)
        assert not any(b.leased for b in synth.buffers)
