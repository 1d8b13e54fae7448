"""DmaBuf: one owner for a dma-buf fd, with CPU access bracketed by
DMA_BUF_IOCTL_SYNC and implicit fences exported/imported as sync_files."""
import mmap
import os
from contextlib import contextmanager

from sits._kernel import ffi, ioctl, lib
from sits.dmabuf.sync_file import SyncFile
from sits.fd import FdOwner

READ = lib.DMA_BUF_SYNC_READ
WRITE = lib.DMA_BUF_SYNC_WRITE
RW = lib.DMA_BUF_SYNC_RW


def sync(fd: int, flags: int) -> None:
    arg = ffi.new("struct dma_buf_sync *", {"flags": flags})
    ioctl(fd, lib.SITS_DMA_BUF_IOCTL_SYNC, arg)


def export_sync_file(fd: int, flags: int = READ) -> int:
    """A sync_file fd of the buffer's implicit fences (READ: those a reader
    must wait for, i.e. pending writes)."""
    arg = ffi.new("struct dma_buf_export_sync_file *", {"flags": flags, "fd": -1})
    ioctl(fd, lib.SITS_DMA_BUF_IOCTL_EXPORT_SYNC_FILE, arg)
    return arg.fd


def import_sync_file(fd: int, sync_fd: int, flags: int = WRITE) -> None:
    """Attach a fence to the buffer (WRITE: as a pending write)."""
    arg = ffi.new("struct dma_buf_import_sync_file *", {"flags": flags, "fd": sync_fd})
    ioctl(fd, lib.SITS_DMA_BUF_IOCTL_IMPORT_SYNC_FILE, arg)


class DmaBuf(FdOwner):
    """A dma-buf of `size` bytes. `backing` is kept alive with it (e.g. the
    memfd under a udmabuf)."""

    __slots__ = ("size", "backing", "_map")

    def __init__(self, fd: int, size: int | None = None, backing=None):
        super().__init__(fd)
        self.size = size if size is not None else os.lseek(fd, 0, os.SEEK_END)
        self.backing = backing
        self._map = None

    def map(self) -> mmap.mmap:
        """A shared mapping of the whole buffer, created once."""
        if self._map is None:
            self._map = mmap.mmap(self.fileno(), self.size, mmap.MAP_SHARED,
                                  mmap.PROT_READ | mmap.PROT_WRITE)
        return self._map

    @contextmanager
    def cpu_access(self, flags: int = READ):
        """Bracket CPU access with SYNC_START/SYNC_END so caches are right."""
        sync(self.fileno(), lib.DMA_BUF_SYNC_START | flags)
        try:
            yield self.map()
        finally:
            sync(self.fileno(), lib.DMA_BUF_SYNC_END | flags)

    def export_fence(self, flags: int = READ) -> SyncFile:
        return SyncFile(export_sync_file(self.fileno(), flags))

    def import_fence(self, fence: SyncFile, flags: int = WRITE) -> None:
        import_sync_file(self.fileno(), fence.fileno(), flags)

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a numpy view still exists; the fd goes anyway
                pass
            self._map = None
        super().close()
        self.backing = None
