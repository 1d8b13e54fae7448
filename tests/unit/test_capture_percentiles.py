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
