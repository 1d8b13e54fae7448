"""What a pipeline run reports: the summary and its percentiles."""
from dataclasses import dataclass, field

#: the last samples a CUDA latency report is taken over (CudaConsumer's
#: window, and the frame queue's for the conversions it runs in C)
CUDA_LATENCY_WINDOW = 100_000


@dataclass
class Summary:
    frames_captured: int = 0
    frames_displayed: int = 0
    frames_dropped: int = 0      # the display's: a newer frame came first, or no display
    buffer_errors: int = 0
    v4l2_errors: dict = field(default_factory=dict)
    # every drop by cause: "sequence_gap" (the driver skipped sequence
    # numbers: no buffer was queued), "display" (as frames_dropped), and one
    # key per consumer whose queue overflowed (its name)
    drops: dict = field(default_factory=dict)
    zero_copy: bool = True
    cpu_copies_per_frame: int = 0
    memory: str = "mmap"
    format: str = ""
    display_format: str = ""
    size: str = ""
    mode: str = ""
    device: str = ""
    card: str = ""
    connector: str = ""
    verify: dict = field(default_factory=lambda: {"checked": 0, "mismatched": 0})
    latency_ms: dict = field(default_factory=dict)
    # DQBUF returned -> atomic commit issued: the span GStreamer's latency
    # tracer reports (v4l2src push -> kmssink), for a like-for-like comparison
    dequeue_to_commit_ms: dict = field(default_factory=dict)
    cpu_ms_per_frame: float = 0.0
    fps: float = 0.0
    capture_fps: float = 0.0   # frames captured a second, the first frame's dequeue to the last's
    duration_s: float = 0.0
    snapshot: str | None = None
    stopped_by: str = ""
    timestamp_anomalies: int = 0
    hotplug_events: int = 0
    disconnects: int = 0    # the camera vanished (with --reconnect the run goes on)
    reconnects: int = 0     # ... and came back
    c_loop_commits: int = 0  # frames committed by the display's C half (no out-fence); the rest by Python
    # the loop's wake-ups: the C loop's epoll_wait returns and Python's passes
    # (each a wait of its own); a frame costs one, two while frames outpace the flips
    wakeups: dict = field(default_factory=lambda: {"c_loop": 0, "python": 0})
    # --timeline: {"file", "records" (one per captured frame), "lost" (never, unless a bug)}
    timeline: dict | None = None
    # stage name -> {"frames" made, "errors", "dropped" (a newer frame came first),
    # "work_ms_mean", "work_ms_max" (its worker's time a frame)}
    stages: dict = field(default_factory=dict)
    # each source of the run, the camera first (a frame's `source` is its place):
    # {"device", "captured", "sequence_gap", "buffer_errors", "requeue_errors"}
    sources: list = field(default_factory=list)
    # consumer name -> {"taken", "dropped" (by its policy), "left" (queued at the stop)}
    consumers: dict = field(default_factory=dict)
    # consumers' own sections (Consumer.report(): e.g. "cuda"), top-level keys in as_dict()
    sections: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d.update(d.pop("sections"))
        return d


def percentiles(values: list[float]) -> dict:
    """p50/p95/p99 with linear interpolation between the closest ranks
    (numpy.percentile's default), without numpy: the zero-copy path never
    touches pixels, so a capture run need not import it at all."""
    if not values:
        return {"p50": None, "p95": None, "p99": None}
    a = sorted(values)
    out = {}
    for q in (50, 95, 99):
        pos = (len(a) - 1) * q / 100
        lo = int(pos)
        hi = min(lo + 1, len(a) - 1)
        out[f"p{q}"] = round(a[lo] + (a[hi] - a[lo]) * (pos - lo), 3)
    return out


def histogram_percentiles(h) -> dict:
    """p50/p95/p99 in ms of a Histogram of ns (sits/ebpf/histogram.py), as
    percentiles() gives them for a list: a run's own figures, in memory
    that does not grow with the run."""
    from sits.journey.stats import quantiles_ms
    return quantiles_ms(h, (50, 95, 99))
