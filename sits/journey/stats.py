"""Statistics of finished frame records (record.py): a latency histogram
per stage, drops by cause (counted exactly), glass to glass, frame rates
and the display's vblank period.

State stays bounded for runs of hours: histograms (sits/ebpf/histogram.py)
and counters, plus the last few records for the live view's waterfall.
"""
from __future__ import annotations

import collections

from sits.ebpf.histogram import Histogram
from sits.errors import UsageError
from sits.journey.record import DROP_CAUSES, STAGES

DISPLAY_CHAIN = STAGES[:6]  # captured .. requeued
#: the stages a stage's span may start from, nearest first: the display
#: chain runs in STAGES order; a stage's making (the display's conversion)
#: and the CUDA stages branch off at dequeued
SPAN_FROM = {**{s: DISPLAY_CHAIN[i - 1::-1] for i, s in enumerate(DISPLAY_CHAIN) if i},
             "made": ("dequeued", "captured"),
             "cuda_submitted": ("dequeued", "captured"),
             "cuda_done": ("cuda_submitted", "dequeued", "captured")}
_SPAN_KEYS = tuple((s, f"{s}_ns", tuple(f"{p}_ns" for p in SPAN_FROM[s])) for s in SPAN_FROM)
_STAGE_KEYS = tuple((s, f"{s}_ns") for s in STAGES)


def span_name(stage: str) -> str:
    """A stage's span in words, from its usual start: "captured → dequeued"."""
    return f"{SPAN_FROM[stage][0]} → {stage}"


def spans(rec: dict) -> list[tuple[str, int, int]]:
    """(stage, start ns, end ns) for each stage the frame reached, from the
    nearest earlier stage it reached at or before that time (a copied frame
    can be requeued before its copy is committed: its requeue counts from
    dequeued)."""
    out = []
    for stage, key, froms in _SPAN_KEYS:
        end = rec[key]
        if end is None:
            continue
        for f in froms:
            start = rec[f]
            if start is not None and start <= end:
                out.append((stage, start, end))
                break
    return out


class Times:
    """How many times were seen and the earliest and latest: a rate over
    the run without keeping the times."""

    __slots__ = ("n", "lo", "hi")

    def __init__(self):
        self.n, self.lo, self.hi = 0, None, None

    def add(self, t: int) -> None:
        self.n += 1
        if self.lo is None or t < self.lo:
            self.lo = t
        if self.hi is None or t > self.hi:
            self.hi = t

    def merge(self, other: "Times") -> None:
        self.n += other.n
        if other.lo is not None and (self.lo is None or other.lo < self.lo):
            self.lo = other.lo
        if other.hi is not None and (self.hi is None or other.hi > self.hi):
            self.hi = other.hi

    def per_s(self) -> float | None:
        """Events per second: n events span n - 1 intervals."""
        if self.n < 2 or self.hi == self.lo:
            return None
        return (self.n - 1) * 1e9 / (self.hi - self.lo)


