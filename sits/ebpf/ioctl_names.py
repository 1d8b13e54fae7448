"""ioctl command -> name, for the rows the ioctl probe keys by command.

Known commands come from sits._kernel.IOCTL_NAMES (computed by the compiler
from the UAPI headers, csrc/sits_ioctls.h); anything else is spelled from its
_IOC fields, e.g. ``_IOWR('V', 9, 88)``, which still says which driver
family and which call it is.
"""
from __future__ import annotations

import functools

# asm-generic/ioctl.h field layout (x86, arm, arm64, riscv; powerpc/mips
# differ in the direction bits, which only the unknown-command fallback uses)
_NRBITS, _TYPEBITS, _SIZEBITS = 8, 8, 14
_NRSHIFT = 0
_TYPESHIFT = _NRSHIFT + _NRBITS
_SIZESHIFT = _TYPESHIFT + _TYPEBITS
_DIRSHIFT = _SIZESHIFT + _SIZEBITS
_DIRS = {0: "_IO", 1: "_IOW", 2: "_IOR", 3: "_IOWR"}


@functools.cache
def _names() -> dict[int, str]:
    from sits._kernel import IOCTL_NAMES
    return dict(IOCTL_NAMES)


def ioctl_name(cmd: int) -> str:
    """The UAPI name of an ioctl command, or its _IOC spelling."""
    cmd &= 0xFFFFFFFF
    name = _names().get(cmd)
    if name:
        return name
    d = (cmd >> _DIRSHIFT) & 3
    typ = (cmd >> _TYPESHIFT) & 0xFF
    nr = (cmd >> _NRSHIFT) & 0xFF
    size = (cmd >> _SIZESHIFT) & ((1 << _SIZEBITS) - 1)
    t = repr(chr(typ)) if 0x20 < typ < 0x7F else hex(typ)
    if d == 0:
        return f"_IO({t}, {nr})"
    return f"{_DIRS[d]}({t}, {nr}, {size})"


def ioctl_family(cmd: int) -> str | None:
    """'v4l2', 'drm', 'dma-buf', 'sync_file', ... for the ioctls video code
    waits in (used for hot-spot thresholds); None otherwise."""
    name = ioctl_name(cmd)
    for prefix, family in (("VIDIOC_", "v4l2"), ("DRM_IOCTL_", "drm"),
                           ("DMA_BUF_", "dma-buf"), ("DMA_HEAP_", "dma-heap"),
                           ("SYNC_IOC_", "sync_file"), ("UDMABUF_", "udmabuf")):
        if name.startswith(prefix):
            return family
    return None
