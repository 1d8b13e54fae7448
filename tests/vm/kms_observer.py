"""The display as a second DRM client sees it, for tests that check that
sits gives it back as it found it.

The observer stays open (not master) while sits runs: while it is, the
kernel's last-close restore (fbdev's mode and framebuffer put back when the
last client closes) cannot happen, so what it sees afterwards is what sits
itself restored, not what the kernel did for it."""
import contextlib
import errno
import time

from sits._kernel import lib
from sits.drm import raw
from sits.drm.card import Card

# a hang guard for waits on the display: passed as soon as it changes
SHOWING_WAIT_S = 600


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


def showing_sits(card, before, proc=None) -> bool:
    """Wait, on the display's own state, until a plane shows another
    framebuffer than in `before` (True), or `proc` has exited (False)."""
    deadline = time.monotonic() + SHOWING_WAIT_S
    while time.monotonic() < deadline and (proc is None or proc.poll() is None):
        if display_state(card)[0] != before[0]:
            return True
        time.sleep(0.05)
    return False
