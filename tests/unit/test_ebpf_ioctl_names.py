from sits._kernel import ioctl_number
from sits.ebpf.ioctl_names import ioctl_family, ioctl_name


def test_known_commands_have_their_uapi_names():
    for name in ("VIDIOC_QBUF", "VIDIOC_DQBUF", "VIDIOC_STREAMON", "VIDIOC_EXPBUF",
                 "DRM_IOCTL_MODE_ATOMIC", "DRM_IOCTL_PRIME_FD_TO_HANDLE", "DRM_IOCTL_MODE_ADDFB2",
                 "DMA_BUF_IOCTL_SYNC", "DMA_BUF_IOCTL_EXPORT_SYNC_FILE", "SYNC_IOC_MERGE"):
        assert ioctl_name(ioctl_number(name)) == name


def test_unknown_commands_are_spelled_from_their_fields():
    assert ioctl_name(0x5401) == "_IO('T', 1)"  # TCGETS
    assert ioctl_name((3 << 30) | (88 << 16) | (ord("V") << 8) | 200) == "_IOWR('V', 200, 88)"


def test_families():
    assert ioctl_family(ioctl_number("VIDIOC_DQBUF")) == "v4l2"
    assert ioctl_family(ioctl_number("DRM_IOCTL_MODE_ATOMIC")) == "drm"
    assert ioctl_family(0x5401) is None
