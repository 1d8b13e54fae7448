"""Prometheus exposition of the probe histograms (prometheus-client).

One metric family, `sits_probe_latency_seconds`, labelled by pid, comm,
probe and key, cumulative since start; with a frame journey
(sits/journey/stats.py) also `sits_frame_stage_seconds` by stage,
`sits_frame_glass_to_glass_seconds`, `sits_frame_late_seconds` and the
counter `sits_frame_drops_total` by cause. Scrapers get classic buckets (one
per power of two of nanoseconds: exact, since our slots nest in them, except
that a bound counts the values below it, not equal to it) and,
when they ask for OpenMetrics 2.0 (Prometheus with native histograms on),
native histograms too. Ours have 16 linear sub-buckets per power of two;
native schema 3 has 8 exponential ones, and each of our slots is counted in
the native bucket that holds its midpoint, so a native bucket's count is off
by at most the slots straddling its boundary. Drops are a counter family.
"""
from __future__ import annotations

import threading

# prometheus_client (~40 ms to import) is imported where it is used, so
# that `sits probe export` attaches its probes first.
from sits.ebpf.histogram import Histogram
from sits.ebpf.report import Aggregate
from sits.errors import UsageError

NATIVE_SCHEMA = 3
#: sits_probe_latency_seconds' labels: fields of a report row (Aggregate.row)
PROBE_LABELS = ("pid", "comm", "probe", "key")
#: classic bucket bounds: 2^10 ns (~1 µs) .. 2^36 ns (~69 s)
CLASSIC_EXP = range(10, 37)


def parse_listen(listen: str) -> tuple[str, int]:
    addr, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(f"--listen {listen!r}: expected ADDR:PORT")
    return addr.strip("[]") or "0.0.0.0", int(port)


def classic_buckets(h: Histogram) -> list[tuple[str, int]]:
    """Cumulative (le seconds, count) at powers of two of ns, then +Inf.
    A slot [lo, hi) with hi <= 2^e lies entirely below that bound."""
    from sits.ebpf.histogram import slot_bounds
    per_exp: dict[int, int] = {}
    for s, n in h.slots.items():
        _, hi = slot_bounds(s)
        e = max((hi - 1).bit_length(), CLASSIC_EXP[0])
        per_exp[e] = per_exp.get(e, 0) + n
    out, acc = [], 0
    for e in CLASSIC_EXP:
        acc += per_exp.get(e, 0)
        out.append((repr((1 << e) / 1e9), acc))
    out.append(("+Inf", h.count))
    return out


def native(h: Histogram) -> "NativeHistogram":  # noqa: F821
    """The histogram as a native histogram of schema 3, in seconds."""
    import math

    from sits.ebpf.histogram import slot_bounds
    factor = 2 ** NATIVE_SCHEMA
    idx_counts: dict[int, int] = {}
    zero = 0
    for s, n in h.slots.items():
        lo, hi = slot_bounds(s)
        mid = (lo + hi) / 2 / 1e9
        if lo == 0:
            zero += n
            continue
        # bucket i holds (base^(i-1), base^i], base = 2^(2^-schema)
        i = math.ceil(math.log2(mid) * factor)
        idx_counts[i] = idx_counts.get(i, 0) + n
    spans, deltas = [], []
    prev_idx, prev_count = None, 0
    for i in sorted(idx_counts):
        if prev_idx is None:
            spans.append([i, 1])
        elif i == prev_idx + 1:
            spans[-1][1] += 1
        else:
            spans.append([i - prev_idx - 1, 1])
        deltas.append(idx_counts[i] - prev_count)
        prev_idx, prev_count = i, idx_counts[i]
    from prometheus_client.samples import BucketSpan, NativeHistogram
    return NativeHistogram(count_value=h.count, sum_value=h.sum_ns / 1e9, schema=NATIVE_SCHEMA,
                           zero_threshold=1e-9, zero_count=zero,
                           pos_spans=[BucketSpan(o, n) for o, n in spans] or None,
                           pos_deltas=deltas or None)


def _add_histogram(fam, labels: dict[str, str], h: Histogram, with_native: bool) -> None:
    """One histogram into a HistogramMetricFamily; `labels` {name: value}
    in the order of the names the family was built with."""
    fam.add_metric(list(labels.values()), classic_buckets(h), h.sum_ns / 1e9)
    if with_native:
        fam.add_sample(fam.name, labels, 0, None, None, native(h))


