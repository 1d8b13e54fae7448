"""The CLI edge of `sits capture --to-kms`: bad input gives one line and the
right exit code (2 usage, 1 runtime). Signals: tests/vm/test_signals_vm.py."""
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.vm

SITS = [sys.executable, "-m", "sits.cli.app"]


def one_line_error(r, code, pattern):
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in r.stderr
    assert any(pattern in ln for ln in lines), r.stderr
    return lines


def test_summary_json_has_the_documented_fields(sits, vivid_path, vkms_path, tmp_path):
    snap = "/tmp/sits-test-out/snap.png" if os.path.isdir("/tmp/sits-test-out") else str(tmp_path / "s.png")
    r = sits("capture", "--to-kms", "--device", vivid_path, "--card", vkms_path, "--format", "XR24",
             "--size", "640x480", "--frames", "8", "--verify", "--snapshot", snap, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    for key in ("frames_captured", "frames_displayed", "frames_dropped", "buffer_errors", "zero_copy",
                "cpu_copies_per_frame", "memory", "format", "size", "verify", "latency_ms", "cpu_ms_per_frame"):
        assert key in s
    assert set(s["latency_ms"]) == {"p50", "p95", "p99"}
    # dequeue -> commit is part of capture -> flip
    assert 0 <= s["dequeue_to_commit_ms"]["p50"] <= s["latency_ms"]["p99"]
    assert s["verify"]["mismatched"] == 0 and s["verify"]["checked"] >= 1
    with open(snap, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_no_such_device(sits):
    one_line_error(sits("capture", "--to-kms", "--device", "/dev/video99"), 1, "/dev/video99: no such device")


def test_not_a_capture_device(sits):
    from sits.v4l2.device import VideoDevice, video_paths
    outputs = []
    for p in video_paths():
        with VideoDevice.open(p) as d:
            if not d.cap.is_capture:
                outputs.append(p)
    if not outputs:
        pytest.skip("no non-capture video node")
    one_line_error(sits("capture", "--to-kms", "--device", outputs[0]), 1, "not a video capture device")


@pytest.mark.parametrize("args,pattern", [
    (["--format", "ZZZZ"], "format ZZZZ not supported; supported:"),
    (["--size", "123x45"], "not supported for XR24; supported:"),
    (["--size", "big"], "--size must look like 1280x720"),
    (["--memory", "floppy"], "--memory must be mmap, heap or udmabuf"),
    (["--format", "TOOLONG"], "--format takes a fourcc"),
])
def test_usage_errors(sits, args, pattern, vivid_path):
    extra = ["--format", "XR24"] if "--format" not in args else []
    one_line_error(sits("capture", "--to-kms", "--device", vivid_path, *extra, *args), 2, pattern)


def test_the_zero_copy_path_never_imports_numpy(vivid_path, vkms_path):
    """It touches no pixel, so it loads no numpy (seconds of CPU of every
    start in the test VM, and memory on an appliance)."""
    code = ("import sys; from sits.cli.app import main; "
            f"rc = main(['capture', '--to-kms', '--device', '{vivid_path}', '--card', '{vkms_path}', "
            "'--format', 'XR24', '--size', '320x180', '--frames', '5', '--json']); "
            "print('numpy loaded' if 'numpy' in sys.modules else 'no numpy'); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "no numpy"


def test_device_paths_that_are_not_what_they_claim_are_named(sits, vivid_path, vkms_path):
    one_line_error(sits("capture", "--to-kms", "--device", vivid_path, "--card", "/dev/null"), 1,
                   "/dev/null: not a DRM device")
    one_line_error(sits("capture", "--to-kms", "--device", vkms_path, "--card", vkms_path), 1,
                   f"{vkms_path}: not a V4L2 device")


def test_without_to_kms_is_a_usage_error(sits):
    one_line_error(sits("capture"), 2, "--to-kms")


def test_to_cuda_without_a_gpu_is_one_line_and_leaves_the_display(sits, vivid_path, vkms_path):
    """The VM has no GPU: --to-cuda names what is missing, exit 1, before
    any device is touched (the plane shows what it showed)."""
    from sits.drm.card import Card
    with Card.open(vkms_path) as card:
        before = [(p.id, p.crtc_id, p.fb_id) for p in card.planes()]
    one_line_error(sits("capture", "--to-kms", "--to-cuda", "224x224", "--device", vivid_path, "--card", vkms_path,
                        "--memory", "udmabuf", "--frames", "3"), 1, "--to-cuda needs a CUDA GPU: no CUDA driver")
    with Card.open(vkms_path) as card:
        assert [(p.id, p.crtc_id, p.fb_id) for p in card.planes()] == before


def test_no_permission_hints_at_the_video_group(vivid_path):
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *SITS,
                        "capture", "--to-kms", "--device", vivid_path],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": "/tmp"})
    one_line_error(r, 1, "permission denied (add the user to the video")


def test_device_busy(sits, vivid_path, vkms_path):
    import select

    from sits.pipeline.frame_queue import FrameQueue
    from sits.v4l2.capture import CaptureDevice
    with CaptureDevice.open(vivid_path) as other, select.epoll() as ep:
        other.configure("XR24", (640, 480))
        other.allocate(2)
        FrameQueue(ep.fileno()).attach(other)
        other.start()
        one_line_error(sits("capture", "--to-kms", "--device", vivid_path, "--card", vkms_path,
                            "--format", "XR24", "--size", "640x480", "--frames", "3"), 1, "device busy")


def test_no_connected_connector(sits, vivid_path, vkms_path):
    status = [f"/sys/class/drm/{n}/status" for n in os.listdir("/sys/class/drm") if n.endswith("Virtual-1")][0]
    with open(status, "w") as f:
        f.write("off")
    try:
        one_line_error(sits("capture", "--to-kms", "--device", vivid_path, "--card", vkms_path,
                            "--frames", "3"), 1, "no connected connector")
    finally:
        with open(status, "w") as f:
            f.write("detect")
