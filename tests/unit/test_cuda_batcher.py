"""The latency-budget batcher, against a simulated clock and GPU."""
import math

import pytest

from sits.cuda.batcher import BatchCostModel, DynamicBatcher
from sits.errors import UsageError


def simulate(rate_hz, budget, true_fixed, true_per, frames=2000, max_batch=64, jitter=0.0):
    """Frames arrive at `rate_hz`; a flushed batch runs on a serial GPU with
    the true cost. Returns (latencies, batch sizes)."""
    b = DynamicBatcher(budget, max_batch=max_batch, cost=BatchCostModel(1e-3, 1e-4))
    arrivals = [i / rate_hz + (jitter * ((i * 7919) % 13) / 13 if jitter else 0.0) for i in range(frames)]
    arrivals.sort()
    gpu_free = 0.0
    latencies, sizes = [], []
    i = 0
    now = 0.0
    while i < len(arrivals) or len(b):
        # Next event: an arrival or the batcher's deadline (the poll timeout).
        next_arrival = arrivals[i] if i < len(arrivals) else math.inf
        d = b.deadline()
        d = math.inf if d is None else d
        now = max(now, min(next_arrival, d))
        if next_arrival <= now and i < len(arrivals):
            b.add(arrivals[i], now)
            i += 1
        if b.due(now):
            batch = b.take()
            start = max(now, gpu_free)
            took = true_fixed + true_per * len(batch)
            gpu_free = start + took
            b.observe(len(batch), took)
            sizes.append(len(batch))
            latencies.extend(gpu_free - t for t in batch)
    return latencies, sizes


def test_never_past_budget_at_steady_rates():
    for rate in (30, 240, 1000, 5000):
        lat, sizes = simulate(rate, 12e-3, 400e-6, 60e-6, frames=3000)
        assert max(lat[200:]) <= 12e-3, (rate, max(lat[200:]))  # after the model has learnt
        assert len(lat) == 3000


def test_batches_grow_with_rate():
    _, slow = simulate(60, 12e-3, 400e-6, 60e-6)
    _, fast = simulate(5000, 12e-3, 400e-6, 60e-6)
    assert max(slow) == 1
    assert sum(fast[5:]) / len(fast[5:]) > 20


def test_cap_fits_budget():
    b = DynamicBatcher(5e-3, max_batch=512, cost=BatchCostModel(1e-3, 1e-4), margin_s=0.5e-3)
    assert b.cap == 35  # (5 - 0.5 - 1) ms / 0.1 ms
    for k in range(35):
        b.add(k, 0.0)
    assert b.due(0.0)
    assert b.take() == list(range(35))
    assert len(b) == 0 and b.deadline() is None


def test_deadline_and_timeout():
    b = DynamicBatcher(10e-3, cost=BatchCostModel(1e-3, 0.0), margin_s=0.0)
    b.add("a", 1.0)
    assert b.deadline() == pytest.approx(1.0 + 10e-3 - 1e-3)
    assert b.timeout(1.002) == pytest.approx(7e-3)
    assert not b.due(1.008)
    assert b.due(1.0091)


def test_cost_model_fits_two_terms():
    m = BatchCostModel(1.0, 1.0)
    for n in (1, 8, 32, 4, 64, 16) * 5:
        m.observe(n, 300e-6 + 25e-6 * n)
    assert m.fixed_s == pytest.approx(300e-6, rel=1e-6)
    assert m.per_frame_s == pytest.approx(25e-6, rel=1e-6)


def test_bad_budget():
    with pytest.raises(UsageError):
        DynamicBatcher(0)
    with pytest.raises(UsageError):
        DynamicBatcher(1e-3, max_batch=0)
