"""timerfd: a clock as a file descriptor, for the one poll loop.

A synthetic source's frames "land" on a periodic CLOCK_MONOTONIC timer; the
poll loop learns of them as it learns of V4L2 frames, by the fd becoming
readable. The timer is set with an absolute first expiry, so expiry k falls
at exactly `first_ns + k * period_ns` however late the loop reads it.
"""
import os

from sits._kernel import check, ffi, lib
from sits.fd import FdOwner

NS = 1_000_000_000


def timerfd_create(clock: int = lib.CLOCK_MONOTONIC, flags: int = 0) -> int:
    return check(lib.timerfd_create(clock, flags | lib.TFD_CLOEXEC | lib.TFD_NONBLOCK), "timerfd_create")


def timerfd_settime(fd: int, first_ns: int, period_ns: int) -> None:
    """Arm: first expiry at `first_ns` (absolute, the timer's clock), then every
    `period_ns` (0: once). first_ns == 0 disarms."""
    spec = ffi.new("struct itimerspec *")
    spec.it_value.tv_sec, spec.it_value.tv_nsec = divmod(first_ns, NS)
    spec.it_interval.tv_sec, spec.it_interval.tv_nsec = divmod(period_ns, NS)
    check(lib.timerfd_settime(fd, lib.TFD_TIMER_ABSTIME, spec, ffi.NULL), "timerfd_settime")


def expirations(fd: int) -> int:
    """Expiries since the last read (0 when none: the fd is non-blocking)."""
    try:
        return int.from_bytes(os.read(fd, 8), "little")
    except BlockingIOError:
        return 0


class TimerFd(FdOwner):
    """A periodic timer; readable while expiries wait to be read."""

    __slots__ = ("first_ns", "period_ns")

    def __init__(self, fd: int):
        super().__init__(fd)
        self.first_ns = 0
        self.period_ns = 0

    @classmethod
    def create(cls, clock: int = lib.CLOCK_MONOTONIC) -> "TimerFd":
        return cls(timerfd_create(clock))

    def start(self, first_ns: int, period_ns: int) -> None:
        timerfd_settime(self.fileno(), first_ns, period_ns)
        self.first_ns, self.period_ns = first_ns, period_ns

    def stop(self) -> None:
        timerfd_settime(self.fileno(), 0, 0)

    def expirations(self) -> int:
        return expirations(self.fileno())
