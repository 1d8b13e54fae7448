"""`sits probe frames` follows real pipelines' frames through the kernel
(vivid + vkms), joined by buffer identity: sits' own, held frame for frame
against the records sits writes itself (`sits capture --timeline`), and
GStreamer's, which nobody here wrote."""
import bisect
import collections
import json
import shutil
import subprocess
import sys

import pytest

from sits.journey import record

pytestmark = pytest.mark.vm

SITS = [sys.executable, "-m", "sits.cli.app"]
FRAMES = 300
# A scanout can come before its commit began: vkms stamps a vblank with its
# timer's expiry, and a timer interrupt that runs late completes a commit
# made after that expiry (sits' flip event carries the same time). Under a
# loaded host 10% of GStreamer's frames did (29 of 300, 0.3-9.4 ms before
# the commit). The stamp is the timer's last expiry before the interrupt
# ran, and the commit came before the interrupt: so it is less than one
# vblank period before the commit, and a frame given an earlier vblank
# would be a period or more before. (sits' own frames are held to sits'
# records instead.)
#: stages whose time both sides take from the same kernel value (the V4L2
#: timestamp, the vblank's): equal, to sits' microseconds
CARRIED = ("captured", "scanout", "replaced")
# The other stages each side times on its side of an ioctl: sits before the
# commit's, after DQBUF's and QBUF's. How far apart is a measurement
# (tools/bench/journey_bench.py), not a test: a loaded host stops the
# emulated CPU for milliseconds between the two.


def follow(tmp_path, command, name="run", env=None):
    """`sits probe frames` around `command` (in `env`): its JSON report and
    the kernel's records (--stream)."""
    report, stream = tmp_path / f"{name}.json", tmp_path / f"{name}.ndjson"
    r = subprocess.run([*SITS, "probe", "frames", "--json", "-o", str(report), "--stream", str(stream),
                        "--", *command], capture_output=True, text=True, timeout=1200, env=env)
    assert r.returncode == 0, r.stderr
    rep = json.loads(report.read_text())
    # a record is streamed when its frame's journey ends: a dropped frame's
    # before the one on screen's, so capture order is the dequeue order
    records = sorted(record.read(str(stream)), key=lambda r: r["dequeued_ns"])
    assert rep["exit_code"] == 0, rep
    assert rep["untimed"] == {}, rep["untimed"]
    assert not any(rep["frames"]["lost"].values()), rep["frames"]["lost"]
    return rep, records


def sits_capture(tmp_path, vivid_path, vkms_path, *extra):
    timeline = tmp_path / "timeline.ndjson"
    summary = tmp_path / "summary.json"
    cmd = ["sh", "-c", " ".join([*SITS, "capture", "--to-kms", "--device", vivid_path, "--card", vkms_path,
                                 "--size", "320x180", "--frames", str(FRAMES), "--timeline", str(timeline),
                                 "--json", *extra]) + f" > {summary}"]
    return cmd, timeline, summary


@pytest.mark.parametrize("memory,fmt", [("mmap", "XR24"), ("udmabuf", "XR24"), ("udmabuf", "YUYV")],
                         ids=["exported", "dmabuf-import", "copied"])
def test_every_frame_of_sits_is_joined_as_sits_saw_it(memory, fmt, tmp_path, vivid_path, vkms_path):
    cmd, timeline, summary = sits_capture(tmp_path, vivid_path, vkms_path, "--memory", memory, "--format", fmt)
    rep, kernel = follow(tmp_path, cmd)
    own = record.read(str(timeline))
    s = json.loads(summary.read_text())
    assert s["frames_captured"] == FRAMES and len(own) == FRAMES

    # one for one, in capture order (a driver under TCG can repeat a
    # sequence number: order, buffer and sequence together are the identity)
    assert [(r["sequence"], r["buffer"]) for r in kernel] == [(r["sequence"], r["buffer"]) for r in own]
    joined_as_sits_saw_them(kernel, own, copied=fmt == "YUYV")

    # every displayed frame joined, and drops as sits counted them, by cause
    shown = [r for r in kernel if r["scanout_ns"] is not None]
    assert len(shown) == s["frames_displayed"] > 0
    f = rep["frames"]
    assert f["count"] == FRAMES
    assert f["drops"]["not_shown"] == s["frames_dropped"]   # the display's drops, and the conversion's
    assert f["drops"]["sequence_gap"] == s["drops"]["sequence_gap"]


def vblank_grid(kernel):
    """(the vblanks' spacing, their times seen): vkms stamps each vblank
    with its timer's expiry, a whole number of periods apart."""
    periods = collections.Counter((r["replaced_ns"] - r["scanout_ns"]) // r["vblanks"] for r in kernel
                                  if r["replaced_ns"] is not None and r["vblanks"])
    return periods.most_common(1)[0][0], sorted(r["scanout_ns"] for r in kernel if r["scanout_ns"] is not None)


