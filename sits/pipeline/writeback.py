"""The writeback check (--verify, --snapshot): proof of what was on screen.

A commit that carries a writeback makes the display write the composed
frame into a buffer of ours; its fence says when. `--verify` compares the
colour channels with the captured buffer (held by a "verify" lease until
then); `--snapshot` keeps the last image and writes it as a PNG once the run
ends. This module decides which commits carry a writeback (`due`), and does
the comparison; the display makes the commits.
"""
from sits.drm.framebuffer import DumbBuffer
from sits.errors import DeviceError
from sits.formats import drm_for_v4l2


class WritebackCheck:
    def __init__(self, card, out, *, verify: bool = False, verify_every: int = 10,
                 snapshot: str | None = None, frames: int | None = None):
        if out.writeback is None:
            raise DeviceError(f"{card.path}: --verify/--snapshot need a writeback connector, and it has none")
        self.out = out
        self.verify, self.every = verify, max(1, verify_every)
        self.snapshot, self.frames = snapshot, frames
        self.buffer = DumbBuffer(card, out.mode.width, out.mode.height, "XR24")
        self.counts = {"checked": 0, "mismatched": 0}
        self.pending = False      # a writeback is in flight: vkms writes back the newest state
        self.image = None         # the last writeback image, for --snapshot
        # numpy and the checks load now, not at the first writeback inside
        # the loop (where cpu_ms_per_frame would count them)
        from sits.pipeline import png, verify  # noqa: F401

    def due(self, displayed: int, captured: int) -> tuple[int, int]:
        """When a commit carries a writeback: the displayed count at which
        the next one does (-1: none), and the captured count from which every
        one does (0: none). The frame queue takes both numbers."""
        due = -1
        if self.verify:  # every `every`-th displayed frame
            due = -(-displayed // self.every) * self.every
        # the snapshot: the first frame (as a start) and the last of a --frames run
        if self.snapshot and self.image is None and displayed == 0:
            due = 0
        return due, (self.frames or 0) if self.snapshot else 0

    def wanted(self, displayed: int, captured: int) -> bool:
        due, from_captured = self.due(displayed, captured)
        return displayed == due or bool(from_captured) and captured >= from_captured

    def check(self, sequence: int, frame, dumb, drawn=None) -> None:
        """The writeback of a commit of frame `sequence` (zero-copy: `frame`;
        a CPU conversion: into `dumb`; `drawn`: the overlay plane's buffer
        above it) has landed: compare, keep the image."""
        import numpy as np

        from sits.pipeline import verify
        wb = self.buffer
        shown_all = verify.to_rgb(wb.map(), "XR24", wb.width, wb.height, wb.pitch)
        x, y, w, h = self.out.placement.dst
        sx, sy, _, _ = self.out.placement.src
        shown = shown_all[y:y + h, x:x + w]
        if self.snapshot:
            # kept, and written once when the run ends: a PNG at every
            # check cost 0.12 s of CPU each in the test VM (zlib)
            if self.image is None:
                self.image = np.empty(shown_all.shape, np.uint8)
            np.copyto(self.image, shown_all)
        if not self.verify:
            return
        if dumb is None:
            f = frame.format
            with frame.dmabuf.cpu_access() as m:
                expected = verify.to_rgb(m, drm_for_v4l2(f.fourcc), f.width, f.height, f.bytesperline)
                expected = expected[sy:sy + h, sx:sx + w].copy()
        else:
            expected = verify.to_rgb(dumb.map(), "XR24", dumb.width, dumb.height, dumb.pitch)
            expected = expected[sy:sy + h, sx:sx + w]
        if drawn is not None:   # the overlay plane, placed as the video is
            above = verify.to_argb(drawn.map(), drawn.width, drawn.height, drawn.pitch)
            expected = verify.over(above[sy:sy + h, sx:sx + w], expected)
        bad = verify.mismatches(shown, expected)
        self.counts["checked"] += 1
        if bad:
            self.counts["mismatched"] += 1
            self.counts.setdefault("first_mismatch", {"sequence": sequence, "pixels": bad})

    def finish(self) -> str | None:
        """Write the snapshot (if any); its path."""
        if self.image is None:
            return None
        from sits.pipeline.png import write_png
        write_png(self.snapshot, self.image)
        return self.snapshot

    def close(self) -> None:
        self.buffer.close()
