"""`sits capture --to-kms --timeline FILE` on vivid + vkms: one record per
captured frame, whose counts are the summary's (shown, dropped by the
display, skipped sequence numbers) and whose stages agree with each other:
in order, buffers back to the driver before they are filled again, each
displayed frame replaced by the next displayed one. Zero-copy (mmap,
udmabuf) and the conversion path (a format vkms cannot scan out)."""
import json
import os

import pytest

from sits.journey import record

pytestmark = pytest.mark.vm

FRAMES, BUFFERS = 60, 4


def _order_breaks(recs, earlier, later):
    return sum(1 for r in recs if r[earlier] is not None and r[later] is not None and r[earlier] > r[later])


def _anomalies(recs) -> int:
    """frame_queue.c's rule, from the records: a committed frame's V4L2
    timestamp after its dequeue (latency then counts from the dequeue), a
    displayed frame's vblank before the time its latency counts from."""
    n = 0
    for x in recs:
        if x["committed_ns"] is None:
            continue
        believable = x["captured_ns"] is not None and x["captured_ns"] <= x["dequeued_ns"]
        n += not believable
        if x["scanout_ns"] is not None:
            n += x["scanout_ns"] < (x["captured_ns"] if believable else x["dequeued_ns"])
    return n


@pytest.mark.parametrize("fmt,memory,name", [("XR24", "mmap", "t.ndjson"), ("XR24", "udmabuf", "t.csv"),
                                             ("YUYV", "mmap", "t.ndjson")],
                         ids=["zero-copy-mmap", "zero-copy-udmabuf", "conversion"])
def test_timeline_records_match_the_summary_and_each_other(sits, fmt, memory, name, vivid_path, vkms_path,
                                                           tmp_path, no_leaks):
    path = str(tmp_path / name)
    r = sits("capture", "--to-kms", "--device", vivid_path, "--card", vkms_path, "--format", fmt,
             "--size", "320x180", "--memory", memory, "--buffers", str(BUFFERS), "--frames", str(FRAMES),
             "--timeline", path, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    recs = record.read(path)
    copy = fmt == "YUYV"
    assert s["zero_copy"] is not copy
    assert s["timeline"] == {"file": path, "records": FRAMES, "lost": 0}

    # the summary's counts, from the records
    assert len(recs) == s["frames_captured"] == FRAMES
    assert sum(x["scanout_ns"] is not None for x in recs) == s["frames_displayed"] > 0
    assert sum(x["committed_ns"] is None for x in recs) == s["frames_dropped"] == \
        s["drops"]["display"] + s["drops"].get("convert", 0) + s["drops"].get("convert_error", 0)
    assert sum(x["skipped_before"] for x in recs) == s["drops"]["sequence_gap"]

    # capture order, each frame's own sequence number and buffer
    # (vivid under a loaded TCG host can hand out a sequence number twice:
    # no gap then, as for any number that does not move forward)
    for a, b in zip(recs, recs[1:]):
        assert max(b["sequence"] - a["sequence"] - 1, 0) == b["skipped_before"]
    assert {x["pid"] for x in recs} == {os.getpid()}
    assert {x["buffer"] for x in recs} <= set(range(BUFFERS))
    # every buffer back to the driver but those the display held at the end
    assert sum(x["requeued_ns"] is None for x in recs) <= BUFFERS
    last_requeue = {}
    for x in recs:
        assert x["dequeued_ns"] >= last_requeue.get(x["buffer"], 0), x   # filled only once queued again
        if x["requeued_ns"] is not None:
            last_requeue[x["buffer"]] = x["requeued_ns"]

    # stages in order on each clock: sits' own, and vkms's vblank clock
    # (a copy: the conversion stage made it, then its buffer went back, then the copy was committed)
    pairs = ((("dequeued_ns", "made_ns"), ("made_ns", "requeued_ns"), ("made_ns", "committed_ns")) if copy
             else (("committed_ns", "requeued_ns"),))
    for earlier, later in (("dequeued_ns", "committed_ns"), ("dequeued_ns", "requeued_ns"),
                           ("scanout_ns", "replaced_ns"), *pairs):
        assert _order_breaks(recs, earlier, later) == 0, (earlier, later)
    # across clocks, vivid's and vkms's drift from sits' under the VM's
    # emulated CPU; the summary counts where (timestamp_anomalies), and the
    # records' raw times say exactly the same
    assert _anomalies(recs) == s["timestamp_anomalies"]
    for x in recs:
        committed = x["committed_ns"] is not None
        assert x["copied"] is (copy and committed)
        if not copy:
            assert x["made_ns"] is None
        elif committed:
            assert x["made_ns"] is not None   # a copy is committed only once the stage made it
        assert x["cuda_submitted_ns"] is x["cuda_done_ns"] is None
        if x["late_ns"] is not None:
            # committed late_ns after a vblank that came after its dequeue
            assert committed and x["dequeued_ns"] < x["committed_ns"] - x["late_ns"] <= x["committed_ns"]
        if not copy and x["replaced_ns"] is not None:
            assert x["requeued_ns"] >= x["replaced_ns"]   # zero-copy: back to the driver once off screen

    # each displayed frame stays until the next displayed one replaces it
    shown = [x for x in recs if x["scanout_ns"] is not None]
    for a, b in zip(shown, shown[1:]):
        assert a["replaced_ns"] == b["scanout_ns"] and a["vblanks"] >= 1, (a, b)
    assert shown[-1]["replaced_ns"] is None and shown[-1]["vblanks"] is None
