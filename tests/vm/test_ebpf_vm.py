"""v4l2/vb2, DRM and dma_fence probes while `sits capture --to-kms` runs
(vivid -> vkms), in the test VM whose kernel has these tracepoints."""
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.vm
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _need_tracepoints(*pairs):
    from sits.ebpf.tracefs import has_tracepoint
    for cat, name in pairs:
        if not has_tracepoint(cat, name):
            pytest.skip(f"no {cat}:{name} tracepoint in this kernel")


def _need_capture():
    r = subprocess.run([sys.executable, "-m", "sits.cli.app", "capture", "--help"], cwd=ROOT,
                       capture_output=True, text=True)
    if r.returncode != 0 or "--to-kms" not in r.stdout:
        pytest.skip("`sits capture --to-kms` is not available")


def test_v4l2_drm_and_fence_probes_during_a_capture(vivid_path, vkms_path, tmp_path):
    _need_tracepoints(("vb2", "vb2_qbuf"), ("vb2", "vb2_buf_done"), ("vb2", "vb2_dqbuf"),
                      ("drm", "drm_vblank_event"), ("drm", "drm_vblank_event_delivered"))
    _need_capture()
    from sits._kernel import ioctl_number
    from sits.ebpf.histogram import slot_bounds
    from sits.ebpf.probes import POINT_BY_NAME, Filters, ProbeSession
    from sits.drm.card import Card
    with Card.open(vkms_path) as card:
        crtc_id = card.resources().crtcs[0]
        writeback = [c for c in card.connectors() if c.name.startswith("Writeback-")][0]
    frames = 40
    with ProbeSession(("v4l2", "drm", "fence", "ioctl"), filters=Filters(follow=True)) as s:
        for name in ("sits_vb2_qbuf", "sits_vb2_buf_done", "sits_vb2_dqbuf", "sits_drm_vblank",
                     "sits_drm_event_delivered", "sits_drm_atomic", "sits_drm_read_enter",
                     "sits_drm_read_exit"):
            assert name in s.attached, s.skipped
        summary = tmp_path / "capture.json"
        # sh execs the capture (same pid) with its summary sent to a file
        pid = s.spawn(["sh", "-c", 'exec "$@" > "$0"', str(summary), sys.executable, "-m", "sits.cli.app",
                       "capture", "--to-kms", "--device", vivid_path, "--card", vkms_path,
                       "--format", "XR24", "--size", "640x480", "--frames", str(frames),
                       "--verify", "--verify-every", "4", "--json"])
        status = os.waitpid(pid, 0)[1]
        rows, _ = s.collect()
        drops = s.drops()
        fence_names = s.fence_names()
    assert os.waitstatus_to_exitcode(status) == 0
    result = json.loads(summary.read_text())
    shown, written_back = result["frames_displayed"], result["verify"]["checked"]
    assert shown >= 1 and written_back >= 1, result

    def count(point, key=None):
        pid_ = POINT_BY_NAME[point].id
        return sum(h.count for k, h in rows.items() if k.probe == pid_ and (key is None or k.key == key))

    dqbufs = count("sys_ioctl", ioctl_number("VIDIOC_DQBUF"))
    assert dqbufs >= frames
    # every dequeued buffer was first done, and (after the first few) queued while we watched
    assert count("v4l2_done_dqbuf") >= frames - 1
    assert count("v4l2_qbuf_done") >= frames - 8
    assert count("sys_ioctl", ioctl_number("DRM_IOCTL_MODE_ATOMIC")) >= 1
    # page flips (atomic commits with a flip event): every shown frame's
    # event, attributed to the capture, timed from its own vblank. Timed
    # from the vblank before, every sample would be a frame period more:
    # so at least one sample (the lowest slot's upper bound) is under a
    # period (the mode's, not the host's speed: a loaded host makes some
    # interrupts late, not all)
    deliver = [h for k, h in rows.items() if k.probe == POINT_BY_NAME["drm_vblank_deliver"].id]
    assert deliver and all(k.pid == pid for k in rows if k.probe == POINT_BY_NAME["drm_vblank_deliver"].id)
    assert shown - 2 <= count("drm_vblank_deliver") <= shown + 3
    period_ns = 1e9 / int(result["mode"].rsplit("@", 1)[1])
    lowest = min(slot_bounds(min(h.slots))[1] for h in deliver)
    assert lowest < period_ns, (lowest, period_ns)
    # each flip event read() by the capture's event loop
    assert shown - 2 <= count("drm_event_read") <= shown + 3
    # the commits' out-fences: each commit of Python's (the modeset, the
    # writeback checks) got one on vkms's CRTC timeline, the C loop's none
    # (its flip event says the same), each writeback commit one on the
    # writeback connector's; the fence probe saw each emitted by the
    # capture and signalled, and no fence of any other timeline
    signalled = {}
    for k, h in rows.items():
        if k.probe == POINT_BY_NAME["fence_signal"].id and k.pid == pid:
            signalled[fence_names.get(k.key, f"unnamed context {k.key}")] = h.count
    crtc_timeline = f"vkms:CRTC:{crtc_id}-crtc-0"
    writeback_timeline = f"vkms:CONNECTOR:{writeback.id}-{writeback.name}"
    python_commits = shown - result["c_loop_commits"]
    assert 0 < result["c_loop_commits"] < shown and python_commits >= written_back, result
    assert signalled == {crtc_timeline: python_commits, writeback_timeline: written_back}, (signalled, result)
    assert all(v == 0 for v in drops.values()), f"drops: {drops}"