def vblank_within(grid, lo, hi) -> bool:
    """Some vblank falls in [lo, hi], on the grid of the scanout seen last
    before it or of the one seen first after it. The grid's phase is not
    one for the whole run: vkms starts its vblank timer afresh when vblanks
    are turned on again, after drm's off-delay (none wanted for 5 s, as
    while the camera is replugged) -- a fresh-clone run failed the replug
    test on the first frame shown after it, checked on the old phase."""
    from sits._kernel import lib
    period, seen = grid
    i = bisect.bisect_right(seen, lo)
    # the product's grid (sits_vblank.h): the last vblank at or before hi is at or after lo
    return any(lib.sits_vblank_before(ref, period, hi) >= lo for ref in seen[max(0, i - 1):i + 1])


def joined_as_sits_saw_them(kernel, own, copied):
    """The kernel's records of sits' frames against sits' own, frame for
    frame (`copied`: vkms cannot scan out the camera's format, and sits
    converts into a buffer of its own)."""
    grid = vblank_grid(kernel)
    for k, mine in zip(kernel, own, strict=True):
        # late: the same rule on the same vblanks (the kernel sees every one,
        # sits its flips' and the mode's frame time), so the two differ only
        # where a vblank falls between the sides' times of the dequeue or of
        # the commit
        if (k["late_ns"] is None) != (mine["late_ns"] is None):
            assert k["committed_ns"] is not None and mine["committed_ns"] is not None, (k, mine)
            # (sits reads the vblanks through the events' microseconds)
            assert any(vblank_within(grid, min(k[f"{st}_ns"], mine[f"{st}_ns"]) - 1000,
                                     max(k[f"{st}_ns"], mine[f"{st}_ns"]) + 1000)
                       for st in ("dequeued", "committed")), ("late", grid[0], {
                           side: {st: r[f"{st}_ns"] for st in ("dequeued", "committed", "scanout", "late")}
                           for side, r in (("kernel", k), ("sits", mine))})
        # a copy is made for a commit: a frame dropped before its commit
        # (a loaded host) was never copied
        expect = copied and mine["committed_ns"] is not None
        assert k["copied"] == expect == mine["copied"], (k, mine)
        for stage in record.STAGES[:6]:
            a, b = k[f"{stage}_ns"], mine[f"{stage}_ns"]
            assert (a is None) == (b is None), (stage, k, mine)
            if a is None:
                continue
            if stage in CARRIED:   # the same clock value, sits' through a timeval (us)
                assert abs(a - b) < 1000, (stage, a - b, k, mine)
            else:                  # the kernel's inside the ioctl, sits' on the side it said
                assert (a >= b) if stage == "committed" else (a <= b), (stage, a - b, k, mine)
        # the order the join makes; scanout and replaced are the kernel's
        # vblank stamps, held to sits' above
        if k["committed_ns"] is not None:
            assert k["dequeued_ns"] <= k["committed_ns"], k
        if k["replaced_ns"] is not None:
            assert k["scanout_ns"] <= k["replaced_ns"], k
            if not copied:  # (a copy's buffer can go back before the copy is shown)
                assert k["requeued_ns"] is None or k["replaced_ns"] <= k["requeued_ns"], k


@pytest.mark.skipif(not shutil.which("gst-launch-1.0"), reason="no gst-launch-1.0")
@pytest.mark.parametrize("io_mode", ["dmabuf", "mmap"])
def test_gstreamer_frames_are_followed_to_the_screen(io_mode, tmp_path, vivid_path, vkms_path):
    # kmssink with sync=false shows every frame it gets (no QoS drops)
    cmd = ["gst-launch-1.0", "-q", "v4l2src", f"device={vivid_path}", f"io-mode={io_mode}",
           f"num-buffers={FRAMES}", "!", "video/x-raw,format=BGRx,width=320,height=180", "!",
           "kmssink", "driver-name=vkms", "sync=false"]
    rep, kernel = follow(tmp_path, cmd, name=f"gst-{io_mode}")
    assert len(kernel) >= FRAMES - 8    # (the source's last buffers can end with the pipeline)
    shown = [r for r in kernel if r["scanout_ns"] is not None]
    assert len(shown) >= 0.95 * len(kernel), rep["frames"]
    period_ns = rep["frames"]["vblank_ms"] * 1e6   # the vblanks' own spacing
    last_scanout = 0
    for r in shown:
        assert r["copied"] == (io_mode == "mmap"), r
        # (not the V4L2 timestamp: vivid's clock runs ahead of the guest's under TCG)
        assert r["dequeued_ns"] < r["committed_ns"], r
        assert r["committed_ns"] - period_ns < r["scanout_ns"], r   # see above
        assert r["scanout_ns"] > last_scanout, r                       # each frame its own vblank
        last_scanout = r["scanout_ns"]
    seqs = [r["sequence"] for r in kernel]
    # in dequeue order, the sequence numbers never go back; one can repeat
    # (seen: 0 twice -- a stream started again starts again at 0, and
    # vivid under TCG can repeat a number)
    assert seqs == sorted(seqs)
