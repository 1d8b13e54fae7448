"""dma-bufs imported into CUDA (the `dmabuf` import path; Tegra).

Where the driver imports dma-bufs (`probe()["dmabuf_import"]["supported"]`),
a capture buffer is imported once with cuImportExternalMemory(DMABUF_FD) and
mapped whole; the kernel reads its device pointer, no copy at all. The
import is undone by close() (or when the object goes).
"""
from __future__ import annotations

import weakref

from sits.cuda import probe as P
from sits.cuda.runtime import cupy
from sits.errors import DeviceError


class ImportedDmabuf:
    """One dma-buf mapped into the GPU's address space. It has
    __cuda_array_interface__ (size bytes, uint8), so FrameConverter takes it
    as a device frame."""

    __slots__ = ("size", "device_pointer", "_finalizer", "__weakref__")

    def __init__(self, fd: int, size: int):
        cupy()  # the primary context current on this thread, as the converter's
        drv, reason = P.load_driver()
        if drv is None:
            raise DeviceError(reason)
        try:
            ext, dptr = P.import_dmabuf(drv, fd, size)
        except P.CudaCallFailed as exc:
            raise DeviceError(f"CUDA cannot import this dma-buf ({exc})") from None
        self.size = size
        self.device_pointer = dptr
        self._finalizer = weakref.finalize(self, P.release_dmabuf, drv, ext, dptr)

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": (self.size,), "typestr": "|u1", "data": (self.device_pointer, False),
                "strides": None, "version": 3}

    def close(self) -> None:
        self._finalizer()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive
