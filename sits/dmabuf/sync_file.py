"""SyncFile: a sync_file fd (one or more dma_fences)."""
import select
from dataclasses import dataclass

from sits._kernel import ffi, ioctl, lib
from sits.errors import KernelCallError
from sits.fd import FdOwner


@dataclass
class FenceInfo:
    obj_name: str
    driver_name: str
    status: int          # 1 signalled, 0 active, <0 error
    timestamp_ns: int    # CLOCK_MONOTONIC signal time (0 if not signalled)


def file_info(fd: int) -> tuple[int, list[FenceInfo]]:
    """(status, fences) of a sync_file, via SYNC_IOC_FILE_INFO (two calls:
    the first learns how many fences there are)."""
    info = ffi.new("struct sync_file_info *")
    ioctl(fd, lib.SITS_SYNC_IOC_FILE_INFO, info)
    n = info.num_fences
    fences = ffi.new("struct sync_fence_info[]", max(n, 1))
    info = ffi.new("struct sync_file_info *", {"num_fences": n,
                                                "sync_fence_info": int(ffi.cast("uintptr_t", fences))})
    ioctl(fd, lib.SITS_SYNC_IOC_FILE_INFO, info)
    return info.status, [FenceInfo(ffi.string(f.obj_name).decode(), ffi.string(f.driver_name).decode(),
                                   f.status, f.timestamp_ns) for f in fences[0:info.num_fences]]


def file_status(fd: int) -> int:
    """1 signalled, 0 active, <0 error: one SYNC_IOC_FILE_INFO asking for no
    per-fence records (the per-frame question; file_info() asks for them)."""
    info = ffi.new("struct sync_file_info *")
    ioctl(fd, lib.SITS_SYNC_IOC_FILE_INFO, info)
    return info.status


def merge(fd1: int, fd2: int, name: str = "sits-merge") -> int:
    data = ffi.new("struct sync_merge_data *")
    data.name = name.encode()[:31]
    data.fd2 = fd2
    ioctl(fd1, lib.SITS_SYNC_IOC_MERGE, data)
    return data.fence


class SyncFile(FdOwner):
    """A fence. Readable (POLLIN) once signalled; wait() polls with a timeout."""

    __slots__ = ()

    def wait(self, timeout_s: float | None = None) -> bool:
        """True once signalled, False on timeout. Raises if the fence errored."""
        p = select.poll()
        p.register(self.fileno(), select.POLLIN)
        ms = -1 if timeout_s is None else max(0, int(timeout_s * 1000))
        if not p.poll(ms):
            return False
        status = self.status()
        if status < 0:
            raise KernelCallError(-status, "dma_fence", "fence signalled with an error")
        return True

    def signalled(self) -> bool:
        return self.status() == 1

    def status(self) -> int:
        return file_status(self.fileno())

    def info(self) -> list[FenceInfo]:
        return file_info(self.fileno())[1]

    def merge(self, other: "SyncFile", name: str = "sits-merge") -> "SyncFile":
        return SyncFile(merge(self.fileno(), other.fileno(), name))

    @classmethod
    def from_fd(cls, fd: int) -> "SyncFile | None":
        """Own a fence fd returned by the kernel; -1 (no fence) gives None."""
        return None if fd < 0 else cls(fd)
