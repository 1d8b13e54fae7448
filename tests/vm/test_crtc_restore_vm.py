"""sits gives the display back as it found it: the planes' framebuffers and
CRTCs and the CRTC's mode, compared before sits starts and after it has
gone -- normal end, SIGINT, SIGTERM, a consumer that raises.

A second DRM client (not master) stays open throughout: while it is, the
kernel's last-close restore (fbdev's mode and framebuffer put back when the
last client closes) cannot happen, so what it sees afterwards is what sits
itself restored, not what the kernel did for it."""
import subprocess
import sys

import pytest

from sits.pipeline.capture import CaptureOptions, build
from sits.pipeline.consumer import Consumer
from sits.pipeline.pipeline import ConsumerError
from tests.vm.conftest import EVENT_WAIT_S, run_until
from tests.vm.kms_observer import display_state, observer, showing_sits
from tests.vm.procfs import kernel_view

pytestmark = pytest.mark.vm

SITS = [sys.executable, "-m", "sits.cli.app"]


def test_restored_after_a_normal_end(vivid_path, vkms_path):
    with observer(vkms_path) as obs:
        before = display_state(obs)
        seen = []
        s = run_until(CaptureOptions(device=vivid_path, card=vkms_path, display=True, format="XR24", size=(1280, 720)),
                      lambda s: any(st[0] != before[0] for st in seen),
                      on_status=lambda s: seen.append(display_state(obs)))
        assert s.stopped_by == "test", "sits never showed a frame: nothing was tested"
        assert s.frames_displayed >= 1
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
        p = build(CaptureOptions(device=vivid_path, card=vkms_path, display=True, format="XR24", size=(1280, 720), frames=50),
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
            assert showing_sits(obs, before, proc), "sits never showed a frame"
            proc.send_signal(getattr(signal, sig))
            try:
                out, err = proc.communicate(timeout=EVENT_WAIT_S)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"sits did not end within {EVENT_WAIT_S} s of {sig}:\n{kernel_view(proc.pid)}") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=60)   # a kill that cannot land fails here, not holds the tier
        assert proc.returncode == 0, err
        assert '"stopped_by": "signal"' in out
        assert display_state(obs) == before
