"""What this machine's CUDA driver can do with video buffers, asked, never assumed.

`probe()` answers for `sits doctor` and for choosing an import strategy at
run time: `dmabuf` (cuImportExternalMemory of a dma-buf fd; meant for
Tegra), `host-registered` (memfd pages mapped and registered with
cuMemHostRegister(DEVICEMAP)), `staged` (a copy through a pinned bounce
buffer, not zero-copy). It talks to libcuda through ctypes so that it needs
neither cuda-python nor CuPy, and it never raises. Its dma-bufs and memfds
come from sits' own allocators (sits.dmabuf: the binding's ioctl numbers).
"""
from __future__ import annotations

import ctypes
import os

CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD = 9
CU_MEMHOSTREGISTER_PORTABLE = 0x01
CU_MEMHOSTREGISTER_DEVICEMAP = 0x02
CU_DEVICE_ATTRIBUTE_INTEGRATED = 18
CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19

STRATEGIES = ("dmabuf", "host-registered", "staged")

PROBE_BYTES = 2 * 1024 * 1024


class _ExternalMemoryHandleDesc(ctypes.Structure):
    # CUDA_EXTERNAL_MEMORY_HANDLE_DESC: type, union {int fd; struct {void*, const void*} win32; ...}, size, flags, reserved[16]
    _fields_ = [("type", ctypes.c_int), ("_pad", ctypes.c_int), ("fd", ctypes.c_int), ("_union_rest", ctypes.c_byte * 12),
                ("size", ctypes.c_ulonglong), ("flags", ctypes.c_uint), ("reserved", ctypes.c_uint * 16)]


class _ExternalMemoryBufferDesc(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_ulonglong), ("size", ctypes.c_ulonglong), ("flags", ctypes.c_uint),
                ("reserved", ctypes.c_uint * 16)]


class Driver:
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
            raise CudaCallFailed(fn, self.error_name(rc))


class CudaCallFailed(Exception):
    """A libcuda call returned an error: `fn` is the entry point, `error` the
    CUresult's name (what import_dmabuf and Driver.check raise)."""

    def __init__(self, fn: str, error: str):
        super().__init__(f"{fn}: {error}")
        self.fn = fn
        self.error = error


def load_driver() -> tuple[Driver | None, str | None]:
    """libcuda through ctypes: (Driver, None), or (None, why not) where there
    is no CUDA driver. The probe and sits.cuda.extmem both start here."""
    try:
        return Driver(ctypes.CDLL("libcuda.so.1")), None
    except OSError as exc:
        return None, f"no CUDA driver (libcuda.so.1 could not be loaded: {exc})"


def _dmabuf_source():
    """A dma-buf to probe with (a DmaBuf from sits' allocators), the source's
    name, and why the others failed."""
    why = []
    try:
        from sits.dmabuf.heap import DmaHeap
        from sits.dmabuf.udmabuf import Udmabuf
    except ImportError as exc:  # the kernel binding is not built: no allocator to ask
        return None, "", [f"dma-buf allocators unavailable ({exc})"]
    from sits.errors import SitsError

    for name, open_allocator in (("udmabuf", Udmabuf.open), ("dma_heap/system", lambda: DmaHeap.open("system"))):
        try:
            with open_allocator() as allocator:
                return allocator.alloc(PROBE_BYTES), name, why
        except (OSError, SitsError) as exc:
            why.append(str(exc))
    return None, "", why


def import_dmabuf(drv: Driver, fd: int, size: int) -> tuple[ctypes.c_void_p, int]:
    """cuImportExternalMemory(DMABUF_FD) of `fd` and its first `size` bytes
    as a mapped buffer: (external memory, device pointer). The context must
    be current; raises CudaCallFailed. `fd` stays the caller's (a dup is
    imported, which the driver owns once the import succeeds)."""
    desc = _ExternalMemoryHandleDesc()
    desc.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD
    desc.fd = os.dup(fd)
    desc.size = size
    ext = ctypes.c_void_p()
    rc = drv.call("cuImportExternalMemory", ctypes.byref(ext), ctypes.byref(desc))
    if rc != 0:
        os.close(desc.fd)
        raise CudaCallFailed("cuImportExternalMemory", drv.error_name(rc))
    try:
        bdesc = _ExternalMemoryBufferDesc(0, size, 0)
        dptr = ctypes.c_ulonglong()
        drv.check("cuExternalMemoryGetMappedBuffer", ctypes.byref(dptr), ext, ctypes.byref(bdesc))
    except BaseException:
        drv.call("cuDestroyExternalMemory", ext)
        raise
    return ext, dptr.value


