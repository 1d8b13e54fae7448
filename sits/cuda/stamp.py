"""The GPU's clock at the two ends of each capture buffer's conversion graph
(kernels/stamp.cu), in host memory the GPU writes and the frame queue's C
reads (sits/pipeline/frame_queue.c): a frame's completion and its GPU time
are known with no driver call a frame. An event record, query and elapsed
time cost the host tens of µs each under a sandboxed kernel; the two stamp
nodes cost the GPU a few µs.

Layout (frame_queue.h, `cu_stamps`): SITS_CU_STAMP_WORDS u64 a buffer
index, {begin, end} in %globaltimer nanoseconds.
"""
from __future__ import annotations

import ctypes
import functools
import weakref
from pathlib import Path

import numpy as np

from sits._kernel import lib
from sits.cuda.hostmem import host_device_pointer
from sits.cuda.runtime import cupy

STAMP_SOURCE_PATH = Path(__file__).with_name("kernels") / "stamp.cu"
STAMP_BYTES = lib.SITS_CU_STAMP_WORDS * 8
CUDA_HOST_ALLOC_MAPPED = 0x02


@functools.cache
def _kernels():
    mod = cupy().RawModule(code=STAMP_SOURCE_PATH.read_text())
    return mod.get_function("sits_stamp_begin"), mod.get_function("sits_stamp_end")


class Stamps:
    """One stamp per capture buffer, in page-locked host memory mapped for
    the GPU (cudaHostAlloc, Mapped: the allocation every CUDA device maps,
    Tegra's included). Owns the memory."""

    def __init__(self, buffers: int):
        rt = cupy().cuda.runtime
        size = buffers * STAMP_BYTES
        self.address = rt.hostAlloc(size, CUDA_HOST_ALLOC_MAPPED)   # the host's view: C reads it
        try:
            ctypes.memset(self.address, 0, size)
            self._device = host_device_pointer(cupy(), self.address)
            self._begin, self._end = _kernels()
        except BaseException:
            rt.freeHost(self.address)
            raise
        self._finalizer = weakref.finalize(self, rt.freeHost, self.address)

    def _launch(self, kernel, index: int, stream) -> None:
        with stream:
            kernel((1,), (1,), (np.uint64(self._device + index * STAMP_BYTES),))

    def begin(self, index: int, stream) -> None:
        """Enqueue buffer `index`'s begin stamp (first in its graph)."""
        self._launch(self._begin, index, stream)

    def end(self, index: int, stream) -> None:
        """Enqueue its end stamp (last in its graph, after all its work)."""
        self._launch(self._end, index, stream)

    def close(self) -> None:
        """Freed (nothing may be in flight that writes it)."""
        self._finalizer()
