"""GStreamer's own latency tracer and `sits probe frames` in the same run
of `gst-launch-1.0 v4l2src ! kmssink`, frame by frame. The tracer stamps
each buffer where v4l2src pushes it and where it reaches kmssink's pad;
the kernel stamps DQBUF's return and the commit ioctl. The one streaming
thread does, in order: DQBUF, push, arrive, commit, the next DQBUF. So
the n-th traced buffer lies inside the n-th kernel frame (dequeued <=
pushed, arrived <= committed), whose commit comes before the next frame's
dequeue.

The tracer's clock is CLOCK_MONOTONIC less the moment GStreamer started,
which it does not log: so the claim is that one offset puts every traced
buffer inside its frame. Each frame allows an interval of offsets; they
must share one. A frame joined to another frame's commit (a frame period,
~30 ms, away) leaves them none."""
import os
import re
import shutil

import pytest

from tests.vm.test_journey_vm import FRAMES, follow

pytestmark = [pytest.mark.vm,
              pytest.mark.skipif(not shutil.which("gst-launch-1.0"), reason="no gst-launch-1.0")]

# time: arrival - push; ts: arrival, since GStreamer's start
TRACER = re.compile(r" latency, .*sink-element=\(string\)kmssink\d+.* time=\(guint64\)(\d+), ts=\(guint64\)(\d+)")


def test_each_traced_buffer_lies_inside_its_kernel_frame(tmp_path, vivid_path, vkms_path):
    cmd = ["gst-launch-1.0", "-q", "v4l2src", f"device={vivid_path}", "io-mode=dmabuf", f"num-buffers={FRAMES}",
           "!", "video/x-raw,format=BGRx,width=320,height=180", "!", "kmssink", "driver-name=vkms", "sync=false"]
    log = tmp_path / "tracer.log"
    env = dict(os.environ, GST_TRACERS="latency(flags=pipeline)", GST_DEBUG="GST_TRACER:7",
               GST_DEBUG_FILE=str(log), GST_DEBUG_COLOR_MODE="off")
    _, kernel = follow(tmp_path, cmd, name="gst-traced", env=env)
    traced = [(int(m.group(2)) - int(m.group(1)), int(m.group(2)))
              for line in log.read_text().splitlines() if (m := TRACER.search(line))]
    assert len(traced) >= FRAMES - 8, f"the tracer gave {len(traced)} latencies"
    # (the source's last buffers can end with the pipeline, unfollowed)
    assert len(traced) - 8 <= len(kernel) <= len(traced), (len(kernel), len(traced))

    low, high = [], []   # per frame, the offsets that put its traced buffer inside it
    for n, ((pushed, arrived), r) in enumerate(zip(traced, kernel)):
        assert r["committed_ns"] is not None, r
        low.append(r["dequeued_ns"] - pushed)
        high.append(r["committed_ns"] - arrived)
        if n + 1 < len(kernel):
            assert r["committed_ns"] < kernel[n + 1]["dequeued_ns"], (r, kernel[n + 1])
    assert max(low) <= min(high), (
        f"no one offset fits: frame {low.index(max(low))} needs >= {max(low)}, "
        f"frame {high.index(min(high))} <= {min(high)} ns")
