"""Zero-copy as the kernel shows it, not as a flag says: while sits runs,
every capture buffer's dma-buf is attached to vkms (debugfs bufinfo) and
the plane scans out an imported framebuffer of the capture size (dri
state); on the conversion path no capture dma-buf is attached to vkms and
the plane shows vkms's own buffer."""
import pytest

from sits.pipeline.capture import CaptureOptions
from tests.vm.conftest import run_until

pytestmark = pytest.mark.vm

BUFINFO = "/sys/kernel/debug/dma_buf/bufinfo"


def dmabufs() -> list[tuple[str, list[str]]]:
    """(exporter, attached devices) of every dma-buf."""
    out, cur = [], None
    for line in open(BUFINFO).read().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[0].isdigit() and len(fields[0]) >= 8:   # size flags mode count exp_name ino
            cur = (fields[4], [])
            out.append(cur)
        elif cur is not None and line.startswith("\t") and "Attached Devices" not in line:
            cur[1].append(line.strip())
    return out


def shown_plane(card_index: int = 0) -> str:
    """The dri state block of the plane on crtc-0."""
    blocks = open(f"/sys/kernel/debug/dri/{card_index}/state").read().split("plane[")
    return next(b for b in blocks[1:] if "crtc=crtc-0" in b)


def look_while_running(vivid_path, vkms_path, fmt, memory):
    seen = {}

    def status(s):
        if s.frames_displayed >= 2 and not seen:
            seen["bufs"], seen["plane"] = dmabufs(), shown_plane()
    s = run_until(CaptureOptions(device=vivid_path, card=vkms_path, display=True, format=fmt, size=(320, 180),
                                 memory=memory, buffers=4), lambda s: bool(seen), on_status=status)
    assert seen, "nothing was shown while it ran"
    return s, seen


@pytest.mark.parametrize("memory,exporter", [("mmap", "videobuf2"), ("udmabuf", "udmabuf")])
def test_the_plane_scans_out_the_capture_buffers(memory, exporter, vivid_path, vkms_path):
    s, seen = look_while_running(vivid_path, vkms_path, "XR24", memory)
    capture = [devs for exp, devs in seen["bufs"] if exp.startswith(exporter)]
    assert len(capture) == 4, seen["bufs"]
    assert all("vkms" in devs for devs in capture), seen["bufs"]   # PRIME-imported by the display
    plane = seen["plane"]
    assert "imported=yes" in plane and "size=320x180" in plane and "format=XR24" in plane, plane
    assert s.zero_copy and s.cpu_copies_per_frame == 0


def test_the_conversion_path_shows_a_buffer_of_the_display(vivid_path, vkms_path):
    s, seen = look_while_running(vivid_path, vkms_path, "YUYV", "udmabuf")
    capture = [devs for exp, devs in seen["bufs"] if exp.startswith("udmabuf")]
    assert len(capture) == 4 and not any("vkms" in devs for devs in capture), seen["bufs"]
    assert "imported=no" in seen["plane"], seen["plane"]
    assert not s.zero_copy and s.cpu_copies_per_frame == 1
