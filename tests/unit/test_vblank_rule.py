"""The late rule (sits/include/sits_vblank.h), one for the frame journey's
BPF and the display sink's C, through the binding: a frame is late when a
vblank of the grid came after its dequeue and before its commit's start."""
from sits._kernel import lib

P = 16_666_667          # 60 Hz
V = 10_000_000_000      # a vblank seen


def test_the_grid_runs_both_ways_from_the_vblank_seen():
    assert lib.sits_vblank_before(V, P, V) == V
    assert lib.sits_vblank_before(V, P, V + 3 * P + 5) == V + 3 * P
    assert lib.sits_vblank_before(V, P, V - 1) == V - P          # before the vblank seen
    assert lib.sits_vblank_before(V, P, V - 2 * P) == V - 2 * P
    assert lib.sits_vblank_before(V, 0, V + 5 * P) == V          # no period: the vblank seen
    assert lib.sits_vblank_before(0, P, V) == 0                  # none seen


def test_late_by_the_time_since_the_vblank_between_dequeue_and_commit():
    assert lib.sits_late_ns(V, P, V + 10, V + P + 300) == 300    # the next vblank came between
    assert lib.sits_late_ns(V, P, V + 10, V + P - 1) == 0        # committed before it
    assert lib.sits_late_ns(V, P, V + P, V + P + 300) == 0       # dequeued at it: not one it could make
    assert lib.sits_late_ns(V, P, V - 2 * P + 10, V - 300) == P - 300   # on the grid before the vblank seen
    assert lib.sits_late_ns(0, P, V + 10, V + P + 300) == 0      # no vblank seen yet
    assert lib.sits_late_ns(V, P, 0, V + P + 300) == 0           # no dequeue time
