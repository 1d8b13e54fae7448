"""What this machine's CUDA driver can do with video buffers, asked, never assumed.

`probe()` answers for `sits doctor` and for choosing an import strategy at
run time: `dmabuf` (cuImportExternalMemory of a dma-buf fd; meant for
Tegra), `host-registered` (memfd pages mapped and registered with
cuMemHostRegister(DEVICEMAP)), `staged` (a copy through a pinned bounce
buffer, not zero-copy). It talks to libcuda through ctypes so that it needs
neither cuda-python nor CuPy, and it never raises.
"""
from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import struct

CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD = 9
CU_MEMHOSTREGISTER_PORTABLE = 0x01
CU_MEMHOSTREGISTER_DEVICEMAP = 0x02
CU_DEVICE_ATTRIBUTE_INTEGRATED = 18
CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19

STRATEGIES = ("dmabuf", "host-registered", "staged")

# <linux/udmabuf.h>: struct udmabuf_create { u32 memfd, flags; u64 offset, size; }
UDMABUF_CREATE = 0x40187542
UDMABUF_FLAGS_CLOEXEC = 0x01
# <linux/dma-heap.h>: struct dma_heap_allocation_data { u64 len; u32 fd, fd_flags; u64 heap_flags; }
DMA_HEAP_IOCTL_ALLOC = 0xC0184800

PROBE_BYTES = 2 * 1024 * 1024


class _ExternalMemoryHandleDesc(ctypes.Structure):
    # CUDA_EXTERNAL_MEMORY_HANDLE_DESC: type, union {int fd; struct {void*, const void*} win32; ...}, size, flags, reserved[16]
    _fields_ = [("type", ctypes.c_int), ("_pad", ctypes.c_int), ("fd", ctypes.c_int), ("_union_rest", ctypes.c_byte * 12),
                ("size", ctypes.c_ulonglong), ("flags", ctypes.c_uint), ("reserved", ctypes.c_uint * 16)]


class _ExternalMemoryBufferDesc(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_ulonglong), ("size", ctypes.c_ulonglong), ("flags", ctypes.c_uint),
                ("reserved", ctypes.c_uint * 16)]


class _Driver:
    """The few libcuda entry points the probe needs; every call is checked."""

    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib

    def error_name(self, rc: int) -> str:
        name = ctypes.c_char_p()
        if self.lib.cuGetErrorName(rc, ctypes.byref(name)) == 0 and name.value:
            return name.value.decode()
        return f"CUresult {rc}"

    def call(self, fn: str, *args) -> int:
        return getattr(self.lib, fn)(*args)

    def check(self, fn: str, *args) -> None:
        rc = self.call(fn, *args)
        if rc != 0:
            raise _CudaCallFailed(fn, self.error_name(rc))


class _CudaCallFailed(Exception):
    def __init__(self, fn: str, error: str):
        super().__init__(f"{fn}: {error}")
        self.fn = fn
        self.error = error


def _load_driver() -> tuple[_Driver | None, str | None]:
    try:
        return _Driver(ctypes.CDLL("libcuda.so.1")), None
    except OSError as exc:
        return None, f"no CUDA driver (libcuda.so.1 could not be loaded: {exc})"


def _memfd(size: int) -> int:
    fd = os.memfd_create("sits-cuda-probe", os.MFD_CLOEXEC | getattr(os, "MFD_ALLOW_SEALING", 2))
    try:
        os.ftruncate(fd, size)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _dmabuf_from_udmabuf(memfd: int, size: int) -> int:
    dev = os.open("/dev/udmabuf", os.O_RDWR | os.O_CLOEXEC)
    try:
        # udmabuf wants the memfd sealed against shrinking.
        fcntl.fcntl(memfd, 1033, 0x0002)  # F_ADD_SEALS, F_SEAL_SHRINK
        arg = struct.pack("IIQQ", memfd, UDMABUF_FLAGS_CLOEXEC, 0, size)
        return _ioctl_int(dev, UDMABUF_CREATE, arg)
    finally:
        os.close(dev)


