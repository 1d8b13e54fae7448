"""fd-level V4L2 calls: one function per ioctl use, plain values out.

Nothing here owns the fd; sits/v4l2/device.py does. Every call goes through
sits._kernel.ioctl, so failures are IoctlError named after the ioctl.
"""
import errno
from dataclasses import dataclass, field

from sits._kernel import ffi, ioctl, lib, string
from sits.errors import IoctlError
from sits.formats import fourcc_str

CAPABILITY_NAMES = {
    lib.V4L2_CAP_VIDEO_CAPTURE: "video-capture",
    lib.V4L2_CAP_VIDEO_CAPTURE_MPLANE: "video-capture-mplane",
    lib.V4L2_CAP_VIDEO_OUTPUT: "video-output",
    lib.V4L2_CAP_VIDEO_OUTPUT_MPLANE: "video-output-mplane",
    lib.V4L2_CAP_VIDEO_M2M: "video-m2m",
    lib.V4L2_CAP_VIDEO_M2M_MPLANE: "video-m2m-mplane",
    lib.V4L2_CAP_META_CAPTURE: "meta-capture",
    lib.V4L2_CAP_READWRITE: "readwrite",
    lib.V4L2_CAP_STREAMING: "streaming",
}


@dataclass
class Capability:
    driver: str
    card: str
    bus_info: str
    version: str
    capabilities: int
    device_caps: int

    @property
    def caps(self) -> int:
        """The caps of this node (device_caps when the driver sets it)."""
        if self.capabilities & lib.V4L2_CAP_DEVICE_CAPS:
            return self.device_caps
        return self.capabilities

    @property
    def cap_names(self) -> list[str]:
        return [n for bit, n in CAPABILITY_NAMES.items() if self.caps & bit]

    @property
    def is_capture(self) -> bool:
        return bool(self.caps & lib.V4L2_CAP_VIDEO_CAPTURE)


def querycap(fd: int) -> Capability:
    cap = ffi.new("struct v4l2_capability *")
    ioctl(fd, lib.SITS_VIDIOC_QUERYCAP, cap)
    v = cap.version
    return Capability(string(cap.driver), string(cap.card), string(cap.bus_info),
                      f"{v >> 16}.{(v >> 8) & 0xFF}.{v & 0xFF}", cap.capabilities, cap.device_caps)


@dataclass
class FormatDesc:
    fourcc: str
    description: str
    flags: int
    sizes: list = field(default_factory=list)


def _enumerate(fd: int, request: int, ctype: str, fill):
    """Yield filled structs for index 0.. until the driver says EINVAL."""
    index = 0
    while True:
        s = ffi.new(ctype)
        s.index = index
        fill(s)
        try:
            ioctl(fd, request, s)
        except IoctlError as exc:
            if exc.errno == errno.EINVAL:
                return
            raise
        yield s
        index += 1


def enum_formats(fd: int, buf_type: int = lib.V4L2_BUF_TYPE_VIDEO_CAPTURE) -> list[FormatDesc]:
    def fill(s):
        s.type = buf_type
    return [FormatDesc(fourcc_str(s.pixelformat), string(s.description), s.flags)
            for s in _enumerate(fd, lib.SITS_VIDIOC_ENUM_FMT, "struct v4l2_fmtdesc *", fill)]


@dataclass
class FrameSizes:
    """Either a list of discrete (w, h), or a stepwise/continuous range."""
    discrete: list[tuple[int, int]] = field(default_factory=list)
    stepwise: tuple[int, int, int, int, int, int] | None = None  # min_w,max_w,step_w,min_h,max_h,step_h

    def describe(self) -> str:
        if self.stepwise:
            a, b, c, d, e, f = self.stepwise
            return f"{a}x{d}..{b}x{e} step {c}x{f}"
        return " ".join(f"{w}x{h}" for w, h in self.discrete)

    def allows(self, width: int, height: int) -> bool:
        if self.stepwise:
            a, b, c, d, e, f = self.stepwise
            return (a <= width <= b and d <= height <= e
                    and (width - a) % max(c, 1) == 0 and (height - d) % max(f, 1) == 0)
        return (width, height) in self.discrete


def enum_frame_sizes(fd: int, pixelformat: int) -> FrameSizes:
    sizes = FrameSizes()

    def fill(s):
        s.pixel_format = pixelformat
    for s in _enumerate(fd, lib.SITS_VIDIOC_ENUM_FRAMESIZES, "struct v4l2_frmsizeenum *", fill):
        if s.type == lib.V4L2_FRMSIZE_TYPE_DISCRETE:
            sizes.discrete.append((s.discrete.width, s.discrete.height))
        else:
            w = s.stepwise
            sizes.stepwise = (w.min_width, w.max_width, w.step_width,
                              w.min_height, w.max_height, w.step_height)
            break
    return sizes


def enum_frame_intervals(fd: int, pixelformat: int, width: int, height: int) -> list[tuple[int, int]]:
    """Discrete frame intervals as (numerator, denominator) seconds; for a
    stepwise range, its min and max."""
    out = []

    def fill(s):
        s.pixel_format, s.width, s.height = pixelformat, width, height
    for s in _enumerate(fd, lib.SITS_VIDIOC_ENUM_FRAMEINTERVALS, "struct v4l2_frmivalenum *", fill):
        if s.type == lib.V4L2_FRMIVAL_TYPE_DISCRETE:
            out.append((s.discrete.numerator, s.discrete.denominator))
        else:
            out += [(s.stepwise.min.numerator, s.stepwise.min.denominator),
                    (s.stepwise.max.numerator, s.stepwise.max.denominator)]
            break
    return out
