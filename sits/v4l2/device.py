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