def frame_families(journey, with_native: bool):
    """The metric families of a frame journey (a sits.journey.stats.Journey)."""
    from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
    stages = HistogramMetricFamily("sits_frame_stage_seconds",
                                   "Time a frame took to reach a stage from the stage before it",
                                   labels=["stage"])
    for stage, h in journey.stages.items():
        if h.count:
            _add_histogram(stages, {"stage": stage}, h, with_native)
    yield stages
    for name, doc, h in (("sits_frame_glass_to_glass_seconds",
                          "Captured to scanout, plus the display's latency", journey.glass),
                         ("sits_frame_late_seconds",
                          "How long after a vblank it could have made a late frame was committed",
                          journey.late)):
        fam = HistogramMetricFamily(name, doc, labels=[])
        _add_histogram(fam, {}, h, with_native)
        yield fam
    drops = CounterMetricFamily("sits_frame_drops", "Frames dropped, by cause", labels=["cause"])
    for cause, n in journey.drops.items():
        drops.add_metric([cause], n)
    yield drops


class _Collector:
    """A prometheus_client collector (its registry only calls collect())."""

    def __init__(self, exporter: "Exporter", with_native: bool):
        self.exporter = exporter
        self.with_native = with_native

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
        journey = self.exporter.journey
        with self.exporter.lock:
            rows = [(self.exporter.agg.row(k, h), h) for k, h in self.exporter.agg.total.items()]
            drops = dict(self.exporter.drops)
            frames = list(frame_families(journey, self.with_native)) if journey is not None else []
        fam = HistogramMetricFamily("sits_probe_latency_seconds",
                                    "Latency measured in the kernel by sits probes",
                                    labels=PROBE_LABELS)
        for r, h in rows:
            _add_histogram(fam, {k: str(r[k]) for k in PROBE_LABELS}, h, self.with_native)
        yield fam
        c = CounterMetricFamily("sits_probe_drops", "Samples not counted, by cause",
                                labels=["cause"])
        for cause, n in drops.items():
            c.add_metric([cause], n)
        yield c
        yield from frames


class Exporter:
    """Accumulates a session's intervals (and, given a Journey, its frame
    records); serves them on /metrics."""

    def __init__(self, session, journey=None):
        self.session = session
        self.journey = journey
        self.agg = Aggregate(session)
        self.lock = threading.Lock()
        self.drops = session.drops()
        from prometheus_client.registry import CollectorRegistry
        self.classic = CollectorRegistry(auto_describe=False)
        self.classic.register(_Collector(self, with_native=False))
        self.native = CollectorRegistry(auto_describe=False)
        self.native.register(_Collector(self, with_native=True))

    def update(self) -> None:
        rows, elapsed = self.session.collect()
        drops = self.session.drops()
        with self.lock:
            self.agg.add(rows, elapsed)
            self.drops = drops

    def add_frames(self, records) -> None:
        """Finished frame records into the journey, between scrapes."""
        with self.lock:
            for rec in records:
                self.journey.add(rec)

    def add_journey(self, part) -> None:
        """An interval of the kernel's frame statistics (a Journey, from
        sits.journey.kernel's collect()), between scrapes."""
        with self.lock:
            self.journey.merge(part)

    def wsgi_app(self):
        from prometheus_client import make_wsgi_app
        classic = make_wsgi_app(self.classic)
        native = make_wsgi_app(self.native)

        def app(environ, start_response):
            accept = environ.get("HTTP_ACCEPT", "")
            wants_native = "openmetrics-text" in accept and "version=2" in accept
            return (native if wants_native else classic)(environ, start_response)
        return app

    def serve(self, addr: str, port: int):
        """Start the HTTP server in a thread; returns it (shutdown() stops it)."""
        from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
        from socketserver import ThreadingMixIn

        class _Server(ThreadingMixIn, WSGIServer):
            daemon_threads = True

        class _Quiet(WSGIRequestHandler):
            def log_message(self, *args):
                pass

        try:
            server = make_server(addr, port, self.wsgi_app(), _Server, handler_class=_Quiet)
        except OSError as exc:
            raise UsageError(f"--listen {addr}:{port}: {exc.strerror}") from exc
        threading.Thread(target=server.serve_forever, name="sits-metrics", daemon=True).start()
        return server
