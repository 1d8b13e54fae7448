"""The binding layer: ioctl numbers from the compiler, the one ioctl helper,
fd ownership. Runs anywhere (no device needed)."""
import errno
import gc
import os
import weakref

import pytest

from sits._kernel import IOCTL_NAMES, ffi, ioctl, ioctl_number, lib
from sits.errors import IoctlError
from sits.fd import FdOwner


def _ioc(direction, typ, nr, size):
    # asm-generic/ioctl.h encoding (x86_64, aarch64): the test's independent oracle.
    return (direction << 30) | (size << 16) | (ord(typ) << 8) | nr


def test_ioctl_numbers_match_the_uapi_encoding():
    read_write = 3
    assert lib.SITS_VIDIOC_S_FMT == _ioc(read_write, "V", 5, ffi.sizeof("struct v4l2_format"))
    assert lib.SITS_VIDIOC_DQBUF == _ioc(read_write, "V", 17, ffi.sizeof("struct v4l2_buffer"))
    assert lib.SITS_DMA_HEAP_IOCTL_ALLOC == _ioc(read_write, "H", 0, ffi.sizeof("struct dma_heap_allocation_data"))
    assert lib.SITS_DMA_BUF_IOCTL_SYNC == _ioc(1, "b", 0, 8)


def test_struct_layouts_are_the_kernels():
    assert ffi.sizeof("struct v4l2_format") == (208 if ffi.sizeof("long") == 8 else 204)
    assert ffi.offsetof("struct v4l2_format", "fmt") == 8
    assert ffi.sizeof("struct v4l2_buffer") == 88
    assert ffi.sizeof("struct sync_file_info") == 56


def test_ioctl_names_are_unique_and_named():
    assert len(IOCTL_NAMES) >= 60
    assert IOCTL_NAMES[lib.SITS_VIDIOC_EXPBUF] == "VIDIOC_EXPBUF"
    assert IOCTL_NAMES[ioctl_number("DRM_IOCTL_MODE_ATOMIC")] == "DRM_IOCTL_MODE_ATOMIC"


def test_ioctl_error_names_the_ioctl_and_errno():
    fd = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
    try:
        with pytest.raises(IoctlError) as info:
            ioctl(fd, lib.SITS_VIDIOC_S_FMT, ffi.new("struct v4l2_format *"))
    finally:
        os.close(fd)
    err = info.value
    assert isinstance(err, OSError)
    assert err.errno == errno.ENOTTY and err.call == "VIDIOC_S_FMT"
    assert str(err) == "VIDIOC_S_FMT: Inappropriate ioctl for device (ENOTTY)"


def _fd_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def test_fd_owner_closes_once_and_on_collection():
    owner = FdOwner.open("/dev/null")
    fd = owner.fileno()
    assert os.get_inheritable(fd) is False  # O_CLOEXEC
    owner.close()
    owner.close()
    assert not _fd_open(fd) and owner.closed
    with pytest.raises(ValueError):
        owner.fileno()

    owner = FdOwner.open("/dev/null")
    fd, ref = owner.fileno(), weakref.ref(owner)
    del owner
    gc.collect()
    assert ref() is None and not _fd_open(fd)


def test_open_missing_device_is_one_line():
    from sits.errors import DeviceError
    with pytest.raises(DeviceError, match="^/dev/video99: no such device$"):
        FdOwner.open("/dev/video99")


def test_subclass_open_passes_path_through():
    class Named(FdOwner):
        __slots__ = ("path",)

        def __init__(self, fd, path):
            super().__init__(fd)
            self.path = path

    with Named.open("/dev/null", os.O_RDONLY, path="/dev/null") as n:
        assert n.path == "/dev/null"


def test_ioctl_names_are_the_ioctls_only():
    """IOCTL_NAMES holds sits_ioctls.h's ioctls, not the binding's other
    SITS_* constants (the frame queue's SITS_Q_*/SITS_OP_* numbers)."""
    import os
    import sys
    from sits._kernel import IOCTL_NAMES
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "csrc"))
    from build_kernel import ioctl_names
    assert sorted(IOCTL_NAMES.values()) == sorted(n[len("SITS_"):] for n in ioctl_names())
