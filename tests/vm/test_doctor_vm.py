"""`sits doctor --json` against the VM's real devices (vivid, vkms, udmabuf,
the system dma-heap where the kernel has heaps)."""
import json
import subprocess
import sys

import pytest

from tests.vm.conftest import kernel_has_dma_heaps

pytestmark = pytest.mark.vm


def test_doctor_sees_vivid_vkms_udmabuf_and_the_system_heap():
    out = subprocess.run([sys.executable, "-m", "sits.cli.app", "doctor", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    vivid = [d for d in data["v4l2"]["devices"] if d.get("driver") == "vivid" and d.get("capture")]
    assert vivid, data["v4l2"]
    fourccs = {f["fourcc"] for f in vivid[0]["formats"]}
    assert {"XR24", "AR24", "RGBP", "YUYV"} <= fourccs
    cards = [c for c in data["drm"]["cards"] if c.get("driver") == "vkms"]
    assert cards, data["drm"]
    card = cards[0]
    assert card["atomic"] and card["writeback_cap"] and card["prime_import"]
    assert card["writeback_connectors"] == ["Writeback-1"]
    wb = [c for c in card["connectors"] if c["writeback"]][0]
    assert "XR24" in wb["writeback_formats"]
    assert any(c["name"] == "Virtual-1" and c["status"] == "connected" for c in card["connectors"])
    assert {p["type"] for p in card["planes"]} >= {"primary", "overlay", "cursor"}
    if kernel_has_dma_heaps():
        assert "system" in data["dmabuf"]["heaps"]["names"]
    else:  # a kernel without CONFIG_DMABUF_HEAPS (Debian's arm64 6.12): said so, not hidden
        assert not data["dmabuf"]["heaps"]["ok"] and data["dmabuf"]["heaps"]["names"] == []
    assert data["dmabuf"]["udmabuf"]["ok"]
    assert data["dmabuf"]["sync_file_export"]["ok"]
    # vkms with enable_overlay=1: overlay planes with ARGB8888, each listed
    overlays = [p["id"] for p in card["planes"] if p["type"] == "overlay" and "AR24" in p["formats"]]
    assert overlays and data["overlay"]["plane_with_alpha"]["ok"]
    assert data["overlay"]["plane_with_alpha"]["planes"] == [f"{card['path']} plane {i} (overlay)" for i in overlays]
