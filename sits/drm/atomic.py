"""AtomicRequest: properties by name, committed as one atomic state.

Property ids are looked up once per (object, name) and cached on the card.
Fence properties are handled here because their values are pointers:
OUT_FENCE_PTR / WRITEBACK_OUT_FENCE_PTR get an int32 the kernel writes a
sync_file fd into, kept alive until commit() returns and then owned as a
SyncFile.
"""
import time
import weakref

from sits._kernel import ffi, lib
from sits.dmabuf.sync_file import SyncFile
from sits.errors import KernelCallError

TEST_ONLY = lib.DRM_MODE_ATOMIC_TEST_ONLY
NONBLOCK = lib.DRM_MODE_ATOMIC_NONBLOCK
ALLOW_MODESET = lib.DRM_MODE_ATOMIC_ALLOW_MODESET
PAGE_FLIP_EVENT = lib.DRM_MODE_PAGE_FLIP_EVENT


class AtomicRequest:
    def __init__(self, card):
        self.card = card
        req = lib.drmModeAtomicAlloc()
        if req == ffi.NULL:
            raise MemoryError("drmModeAtomicAlloc")
        self._req = req
        self._free = weakref.finalize(self, lib.drmModeAtomicFree, req)
        self._fence_ptrs: dict[str, object] = {}       # where the kernel writes this commit's out-fences
        self._fence_ptr_pool: dict[str, object] = {}   # one per property, kept across reset()
        self.fences: dict[str, SyncFile | None] = {}
        self.props: list[tuple[int, str, int]] = []
        self.started_ns = 0     # when the last commit() began (CLOCK_MONOTONIC)

    def reset(self) -> "AtomicRequest":
        """Empty the request for the next commit (drmModeAtomicSetCursor 0),
        so a flip loop allocates no request, finalizer or out-fence pointer per frame."""
        lib.drmModeAtomicSetCursor(self._req, 0)
        self._fence_ptrs = {}
        self.fences = {}
        self.props.clear()
        return self

    def add(self, obj_id: int, name: str, value: int) -> "AtomicRequest":
        prop_id = self.card.prop_id(obj_id, name)
        ret = lib.drmModeAtomicAddProperty(self._req, obj_id, prop_id, value)
        if ret < 0:
            raise KernelCallError(-ret, "drmModeAtomicAddProperty", f"{name} on object {obj_id}")
        self.props.append((obj_id, name, value))
        return self

    def add_out_fence(self, obj_id: int, name: str) -> "AtomicRequest":
        """Ask for an out-fence (OUT_FENCE_PTR, WRITEBACK_OUT_FENCE_PTR);
        after commit() it is in self.fences[name]."""
        fence_ptr = self._fence_ptr_pool.get(name)
        if fence_ptr is None:
            fence_ptr = self._fence_ptr_pool[name] = ffi.new("int32_t *", -1)
        fence_ptr[0] = -1
        self._fence_ptrs[name] = fence_ptr
        return self.add(obj_id, name, int(ffi.cast("uintptr_t", fence_ptr)))

    def commit(self, flags: int = 0, user_data: int = 0) -> dict[str, SyncFile | None]:
        # the commit's time, as near its ioctl as Python gets (a frame's
        # "committed" stage, sits/journey/record.py)
        self.started_ns = time.monotonic_ns()
        ret = lib.drmModeAtomicCommit(self.card.fileno(), self._req, flags,
                                      ffi.cast("void *", user_data))
        if ret < 0:
            err = ffi.errno if ret == -1 else -ret
            raise KernelCallError(err, "DRM_IOCTL_MODE_ATOMIC",
                                  "test-only commit refused" if flags & TEST_ONLY else None)
        if not flags & TEST_ONLY:
            self.fences = {name: SyncFile.from_fd(ptr[0]) for name, ptr in self._fence_ptrs.items()}
        return self.fences

    def close(self):
        self._free()
