"""dma-heap allocator: /dev/dma_heap/<name> (e.g. system, linux,cma)."""
import glob
import os

from sits._kernel import ffi, ioctl, lib
from sits.dmabuf.buffer import DmaBuf
from sits.fd import FdOwner

HEAP_DIR = "/dev/dma_heap"


def heap_names() -> list[str]:
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(HEAP_DIR, "*")))


class DmaHeap(FdOwner):
    __slots__ = ("name",)

    def __init__(self, fd: int, name: str = "?"):
        super().__init__(fd)
        self.name = name

    @classmethod
    def open(cls, name: str = "system"):
        return super().open(os.path.join(HEAP_DIR, name), os.O_RDONLY, name=name)

    def alloc(self, size: int) -> DmaBuf:
        data = ffi.new("struct dma_heap_allocation_data *",
                       {"len": size, "fd_flags": os.O_RDWR | os.O_CLOEXEC})
        ioctl(self.fileno(), lib.SITS_DMA_HEAP_IOCTL_ALLOC, data)
        return DmaBuf(data.fd, size)
