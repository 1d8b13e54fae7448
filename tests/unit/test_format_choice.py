"""The camera format sits picks when none is asked for: among those the
camera lists at the size and rate asked for. A webcam as sold (a C920's
list: YUYV 1080p only at 5 fps, MJPEG at 30) is described here by its
enumerations; the enumerating itself is the VM tier's (sits cameras)."""
import pytest

from sits.errors import UsageError
from sits.pipeline.capture import choose_format, options
from sits.v4l2 import raw
from sits.v4l2.device import VideoDevice


class Webcam:
    """VideoDevice's offers() over a fixed list of (format, size) -> rates."""

    path = "/dev/video0"
    LISTS = {("YUYV", (640, 480)): [30.0, 15.0], ("YUYV", (1920, 1080)): [5.0],
             ("MJPG", (640, 480)): [30.0], ("MJPG", (1920, 1080)): [30.0, 24.0, 15.0]}
    offers = VideoDevice.offers

    def formats(self):
        return [raw.FormatDesc("YUYV", "YUYV 4:2:2", 0), raw.FormatDesc("MJPG", "Motion-JPEG", 1)]

    def frame_sizes(self, code):
        return raw.FrameSizes(discrete=[size for c, size in self.LISTS if c == code])

    def frame_rates(self, code, width, height):
        return self.LISTS.get((code, (width, height)), [])


@pytest.mark.parametrize("size, fps, want", [
    ("1920x1080", 30, "MJPG"),    # HD at full rate: only as MJPEG
    ("1920x1080", 5, "YUYV"),     # slow enough for the uncompressed format, listed first
    ("1920x1080", None, "YUYV"),
    ("640x480", 30, "YUYV"),
    (None, None, "YUYV"),         # nothing asked: the camera's first
])
def test_the_first_format_listed_at_the_size_and_rate(size, fps, want):
    opts = options(device="/dev/video0", size=size, fps=fps)
    assert choose_format(opts, Webcam(), None) == want


def test_a_size_and_rate_no_format_has_is_one_line():
    opts = options(device="/dev/video0", size="1920x1080", fps=60)
    with pytest.raises(UsageError, match=r"no format at 1920x1080 at 60 fps; `sits cameras --device /dev/video0`"):
        choose_format(opts, Webcam(), None)


def test_a_format_asked_for_is_taken_as_asked():
    opts = options(device="/dev/video0", format="YUYV", size="1920x1080", fps=30)
    assert choose_format(opts, Webcam(), None) == "YUYV"   # configure() then says what the camera does
