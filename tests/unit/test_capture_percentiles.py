"""The summary's latency percentiles, computed without numpy, agree with
numpy.percentile's default (linear) method."""
import random

import numpy as np
import pytest

from sits.pipeline.stats import percentiles


@pytest.mark.parametrize("n", [1, 2, 3, 10, 101, 1000])
def test_percentiles_match_numpy(n):
    rng = random.Random(n)
    values = [rng.uniform(0, 40) for _ in range(n)]
    got = percentiles(values)
    for q in (50, 95, 99):
        assert got[f"p{q}"] == pytest.approx(float(np.percentile(values, q)), abs=1e-3)


def test_no_values_no_percentiles():
    assert percentiles([]) == {"p50": None, "p95": None, "p99": None}


def test_a_runs_latencies_take_bounded_memory_and_keep_their_percentiles():
    """The frame queue's sinks add every frame's latency to a histogram of
    fixed slots in C (sits_hist.h's): a run of any length holds only those, its
    count, sum and maximum are exact, and its percentiles stay within the
    histogram's 1/16 of the exact ones."""
    import random

    from sits._kernel import ffi, lib
    from sits.ebpf.histogram import SLOTS
    from sits.pipeline.display import KmsDisplay
    from sits.pipeline.stats import histogram_percentiles
    c = ffi.new("struct sits_q_hist *")
    slots = c.slots = ffi.new("uint32_t[]", SLOTS)
    rng = random.Random(1)
    values = [rng.randrange(5_000_000, 40_000_000) for _ in range(100_000)]
    for v in values:
        lib.sits_q_hist_add(c, v)
    lib.sits_q_hist_add(c, -3)     # a clock that went back counts as 0
    h = KmsDisplay._histogram(c, slots)
    assert (h.count, h.sum_ns, h.max_ns) == (len(values) + 1, sum(values), max(values))
    assert len(h.slots) <= SLOTS and h.slots[0] == 1
    want = percentiles([v / 1e6 for v in values + [0]])
    got = histogram_percentiles(h)
    for k in ("p50", "p95", "p99"):
        assert abs(got[k] - want[k]) <= want[k] / 16, (k, got, want)
