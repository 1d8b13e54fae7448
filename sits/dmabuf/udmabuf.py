"""memfd buffers and the udmabuf allocator (a dma-buf over a memfd).

A `MemFd` is the one memfd type of sits: the pages of a udmabuf capture
buffer, of a synthetic source's frames and of anything CUDA registers as host
memory (`cuMemHostRegister` needs an address: `address` maps the memfd
shared, once). The memfd stays with a udmabuf (DmaBuf.backing): its pages
are the buffer's, so the CPU and CUDA use the memfd mapping while V4L2/KMS
use the dma-buf. udmabuf requires the memfd sealed against shrinking.
"""
import ctypes
import fcntl
import mmap
import os
import weakref

from sits._kernel import ffi, ioctl, lib
from sits.dmabuf.buffer import DmaBuf
from sits.fd import FdOwner

DEVICE = "/dev/udmabuf"
PAGE = os.sysconf("SC_PAGE_SIZE")


class MemFd(FdOwner):
    """A memfd of `size` bytes; `map()`/`address`/`array` see it through one
    shared mapping, made on first use and unmapped by close()."""

    __slots__ = ("size", "_map", "_address", "_map_finalizer")

    def __init__(self, fd: int, size: int):
        super().__init__(fd)
        self.size = size
        self._map = None
        self._address = 0
        self._map_finalizer = None

    @classmethod
    def create(cls, size: int, name: str = "sits-frame") -> "MemFd":
        """A new memfd of `size` bytes, sealed against shrinking (udmabuf's
        condition, and a registered range that cannot lose its pages)."""
        memfd = cls(os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING), size)
        try:
            os.ftruncate(memfd.fileno(), size)
            fcntl.fcntl(memfd.fileno(), fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
        except BaseException:
            memfd.close()
            raise
        return memfd

    def map(self) -> mmap.mmap:
        """The shared read/write mapping of the whole memfd, created once."""
        if self._map is None:
            m = mmap.mmap(self.fileno(), self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            self._map_finalizer = weakref.finalize(self, _close_map, m)
            view = ctypes.c_char.from_buffer(m)
            self._address = ctypes.addressof(view)
            del view  # the address stays valid while the mapping does; the export must go
            self._map = m
        return self._map

    @property
    def address(self) -> int:
        """Where the CPU sees the pages (what cuMemHostRegister takes)."""
        self.map()
        return self._address

    @property
    def array(self):
        """The bytes as a writable numpy uint8 array (no copy). Drop it before close()."""
        import numpy as np

        return np.frombuffer(self.map(), dtype=np.uint8)

    def close(self) -> None:
        if self._map_finalizer is not None:
            self._map_finalizer()
        self._map = None
        self._address = 0
        super().close()


def _close_map(m: mmap.mmap) -> None:
    try:
        m.close()
    except (BufferError, ValueError):  # a numpy view still exists: the pages go with it
        pass


class Udmabuf(FdOwner):
    __slots__ = ()

    @classmethod
    def open(cls):
        return super().open(DEVICE, os.O_RDWR)

    def alloc(self, size: int) -> DmaBuf:
        size = (size + PAGE - 1) // PAGE * PAGE  # udmabuf works in whole pages
        memfd = MemFd.create(size)
        try:
            arg = ffi.new("struct udmabuf_create *", {"memfd": memfd.fileno(),
                                                      "flags": lib.UDMABUF_FLAGS_CLOEXEC,
                                                      "offset": 0, "size": size})
            fd = ioctl(self.fileno(), lib.SITS_UDMABUF_CREATE, arg)
        except BaseException:
            memfd.close()
            raise
        return DmaBuf(fd, size, backing=memfd)
