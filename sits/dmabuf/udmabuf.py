"""udmabuf allocator: a dma-buf over a memfd.

The memfd stays with the buffer (DmaBuf.backing): its pages are the buffer's,
so the CPU (and cuMemHostRegister) can use the memfd mapping while V4L2/KMS
use the dma-buf. udmabuf requires the memfd sealed against shrinking.
"""
import fcntl
import os

from sits._kernel import ffi, ioctl, lib
from sits.dmabuf.buffer import DmaBuf
from sits.fd import FdOwner

DEVICE = "/dev/udmabuf"
PAGE = os.sysconf("SC_PAGE_SIZE")


class MemFd(FdOwner):
    __slots__ = ("size",)

    def __init__(self, fd: int, size: int):
        super().__init__(fd)
        self.size = size


def sealed_memfd(size: int, name: str = "sits-frame") -> MemFd:
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    memfd = MemFd(fd, size)
    os.ftruncate(fd, size)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    return memfd


class Udmabuf(FdOwner):
    __slots__ = ()

    @classmethod
    def open(cls):
        return super().open(DEVICE, os.O_RDWR)

    def alloc(self, size: int) -> DmaBuf:
        size = (size + PAGE - 1) // PAGE * PAGE  # udmabuf works in whole pages
        memfd = sealed_memfd(size)
        try:
            arg = ffi.new("struct udmabuf_create *", {"memfd": memfd.fileno(),
                                                      "flags": lib.UDMABUF_FLAGS_CLOEXEC,
                                                      "offset": 0, "size": size})
            fd = ioctl(self.fileno(), lib.SITS_UDMABUF_CREATE, arg)
        except BaseException:
            memfd.close()
            raise
        return DmaBuf(fd, size, backing=memfd)
