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

    libc = _libc(ffi)
    buf = ffi.new("char[]", 1 << 16)

    @ffi.callback("int(enum libbpf_print_level, const char *, void *)")
    def _print(level, fmt, args):
        if level == lib.LIBBPF_DEBUG:
            return 0
        if libc is not None:
            libc.vsnprintf(buf, len(buf), fmt, args)
            text = ffi.string(buf)
        else:  # keep the format string, which still names what failed
            text = ffi.string(fmt)
        _log.append(text.decode(errors="replace").rstrip())
        return 0

    lib.libbpf_set_print(_print)
    load._keep = _print  # the callback must outlive every libbpf call
    return ffi, lib


def _libc(ffi):
    """libc for vsnprintf, on the ABIs where a va_list is passed as a pointer."""
    import os
    if os.uname().machine not in ("x86_64", "aarch64"):
        return None
    try:
        return ffi.dlopen("libc.so.6")
    except OSError:
        return None


def recent_log(n: int = 5, lines: int = 4) -> str:
    """The last `n` libbpf messages, each cut to its last `lines` lines (a
    verifier log ends with the reason it refused the program)."""
    out = []
    for msg in list(_log)[-n:]:
        parts = [p for p in msg.splitlines() if p.strip() and "END PROG LOAD LOG" not in p]
        out.append(" / ".join(parts[-lines:]))
    return " | ".join(out)


def check_ptr(ptr, call: str, detail: str | None = None):
    ffi, _ = load()
    if ptr == ffi.NULL:
        raise KernelCallError(ffi.errno or errno.EINVAL, call, detail)
    return ptr


def check_int(ret: int, call: str, detail: str | None = None) -> int:
    if ret < 0:
        raise KernelCallError(-ret, call, detail)
    return ret
