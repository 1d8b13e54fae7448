"""sits capture --to-kms against vivid + vkms: the zero-copy chain verified
pixel for pixel through the writeback connector, every memory kind, the
conversion path, leaks, and vivid's error injection."""
import pytest

from sits.pipeline.capture import CaptureOptions, build
from tests.vm import vivid
from tests.vm.conftest import run_until

pytestmark = pytest.mark.vm

SIZES = [(640, 480), (1280, 720), (1920, 1080)]


def run(**kw):
    kw.setdefault("frames", 6)
    return build(CaptureOptions(**{"display": True, **kw})).run()


@pytest.mark.parametrize("memory", ["mmap", "heap", "udmabuf"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("fmt", ["XR24", "AR24", "RGBP"])
def test_zero_copy_chain_is_verified_by_writeback(fmt, size, memory, vivid_path, vkms_path, no_leaks, request):
    if memory == "heap":
        request.getfixturevalue("need_dma_heaps")
    s = run(device=vivid_path, card=vkms_path, format=fmt, size=size, memory=memory,
            verify=True, verify_every=2)
    assert s.zero_copy and s.cpu_copies_per_frame == 0
    assert s.format == fmt and s.size == f"{size[0]}x{size[1]}" and s.memory == memory
    assert s.frames_captured == 6 and s.frames_displayed >= 1
    assert s.frames_displayed + s.frames_dropped == s.frames_captured
    assert s.verify["checked"] >= 1 and s.verify["mismatched"] == 0, s.verify
    assert s.latency_ms["p50"] is not None and s.latency_ms["p50"] >= 0


@pytest.mark.parametrize("memory", ["mmap", "udmabuf"])
def test_c_flip_loop_shows_the_frames_between_writebacks(memory, vivid_path, vkms_path, no_leaks):
    # until the second writeback has been checked: how many frames that
    # takes is the host's speed
    s = run_until(CaptureOptions(device=vivid_path, card=vkms_path, display=True, format="XR24", size=(640, 480),
                                 memory=memory, verify=True, verify_every=8),
                  lambda s: s.verify["checked"] >= 2)
    assert s.stopped_by == "test", s
    assert s.frames_displayed + s.frames_dropped == s.frames_captured
    assert s.verify["checked"] >= 2 and s.verify["mismatched"] == 0, s.verify
    # the writeback commits are Python's, most others C's
    assert s.c_loop_commits >= s.frames_displayed // 2, s
    assert s.dequeue_to_commit_ms["p50"] is not None and s.latency_ms["p50"] is not None


@pytest.mark.parametrize("buffers", [2, 3])
def test_c_flip_loop_with_few_buffers_waits_for_flips_not_frames(buffers, vivid_path, vkms_path, no_leaks):
    # with two or three buffers the driver may have none left until a flip
    # retires one: the C loop must then wake for the flip event itself
    s = run_until(CaptureOptions(device=vivid_path, card=vkms_path, display=True, format="XR24", size=(320, 180),
                                 buffers=buffers, fps=30), lambda s: s.c_loop_commits >= 10)
    assert s.stopped_by == "test", s
    assert s.frames_displayed + s.frames_dropped == s.frames_captured
    assert s.c_loop_commits >= 10, s


def test_format_no_plane_shows_takes_the_conversion_path(vivid_path, vkms_path, no_leaks):
    s = run(device=vivid_path, card=vkms_path, format="YUYV", size=(640, 480), verify=True, verify_every=2)
    assert s.zero_copy is False and s.cpu_copies_per_frame == 1
    assert s.display_format == "XR24"
    assert s.verify["checked"] >= 1 and s.verify["mismatched"] == 0, s.verify


def test_no_leaks_after_2000_frames(vivid_path, vkms_path, no_leaks):
    s = run(device=vivid_path, card=vkms_path, format="XR24", size=(320, 180), frames=2000, fps=60)
    assert s.frames_captured == 2000
    assert s.frames_displayed + s.frames_dropped == 2000


def test_no_leaks_after_50_start_stop_cycles(vivid_path, no_leaks):
    from sits.pipeline.consumer import Consumer
    from sits.pipeline.pipeline import Pipeline
    from sits.v4l2.capture import CaptureDevice

    class Let(Consumer):
        name = "let"

        def take(self, frame, lease):
            lease.release()
    for i in range(50):
        with CaptureDevice.open(vivid_path) as cap:
            cap.configure("XR24", (320, 180))
            cap.allocate(3, ["mmap", "heap", "udmabuf"][i % 3])
            s = Pipeline(cap, consumers=[Let()]).run(frames=1)
            assert s.frames_captured >= 1 and s.consumers["let"]["taken"] >= 1
            assert not cap.streaming


def _set_ctrl(path, name, value=1):
    vivid.set_control(path, vivid.control_id(path, name), value)


def test_injected_buffer_error_is_counted_and_never_shown(vivid_path, vkms_path, no_leaks):
    s = vivid.inject_during(vivid_path, vkms_path, "Inject V4L2_BUF_FLAG_ERROR", lambda s: s.buffer_errors >= 1)
    assert s.buffer_errors >= 1 and s.verify["mismatched"] == 0


def test_injected_qbuf_error_loses_no_buffer(vivid_path, vkms_path, no_leaks):
    s = vivid.inject_during(vivid_path, vkms_path, "Inject VIDIOC_QBUF Error", lambda s: s.v4l2_errors["requeue"] >= 1)
    assert s.v4l2_errors["requeue"] >= 1 and s.verify["mismatched"] == 0


def test_injected_fatal_streaming_error_restarts_the_queue(vivid_path, vkms_path, no_leaks):
    s = vivid.inject_during(vivid_path, vkms_path, "Inject Fatal Streaming Error",
                       lambda s: s.v4l2_errors["stream_restarts"] >= 1)
    assert s.v4l2_errors["stream_restarts"] >= 1 and s.verify["mismatched"] == 0


@pytest.mark.parametrize("name,counter", [("Inject VIDIOC_STREAMON Error", "setup_retries"),
                                          ("Inject VIDIOC_REQBUFS Error", "setup_retries")])
def test_injected_setup_errors_are_retried(name, counter, vivid_path, vkms_path, no_leaks):
    _set_ctrl(vivid_path, name)
    s = run(device=vivid_path, card=vkms_path, format="XR24", size=(640, 480))
    assert s.v4l2_errors[counter] >= 1 and s.frames_captured == 6


def test_percentage_of_dropped_buffers_is_survived(vivid_path, vkms_path, no_leaks):
    _set_ctrl(vivid_path, "Percentage of Dropped Buffers", 30)
    try:
        s = run(device=vivid_path, card=vkms_path, format="XR24", size=(640, 480), frames=10)
    finally:
        _set_ctrl(vivid_path, "Percentage of Dropped Buffers", 0)
    assert s.frames_captured == 10


def test_display_hotplug_pauses_and_resumes(vivid_path, vkms_path, no_leaks):
    import os
    name = [n for n in os.listdir("/sys/class/drm") if n.endswith("Virtual-1")][0]
    status = f"/sys/class/drm/{name}/status"
    card_uevent = f"/sys/class/drm/{name.split('-')[0]}/uevent"
    steps = []

    def plug(state):
        # vkms has no hotplug of its own: force the connector's status, then
        # have the kernel send a (synthetic) change uevent for the card.
        with open(status, "w") as f:
            f.write(state)
        with open(card_uevent, "w") as f:
            f.write("change 8c1f6a3e-0000-4000-8000-000000000001 HOTPLUG=1")

    def on_status(s):
        if not steps and s.frames_displayed >= 2:
            plug("off")
            steps.append(("off", s.frames_captured))
        elif len(steps) == 1 and s.frames_captured >= steps[0][1] + 3:
            plug("detect")
            steps.append(("on", s.frames_captured, s.frames_displayed))

    try:
        s = run_until(CaptureOptions(device=vivid_path, card=vkms_path, display=True, format="XR24", size=(640, 480)),
                      lambda s: len(steps) == 2 and s.frames_displayed > steps[1][2] + 2, on_status=on_status)
    finally:
        with open(status, "w") as f:
            f.write("detect")
    assert len(steps) == 2, steps
    assert s.stopped_by == "test", ("the display did not resume after the connector came back", steps, s)
    assert s.hotplug_events >= 2
    assert s.frames_displayed + s.frames_dropped == s.frames_captured
