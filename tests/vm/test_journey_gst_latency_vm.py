"""The kernel's dequeued -> committed span of GStreamer's frames (`sits
probe frames -- gst-launch-1.0 v4l2src ! kmssink`) against GStreamer's own
latency tracer in a run of its own: the kernel's median within the
tracer's spread (its 5th to 95th percentile). The two spans are not the
same (the tracer's runs from v4l2src's push to kmssink's pad; the
kernel's from DQBUF's return to the commit ioctl, so it holds both
elements' own work too, and the probe's), but a frame joined to another
frame's commit would be a frame period or more away."""
import os
import re
import shutil
import subprocess

import pytest

from tests.vm.test_journey_vm import FRAMES, follow

pytestmark = [pytest.mark.vm,
              pytest.mark.skipif(not shutil.which("gst-launch-1.0"), reason="no gst-launch-1.0")]

TRACER_TIME = re.compile(r" latency, .*sink-element=\(string\)kmssink\d+.* time=\(guint64\)(\d+)")


def quantile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def test_dequeue_to_commit_agrees_with_gstreamers_latency_tracer(tmp_path, vivid_path, vkms_path):
    cmd = ["gst-launch-1.0", "-q", "v4l2src", f"device={vivid_path}", "io-mode=dmabuf", f"num-buffers={FRAMES}",
           "!", "video/x-raw,format=BGRx,width=320,height=180", "!", "kmssink", "driver-name=vkms", "sync=false"]
    log = tmp_path / "tracer.log"
    env = dict(os.environ, GST_TRACERS="latency(flags=pipeline)", GST_DEBUG="GST_TRACER:7",
               GST_DEBUG_FILE=str(log), GST_DEBUG_COLOR_MODE="off")
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=1200)
    tracer = [int(m.group(1)) for line in log.read_text().splitlines() if (m := TRACER_TIME.search(line))]
    assert len(tracer) >= FRAMES - 8, f"the tracer gave {len(tracer)} latencies"

    _, kernel = follow(tmp_path, cmd, name="gst-traced")
    spans = [r["committed_ns"] - r["dequeued_ns"] for r in kernel if r["committed_ns"] is not None]
    assert len(spans) >= 0.95 * len(kernel)
    low, high = quantile(tracer, 0.05), quantile(tracer, 0.95)
    median = quantile(spans, 0.5)
    assert low <= median <= high, (f"kernel dequeued->committed median {median / 1e6:.3f} ms; "
                                   f"GStreamer's tracer p5 {low / 1e6:.3f}, p95 {high / 1e6:.3f} ms")
