"""A mode's time between vblanks, as DRM computes it
(drm_calc_timestamping_constants: framedur_ns), which the timeline's late
rule puts the vblanks that sent no event on."""
from sits.drm.raw import frame_ns


def test_frame_time_is_drms():
    # vkms's 1024x768: its vblank timer's period, seen between vblank events in the test VM
    assert frame_ns(65000, 1344, 806, interlaced=False) == 16_665_600
    # an interlaced mode's vblanks are a field apart: 1080i60
    assert frame_ns(74250, 2200, 1125, interlaced=True) == 16_666_666


def test_no_clock_no_frame_time():
    assert frame_ns(0, 800, 525, interlaced=False) == 0
