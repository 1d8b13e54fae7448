"""fd-level V4L2 calls: one function per ioctl use, plain values out.

Nothing here owns the fd; sits/v4l2/device.py does. Every call goes through
sits._kernel.ioctl, so failures are IoctlError named after the ioctl.
"""
import errno
import os
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


def enum_frame_rates(fd: int, pixelformat: int, width: int, height: int) -> list[float] | tuple[float, float]:
    """The frame rates a camera offers at one size: a list of discrete
    rates (fps), or (lowest, highest) for a stepwise/continuous range."""
    def fill(s):
        s.pixel_format, s.width, s.height = pixelformat, width, height
    rates = []
    for s in _enumerate(fd, lib.SITS_VIDIOC_ENUM_FRAMEINTERVALS, "struct v4l2_frmivalenum *", fill):
        if s.type != lib.V4L2_FRMIVAL_TYPE_DISCRETE:
            slow, fast = s.stepwise.max, s.stepwise.min   # the longest interval is the lowest rate
            return (slow.denominator / slow.numerator if slow.numerator else 0.0,
                    fast.denominator / fast.numerator if fast.numerator else 0.0)
        t = s.discrete
        rates.append(t.denominator / t.numerator if t.numerator else 0.0)
    return rates


# ------------------------------------------------------------------ formats
@dataclass
class Format:
    fourcc: str
    width: int
    height: int
    bytesperline: int
    sizeimage: int
    field: int
    colorspace: int
    ycbcr_enc: int = 0          # V4L2_YCBCR_ENC_*, as the driver said it (0: its colorspace's default)
    quantization: int = 0       # V4L2_QUANTIZATION_*, as the driver said it (0: the default)

    @property
    def size(self) -> tuple[int, int]:
        return self.width, self.height


def format_of(f) -> Format:
    """The Format of a struct v4l2_format (single-planar)."""
    p = f.fmt.pix
    return Format(fourcc_str(p.pixelformat), p.width, p.height, p.bytesperline,
                  p.sizeimage, p.field, p.colorspace, lib.sits_v4l2_pix_ycbcr_enc(ffi.addressof(p)),
                  p.quantization)


def g_fmt(fd: int, buf_type: int = lib.V4L2_BUF_TYPE_VIDEO_CAPTURE) -> Format:
    f = ffi.new("struct v4l2_format *", {"type": buf_type})
    ioctl(fd, lib.SITS_VIDIOC_G_FMT, f)
    return format_of(f)


def s_fmt(fd: int, pixelformat: int, width: int, height: int, *, try_only: bool = False,
          buf_type: int = lib.V4L2_BUF_TYPE_VIDEO_CAPTURE) -> Format:
    """Ask for a format; the driver answers with what it will really do
    (size, bytesperline and sizeimage may all differ from the request)."""
    f = ffi.new("struct v4l2_format *", {"type": buf_type})
    f.fmt.pix.pixelformat = pixelformat
    f.fmt.pix.width = width
    f.fmt.pix.height = height
    f.fmt.pix.field = lib.V4L2_FIELD_NONE
    ioctl(fd, lib.SITS_VIDIOC_TRY_FMT if try_only else lib.SITS_VIDIOC_S_FMT, f)
    return format_of(f)


def s_fps(fd: int, fps: int, buf_type: int = lib.V4L2_BUF_TYPE_VIDEO_CAPTURE) -> float:
    """Ask for a frame rate; returns the rate the driver chose."""
    p = ffi.new("struct v4l2_streamparm *", {"type": buf_type})
    p.parm.capture.timeperframe.numerator = 1
    p.parm.capture.timeperframe.denominator = fps
    ioctl(fd, lib.SITS_VIDIOC_S_PARM, p)
    t = p.parm.capture.timeperframe
    return t.denominator / t.numerator if t.numerator else 0.0


# ------------------------------------------------------------------ buffers
def reqbufs(fd: int, count: int, memory: int, buf_type: int = lib.V4L2_BUF_TYPE_VIDEO_CAPTURE) -> tuple[int, int]:
    """(count granted, buffer capabilities)."""
    r = ffi.new("struct v4l2_requestbuffers *", {"count": count, "type": buf_type, "memory": memory})
    ioctl(fd, lib.SITS_VIDIOC_REQBUFS, r)
    return r.count, r.capabilities


def querybuf(fd: int, index: int, memory: int, buf_type: int = lib.V4L2_BUF_TYPE_VIDEO_CAPTURE):
    b = ffi.new("struct v4l2_buffer *", {"index": index, "type": buf_type, "memory": memory})
    ioctl(fd, lib.SITS_VIDIOC_QUERYBUF, b)
    return b


def expbuf(fd: int, index: int, buf_type: int = lib.V4L2_BUF_TYPE_VIDEO_CAPTURE) -> int:
    """Export an MMAP buffer as a dma-buf fd (read-write, close-on-exec)."""
    e = ffi.new("struct v4l2_exportbuffer *", {"type": buf_type, "index": index,
                                               "flags": os.O_RDWR | os.O_CLOEXEC})
    ioctl(fd, lib.SITS_VIDIOC_EXPBUF, e)
    return e.fd


