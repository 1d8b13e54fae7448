"""The kernel's frame rows (struct sits_frame) as the journey's records."""
import numpy as np

from sits.ebpf.ringbuf import FRAME_DTYPE
from sits.journey.kernel import COPIED, to_records


def rows(*frames):
    a = np.zeros(len(frames), FRAME_DTYPE)
    for row, f in zip(a, frames):
        for k, v in f.items():
            row[k] = v
    return a


def test_rows_become_records_in_capture_order():
    a = rows(dict(id=7, pid=5, buffer=1, sequence=11, captured_ns=90, dequeued_ns=100, committed_ns=110,
                  scanout_ns=120, replaced_ns=153, requeued_ns=160, scanout_seq=40, replaced_seq=42,
                  late_ns=3, skipped_before=2),
             dict(id=6, pid=5, buffer=0, sequence=10, captured_ns=80, dequeued_ns=90, requeued_ns=95,
                  flags=COPIED),
             dict(id=8, pid=5, buffer=2, sequence=12, captured_ns=99))   # never dequeued
    recs = to_records(a)
    assert [r["sequence"] for r in recs] == [10, 11]
    first, second = recs
    assert first["copied"] and first["committed_ns"] is None and first["vblanks"] is None
    assert first["late_ns"] is None and first["skipped_before"] == 0
    assert not second["copied"]
    assert second["vblanks"] == 2 and second["late_ns"] == 3 and second["skipped_before"] == 2
    assert (second["captured_ns"], second["scanout_ns"], second["replaced_ns"]) == (90, 120, 153)
    assert second["pid"] == 5 and second["buffer"] == 1
