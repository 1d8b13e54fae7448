"""A camera pulled and plugged in again under `sits probe frames -- sits
capture --reconnect` (tests/vm/replugged.py): the old queue frees its
buffers at sits' close, the new one allocates its own -- often at the
freed buffers' kernel addresses. Every frame of both is joined as sits
saw it: none of the old stream's frames is taken for a new buffer (its
requeue, its commits), and the kernel counts the queues that freed the
buffers it knew."""
import json
import os
import sys

import pytest

from sits.journey import record
from tests.vm import vivid
from tests.vm.test_journey_vm import FRAMES, follow, joined_as_sits_saw_them, sits_capture

pytestmark = pytest.mark.vm


def test_a_camera_plugged_in_again_is_followed_as_new_buffers(tmp_path, vivid_path, vkms_path):
    cmd, timeline, summary = sits_capture(tmp_path, vivid_path, vkms_path, "--memory", "mmap",
                                          "--format", "XR24", "--reconnect")
    try:
        rep, kernel = follow(tmp_path, [sys.executable, "-m", "tests.vm.replugged", vivid_path, "--", *cmd],
                             name="replug")
    finally:
        if not os.path.exists(vivid_path):
            vivid.reload()
    s = json.loads(summary.read_text())
    own = record.read(str(timeline))
    assert (s["disconnects"], s["reconnects"]) == (1, 1), s
    assert s["frames_captured"] == FRAMES == len(own)

    assert [(r["sequence"], r["buffer"]) for r in kernel] == [(r["sequence"], r["buffer"]) for r in own]
    joined_as_sits_saw_them(kernel, own, copied=False)
    # the lost camera's queue at its close, the new one's at the end
    assert rep["frames"]["queues_freed"] == 2, rep["frames"]
