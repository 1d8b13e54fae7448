"""A sink that is all C half (sits/pipeline/sinks/hold.c, attached as
CSink("hold")): in the frame queue's steady state it takes every frame and
lets it go once its hold time has passed, a deadline of the C loop's, with
no Python a frame; each frame's record says how long its buffer was out."""
import pytest

from sits.errors import UsageError
from sits.journey import record
from sits.pipeline.csink import CSink
from sits.pipeline.pipeline import Pipeline
from sits.pipeline.synthetic import SyntheticCamera


def test_each_frame_is_held_for_its_time_in_c(tmp_path):
    path = str(tmp_path / "t.ndjson")
    with SyntheticCamera("YUYV", (64, 32), fps=200, buffers=6) as cam:
        hold_ns = 2 * cam.period_ns
        sink = CSink("hold", hold_ns=hold_ns)
        s = Pipeline(cam, consumers=[sink], timeline=path).run(frames=80)
    rep = s.sections["hold"]
    assert rep["frames"] == s.frames_captured == 80
    assert rep["released"] == rep["frames"]          # the last ones too, before the run ended
    recs = record.read(path)
    assert len(recs) == 80
    for r in recs:   # each buffer out of the driver for at least its hold
        assert r["requeued_ns"] - r["dequeued_ns"] >= hold_ns, r
    # the steady state is C's: Python woke a handful of times, not per frame
    assert s.wakeups["python"] < 10, s.wakeups
    assert s.wakeups["c_loop"] >= 80


def test_a_c_sink_is_found_by_name_and_its_fields_checked():
    with pytest.raises(UsageError, match="no C sink 'nosuch'"):
        CSink("nosuch")
    with SyntheticCamera("YUYV", (64, 32), fps=200, buffers=4) as cam:
        with pytest.raises(UsageError, match="sink hold: colour=1"):
            Pipeline(cam, consumers=[CSink("hold", colour=1)]).run(frames=1)
