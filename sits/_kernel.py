"""The compiled kernel binding and the one ioctl helper every layer uses.

`ffi`/`lib` come from the cffi extension built at install time against the
system's UAPI and libdrm headers (csrc/). `ioctl()` is the only place that
issues an ioctl: it retries EINTR and raises IoctlError with the ioctl's name.
"""
import errno

from sits.errors import IoctlError, KernelCallError

try:
    from sits._kernel_ffi import ffi, lib
except ImportError as exc:  # pragma: no cover - only on a broken install
    raise ImportError(
        "sits' kernel binding is not built; reinstall with `pip install .` "
        f"(needs gcc, linux-libc-dev and libdrm-dev): {exc}") from exc

def _ioctl_constants() -> list[str]:
    """The SITS_* ioctl constants of csrc/sits_ioctls.h (the module lists
    them: other SITS_* names, the frame queue's, are not ioctls)."""
    out, i = [], 0
    while lib.sits_ioctl_names[i] != ffi.NULL:
        out.append(ffi.string(lib.sits_ioctl_names[i]).decode())
        i += 1
    return out


#: ioctl request number -> name
IOCTL_NAMES: dict[int, str] = {getattr(lib, n): n[len("SITS_"):] for n in _ioctl_constants()}


def ioctl_number(name: str) -> int:
    """The request number of an ioctl by its UAPI name, e.g. 'VIDIOC_QBUF'."""
    return getattr(lib, "SITS_" + name)


def ioctl(fd: int, request: int, arg=ffi.NULL, *, name: str | None = None) -> int:
    """Issue one ioctl, retrying on EINTR; raise IoctlError on failure.

    `arg` is a cffi pointer (ffi.new(...)) or NULL. The GIL is released for
    the call, so a blocking ioctl does not stall other threads.
    """
    while True:
        ret = lib.sits_ioctl(fd, request, arg)
        if ret >= 0:
            return ret
        err = ffi.errno
        if err != errno.EINTR:
            raise IoctlError(err, name or IOCTL_NAMES.get(request, hex(request)))


def check(ret: int, call: str) -> int:
    """Raise for a libdrm-style return (negative errno, or -1 with errno)."""
    if ret >= 0:
        return ret
    err = -ret if ret != -1 else (ffi.errno or errno.EIO)
    raise KernelCallError(err, call)


def string(cdata) -> str:
    """A NUL-terminated char/__u8 array from a UAPI struct, as str."""
    return ffi.string(ffi.cast("char *", cdata)).decode(errors="replace")
