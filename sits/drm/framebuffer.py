"""Framebuffers: dma-bufs imported with PRIME + ADDFB2, and dumb buffers.

A Framebuffer keeps its card alive; close() removes the fb. The GEM handle
from PRIME import is closed right after ADDFB2 (the fb holds its own
reference to the buffer), so nothing but the fb id needs cleaning up.
"""
import mmap
import weakref

from sits._kernel import ffi, ioctl, lib
from sits.errors import KernelCallError
from sits.formats import fourcc


def _check(ret: int, call: str, detail: str | None = None) -> None:
    if ret < 0:
        raise KernelCallError(ffi.errno if ret == -1 else -ret, call, detail)


def _rmfb(card_fd_owner, fb_id):
    if not card_fd_owner.closed:
        lib.drmModeRmFB(card_fd_owner.fileno(), fb_id)


def add_fb(card, handle: int, width: int, height: int, drm_fourcc: str, pitch: int,
           offset: int = 0, modifier: int | None = None, handles=None, pitches=None, offsets=None) -> int:
    h = ffi.new("uint32_t[4]", handles or [handle, 0, 0, 0])
    p = ffi.new("uint32_t[4]", pitches or [pitch, 0, 0, 0])
    o = ffi.new("uint32_t[4]", offsets or [offset, 0, 0, 0])
    fb_id = ffi.new("uint32_t *")
    if modifier is not None:
        mods = ffi.new("uint64_t[4]", [modifier if h[i] else 0 for i in range(4)])
        ret = lib.drmModeAddFB2WithModifiers(card.fileno(), width, height, fourcc(drm_fourcc), h, p, o,
                                             mods, fb_id, lib.DRM_MODE_FB_MODIFIERS)
    else:
        ret = lib.drmModeAddFB2(card.fileno(), width, height, fourcc(drm_fourcc), h, p, o, fb_id, 0)
    _check(ret, "DRM_IOCTL_MODE_ADDFB2", f"{drm_fourcc} {width}x{height} pitch {pitch}")
    return fb_id[0]


class Framebuffer:
    """A KMS framebuffer id with its geometry."""

    def __init__(self, card, fb_id: int, width: int, height: int, drm_fourcc: str, pitch: int, source=None):
        self.card = card          # keeps the card open while the fb exists
        self.source = source      # and the buffer it scans out
        self.id = fb_id
        self.width, self.height = width, height
        self.format = drm_fourcc
        self.pitch = pitch
        self._rm = weakref.finalize(self, _rmfb, card, fb_id)

    @classmethod
    def from_dmabuf(cls, card, dmabuf, width: int, height: int, drm_fourcc: str, pitch: int,
                    offset: int = 0, modifier: int | None = None) -> "Framebuffer":
        handle = ffi.new("uint32_t *")
        _check(lib.drmPrimeFDToHandle(card.fileno(), dmabuf.fileno(), handle),
               "DRM_IOCTL_PRIME_FD_TO_HANDLE")
        try:
            fb_id = add_fb(card, handle[0], width, height, drm_fourcc, pitch, offset, modifier)
        finally:
            lib.drmCloseBufferHandle(card.fileno(), handle[0])
        return cls(card, fb_id, width, height, drm_fourcc, pitch, source=dmabuf)

    def close(self) -> None:
        self._rm()

    def __repr__(self):
        return f"<Framebuffer {self.id} {self.format} {self.width}x{self.height}>"


def _destroy_dumb(card, handle):
    if not card.closed:
        arg = ffi.new("struct drm_mode_destroy_dumb *", {"handle": handle})
        try:
            ioctl(card.fileno(), lib.SITS_DRM_IOCTL_MODE_DESTROY_DUMB, arg)
        except OSError:
            pass


class DumbBuffer:
    """A CPU-mappable scan-out buffer (conversion target, writeback target)."""

    def __init__(self, card, width: int, height: int, drm_fourcc: str = "XR24", bpp: int = 32):
        self.card = card
        arg = ffi.new("struct drm_mode_create_dumb *", {"width": width, "height": height, "bpp": bpp})
        ioctl(card.fileno(), lib.SITS_DRM_IOCTL_MODE_CREATE_DUMB, arg)
        self.handle, self.pitch, self.size = arg.handle, arg.pitch, arg.size
        self.width, self.height, self.format = width, height, drm_fourcc
        self._destroy = weakref.finalize(self, _destroy_dumb, card, self.handle)
        self._map = None
        try:
            fb_id = add_fb(card, self.handle, width, height, drm_fourcc, self.pitch)
        except BaseException:
            self._destroy()
            raise
        self.fb = Framebuffer(card, fb_id, width, height, drm_fourcc, self.pitch, source=self)

    def map(self) -> mmap.mmap:
        if self._map is None:
            arg = ffi.new("struct drm_mode_map_dumb *", {"handle": self.handle})
            ioctl(self.card.fileno(), lib.SITS_DRM_IOCTL_MODE_MAP_DUMB, arg)
            self._map = mmap.mmap(self.card.fileno(), self.size, mmap.MAP_SHARED,
                                  mmap.PROT_READ | mmap.PROT_WRITE, offset=arg.offset)
        return self._map

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:
                pass
            self._map = None
        self.fb.close()
        self._destroy()
