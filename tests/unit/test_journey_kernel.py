"""The kernel's frame rows (struct sits_frame) as the journey's records."""
import numpy as np
import pytest

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


def test_an_interval_of_the_kernels_statistics_is_a_journey():
    from sits.ebpf.histogram import Histogram
    from sits.journey.kernel import EPOCH_DTYPE, from_epoch
    from sits.journey.record import DROP_CAUSES, STAGES
    v = np.zeros(2, EPOCH_DTYPE)   # two CPUs' copies
    st = v["stats"]
    st["count"] = (3, 4)
    st["driver_errors"] = (1, 0)
    st["reached"][0] = (3, 3, 2, 2, 1, 3)
    st["reached"][1] = (4, 4, 4, 4, 4, 4)
    st["drops"][0] = (5, 1, 0, 0)
    st["drops"][1] = (0, 0, 2, 1)
    st["captured_n"], st["captured_lo"], st["captured_hi"] = (3, 0), (100, 0), (300, 0)
    st["scanout_n"], st["scanout_lo"], st["scanout_hi"] = (2, 4), (150, 120), (250, 450)
    st["shown_ns"], st["shown_vblanks"] = (-5, 40), (1, 2)
    dequeued = Histogram.from_values([1000, 2000, 3000])
    for cpu, values in ((0, [1000, 2000]), (1, [3000])):
        h = Histogram.from_values(values)
        row = v["hists"][cpu][STAGES.index("dequeued")]
        row["count"], row["sum_ns"], row["max_ns"] = h.count, h.sum_ns, h.max_ns
        for s, n in h.slots.items():
            row["slots"][s] = n
    j = from_epoch(v)
    assert j.count == 7
    assert [j.reached[s] for s in STAGES[:6]] == [7, 7, 6, 6, 5, 7]
    assert [j.drops[c] for c in DROP_CAUSES] == [5, 1, 2, 1]
    assert (j.captured_times.n, j.captured_times.lo, j.captured_times.hi) == (3, 100, 300)
    assert (j.scanout_times.n, j.scanout_times.lo, j.scanout_times.hi) == (6, 120, 450)   # (a CPU's 0 is no time)
    assert (j.shown_ns, j.shown_vblanks) == (35, 3)
    got = j.stages["dequeued"]
    assert (got.count, got.sum_ns, got.max_ns, got.slots) == (3, 6000, 3000, dequeued.slots)
    assert j.stages["committed"].count == 0 and j.glass.count == 0


@pytest.mark.parametrize("name", ["s.ndjson", "s.csv"])
def test_rows_written_as_they_come_read_back_as_their_records(tmp_path, name):
    from sits.journey import record
    from sits.journey.kernel import to_rows
    a = rows(dict(id=1, pid=5, buffer=1, sequence=11, captured_ns=90, dequeued_ns=100, committed_ns=110,
                  scanout_ns=120, replaced_ns=153, requeued_ns=160, scanout_seq=40, replaced_seq=41,
                  late_ns=3, flags=COPIED),
             dict(id=2, pid=5, buffer=0, sequence=12, captured_ns=2**63 + 5, dequeued_ns=2**63 + 6))
    path = str(tmp_path / name)
    with record.Writer(path) as w:
        w.write_rows(to_rows(a))
        assert w.written == 2
    got = record.read(path)
    assert got == to_records(a)
    assert got[0]["copied"] is True and got[1]["copied"] is False
    assert got[1]["committed_ns"] is None and got[1]["vblanks"] is None and got[1]["cuda_done_ns"] is None
    assert got[1]["captured_ns"] == 2**63 + 5
