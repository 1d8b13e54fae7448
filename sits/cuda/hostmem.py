"""Host memory the GPU reads without a CPU copy: memfd buffers registered once.

A capture buffer that sits allocates is a memfd (`sits.dmabuf.udmabuf.MemFd`,
the same pages a udmabuf hands to V4L2). `HostRegistry.register()` maps it
into the GPU's address space with cudaHostRegister(Mapped | Portable) the
first time it is seen and keeps that registration for the buffer's life,
never per frame; the registration is undone when the buffer object dies,
`unregister()` or `close()` is called (before the memfd is unmapped).
"""
from __future__ import annotations

import weakref

from sits.cuda.runtime import cupy, out_of_memory
from sits.errors import DeviceError

CUDA_HOST_REGISTER_PORTABLE = 0x01
CUDA_HOST_REGISTER_MAPPED = 0x02


def _unregister(address: int) -> None:
    try:
        cupy().cuda.runtime.hostUnregister(address)
    except Exception:  # at interpreter exit the context may be gone already
        pass


def host_device_pointer(cp, address: int) -> int:
    """The GPU address of page-locked host memory (equal to `address` under UVA,
    but asked, not assumed)."""
    get = getattr(cp.cuda.runtime, "hostGetDevicePointer", None)
    if get is not None:
        return int(get(address, 0))
    import ctypes

    lib = ctypes.CDLL("libcuda.so.1")
    dptr = ctypes.c_ulonglong()
    rc = lib.cuMemHostGetDevicePointer_v2(ctypes.byref(dptr), ctypes.c_void_p(address), 0)
    if rc != 0:
        raise DeviceError(f"cuMemHostGetDevicePointer failed for {address:#x}: CUresult {rc}")
    return dptr.value


class HostRegistration:
    """One cudaHostRegister'ed range; `device_pointer` is its GPU address."""

    __slots__ = ("address", "size", "device_pointer", "_finalizer", "__weakref__")

    def __init__(self, address: int, size: int):
        cp = cupy()
        try:
            cp.cuda.runtime.hostRegister(address, size, CUDA_HOST_REGISTER_MAPPED | CUDA_HOST_REGISTER_PORTABLE)
        except cp.cuda.runtime.CUDARuntimeError as exc:
            oom = out_of_memory(exc, f"registering {size} B of host memory")
            raise oom or DeviceError(f"cudaHostRegister of {size} B at {address:#x} failed: {exc}") from None
        self.address = address
        self.size = size
        self._finalizer = weakref.finalize(self, _unregister, address)
        self.device_pointer = host_device_pointer(cp, address)

    def close(self) -> None:
        self._finalizer()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive


class HostRegistry:
    """Registrations cached per buffer object for that object's life."""

    def __init__(self):
        self._by_buffer: dict[int, HostRegistration] = {}
        self.registrations = 0  # how many cudaHostRegister calls were made (tests: once per buffer)

    def register(self, buffer) -> HostRegistration:
        """`buffer` has `address` and `size` (a MemFd) and supports weak references."""
        key = id(buffer)
        reg = self._by_buffer.get(key)
        if reg is not None and not reg.closed:
            return reg
        reg = HostRegistration(buffer.address, buffer.size)
        self.registrations += 1
        self._by_buffer[key] = reg
        # The buffer dying ends its registration; registration first, then unmap.
        weakref.finalize(buffer, self._forget, key, reg)
        return reg

    def _forget(self, key: int, reg: HostRegistration) -> None:
        if self._by_buffer.get(key) is reg:
            del self._by_buffer[key]
        reg.close()

    def unregister(self, buffer) -> None:
        reg = self._by_buffer.pop(id(buffer), None)
        if reg is not None:
            reg.close()

    def close(self) -> None:
        for reg in self._by_buffer.values():
            reg.close()
        self._by_buffer.clear()

    def __len__(self) -> int:
        return len(self._by_buffer)
