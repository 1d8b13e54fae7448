"""CuPy, imported on demand with a clear error when there is no usable GPU.

Nothing in sits imports CuPy at import time: `import sits.cuda` works on any
machine, and the first GPU call raises DeviceError with the reason.
"""
from __future__ import annotations

import functools

from sits.errors import DeviceError, SitsError


class CudaOutOfMemory(SitsError):
    """The GPU ran out of memory; the pipeline stops cleanly."""


@functools.cache
def _load():
    try:
        import cupy
    except ImportError as exc:
        raise DeviceError("the CUDA stage needs CuPy (pip install 'sits[cuda13]', or 'sits[cuda12]' with a "
                          f"CUDA 12 driver and toolkit): {exc}") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError without a driver or a GPU
        raise DeviceError(f"no usable CUDA GPU: {exc}") from None
    if count == 0:
        raise DeviceError("no usable CUDA GPU: the driver sees none")
    return cupy


def cupy():
    """The cupy module, or DeviceError saying why there is none."""
    return _load()


def out_of_memory(exc: BaseException, what: str) -> CudaOutOfMemory | None:
    """A CudaOutOfMemory for `exc` if it is CuPy's or the driver's OOM, else None."""
    text = f"{type(exc).__name__}: {exc}"
    if "OutOfMemory" in text or "out of memory" in text.lower() or "MEMORY_ALLOCATION" in text:
        return CudaOutOfMemory(f"out of GPU memory while {what}: {exc}")
    return None
