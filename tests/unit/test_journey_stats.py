"""Journey statistics from hand-made frame records whose answers are known."""
import pytest

from sits.errors import UsageError
from sits.journey.record import new
from sits.journey.stats import Journey, spans

MS = 1_000_000
VBLANK = 16_666_667  # 60 Hz
#: the histogram's quantiles are within one slot: 1/16 of the value
REL = 1 / 16


def shown(seq, t0, *, deq=1, commit=3, scan=VBLANK, vblanks=1, **kw):
    """A frame captured at t0 and shown: stage times are offsets in ms
    (scan in ns), requeued 0.1 ms after it was replaced."""
    replaced = t0 + scan + (vblanks or 1) * VBLANK
    return new(pid=1, buffer=seq % 4, sequence=seq, captured_ns=t0, dequeued_ns=t0 + deq * MS,
               committed_ns=t0 + commit * MS, scanout_ns=t0 + scan, replaced_ns=replaced,
               requeued_ns=replaced + MS // 10, vblanks=vblanks, **kw)


def frames(j):
    return j.summary()["frames"]


def test_a_stage_counts_from_the_nearest_earlier_stage_the_frame_reached():
    # no commit seen: scanout counts from dequeued
    rec = new(captured_ns=0, dequeued_ns=2 * MS, scanout_ns=10 * MS)
    assert spans(rec) == [("dequeued", 0, 2 * MS), ("scanout", 2 * MS, 10 * MS)]
    # a copied frame is requeued before its copy is committed: from dequeued
    rec = new(captured_ns=0, dequeued_ns=2 * MS, requeued_ns=3 * MS, committed_ns=5 * MS, copied=True)
    assert dict((s, (a, b)) for s, a, b in spans(rec)) == {
        "dequeued": (0, 2 * MS), "committed": (2 * MS, 5 * MS), "requeued": (2 * MS, 3 * MS)}


def test_cuda_stages_count_from_dequeued_not_from_the_display():
    rec = new(captured_ns=0, dequeued_ns=1 * MS, committed_ns=2 * MS, cuda_submitted_ns=4 * MS,
              cuda_done_ns=9 * MS)
    got = {s: (a, b) for s, a, b in spans(rec)}
    assert got["cuda_submitted"] == (1 * MS, 4 * MS)
    assert got["cuda_done"] == (4 * MS, 9 * MS)


def test_stage_percentiles_of_known_spans():
    j = Journey()
    for i in range(1, 101):  # captured -> dequeued takes i ms
        j.add(new(sequence=i, captured_ns=i * VBLANK, dequeued_ns=i * VBLANK + i * MS))
    st = frames(j)["stages"]
    assert set(st) == {"dequeued"}
    assert st["dequeued"]["count"] == 100
    for p, want in ((50, 50), (95, 95), (99, 99)):
        assert st["dequeued"][f"p{p}_ms"] == pytest.approx(want, rel=REL)


def test_drops_are_counted_exactly_by_cause():
    j = Journey()
    t = 0
    recs = [
        shown(0, t),
        shown(1, t, skipped_before=2),                  # 2 sequence numbers skipped
        shown(4, t, skipped_before=3, vblanks=2),       # 3 more; shown twice
        shown(5, t, vblanks=3, late_ns=4 * MS),         # shown 3 times, and late
        shown(6, t, late_ns=1 * MS),
        new(sequence=7, captured_ns=t, dequeued_ns=t + MS, requeued_ns=t + 2 * MS),  # not shown
        new(sequence=8, captured_ns=t, dequeued_ns=t + MS),                          # not shown
        new(sequence=9, captured_ns=t),                 # never dequeued: not a display drop
        shown(10, t, vblanks=None),                     # vblanks unknown: not counted as repeated
    ]
    for r in recs:
        j.add(r)
    f = frames(j)
    assert f["count"] == len(recs)
    assert f["drops"] == {"sequence_gap": 5, "not_shown": 2, "late": 2, "repeated": 2}
    assert f["late_ms"]["p99"] == pytest.approx(4, rel=REL)
    assert f["late_ms"]["p50"] == pytest.approx(1, rel=REL)
    assert f["reached"]["dequeued"] == 8 and f["reached"]["committed"] == 6


def test_glass_to_glass_adds_the_display_latency():
    j = Journey(display_latency_ms=5)
    for i in range(20):
        j.add(shown(i, i * VBLANK, scan=20 * MS))
    g = frames(j)["glass_to_glass_ms"]
    assert g["p50"] == pytest.approx(25, rel=REL) and g["p99"] == pytest.approx(25, rel=REL)
    assert frames(Journey())["glass_to_glass_ms"] == {"p50": None, "p95": None, "p99": None}


def test_negative_display_latency_is_a_usage_error():
    with pytest.raises(UsageError):
        Journey(display_latency_ms=-1)


def test_fps_in_and_out_over_the_records_time_span():
    j = Journey()
    # 61 frames captured at 60 fps; every other one shown: 31 scanouts, 30 fps
    for i in range(61):
        t = i * VBLANK
        j.add(shown(i, t) if i % 2 == 0 else new(sequence=i, captured_ns=t, dequeued_ns=t + MS))
    f = frames(j)
    assert f["fps_in"] == pytest.approx(60, rel=1e-6)
    assert f["fps_out"] == pytest.approx(30, rel=1e-6)
    assert f["drops"]["not_shown"] == 30


def test_vblank_period_from_time_on_screen_and_else_from_scanout_gaps():
    j = Journey()
    for i in range(10):  # each on screen 2 vblanks: the period is still one
        j.add(shown(i, 2 * i * VBLANK, vblanks=2))
    assert frames(j)["vblank_ms"] == pytest.approx(VBLANK / MS, abs=1e-3)
    j = Journey()
    for i in range(30):  # vblanks unknown; most frames one vblank apart, some two
        j.add(new(sequence=i, captured_ns=i * VBLANK, scanout_ns=(i + i // 5) * VBLANK + 5 * MS))
    assert frames(j)["vblank_ms"] == pytest.approx(VBLANK / MS, rel=REL)


def test_recent_keeps_only_the_last_records():
    j = Journey(recent=3)
    for i in range(10):
        j.add(new(sequence=i, captured_ns=i))
    assert [r["sequence"] for r in j.recent] == [7, 8, 9]
    assert j.count == 10


def varied_run():
    """Records with every kind of stage, drop and gap."""
    recs = []
    for i in range(40):
        t = i * VBLANK
        if i % 7 == 3:
            recs.append(new(sequence=i, captured_ns=t, dequeued_ns=t + MS, requeued_ns=t + 2 * MS))
        elif i % 5 == 1:  # vblanks unknown: a scanout gap
            recs.append(new(sequence=i, captured_ns=t, dequeued_ns=t + MS, scanout_ns=t + 2 * VBLANK,
                            skipped_before=1))
        else:
            recs.append(shown(i, t, vblanks=1 + i % 3, late_ns=(i % 4) * MS or None, commit=2 + i % 3))
    return recs


def test_journeys_merged_are_one_journey_of_their_records():
    recs = varied_run()
    whole, first, second = Journey(display_latency_ms=2), Journey(display_latency_ms=2), Journey(display_latency_ms=2)
    for r in recs:
        whole.add(r)
    for r in recs[:17]:
        first.add(r)
    for r in recs[17:]:
        second.add(r)
    merged = first.merge(second)
    got, want = merged.summary()["frames"], whole.summary()["frames"]
    assert got["vblank_ms"] == want["vblank_ms"]
    assert got == want
    assert [r["sequence"] for r in merged.recent] == [r["sequence"] for r in recs][-64:]


def test_journeys_of_different_display_latencies_do_not_merge():
    with pytest.raises(ValueError):
        Journey(display_latency_ms=1).merge(Journey())
