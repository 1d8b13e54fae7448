"""The exception hierarchy. The library raises; only the CLI prints."""
import errno as _errno
import os


class SitsError(Exception):
    """Root of sits' own errors; the CLI turns one into a single line."""

    exit_code = 1


class UsageError(SitsError):
    """The caller asked for something that cannot be (bad option, format...)."""

    exit_code = 2


class DeviceError(SitsError):
    """A device is missing, busy, or not the kind that was asked for."""


class KernelCallError(OSError):
    """A failed call into the kernel (or a library wrapping it), named.

    An OSError, so `except OSError` and `.errno` keep working; the message
    carries the call's name and the errno symbol:
    ``VIDIOC_S_FMT: Invalid argument (EINVAL)``.
    """

    def __init__(self, err: int, call: str, detail: str | None = None):
        super().__init__(err, os.strerror(err))
        self.call = call
        self.detail = detail

    @property
    def errno_name(self) -> str:
        return _errno.errorcode.get(self.errno, f"errno {self.errno}")

    def __str__(self) -> str:
        msg = f"{self.call}: {self.strerror} ({self.errno_name})"
        return f"{msg}: {self.detail}" if self.detail else msg


class IoctlError(KernelCallError):
    """A failed ioctl; `.call` is the ioctl's name (e.g. VIDIOC_DQBUF)."""