def _ioctl_int(fd: int, request: int, arg: bytes) -> int:
    # UDMABUF_CREATE returns the new fd as the ioctl's value; Python's fcntl.ioctl
    # hides it for a bytes argument, so go through libc.
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(arg, len(arg))
    rc = libc.ioctl(fd, ctypes.c_ulong(request), buf)
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return rc


def _dmabuf_from_heap(size: int) -> int:
    heap = os.open("/dev/dma_heap/system", os.O_RDWR | os.O_CLOEXEC)
    try:
        buf = bytearray(struct.pack("QIIQ", size, 0, os.O_RDWR | os.O_CLOEXEC, 0))
        fcntl.ioctl(heap, DMA_HEAP_IOCTL_ALLOC, buf)
        return struct.unpack("QIIQ", bytes(buf))[1]
    finally:
        os.close(heap)


def _dmabuf_source() -> tuple[int | None, str, list[str]]:
    """A dma-buf fd to probe with, the source's name, and why others failed."""
    why = []
    if os.path.exists("/dev/udmabuf"):
        memfd = _memfd(PROBE_BYTES)
        try:
            return _dmabuf_from_udmabuf(memfd, PROBE_BYTES), "udmabuf", why
        except OSError as exc:
            why.append(f"/dev/udmabuf: {exc.strerror}")
        finally:
            os.close(memfd)
    else:
        why.append("/dev/udmabuf: absent")
    if os.path.exists("/dev/dma_heap/system"):
        try:
            return _dmabuf_from_heap(PROBE_BYTES), "dma_heap/system", why
        except OSError as exc:
            why.append(f"/dev/dma_heap/system: {exc.strerror}")
    else:
        why.append("/dev/dma_heap/system: absent")
    return None, "", why


def _import_dmabuf(drv: _Driver, fd: int, size: int) -> str | None:
    """cuImportExternalMemory(DMABUF_FD) + a mapped buffer; None on success, else the error."""
    desc = _ExternalMemoryHandleDesc()
    desc.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD
    desc.fd = os.dup(fd)  # the driver owns the fd after a successful import
    desc.size = size
    ext = ctypes.c_void_p()
    rc = drv.call("cuImportExternalMemory", ctypes.byref(ext), ctypes.byref(desc))
    if rc != 0:
        os.close(desc.fd)
        return drv.error_name(rc)
    try:
        bdesc = _ExternalMemoryBufferDesc(0, size, 0)
        dptr = ctypes.c_ulonglong()
        rc = drv.call("cuExternalMemoryGetMappedBuffer", ctypes.byref(dptr), ext, ctypes.byref(bdesc))
        if rc != 0:
            return f"cuExternalMemoryGetMappedBuffer: {drv.error_name(rc)}"
        drv.call("cuMemFree_v2", dptr)
        return None
    finally:
        drv.call("cuDestroyExternalMemory", ext)


def _probe_dmabuf(drv: _Driver) -> dict:
    fd, source, why = _dmabuf_source()
    if fd is None:
        # No dma-buf exporter here (a discrete-GPU server has neither udmabuf
        # nor dma-heaps). Ask the driver anyway with a memfd, which is not a
        # dma-buf, and report its answer as such.
        memfd = _memfd(PROBE_BYTES)
        try:
            err = _import_dmabuf(drv, memfd, PROBE_BYTES)
        finally:
            os.close(memfd)
        return {"supported": False, "error": "no dma-buf source to probe (" + "; ".join(why) + ")",
                "source": None, "memfd_answer": err or "CUDA_SUCCESS (a memfd is not a dma-buf)"}
    try:
        err = _import_dmabuf(drv, fd, PROBE_BYTES)
    finally:
        os.close(fd)
    return {"supported": err is None, "error": err, "source": source}