@dataclass
class Dequeued:
    index: int
    sequence: int
    timestamp_ns: int   # CLOCK_MONOTONIC when the driver says so (flags)
    bytesused: int
    flags: int

    @property
    def error(self) -> bool:
        return bool(self.flags & lib.V4L2_BUF_FLAG_ERROR)

    @property
    def monotonic(self) -> bool:
        return (self.flags & lib.V4L2_BUF_FLAG_TIMESTAMP_MASK) == lib.V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC


def streamon(fd: int, buf_type: int = lib.V4L2_BUF_TYPE_VIDEO_CAPTURE) -> None:
    ioctl(fd, lib.SITS_VIDIOC_STREAMON, ffi.new("int *", buf_type))


def streamoff(fd: int, buf_type: int = lib.V4L2_BUF_TYPE_VIDEO_CAPTURE) -> None:
    ioctl(fd, lib.SITS_VIDIOC_STREAMOFF, ffi.new("int *", buf_type))


# ----------------------------------------------------------------- controls
@dataclass
class Control:
    """One control as VIDIOC_QUERY_EXT_CTRL describes it; `name` is the
    driver's ("White Balance, Automatic")."""
    id: int
    name: str
    type: int
    minimum: int
    maximum: int
    default: int
    flags: int
    step: int = 1
    elems: int = 1     # > 1, or dims set: an array, which has a payload
    dims: tuple = ()


def controls(fd: int) -> list[Control]:
    """Every control but the class headings and disabled ones, compound
    ones too, in the driver's order."""
    out, next_id = [], lib.V4L2_CTRL_FLAG_NEXT_CTRL | lib.V4L2_CTRL_FLAG_NEXT_COMPOUND
    while True:
        q = ffi.new("struct v4l2_query_ext_ctrl *", {"id": next_id})
        try:
            ioctl(fd, lib.SITS_VIDIOC_QUERY_EXT_CTRL, q)
        except IoctlError as exc:
            if exc.errno == errno.EINVAL:
                return out
            raise
        if q.type != lib.V4L2_CTRL_TYPE_CTRL_CLASS and not q.flags & lib.V4L2_CTRL_FLAG_DISABLED:
            out.append(Control(q.id, string(q.name), q.type, q.minimum, q.maximum, q.default_value, q.flags,
                               q.step, q.elems, tuple(q.dims[i] for i in range(q.nr_of_dims))))
        next_id = q.id | lib.V4L2_CTRL_FLAG_NEXT_CTRL | lib.V4L2_CTRL_FLAG_NEXT_COMPOUND


def menu_items(fd: int, ctrl: Control) -> list[tuple[int, str | int]]:
    """(index, name) of a menu's items, (index, value) of an integer
    menu's; the indexes the driver skips (EINVAL) are not items."""
    out = []
    for index in range(ctrl.minimum, ctrl.maximum + 1):
        q = ffi.new("struct v4l2_querymenu *", {"id": ctrl.id, "index": index})
        try:
            ioctl(fd, lib.SITS_VIDIOC_QUERYMENU, q)
        except IoctlError as exc:
            if exc.errno == errno.EINVAL:
                continue
            raise
        out.append((index, q.value if ctrl.type == lib.V4L2_CTRL_TYPE_INTEGER_MENU else string(q.name)))
    return out


def _ext_ctrls(fd: int, request: int, c) -> None:
    cs = ffi.new("struct v4l2_ext_controls *", {"which": lib.V4L2_CTRL_WHICH_CUR_VAL, "count": 1, "controls": c})
    ioctl(fd, request, cs)


def g_ext_ctrl(fd: int, ctrl: Control) -> int | str:
    """A control's current value: an int, or a str for a string control."""
    c = ffi.new("struct v4l2_ext_control *", {"id": ctrl.id})
    if ctrl.type == lib.V4L2_CTRL_TYPE_STRING:
        buf = ffi.new("char[]", ctrl.maximum + 1)
        c.size, c.string = len(buf), buf
        _ext_ctrls(fd, lib.SITS_VIDIOC_G_EXT_CTRLS, c)
        return ffi.string(buf).decode(errors="replace")
    _ext_ctrls(fd, lib.SITS_VIDIOC_G_EXT_CTRLS, c)
    if ctrl.type == lib.V4L2_CTRL_TYPE_INTEGER64:
        return c.value64
    return c.value & 0xFFFFFFFF if ctrl.type == lib.V4L2_CTRL_TYPE_BITMASK else c.value


def s_ext_ctrl(fd: int, ctrl: Control, value: int | str) -> None:
    """Set one control (an int, or a str for a string control)."""
    c = ffi.new("struct v4l2_ext_control *", {"id": ctrl.id})
    if ctrl.type == lib.V4L2_CTRL_TYPE_STRING:
        buf = ffi.new("char[]", value.encode())
        c.size, c.string = len(buf), buf
    elif ctrl.type == lib.V4L2_CTRL_TYPE_INTEGER64:
        c.value64 = value
    else:   # a bitmask's 32 bits go in the signed member as they are
        c.value = value - (1 << 32) if value >= 1 << 31 else value
    _ext_ctrls(fd, lib.SITS_VIDIOC_S_EXT_CTRLS, c)


def s_ctrl(fd: int, ctrl_id: int, value: int) -> None:
    ioctl(fd, lib.SITS_VIDIOC_S_CTRL, ffi.new("struct v4l2_control *", {"id": ctrl_id, "value": value}))
