import random

import pytest

from sits.ebpf.histogram import SLOTS, SUB, Histogram, slot_bounds, slot_of


def test_slots_tile_the_line_without_gaps():
    prev_hi = 0
    for s in range(SLOTS):
        lo, hi = slot_bounds(s)
        assert lo == prev_hi and hi > lo
        assert slot_of(lo) == s and slot_of(hi - 1) == s
        prev_hi = hi


def test_slot_width_is_at_most_a_sixteenth_of_its_values():
    for s in range(SUB, SLOTS):
        lo, hi = slot_bounds(s)
        assert (hi - lo) / lo <= 1 / 16


def test_huge_values_land_in_the_last_slot():
    assert slot_of(1 << 50) == SLOTS - 1


@pytest.mark.parametrize("q", [0.5, 0.95, 0.99])
def test_quantiles_within_a_few_percent_of_exact(q):
    rng = random.Random(4)
    values = [int(rng.lognormvariate(15, 0.8)) for _ in range(20000)]  # ~3 ms median
    h = Histogram.from_values(values)
    exact = sorted(values)[int(q * len(values)) - 1]
    assert h.quantile(q) == pytest.approx(exact, rel=0.03)


def test_merge_adds_counts_and_keeps_max():
    a = Histogram.from_values([100, 200])
    b = Histogram.from_values([5000])
    a.merge(b)
    assert (a.count, a.sum_ns, a.max_ns) == (3, 5300, 5000)
    assert a.quantile(1.0) == 5000


def test_empty_histogram_quantile_is_zero():
    assert Histogram().quantile(0.5) == 0.0


def test_vectorised_slots_match_the_scalar_ones():
    np = pytest.importorskip("numpy")
    from sits.ebpf.ringbuf import slots_of
    rng = random.Random(7)
    values = [0, 1, 15, 16, 17, 31, 32, 33, 1023, 1024, 1025, (1 << 41) - 1, 1 << 41, 1 << 52]
    values += [rng.randrange(1 << rng.randrange(1, 45)) for _ in range(5000)]
    got = slots_of(np.array(values, dtype=np.uint64)).tolist()
    assert got == [slot_of(v) for v in values]
