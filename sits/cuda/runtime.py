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


# CU_CTX_SCHED_*: how a thread waiting for the GPU waits (cuCtxSetFlags)
SCHEDULES = {"auto": 0x0, "spin": 0x1, "yield": 0x2, "blocking": 0x4}
_SCHED_MASK = 0x7


def set_schedule(name: str) -> int:
    """Make threads that wait for this thread's current context (the driver's
    own, that run host functions, too) wait as `name` says; returns the
    context's previous flags, for restore_schedule()."""
    import ctypes

    if name not in SCHEDULES:
        from sits.errors import UsageError
        raise UsageError(f"CUDA schedule {name!r} is not one of {', '.join(SCHEDULES)}")
    cupy().cuda.runtime.free(0)  # the primary context made, and current on this thread
    lib = ctypes.CDLL("libcuda.so.1")
    flags = ctypes.c_uint()
    rc = lib.cuCtxGetFlags(ctypes.byref(flags))
    if rc == 0:
        rc = lib.cuCtxSetFlags(ctypes.c_uint((flags.value & ~_SCHED_MASK) | SCHEDULES[name]))
    if rc != 0:
        raise DeviceError(f"cuCtxSetFlags({name}) failed: CUresult {rc}")
    return flags.value


def restore_schedule(flags: int) -> None:
    import ctypes

    ctypes.CDLL("libcuda.so.1").cuCtxSetFlags(ctypes.c_uint(flags))


def out_of_memory(exc: BaseException, what: str) -> CudaOutOfMemory | None:
    """A CudaOutOfMemory for `exc` if it is CuPy's or the driver's OOM, else None."""
    text = f"{type(exc).__name__}: {exc}"
    if "OutOfMemory" in text or "out of memory" in text.lower() or "MEMORY_ALLOCATION" in text:
        return CudaOutOfMemory(f"out of GPU memory while {what}: {exc}")
    return None
