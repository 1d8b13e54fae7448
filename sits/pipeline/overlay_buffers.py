"""The overlay layer's buffers: where its drawings are made and scanned out.

- `dumb`: DRM dumb buffers, the display's own memory, which cairo draws
  into through their mappings (the CPU renderer).
- `gpu`: memfd pages with a udmabuf over each, PRIME-imported for KMS as the
  synthetic source's frames are, the same pages registered with CUDA
  (sits.cuda.hostmem, as capture buffers are) so that the GPU draws the
  boxes and masks into them (sits.cuda.overlay) and cairo the text on top.

Each buffer has `fb`, `width`, `height`, `pitch`, `map()` and `close()`;
the GPU's have `device_pointer` too.
"""
from __future__ import annotations

from sits.drm.framebuffer import DumbBuffer, Framebuffer

FORMAT = "AR24"        # DRM_FORMAT_ARGB8888: cairo's ARGB32 on a little-endian machine
PITCH_ALIGN = 64


class HostBuffer:
    """One overlay buffer in memfd pages the display scans out and the GPU writes."""

    def __init__(self, card, udmabuf, registry, width: int, height: int):
        self.width, self.height, self.registry = width, height, registry
        self.pitch = (width * 4 + PITCH_ALIGN - 1) // PITCH_ALIGN * PITCH_ALIGN
        self.dmabuf = udmabuf.alloc(self.pitch * height)
        self.memfd, self.fb = self.dmabuf.backing, None
        try:
            self.fb = Framebuffer.from_dmabuf(card, self.dmabuf, width, height, FORMAT, self.pitch)
            self.device_pointer = registry.register(self.memfd).device_pointer
        except BaseException:
            if self.fb is not None:
                self.fb.close()
            self.dmabuf.close()
            raise

    def map(self):
        return self.memfd.map()

    def close(self) -> None:
        self.fb.close()
        self.registry.unregister(self.memfd)    # before its pages are unmapped
        self.dmabuf.close()


def make(card, kind: str, n: int, width: int, height: int) -> list:
    """`n` buffers of `kind` ("dumb" or "gpu") for `width` x `height` drawings."""
    if kind == "dumb":
        return [DumbBuffer(card, width, height, FORMAT) for _ in range(n)]
    from sits.cuda.hostmem import HostRegistry
    from sits.dmabuf.udmabuf import Udmabuf
    registry = HostRegistry()
    made = []
    with Udmabuf.open() as udmabuf:
        try:
            for _ in range(n):
                made.append(HostBuffer(card, udmabuf, registry, width, height))
        except BaseException:
            for b in made:
                b.close()
            raise
    return made
