"""One owner per file descriptor.

Every fd sits opens is held by exactly one FdOwner: `close()` is idempotent,
the owner is a context manager, and a weakref.finalize closes the fd if the
owner is dropped without `close()` (and at interpreter exit), so a forgotten
object never leaks a descriptor. Children keep their parents alive by
holding a reference (a framebuffer holds its card, a lease its buffer).
"""
import errno
import os
import weakref

from sits.errors import DeviceError, KernelCallError


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


class FdOwner:
    """Owns one fd. Subclasses add the interface; `fileno()` lends the fd."""

    __slots__ = ("_fd", "_finalizer", "__weakref__")

    def __init__(self, fd: int):
        self._fd = fd
        # Registered before anything else can fail, so the fd cannot leak.
        self._finalizer = weakref.finalize(self, _close_quietly, fd)

    @classmethod
    def open(cls, path: str, flags: int = os.O_RDWR, /, *args, **kwargs):
        """Open `path` with O_CLOEXEC and wrap it; errors name the path."""
        try:
            fd = os.open(path, flags | os.O_CLOEXEC)
        except OSError as exc:
            raise open_error(exc, path) from None
        try:
            return cls(fd, *args, **kwargs)
        except BaseException:
            os.close(fd)
            raise

    def fileno(self) -> int:
        if self._fd < 0:
            raise ValueError(f"{type(self).__name__} is closed")
        return self._fd

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def detach(self) -> int:
        """Hand the fd to another owner (C code that closes it); this object
        no longer closes it."""
        fd = self.fileno()
        self._finalizer.detach()
        self._fd = -1
        return fd

    def close(self) -> None:
        if self._fd >= 0:
            self._fd = -1
            self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._fd < 0 else f"fd={self._fd}"
        return f"<{type(self).__name__} {state}>"


_OPEN_HINTS = {
    errno.ENOENT: "no such device",
    errno.ENODEV: "no such device",
    errno.ENXIO: "no such device",
    errno.EACCES: "permission denied (add the user to the video/render group, or run as root)",
    errno.EPERM: "permission denied (add the user to the video/render group, or run as root)",
    errno.EBUSY: "device busy (another process holds it)",
}


def open_error(exc: OSError, path: str) -> Exception:
    """A one-line DeviceError for a failed open(), keeping the errno."""
    hint = _OPEN_HINTS.get(exc.errno)
    if hint is None:
        return KernelCallError(exc.errno or errno.EIO, f"open {path}")
    err = DeviceError(f"{path}: {hint}")
    err.errno = exc.errno
    return err
