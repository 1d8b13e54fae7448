"""Results hands each frame the drawing put for its sequence, waiting for
it on the caller's thread, else the newest drawing there is."""
import threading
import time
import types

import pytest

from sits.overlay import Drawing, Results


def frame(seq):
    return types.SimpleNamespace(sequence=seq)


def test_a_frame_gets_the_drawing_put_for_its_sequence():
    r = Results(wait_s=0.5)
    a, b = Drawing().text(0, 0, "a"), Drawing().text(0, 0, "b")
    r.put(7, a)
    r.put(8, b)
    assert r(frame(7)) is a and r(frame(8)) is b and r.late == 0


def test_the_drawing_is_waited_for_until_it_comes():
    r = Results(wait_s=5)
    d = Drawing()
    threading.Timer(0.05, r.put, (3, d)).start()
    t0 = time.monotonic()
    assert r(frame(3)) is d
    assert time.monotonic() - t0 < 4


def test_a_frame_whose_drawing_does_not_come_gets_the_newest():
    r = Results(wait_s=0.01)
    assert r(frame(1)) is None and r.late == 1
    d = Drawing()
    r.put(2, d)
    assert r(frame(5)) is d and r.late == 2


def test_put_batch_pairs_drawings_with_the_batch_sequences():
    r = Results(wait_s=0)
    batch = types.SimpleNamespace(sequences=[10, 11])
    d10, d11 = Drawing(), Drawing()
    r.put_batch(batch, [d10, d11])
    assert r(frame(11)) is d11 and r(frame(10)) is d10


def test_only_keep_drawings_are_kept():
    r = Results(wait_s=0, keep=2)
    for s in range(5):
        r.put(s, Drawing())
    newest = Drawing()
    r.put(5, newest)
    assert r(frame(0)) is newest and r.late == 1


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="wait_s >= 0"):
        Results(wait_s=-1)
