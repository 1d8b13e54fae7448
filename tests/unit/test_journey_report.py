"""The frames' report: hot spots in words, JSON and markdown."""
import json

from sits.journey.record import new
from sits.journey.report import frames_report, hot_spots, to_markdown
from sits.journey.stats import Journey

MS = 1_000_000
VBLANK = 16_666_667


def summary(**over):
    """An empty run's "frames" summary with `over` put in."""
    f = Journey().summary()["frames"]
    f.update(over)
    return f


def stage(p50, p99, count=100):
    return {"count": count, "p50_ms": p50, "p95_ms": p99, "p99_ms": p99}


def test_glass_to_glass_hot_spot_in_vblanks_waited_and_late_commits():
    f = summary(glass_to_glass_ms={"p50": 20.0, "p95": 30.0, "p99": 41.0}, vblank_ms=16.7,
                stages={"scanout": stage(8.0, 33.4)},
                reached=dict(summary()["reached"], committed=50),
                drops=dict(summary()["drops"], late=6), late_ms={"p50": 3.0, "p99": 5.0})
    first = hot_spots(f)[0]
    assert first.startswith("p99 captured → scanout 41.0 ms (p50 20.0 ms)")
    assert "frames wait 2.0 vblanks (16.7 ms) from commit to scanout" in first
    assert first.endswith("12% of commits arrive after the vblank start")


def test_no_vblanks_waited_from_commit_when_no_commit_was_timed():
    f = summary(glass_to_glass_ms={"p50": 20.0, "p95": 30.0, "p99": 41.0}, vblank_ms=16.7,
                stages={"scanout": stage(8.0, 33.4)})  # scanout counted from dequeued
    assert hot_spots(f)[0] == "p99 captured → scanout 41.0 ms (p50 20.0 ms)"


def test_slowest_step_is_on_the_way_to_the_screen():
    f = summary(glass_to_glass_ms={"p50": 20.0, "p95": 30.0, "p99": 41.0},
                stages={"dequeued": stage(1.0, 2.0), "committed": stage(12.0, 30.0),
                        "scanout": stage(7.0, 9.0), "requeued": stage(40.0, 90.0)})
    assert ("slowest step to the screen: dequeued → committed, p99 30.0 ms (p50 12.0 ms), "
            "60% of the median captured → scanout") in hot_spots(f)


def test_each_drop_cause_in_words_with_its_count_and_none_when_zero():
    assert hot_spots(summary()) == []
    f = summary(drops={"sequence_gap": 3, "not_shown": 4, "late": 1, "repeated": 2},
                reached=dict(summary()["reached"], dequeued=40, committed=36),
                late_ms={"p50": 2.0, "p99": 2.0})
    spots = hot_spots(f)
    assert "3 frames skipped by the driver (sequence gaps: no buffer was queued)" in spots
    assert "4 of 40 dequeued frames never committed to the display" in spots
    assert "1 commit late: after the start of a vblank the frame could have made, by p50 2.0 ms, p99 2.0 ms" in spots
    assert "2 frames shown for more than one vblank" in spots


def test_no_display_is_said_as_such_not_as_frames_lost():
    f = summary(drops=dict(summary()["drops"], not_shown=30),
                reached=dict(summary()["reached"], dequeued=30))
    assert hot_spots(f) == ["no frame reached a display (30 dequeued)"]


def test_fps_out_below_fps_in_is_a_hot_spot():
    assert hot_spots(summary(fps_in=60.0, fps_out=30.0)) == [
        "60.0 fps in, 30.0 fps out: the display shows 50% of the frames"]
    assert hot_spots(summary(fps_in=60.0, fps_out=60.0)) == []


def run_with_late_frames() -> Journey:
    """100 frames at 60 fps, committed 4 ms after capture; every tenth one
    late by 2 ms and shown a vblank later."""
    j = Journey()
    for i in range(100):
        t, late = i * VBLANK, i % 10 == 0
        scan = t + (2 if late else 1) * VBLANK
        j.add(new(sequence=i, captured_ns=t, dequeued_ns=t + MS, committed_ns=t + 4 * MS, scanout_ns=scan,
                  replaced_ns=scan + VBLANK, requeued_ns=scan + VBLANK + MS, vblanks=1,
                  late_ns=2 * MS if late else None))
    return j


def test_report_from_records_and_its_markdown():
    report = frames_report(run_with_late_frames())
    assert json.loads(json.dumps(report)) == report
    f = report["frames"]
    assert f["drops"]["late"] == 10
    assert f["hot_spots"][0].endswith("10% of commits arrive after the vblank start")
    md = to_markdown(report)
    assert md.startswith("## Where frames lose time\n")
    for spot in f["hot_spots"]:
        assert f"- {spot}\n" in md
    assert "| committed | dequeued → committed | 100 |" in md
    assert "cuda" not in md  # no frame reached a CUDA stage: no row
    assert "Drops: sequence_gap 0, not_shown 0, late 10, repeated 0" in md
    # an audit report that carries the frames
    assert to_markdown({"schema": "sits.probe.audit/1", "frames": f}) == md


def test_an_audit_report_that_carries_frames_has_the_section():
    from sits.cli.probe.audit import audit_markdown
    audit = {"duration_s": 1.0, "kernel": {"release": "6.18", "machine": "x86_64"}, "command": None,
             "probes": [], "rows": [], "thresholds": {},
             "hot_spots": {"flagged": [], "by_p95": [], "by_p99": [], "by_total": []},
             "drops": {"ringbuf": 0}, "overhead": {"programs": []}}
    assert "Where frames lose time" not in audit_markdown(audit)
    frames = frames_report(run_with_late_frames())
    assert to_markdown(frames) in audit_markdown(dict(audit, **frames))
