"""libbpf.so.1 through cffi's out-of-line ABI module (csrc/build_libbpf.py).

libbpf 1.x returns NULL + errno from constructors and -errno from the rest;
`check_ptr`/`check_int` turn both into KernelCallError named after the call.
libbpf's own log is captured instead of printed (the library never prints):
the last lines are attached to a failed load's message.
"""
import collections
import errno
import functools

from sits.errors import KernelCallError

LIBRARY = "libbpf.so.1"
_log = collections.deque(maxlen=200)


@functools.cache
def load():
    """(ffi, lib) with libbpf opened; raises KernelCallError(ENOENT) if absent."""
    from sits.ebpf._libbpf_ffi import ffi
    try:
        lib = ffi.dlopen(LIBRARY)
    except OSError as exc:
        raise KernelCallError(errno.ENOENT, f"dlopen {LIBRARY}",
                              "libbpf is missing (Debian: apt-get install libbpf1)") from exc

    @ffi.callback("int(enum libbpf_print_level, const char *, void *)")
    def _print(level, fmt, args):
        # The va_list cannot be formatted from Python; keep the format string,
        # which for libbpf's messages names what failed.
        _log.append(ffi.string(fmt).decode(errors="replace").rstrip())
        return 0

    lib.libbpf_set_print(_print)
    load._keep = _print  # the callback must outlive every libbpf call
    return ffi, lib


def recent_log(n: int = 5) -> str:
    return " | ".join(list(_log)[-n:])


def check_ptr(ptr, call: str, detail: str | None = None):
    ffi, _ = load()
    if ptr == ffi.NULL:
        raise KernelCallError(ffi.errno or errno.EINVAL, call, detail)
    return ptr


def check_int(ret: int, call: str, detail: str | None = None) -> int:
    if ret < 0:
        raise KernelCallError(-ret, call, detail)
    return ret
