"""Several sources in one pipeline, through the C frame queue: each
source's frames reach the consumers that take that source, carrying its id
(its place in the pipeline's list); one consumer may take both; a source
whose only consumer blocks leaves the loop while the other streams."""
import pytest

from sits.errors import UsageError
from sits.pipeline.consumer import Consumer, Port
from sits.pipeline.pipeline import Pipeline
from sits.pipeline.synthetic import SyntheticCamera

FPS = 400.0


class Seen(Consumer):
    """Keeps (source, sequence, buffer) of every frame and lets it go."""

    def __init__(self, name: str):
        self.name = name
        self.frames = []

    def take(self, frame, lease):
        self.frames.append((frame.source, frame.sequence, frame.buffer))
        lease.release()


class Never(Consumer):
    """Takes nothing: its port fills."""

    name = "never"

    def ready(self) -> bool:
        return False

    def take(self, frame, lease):
        raise AssertionError("a consumer that is never ready was given a frame")


def test_each_source_to_its_own_consumer_and_both_into_one():
    with SyntheticCamera("YUYV", (64, 48), FPS, buffers=4) as a, \
            SyntheticCamera("UYVY", (32, 24), FPS / 2, buffers=3) as b:
        of_a, of_b, both = Seen("a"), Seen("b"), Seen("both")
        summary = Pipeline([a, b], consumers=[Port(of_a, "drop-oldest", 8, takes=a),
                                              Port(of_b, "drop-oldest", 8, takes=b),
                                              Port(both, "drop-oldest", 8, takes=(a, b))]).run(frames=60)
        assert of_a.frames and of_b.frames
        assert {s for s, _, _ in of_a.frames} == {0} and all(buf in a.buffers for _, _, buf in of_a.frames)
        assert {s for s, _, _ in of_b.frames} == {1} and all(buf in b.buffers for _, _, buf in of_b.frames)
        assert {s for s, _, _ in both.frames} == {0, 1}
        # one consumer of both sees each source's frames as that source's own consumer does
        assert [f for f in both.frames if f[0] == 0] == of_a.frames
        assert [f for f in both.frames if f[0] == 1] == of_b.frames
        for frames in (of_a.frames, of_b.frames):   # each source numbers its own frames
            seqs = [seq for _, seq, _ in frames]
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        per_source = summary.sources
        assert [s["captured"] for s in per_source] == [len(of_a.frames), len(of_b.frames)]
        assert summary.frames_captured == len(of_a.frames) + len(of_b.frames) >= 60
        assert not any(buf.leased for buf in a.buffers + b.buffers)   # every buffer went back


def test_a_blocked_source_leaves_the_loop_while_the_other_streams():
    with SyntheticCamera("YUYV", (64, 48), FPS, buffers=4) as a, \
            SyntheticCamera("YUYV", (64, 48), FPS, buffers=3) as b:
        of_a = Seen("a")
        summary = Pipeline([a, b], consumers=[Port(of_a, "drop-oldest", 8, takes=a),
                                              Port(Never(), "block", 1, takes=b)]).run(frames=80)
        captured_b = summary.sources[1]["captured"]
        assert captured_b == 1   # the blocking port holds one; b is not dequeued again
        assert len(of_a.frames) == summary.frames_captured - captured_b >= 79
        # b's timer stays readable: were its fd left in the loop, every pass would wake for it
        wakeups = summary.wakeups["c_loop"] + summary.wakeups["python"]
        assert wakeups <= 4 * summary.frames_captured, summary.wakeups


def test_the_timeline_names_each_frames_source_and_its_buffer_there(tmp_path):
    from sits.journey import record
    path = str(tmp_path / "t.ndjson")
    with SyntheticCamera("YUYV", (64, 48), FPS, buffers=4) as a, \
            SyntheticCamera("YUYV", (64, 48), FPS, buffers=3) as b:
        seen = Seen("both")
        summary = Pipeline([a, b], consumers=[Port(seen, "drop-oldest", 8, takes=(a, b))], timeline=path).run(frames=40)
    recs = record.read(path)
    assert len(recs) == summary.frames_captured
    assert sorted((r["source"], r["sequence"], r["buffer"]) for r in recs) == \
        sorted((s, seq, buf.index) for s, seq, buf in seen.frames)
    assert {r["buffer"] for r in recs if r["source"] == 1} <= set(range(3))   # its own numbering
    assert all(r["requeued_ns"] for r in recs if r["source"] == 1)   # each went back, recorded as such
    assert all(r["made_buffer"] is None for r in recs)


def test_a_consumer_of_a_source_the_pipeline_lacks_is_refused():
    with SyntheticCamera("YUYV", (64, 48), FPS) as a, SyntheticCamera("YUYV", (64, 48), FPS) as other:
        with pytest.raises(UsageError, match="no source of this pipeline"):
            Pipeline(a, consumers=[Port(Seen("x"), takes=other)]).run(frames=2)
