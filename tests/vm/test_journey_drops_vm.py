"""Drops made on purpose, counted by `sits probe frames` exactly as sits
counts them itself, by cause and frame by frame: vivid losing buffers (its
"Percentage of Dropped Buffers" control: the driver skips sequence numbers)
and frames the display cannot take (sits stopped until the driver has
filled every buffer, tests/vm/paused.py: it wakes to several frames at
once, shows the newest and drops the rest)."""
import json
import sys

import pytest

from sits.journey import record
from tests.vm import vivid
from tests.vm.test_journey_vm import follow, sits_capture

pytestmark = pytest.mark.vm

DROPPED_PERCENT = 20
PAUSES = 3


@pytest.fixture
def dropping_vivid(vivid_path):
    ctrl = vivid.control_id(vivid_path, "Percentage of Dropped Buffers")
    vivid.set_control(vivid_path, ctrl, DROPPED_PERCENT)
    try:
        yield vivid_path
    finally:
        vivid.set_control(vivid_path, ctrl, 0)


def test_drops_made_on_purpose_are_counted_as_sits_counts_them(tmp_path, dropping_vivid, vkms_path):
    # eight buffers: a wake-up after a pause finds six or more frames
    cmd, timeline, summary = sits_capture(tmp_path, dropping_vivid, vkms_path, "--memory", "mmap",
                                          "--format", "XR24", "--buffers", "8")
    paused = [sys.executable, "-m", "tests.vm.paused", dropping_vivid, str(PAUSES), "--", *cmd]
    rep, kernel = follow(tmp_path, paused, name="drops")
    s = json.loads(summary.read_text())
    own = record.read(str(timeline))
    # the drops were made: without them this test would hold nothing
    assert s["drops"]["sequence_gap"] > 0 and s["drops"]["display"] > 0, s["drops"]

    drops = rep["frames"]["drops"]
    assert drops["sequence_gap"] == s["drops"]["sequence_gap"]
    assert drops["not_shown"] == s["drops"]["display"]
    # the same frames, each with the same gap before it and shown or not alike
    assert [(r["sequence"], r["skipped_before"]) for r in kernel] == \
        [(r["sequence"], r["skipped_before"]) for r in own]
    assert [r["scanout_ns"] is None for r in kernel] == [r["scanout_ns"] is None for r in own]