class Journey:
    """Accumulates finished frame records: add() each one, summary() any time."""

    def __init__(self, display_latency_ms: float = 0.0, recent: int = 64):
        if display_latency_ms < 0:
            raise UsageError(f"--display-latency-ms {display_latency_ms:g}: must not be negative")
        self.display_latency_ms = display_latency_ms
        self.display_latency_ns = round(display_latency_ms * 1e6)
        self.count = 0
        self.reached = dict.fromkeys(STAGES, 0)
        self.stages = {s: Histogram() for s in SPAN_FROM}
        self.glass = Histogram()  # captured -> scanout, plus the display's latency
        self.late = Histogram()   # by how much late commits missed their vblank
        self.drops = dict.fromkeys(DROP_CAUSES, 0)
        self.recent: collections.deque[dict] = collections.deque(maxlen=recent)
        # the rest is public for sits.journey.kernel, which fills a Journey
        # from the kernel's statistics instead of records
        self.captured_times = Times()   # fps in
        self.scanout_times = Times()    # fps out
        # vblank period: time on screen over vblanks on screen, exact when the
        # producer counts vblanks; else the gaps between consecutive scanouts
        self.shown_ns = self.shown_vblanks = 0
        self.scanout_gaps = Histogram()
        self.last_scanout = None

    def add(self, rec: dict) -> None:
        self.count += 1
        self.recent.append(rec)
        reached = self.reached
        for s, key in _STAGE_KEYS:
            if rec[key] is not None:
                reached[s] += 1
        hists = self.stages
        for stage, start, end in spans(rec):
            hists[stage].add(end - start)
        drops = self.drops
        drops["sequence_gap"] += rec["skipped_before"] or 0
        if rec["dequeued_ns"] is not None and rec["committed_ns"] is None:
            drops["not_shown"] += 1
        if rec["late_ns"] is not None:
            drops["late"] += 1
            self.late.add(rec["late_ns"])
        vblanks = rec["vblanks"]
        if vblanks is not None and vblanks > 1:
            drops["repeated"] += 1
        captured, scanout = rec["captured_ns"], rec["scanout_ns"]
        if captured is not None:
            self.captured_times.add(captured)
        if scanout is not None:
            self.scanout_times.add(scanout)
            if captured is not None and scanout >= captured:
                self.glass.add(scanout - captured + self.display_latency_ns)
            if vblanks and rec["replaced_ns"] is not None:
                self.shown_ns += rec["replaced_ns"] - scanout
                self.shown_vblanks += vblanks
            elif self.last_scanout is not None and scanout != self.last_scanout:
                self.scanout_gaps.add(abs(scanout - self.last_scanout))
            self.last_scanout = scanout

    def merge(self, other: "Journey") -> "Journey":
        """Add `other`'s frames to these, as if each had been add()ed here
        (an interval of the kernel's statistics, sits.journey.kernel):
        `other` follows these, and its gaps between scanouts are its own."""
        if other.display_latency_ns != self.display_latency_ns:
            raise ValueError("journeys with different display latencies do not add up")
        self.count += other.count
        for s, n in other.reached.items():
            self.reached[s] += n
        for s, h in other.stages.items():
            self.stages[s].merge(h)
        for k, n in other.drops.items():
            self.drops[k] += n
        self.glass.merge(other.glass)
        self.late.merge(other.late)
        self.recent.extend(other.recent)
        self.captured_times.merge(other.captured_times)
        self.scanout_times.merge(other.scanout_times)
        self.shown_ns += other.shown_ns
        self.shown_vblanks += other.shown_vblanks
        self.scanout_gaps.merge(other.scanout_gaps)
        if other.last_scanout is not None:
            self.last_scanout = other.last_scanout
        return self

    def vblank_ns(self) -> float | None:
        """The display's vblank period: exact from frames whose vblanks on
        screen are known; else the short end (p10) of the gaps between
        consecutive scanouts, which are whole periods."""
        if self.shown_vblanks:
            return self.shown_ns / self.shown_vblanks
        if self.scanout_gaps.count:
            return self.scanout_gaps.quantile(0.10)
        return None

    def summary(self) -> dict:
        """The "frames" object of the JSON report (issue 11's schema)."""
        vblank = self.vblank_ns()
        fps_in, fps_out = self.captured_times.per_s(), self.scanout_times.per_s()
        return {"frames": {
            "count": self.count,
            "reached": dict(self.reached),
            "stages": {s: {"count": h.count, **quantiles_ms(h, (50, 95, 99), "_ms")}
                       for s, h in self.stages.items() if h.count},
            "drops": dict(self.drops),
            "glass_to_glass_ms": quantiles_ms(self.glass, (50, 95, 99)),
            "display_latency_ms": self.display_latency_ms,
            "late_ms": quantiles_ms(self.late, (50, 99)),
            "fps_in": None if fps_in is None else round(fps_in, 3),
            "fps_out": None if fps_out is None else round(fps_out, 3),
            "vblank_ms": None if vblank is None else round(vblank / 1e6, 3),
        }}


def quantiles_ms(h: Histogram, percents, suffix: str = "") -> dict:
    """{"p50<suffix>": ms, ...}; None for an empty histogram."""
    return {f"p{p}{suffix}": round(h.quantile(p / 100) / 1e6, 3) if h.count else None
            for p in percents}
