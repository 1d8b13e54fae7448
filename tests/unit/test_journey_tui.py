"""The live view's text: head, stage table, drops, waterfall."""
import pytest

from sits.journey.record import new
from sits.journey.stats import Journey
from sits.journey.tui import render, waterfall

MS = 1_000_000
VBLANK = 16_666_667
REL = 1 / 16  # the histogram's quantiles are within one slot
#: 8 columns of sequence number, " |", "| " and 24 of tail leave 40 for bars
WIDTH_FOR_40 = 76


def chain(seq, t0, deq, commit, scan, **kw):
    """A frame whose steps to the screen take deq, commit and scan ms."""
    return new(sequence=seq, captured_ns=t0, dequeued_ns=t0 + deq * MS, committed_ns=t0 + (deq + commit) * MS,
               scanout_ns=t0 + (deq + commit + scan) * MS, **kw)


def bars(lines):
    return [line.split("|")[1] for line in lines if "|" in line]


def test_head_shows_fps_each_stage_and_drops_by_cause():
    j = Journey()
    for i in range(61):  # 60 fps in, every other frame shown: 30 fps out
        t = i * VBLANK
        j.add(chain(i, t, 2, 4, 8, skipped_before=2 if i == 8 else 0) if i % 2 == 0
              else new(sequence=i, captured_ns=t, dequeued_ns=t + MS))
    lines = render(j, width=100).splitlines()
    assert lines[0].startswith("sits probe frames  61 frames  fps in 60.0 out 30.0")
    for name, ms in (("dequeued → committed", 4), ("glass to glass", 14)):
        row = next(line for line in lines if line.startswith(name))
        assert [float(v) for v in row.split()[-2:]] == pytest.approx([ms, ms], rel=REL)
    assert "drops  sequence_gap 2  not_shown 30  late 0  repeated 0" in lines


def test_waterfall_has_the_last_frames_in_order_within_the_width():
    j = Journey()
    for i in range(20):
        j.add(chain(i, i * VBLANK, 1, 2, 10))
    lines = render(j, width=70, frames=5).splitlines()
    rows = [line for line in lines if "|" in line]
    assert [int(r.split("|")[0]) for r in rows] == [15, 16, 17, 18, 19]
    assert all(len(line) <= 70 for line in lines)


def test_bars_share_one_scale_that_the_slowest_frame_fills():
    lines = waterfall([chain(1, 0, 10, 10, 20), chain(2, VBLANK, 5, 5, 10)], WIDTH_FOR_40)
    assert bars(lines) == ["d" * 10 + "c" * 10 + "s" * 20,
                           "d" * 5 + "c" * 5 + "s" * 10 + " " * 20]


def test_a_short_step_keeps_one_column():
    rec = new(sequence=1, captured_ns=0, dequeued_ns=MS // 10, committed_ns=MS // 5, scanout_ns=40 * MS)
    assert bars(waterfall([rec], WIDTH_FOR_40)) == ["dc" + "s" * 38]


def test_cuda_stages_get_their_own_line_beside_the_display():
    rec = chain(3, 0, 10, 10, 20, cuda_submitted_ns=20 * MS, cuda_done_ns=30 * MS)
    lines = waterfall([rec], WIDTH_FOR_40)
    assert lines[-1].split("|")[0].strip() == "cuda"
    assert bars(lines) == ["d" * 10 + "c" * 10 + "s" * 20,
                           " " * 10 + "u" * 10 + "g" * 10 + " " * 10]


def test_each_line_says_glass_to_glass_or_how_the_frame_was_dropped():
    recs = [chain(1, 0, 1, 1, 10, late_ns=MS, vblanks=2, skipped_before=3),
            new(sequence=2, captured_ns=0, dequeued_ns=MS)]
    tails = [line.split("| ")[-1] for line in waterfall(recs, WIDTH_FOR_40)[2:]]
    assert tails == ["12.0 ms late x2 +3 skipped", "not shown"]


def test_the_view_fits_the_height_given_counting_cuda_lines():
    j = Journey()
    for i in range(30):  # every third frame also went through CUDA: two lines
        cuda = {"cuda_submitted_ns": i * VBLANK + 2 * MS, "cuda_done_ns": i * VBLANK + 5 * MS} if i % 3 == 0 else {}
        j.add(chain(i, i * VBLANK, 1, 2, 10, **cuda))
    head = len(render(j, width=80, frames=0).splitlines())  # everything but the frames' lines
    # the newest frames that fit in 7 rows: 24 would take two more (with CUDA)
    lines = render(j, width=80, frames=30, height=head + 7).splitlines()
    assert [line.split("|")[0].strip() for line in lines[head:]] == ["25", "26", "27", "cuda", "28", "29"]
    lines = render(j, width=80, frames=30, height=head + 8).splitlines()
    assert len(lines) == head + 8 and lines[head].split("|")[0].strip() == "24"
