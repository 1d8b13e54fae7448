"""Frame journey metrics in the Prometheus exposition (sits/ebpf/export.py)."""
from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.parser import text_string_to_metric_families

from sits.ebpf.export import Exporter
from sits.ebpf.histogram import Histogram, RowKey
from sits.ebpf.points import POINTS
from sits.journey.record import new
from sits.journey.stats import Journey

MS = 1_000_000


class _Session:
    def drops(self):
        return {"ringbuf": 0}


def exporter(journey=None) -> Exporter:
    e = Exporter(_Session(), journey)
    # one probe row, so the probe family is there beside the frames
    e.agg.total[RowKey(pid=7, tid=7, probe=POINTS[0].id, key=0)] = Histogram.from_values([5000, 6000])
    return e


def samples(e: Exporter) -> dict:
    text = generate_latest(e.classic).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def ten_frames():
    """10 frames, 16 ms apart: dequeued 1 ms after capture, committed 2 ms
    later, shown at 16 ms; frame 3 repeated, frame 4 late, frame 9 not shown."""
    out = []
    for i in range(10):
        t = i * 16 * MS
        if i == 9:
            out.append(new(sequence=i, captured_ns=t, dequeued_ns=t + MS))
            continue
        out.append(new(sequence=i, captured_ns=t, dequeued_ns=t + MS, committed_ns=t + 3 * MS,
                       scanout_ns=t + 16 * MS, vblanks=2 if i == 3 else 1,
                       late_ns=MS if i == 4 else None))
    return out


def test_stage_histograms_glass_to_glass_and_drops_are_exported():
    e = exporter(Journey(display_latency_ms=4))
    e.add_frames(ten_frames())
    s = samples(e)
    assert s[("sits_frame_stage_seconds_count", (("stage", "dequeued"),))] == 10
    assert s[("sits_frame_stage_seconds_sum", (("stage", "dequeued"),))] == 10 * MS / 1e9
    assert s[("sits_frame_stage_seconds_count", (("stage", "scanout"),))] == 9
    assert s[("sits_frame_stage_seconds_sum", (("stage", "scanout"),))] == 9 * 13 * MS / 1e9
    assert ("sits_frame_stage_seconds_count", (("stage", "cuda_done"),)) not in s
    assert s[("sits_frame_glass_to_glass_seconds_sum", ())] == 9 * 20 * MS / 1e9
    assert s[("sits_frame_late_seconds_count", ())] == 1
    assert {k[1][0][1]: v for k, v in s.items() if k[0] == "sits_frame_drops_total"} == {
        "sequence_gap": 0, "not_shown": 1, "late": 1, "repeated": 1}
    # the probe family is still there
    assert [v for (name, labels), v in s.items() if name == "sits_probe_latency_seconds_count"
            and ("pid", "7") in labels and ("probe", POINTS[0].name) in labels] == [2]


def test_native_histograms_for_the_frame_stages_to_scrapers_that_ask():
    e = exporter(Journey())
    e.add_frames(ten_frames())
    text = generate_openmetrics(e.native, version="2.0.0").decode()
    native = [line for line in text.splitlines() if "schema:3" in line]
    assert any(line.startswith('sits_frame_stage_seconds{stage="dequeued"} {count:10,') for line in native)
    # the native sample carries the same labels as the classic ones
    assert any(line.startswith("sits_probe_latency_seconds{") and 'pid="7"' in line
               and f'probe="{POINTS[0].name}"' in line for line in native)


def test_no_frame_metrics_without_a_journey():
    assert not any(name.startswith("sits_frame_") for name, _ in samples(exporter()))