def release_dmabuf(drv: Driver, ext: ctypes.c_void_p, dptr: int) -> None:
    """Undo import_dmabuf: the mapping, then the external memory."""
    drv.call("cuMemFree_v2", ctypes.c_ulonglong(dptr))
    drv.call("cuDestroyExternalMemory", ext)


def _import_dmabuf(drv: Driver, fd: int, size: int) -> str | None:
    """Whether import_dmabuf works for `fd`: None on success, else the error."""
    try:
        ext, dptr = import_dmabuf(drv, fd, size)
    except CudaCallFailed as exc:
        return exc.error if exc.fn == "cuImportExternalMemory" else str(exc)
    release_dmabuf(drv, ext, dptr)
    return None


def _probe_dmabuf(drv: Driver) -> dict:
    buf, source, why = _dmabuf_source()
    if buf is None:
        # No dma-buf exporter here (a discrete-GPU server has neither udmabuf
        # nor dma-heaps). Ask the driver anyway with a memfd, which is not a
        # dma-buf, and report its answer as such.
        fd = os.memfd_create("sits-cuda-probe", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, PROBE_BYTES)
            err = _import_dmabuf(drv, fd, PROBE_BYTES)
        finally:
            os.close(fd)
        return {"supported": False, "error": "no dma-buf source to probe (" + "; ".join(why) + ")",
                "source": None, "memfd_answer": err or "CUDA_SUCCESS (a memfd is not a dma-buf)"}
    with buf:
        err = _import_dmabuf(drv, buf.fileno(), PROBE_BYTES)
    return {"supported": err is None, "error": err, "source": source}


def _probe_host_register(drv: Driver) -> dict:
    """cuMemHostRegister of a memfd's shared mapping, as capture buffers are
    registered (sits.cuda.hostmem), and whether the GPU sees what the CPU wrote."""
    try:
        from sits.dmabuf.udmabuf import MemFd
    except ImportError as exc:
        return {"supported": False, "error": f"sits' memfd buffers unavailable ({exc})"}
    with MemFd.create(PROBE_BYTES, "sits-cuda-probe") as memfd:
        host = memfd.address
        rc = drv.call("cuMemHostRegister_v2", ctypes.c_void_p(host), ctypes.c_size_t(PROBE_BYTES),
                      CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE)
        if rc != 0:
            return {"supported": False, "error": drv.error_name(rc)}
        try:
            dptr = ctypes.c_ulonglong()
            drv.check("cuMemHostGetDevicePointer_v2", ctypes.byref(dptr), ctypes.c_void_p(host), 0)
            # Data written by the CPU after registration must be what the GPU reads.
            pattern = bytes(range(256)) * 16
            memfd.map()[:len(pattern)] = pattern
            back = ctypes.create_string_buffer(len(pattern))
            drv.check("cuMemcpyDtoH_v2", back, dptr, ctypes.c_size_t(len(pattern)))
            visible = back.raw == pattern
            return {"supported": visible, "error": None if visible else "data written by the CPU not seen",
                    "device_pointer_is_host_pointer": dptr.value == host}
        except CudaCallFailed as exc:
            return {"supported": False, "error": str(exc)}
        finally:
            drv.call("cuMemHostUnregister", ctypes.c_void_p(host))


def probe(device: int = 0) -> dict:
    """What CUDA can do here; never raises. Keys: available, reason, device,
    driver_version, dmabuf_import, host_register, staged, import_path, zero_copy."""
    try:
        return _probe(device)
    except Exception as exc:  # a probe reports, it does not fail
        return {"available": False, "reason": f"CUDA probe failed: {type(exc).__name__}: {exc}"}


def _probe(device: int) -> dict:
    drv, reason = load_driver()
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
