"""Dynamic batching under a latency budget (pure logic, no CUDA).

A frame that arrives at t must have its batch's results by t + budget. The
batcher keeps a cost model of one batch (t(n) = fixed + n * per_frame,
fitted online from measured batches) and flushes the queue at the latest
moment that still lets its oldest frame finish inside the budget, or at
once when the queue reaches the largest batch that fits the budget. The
poll loop sleeps until `deadline()`; nothing busy-waits.
"""
from __future__ import annotations

import collections
import math

from sits.errors import UsageError


class BatchCostModel:
    """Seconds one batch of n frames takes, t(n) = fixed + n * per_frame, fitted
    by exponentially weighted least squares over observed batches."""

    def __init__(self, fixed_s: float = 200e-6, per_frame_s: float = 20e-6, decay: float = 0.9):
        self.fixed_s = fixed_s
        self.per_frame_s = per_frame_s
        self.decay = decay
        self._s = [0.0] * 5  # sums of w, w*n, w*n*n, w*t, w*n*t

    def __call__(self, n: int) -> float:
        return self.fixed_s + n * self.per_frame_s

    def observe(self, n: int, seconds: float) -> None:
        d = self.decay
        s = self._s
        for i, v in enumerate((1.0, n, n * n, seconds, n * seconds)):
            s[i] = s[i] * d + v
        w, wn, wnn, wt, wnt = s
        det = w * wnn - wn * wn
        if det > 1e-9 * max(1.0, w * wnn):  # batches of different sizes seen: fit both terms
            per = (w * wnt - wn * wt) / det
            fixed = (wt - per * wn) / w
            if per >= 0 and fixed >= 0:
                self.per_frame_s, self.fixed_s = per, fixed
                return
        # Only one batch size seen (or a fit that makes no sense): keep the
        # split, scale both terms to the mean observation.
        mean_n, mean_t = wn / w, wt / w
        model = self(mean_n)
        if model > 0:
            k = mean_t / model
            self.fixed_s *= k
            self.per_frame_s *= k


class DynamicBatcher:
    def __init__(self, latency_budget_s: float, max_batch: int = 64, cost: BatchCostModel | None = None,
                 margin_s: float = 0.5e-3):
        if latency_budget_s <= 0 or not math.isfinite(latency_budget_s):
            raise UsageError(f"latency budget {latency_budget_s} s is not a positive time")
        if max_batch < 1:
            raise UsageError(f"max batch {max_batch} is not positive")
        self.budget = latency_budget_s
        self.max_batch = max_batch
        self.cost = cost or BatchCostModel()
        self.margin = margin_s
        self._queue: collections.deque = collections.deque()  # (arrival, item)

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def cap(self) -> int:
        """The largest batch whose cost still fits the budget (at least 1)."""
        room = self.budget - self.margin - self.cost.fixed_s
        per = self.cost.per_frame_s
        fit = int(room / per) if per > 0 else self.max_batch
        return max(1, min(self.max_batch, fit))

    def add(self, item, now: float) -> None:
        self._queue.append((now, item))

    def deadline(self) -> float | None:
        """When the queue must be flushed (monotonic seconds); None when empty."""
        if not self._queue:
            return None
        n = min(len(self._queue), self.cap)
        if len(self._queue) >= self.cap:
            return -math.inf
        return self._queue[0][0] + self.budget - self.margin - self.cost(n)

    def timeout(self, now: float) -> float | None:
        """Seconds the poll loop may sleep before `due()` (None: no deadline)."""
        d = self.deadline()
        return None if d is None else max(0.0, d - now)

    def due(self, now: float) -> bool:
        d = self.deadline()
        return d is not None and now >= d

    def take(self) -> list:
        """The oldest frames, up to `cap`, as one batch."""
        n = min(len(self._queue), self.cap)
        return [self._queue.popleft()[1] for _ in range(n)]

    def observe(self, n: int, seconds: float) -> None:
        self.cost.observe(n, seconds)
