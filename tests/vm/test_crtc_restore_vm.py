"""sits gives the display back as it found it: the planes' framebuffers and
CRTCs and the CRTC's mode, compared before sits starts and after it has
gone -- normal end, SIGINT, SIGTERM, a consumer that raises.

A second DRM client (not master) stays open throughout: while it is, the
kernel's last-close restore (fbdev's mode and framebuffer put back when the
last client closes) cannot happen, so what it sees afterwards is what sits
itself restored, not what the kernel did for it."""
import contextlib
import subprocess
import sys
import time

import pytest

from sits._kernel import lib
from sits.drm import raw
from sits.drm.card import Card
from sits.pipeline.capture import CaptureOptions, build
from sits.pipeline.consumer import Consumer
from sits.pipeline.pipeline import ConsumerError

pytestmark = pytest.mark.vm

SITS = [sys.executable, "-m", "sits.cli.app"]


@contextlib.contextmanager
def observer(vkms_path):
    card = Card.open(vkms_path)
    try:
        lib.drmDropMaster(card.fileno())   # opened first, it may have become master: sits must be
        yield card
    finally:
        card.close()


def display_state(card) -> tuple:
    """What a next client would find: each plane's CRTC and framebuffer,
    each CRTC's ACTIVE and mode (the MODE_ID blob's bytes)."""
    import errno
    for _ in range(10):
        try:
            planes = sorted((p.id, p.crtc_id, p.fb_id) for p in card.planes())
            crtcs = []
            for crtc in card.resources().crtcs:
                blob = card.prop_value(crtc, "MODE_ID")
                crtcs.append((crtc, card.prop_value(crtc, "ACTIVE"),
                              raw.get_blob(card.fileno(), blob) if blob else b""))
            return planes, crtcs
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
            # a blob replaced between reading its id and its bytes (sits is committing): look again
    raise AssertionError("the display state kept changing under the reads")


def showing_sits(card, before, timeout_s=120) -> bool:
    """Wait (on the display's own state) until a plane shows another framebuffer."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if display_state(card)[0] != before[0]:
            return True
        time.sleep(0.05)
    return False


def test_restored_after_a_normal_end(vivid_path, vkms_path):
    with observer(vkms_path) as obs:
        before = display_state(obs)
        seen = []
        p = build(CaptureOptions(device=vivid_path, card=vkms_path, format="XR24", size=(1280, 720), frames=8),
                  on_status=lambda s: seen.append(display_state(obs)), status_interval=0.05)
        s = p.run()
        assert s.frames_displayed >= 1
        assert any(st[0] != before[0] for st in seen), "sits never showed a frame: nothing was tested"
        assert display_state(obs) == before


class Crash(Consumer):
    name = "crash"

    def __init__(self):
        self.n = 0

    def take(self, frame, lease):
        lease.release()
        self.n += 1
        if self.n == 4:
            raise RuntimeError("boom")


def test_restored_after_a_consumer_raises(vivid_path, vkms_path):
    with observer(vkms_path) as obs:
        before = display_state(obs)
        p = build(CaptureOptions(device=vivid_path, card=vkms_path, format="XR24", size=(1280, 720), frames=50),
                  consumers=[Crash()])
        with pytest.raises(ConsumerError, match="consumer crash: RuntimeError: boom"):
            p.run()
        assert display_state(obs) == before


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_restored_after_a_signal(sig, vivid_path, vkms_path):
    import signal
    with observer(vkms_path) as obs:
        before = display_state(obs)
        proc = subprocess.Popen([*SITS, "capture", "--to-kms", "--device", vivid_path, "--card", vkms_path,
                                 "--format", "XR24", "--size", "1280x720", "--duration", "300", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert showing_sits(obs, before), "sits never showed a frame"
            proc.send_signal(getattr(signal, sig))
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, err
        assert '"stopped_by": "signal"' in out
        assert display_state(obs) == before
