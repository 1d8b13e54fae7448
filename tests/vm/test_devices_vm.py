"""The V4L2 and DRM layers against vivid and vkms."""
import pytest

from sits.drm.card import Card
from sits.v4l2.device import VideoDevice

pytestmark = pytest.mark.vm


def test_vivid_capabilities_formats_and_sizes(vivid_path, no_leaks):
    with VideoDevice.open(vivid_path) as dev:
        assert dev.cap.is_capture and "streaming" in dev.cap.cap_names
        codes = [f.fourcc for f in dev.formats()]
        assert "XR24" in codes and "NV12" in codes
        sizes = dev.frame_sizes("XR24")
        assert sizes.allows(1280, 720) and sizes.allows(640, 480)
        assert not sizes.allows(100000, 100000)


def test_vkms_resources_planes_and_writeback(vkms_path, no_leaks):
    with Card.open(vkms_path) as card:
        assert card.atomic and card.writeback
        conns = {c.name: c for c in card.connectors()}
        assert conns["Virtual-1"].connected and conns["Virtual-1"].modes
        assert conns["Writeback-1"].is_writeback
        types = sorted(card.plane_type(p.id) for p in card.planes())
        assert types.count("primary") == 1 and "overlay" in types
        primary = [p for p in card.planes() if card.plane_type(p.id) == "primary"][0]
        assert "XR24" in primary.formats and "AR24" in primary.formats
