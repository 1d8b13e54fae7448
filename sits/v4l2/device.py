"""Objects that own a V4L2 device fd."""
import errno
import glob
import os

from sits.errors import DeviceError, IoctlError
from sits.fd import FdOwner
from sits.formats import fourcc
from sits.v4l2 import raw


def video_paths() -> list[str]:
    return sorted(glob.glob("/dev/video[0-9]*"), key=lambda p: int(p[len("/dev/video"):]))


class VideoDevice(FdOwner):
    """Any /dev/video* node: capabilities and format enumeration."""

    __slots__ = ("path", "cap")

    def __init__(self, fd: int, path: str = "?"):
        super().__init__(fd)
        self.path = path
        try:
            self.cap = raw.querycap(fd)
        except IoctlError as exc:
            if exc.errno in (errno.ENOTTY, errno.EINVAL):   # the node answers no V4L2 ioctl
                raise DeviceError(f"{path}: not a V4L2 device (VIDIOC_QUERYCAP: {exc.strerror})") from None
            raise

    @classmethod
    def open(cls, path: str):
        # O_NONBLOCK: DQBUF must never block the event loop; poll says when.
        return super().open(path, os.O_RDWR | os.O_NONBLOCK, path=path)

    def formats(self, buf_type=None) -> list[raw.FormatDesc]:
        kw = {} if buf_type is None else {"buf_type": buf_type}
        return raw.enum_formats(self.fileno(), **kw)

    def frame_sizes(self, code: str) -> raw.FrameSizes:
        return raw.enum_frame_sizes(self.fileno(), fourcc(code))

    def frame_rates(self, code: str, width: int, height: int) -> list[float] | tuple[float, float]:
        """Discrete rates (fps), or (lowest, highest) of a range, of `code` at this size."""
        return raw.enum_frame_rates(self.fileno(), fourcc(code), width, height)

    def offers(self, code: str, size: tuple[int, int] | None, fps: float | None) -> bool:
        """The camera lists format `code` at `size` and at `fps` or faster
        (what it does not enumerate, it is taken to offer, as S_FMT decides)."""
        if size is not None:
            sizes = self.frame_sizes(code)
            if (sizes.discrete or sizes.stepwise) and not sizes.allows(*size):
                return False
        if fps is None or size is None:
            return True
        rates = self.frame_rates(code, *size)
        if isinstance(rates, tuple):
            return rates[1] + 0.5 >= fps
        return not rates or max(rates) + 0.5 >= fps
