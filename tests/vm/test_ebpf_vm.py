"""v4l2/vb2, DRM and dma_fence probes while `sits capture --to-kms` runs
(vivid -> vkms), in the test VM whose kernel has these tracepoints."""
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


def test_v4l2_drm_and_fence_probes_during_a_capture(vivid_path, vkms_path):
    _need_tracepoints(("vb2", "vb2_qbuf"), ("vb2", "vb2_buf_done"), ("vb2", "vb2_dqbuf"))
    _need_capture()
    from sits._kernel import ioctl_number
    from sits.ebpf.probes import POINT_BY_NAME, Filters, ProbeSession
    frames = 60
    with ProbeSession(("v4l2", "drm", "fence", "ioctl"), filters=Filters(follow=True)) as s:
        for name in ("sits_vb2_qbuf", "sits_vb2_buf_done", "sits_vb2_dqbuf"):
            assert name in s.attached, s.skipped
        pid = s.spawn([sys.executable, "-m", "sits.cli.app", "capture", "--to-kms", "--device", vivid_path,
                       "--card", vkms_path, "--frames", str(frames), "--json"])
        status = os.waitpid(pid, 0)[1]
        rows, _ = s.collect()
        drops = s.drops()
    assert os.waitstatus_to_exitcode(status) == 0

    def count(point, key=None):
        pid_ = POINT_BY_NAME[point].id
        return sum(h.count for k, h in rows.items() if k.probe == pid_ and (key is None or k.key == key))

    dqbufs = count("sys_ioctl", ioctl_number("VIDIOC_DQBUF"))
    assert dqbufs >= frames
    # every dequeued buffer was first done, and (after the first few) queued while we watched
    assert count("v4l2_done_dqbuf") >= frames - 1
    assert count("v4l2_qbuf_done") >= frames - 8
    assert count("sys_ioctl", ioctl_number("DRM_IOCTL_MODE_ATOMIC")) >= 1
    assert drops["hist_map_full"] == 0 and drops["start_map_full"] == 0