def _probe_host_register(drv: _Driver) -> dict:
    memfd = _memfd(PROBE_BYTES)
    try:
        mm = mmap.mmap(memfd, PROBE_BYTES, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(memfd)
    try:
        cbuf = (ctypes.c_char * PROBE_BYTES).from_buffer(mm)
        host = ctypes.addressof(cbuf)
        rc = drv.call("cuMemHostRegister_v2", ctypes.c_void_p(host), ctypes.c_size_t(PROBE_BYTES),
                      CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE)
        if rc != 0:
            return {"supported": False, "error": drv.error_name(rc)}
        try:
            dptr = ctypes.c_ulonglong()
            drv.check("cuMemHostGetDevicePointer_v2", ctypes.byref(dptr), ctypes.c_void_p(host), 0)
            # Data written by the CPU after registration must be what the GPU reads.
            pattern = bytes(range(256)) * 16
            mm[:len(pattern)] = pattern
            back = ctypes.create_string_buffer(len(pattern))
            drv.check("cuMemcpyDtoH_v2", back, dptr, ctypes.c_size_t(len(pattern)))
            visible = back.raw == pattern
            return {"supported": visible, "error": None if visible else "data written by the CPU not seen",
                    "device_pointer_is_host_pointer": dptr.value == host}
        finally:
            drv.call("cuMemHostUnregister", ctypes.c_void_p(host))
    except _CudaCallFailed as exc:
        return {"supported": False, "error": str(exc)}
    finally:
        del cbuf
        mm.close()


def probe(device: int = 0) -> dict:
    """What CUDA can do here; never raises. Keys: available, reason, device,
    driver_version, dmabuf_import, host_register, staged, import_path, zero_copy."""
    try:
        return _probe(device)
    except Exception as exc:  # a probe reports, it does not fail
        return {"available": False, "reason": f"CUDA probe failed: {type(exc).__name__}: {exc}"}


def _probe(device: int) -> dict:
    drv, reason = _load_driver()
    if drv is None:
        return {"available": False, "reason": reason}
    rc = drv.call("cuInit", 0)
    if rc != 0:
        return {"available": False, "reason": f"cuInit failed: {drv.error_name(rc)}"}
    count = ctypes.c_int()
    drv.check("cuDeviceGetCount", ctypes.byref(count))
    if count.value <= device:
        return {"available": False, "reason": f"CUDA driver present but no GPU {device} ({count.value} found)"}
    dev = ctypes.c_int()
    drv.check("cuDeviceGet", ctypes.byref(dev), device)
    name = ctypes.create_string_buffer(256)
    drv.check("cuDeviceGetName", name, 256, dev)
    version = ctypes.c_int()
    drv.check("cuDriverGetVersion", ctypes.byref(version))
    integrated = ctypes.c_int()
    drv.check("cuDeviceGetAttribute", ctypes.byref(integrated), CU_DEVICE_ATTRIBUTE_INTEGRATED, dev)
    ctx = ctypes.c_void_p()
    drv.check("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
    try:
        drv.check("cuCtxPushCurrent_v2", ctx)
        try:
            dmabuf = _probe_dmabuf(drv)
            host = _probe_host_register(drv)
        finally:
            drv.call("cuCtxPopCurrent_v2", ctypes.byref(ctypes.c_void_p()))
    finally:
        drv.call("cuDevicePrimaryCtxRelease_v2", dev)
    if dmabuf["supported"]:
        path = "dmabuf"
    elif host["supported"]:
        path = "host-registered"
    else:
        path = "staged"
    return {
        "available": True,
        "reason": None,
        "device": name.value.decode(errors="replace"),
        "integrated": bool(integrated.value),
        "driver_version": f"{version.value // 1000}.{version.value % 1000 // 10}",
        "dmabuf_import": dmabuf,
        "host_register": host,
        "staged": {"supported": True},
        "import_path": path,
        "zero_copy": path != "staged",
    }
