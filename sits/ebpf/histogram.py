"""The latency histogram the BPF programs fill (sits_probe.h), in user space.

Slots: value v (ns) < 16 is slot v; above, e = floor(log2 v) and
m = (v >> (e-4)) - 16 give slot 16*(e-3) + m, i.e. 16 linear sub-buckets per
power of two. A quantile is interpolated inside its slot, so its error is
below the slot's width: at most 1/16 of the value, typically far less.

No numpy on purpose: the interval path of `probe top`/`audit` must not pay
numpy's import time and memory. The slot rule is sits/include/sits_hist.h's,
through the kernel binding (slot_of).
"""
from __future__ import annotations

import collections

from sits._kernel import lib
from sits.ebpf import header

SUB_BITS = header.SUB_BITS
SUB = 1 << SUB_BITS
SLOTS = header.HIST_SLOTS

#: a row of the histogram maps: struct sits_hist_key without its epoch
RowKey = collections.namedtuple("RowKey", "pid tid probe key")


def slot_of(v: int) -> int:
    """The slot a value (ns) falls in: sits_hist_slot(), the BPF programs'
    and the frame queue's rule; a negative value (a clock step) is slot 0."""
    return lib.sits_hist_slot(v) if v > 0 else 0


def slot_bounds(slot: int) -> tuple[int, int]:
    """[lo, hi) in ns of a slot."""
    if slot < SUB:
        return slot, slot + 1
    e = (slot >> SUB_BITS) + SUB_BITS - 1
    m = slot & (SUB - 1)
    shift = e - SUB_BITS
    return (SUB + m) << shift, (SUB + m + 1) << shift


class Histogram:
    """count, sum, max and sparse slot counts of one row (one interval or a run)."""

    __slots__ = ("count", "sum_ns", "max_ns", "slots")

    def __init__(self, count: int = 0, sum_ns: int = 0, max_ns: int = 0,
                 slots: dict[int, int] | None = None):
        self.count = count
        self.sum_ns = sum_ns
        self.max_ns = max_ns
        self.slots = slots if slots is not None else {}

    @classmethod
    def from_values(cls, values) -> "Histogram":
        h = cls()
        for v in values:
            h.add(int(v))
        return h

    def add(self, v: int, n: int = 1) -> None:
        self.count += n
        self.sum_ns += v * n
        if v > self.max_ns:
            self.max_ns = v
        s = slot_of(v)
        self.slots[s] = self.slots.get(s, 0) + n

    def merge(self, other: "Histogram") -> "Histogram":
        self.count += other.count
        self.sum_ns += other.sum_ns
        if other.max_ns > self.max_ns:
            self.max_ns = other.max_ns
        slots = self.slots
        for s, n in other.slots.items():
            slots[s] = slots.get(s, 0) + n
        return self

    def copy(self) -> "Histogram":
        return Histogram(self.count, self.sum_ns, self.max_ns, dict(self.slots))

    def quantile(self, q: float) -> float:
        """The q-quantile in ns (0 for an empty histogram), interpolated
        linearly by rank inside its slot and never above the maximum."""
        total = sum(self.slots.values())
        if not total:
            return 0.0
        rank = q * total
        seen = 0
        for s in sorted(self.slots):
            n = self.slots[s]
            if seen + n >= rank:
                lo, hi = slot_bounds(s)
                if s < SUB:
                    return float(lo)
                frac = (rank - seen) / n
                return min(lo + frac * (hi - lo), float(self.max_ns) if self.max_ns else float(hi))
            seen += n
        return float(self.max_ns)

    def mean(self) -> float:
        return self.sum_ns / self.count if self.count else 0.0

    def buckets(self) -> list[tuple[int, int, int]]:
        """(lo_ns, hi_ns, count) of the non-empty slots, in order."""
        return [(*slot_bounds(s), self.slots[s]) for s in sorted(self.slots)]

    def log2_buckets(self) -> list[tuple[int, int]]:
        """(upper bound ns, count) per power of two: the small histogram
        `probe top` draws for the selected row."""
        out: dict[int, int] = {}
        for s, n in self.slots.items():
            lo, _ = slot_bounds(s)
            top = 1 << lo.bit_length()
            out[top] = out.get(top, 0) + n
        return sorted(out.items())

    def __repr__(self):
        return (f"<Histogram n={self.count} p50={self.quantile(0.5):.0f}ns "
                f"max={self.max_ns}ns>")
