"""Overlay callbacks the VM tests name (--overlay tests.vm.overlay_callbacks:NAME)."""
import time

from sits.overlay import Drawing

#: the frame's pixels a drawing repeats: a 4x4 block in the top-left corner
PROBE = (0, 0, 4, 4)
#: where it repeats them: an opaque box, and a half-transparent one beside it
BOX = (200, 100, 264, 132)
HALF = (300, 100, 364, 132)


def probe_colour(frame) -> tuple[int, int, int]:
    """R, G, B: the integer mean of the frame's PROBE block (XR24: bytes B, G, R, X)."""
    x, y, w, h = PROBE
    block = frame.pixels[y:y + h, x * 4:(x + w) * 4].reshape(h, w, 4).astype(int)
    b, g, r = (int(block[..., c].sum()) // (w * h) for c in range(3))
    return r, g, b


def repeat_probe(frame) -> Drawing:
    """The frame's own probe colour in a box: shown with another frame, it
    differs from that frame's probe (vivid's noise pattern)."""
    time.sleep(0.05)   # slower than a frame: a drawing of the newest frame lags it
    r, g, b = probe_colour(frame)
    return (Drawing().box(*BOX, color=(r, g, b, 255), width=0, fill_alpha=255)
            .box(*HALF, color=(r, g, b, 128), width=0, fill_alpha=128)
            .text(BOX[0], BOX[3] + 4, f"frame {frame.sequence}"))


def raises(frame) -> Drawing:
    if frame.sequence >= 2:
        raise ValueError("no model loaded")
    return Drawing()


def slow(frame) -> Drawing:
    """Far slower than the camera: the video must not wait for it beyond its policy."""
    time.sleep(0.3)
    return Drawing().text(8, 8, f"frame {frame.sequence}")
