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
    """The frame queue folds every drained latency sample into a histogram:
    a run of any length holds at most the histogram's slots, and its
    percentiles stay within the histogram's 1/16 of the exact ones."""
    import random

    from sits.ebpf.histogram import SLOTS
    from sits.pipeline.frame_queue import SAMPLES, FrameQueue
    from sits.pipeline.stats import histogram_percentiles
    q = FrameQueue(-1)
    rng = random.Random(1)
    values = []
    for _ in range(50):   # 50 drains of a full sample array
        batch = [rng.uniform(5.0, 40.0) for _ in range(SAMPLES)]
        for i, v in enumerate(batch):
            q._latency[i] = v
        q.L.latency_n = SAMPLES
        q.drop_next()     # any step drains the samples
        values += [float(f"{v:.7g}") for v in batch]
    assert q.latency.count == len(values) and len(q.latency.slots) <= SLOTS
    want, got = percentiles(values), histogram_percentiles(q.latency)
    for k in ("p50", "p95", "p99"):
        assert abs(got[k] - want[k]) <= want[k] / 16, (k, got, want)
