"""The chain on a GPU: a memfd source (the same Frame and Lease objects as
V4L2) -> Pipeline (the one event loop) -> CudaConsumer -> tensors.

Each buffer registered once, output equal to the numpy oracle, leases
released only after the CUDA event, sequence and timestamps carried,
batching under a latency budget, a stop with a batch in flight that leaves
nothing behind, out of memory as one clear error.
"""
import gc
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from sits.cuda import reference as R
from sits.cuda.formats import OutputSpec
from sits.pipeline.cuda import CudaConsumer
from sits.pipeline.pipeline import Pipeline
from sits.pipeline.synthetic import SyntheticCamera

pytestmark = pytest.mark.cuda

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def make_pipeline(source, consumers):
    return Pipeline(source, consumers=consumers)


def section(summary, key):
    return summary.as_dict()[key]


class Recorder:
    """What the consumer was given (take) and gave back (on_batch)."""

    def __init__(self, cp, consumer, copy_out=False):
        self.cp = cp
        self.taken = []      # (sequence, timestamp_ns, buffer index)
        self.batches = []    # (sequences, timestamps, event, output copy or None)
        self.copy_out = copy_out
        take = consumer.take

        def recording_take(frame, lease):
            self.taken.append((frame.sequence, frame.timestamp_ns, frame.buffer.index))
            take(frame, lease)
        consumer.take = recording_take
        consumer.on_batch = self.on_batch

    def on_batch(self, batch):
        out = None
        if self.copy_out:
            batch.synchronize()
            out = self.cp.asnumpy(batch.tensor)
        self.batches.append((list(batch.sequences), list(batch.timestamps_ns), batch.event, out))

    def buffer_of(self, seq):
        return {s: i for s, _, i in self.taken}[seq]


SPEC = OutputSpec(96, 64, dtype="float32", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
GATE_CYCLES = 100_000_000   # GPU clock cycles: at least 50 ms at the H200's highest clock (1980 MHz)


def gate(cp, stream):
    """Hold `stream`'s later work behind GATE_CYCLES of one spinning thread
    on a stream of its own; the event that ends it."""
    spin = cp.RawKernel(r"""
    extern "C" __global__ void spin(long long cycles) {
        long long t0 = clock64();
        while (clock64() - t0 < cycles) {}
    }""", "spin")
    with cp.cuda.Stream(non_blocking=True) as gate_stream:
        spin((1,), (1,), (cp.int64(GATE_CYCLES),))
        done = cp.cuda.Event(disable_timing=True)
        done.record(gate_stream)
    stream.wait_event(done)
    return done


@pytest.mark.parametrize("ingest", ["copy", "direct"])
@pytest.mark.parametrize("code", ["YUYV", "NV12"])
def test_output_equals_the_oracle_and_buffers_register_once(cp, code, ingest):
    cam = SyntheticCamera(code, (640, 360), fps=240, buffers=4)
    consumer = CudaConsumer(SPEC, ingest=ingest)
    rec = Recorder(cp, consumer, copy_out=True)
    try:
        summary = make_pipeline(cam, [consumer]).run(frames=24)
        rep = section(summary, "cuda")
        assert rep["import_path"] == "host-registered" and rep["zero_copy"] is True
        assert rep["registrations"] == len(cam.buffers)  # once per buffer, not per frame
        assert rep["frames"] == len(rec.taken) >= 12
        assert len(consumer.registry) == 0  # unregistered at stop
        plan = consumer.plan
        refs = {b.index: R.convert_batch([b.memfd.array.copy()], plan) for b in cam.buffers}
        assert len({rec.buffer_of(seqs[0]) for seqs, *_ in rec.batches}) == len(cam.buffers)
        for seqs, _, _, out in rec.batches:
            # buffers hold distinct random frames: the right one, converted right
            assert R.max_error(out, refs[rec.buffer_of(seqs[0])], "float32") <= 1.0
    finally:
        cam.close()


@pytest.mark.parametrize("ingest", ["copy", "direct"])
def test_without_python_per_frame_the_queue_converts_in_c(cp, ingest):
    """No on_batch: each buffer's graph is launched by the frame queue's C and
    its completion record queues the buffer again; every frame converted,
    the outputs the oracle's, latencies from the completion records."""
    cam = SyntheticCamera("YUYV", (640, 360), fps=240, buffers=4)
    consumer = CudaConsumer(SPEC, ingest=ingest)
    taken, outputs = [], {}
    consumer.take = lambda frame, lease: taken.append(frame)   # never called in C mode

    def status(s):
        # each buffer's tensor, read while running (the consumer frees them at
        # the stop); its pixels never change, so any finished write is the same
        if s.frames_captured >= 24 and not outputs:
            cp.cuda.runtime.deviceSynchronize()
            outputs.update({b.index: cp.asnumpy(consumer.tensor_for(b.index)) for b in cam.buffers})
    try:
        summary = Pipeline(cam, consumers=[consumer], on_status=status, status_interval=0.01).run(frames=48)
        rep = section(summary, "cuda")
        assert rep["converted_in"] == "frame queue (C)" and taken == []
        assert rep["frames"] == summary.frames_captured == 48
        lat = rep["latency_ms"]
        assert lat["p50"] is not None and 0 < lat["p50"] <= lat["p99"] < 1000
        plan = consumer.plan
        assert len(outputs) == len(cam.buffers)
        for b in cam.buffers:
            want = R.convert_batch([b.memfd.array.copy()], plan)
            assert R.max_error(outputs[b.index], want, "float32") <= 1.0
    finally:
        cam.close()


def test_an_on_batch_callback_keeps_the_python_path(cp):
    cam = SyntheticCamera("YUYV", (640, 360), fps=240, buffers=4)
    consumer = CudaConsumer(SPEC, on_batch=lambda batch: None)
    try:
        rep = section(make_pipeline(cam, [consumer]).run(frames=12), "cuda")
        assert rep["converted_in"] == "python" and rep["frames"] == 12
    finally:
        cam.close()


def test_batches_through_convert_equal_the_oracle(cp):
    cam = SyntheticCamera("YUYV", (640, 360), fps=480, buffers=8)
    consumer = CudaConsumer(SPEC, max_batch=4, latency_budget_s=0.030)
    rec = Recorder(cp, consumer, copy_out=True)
    try:
        make_pipeline(cam, [consumer]).run(frames=60)
        plan = consumer.plan
        refs = {b.index: R.convert_batch([b.memfd.array.copy()], plan)[0] for b in cam.buffers}
        assert any(len(seqs) > 1 for seqs, *_ in rec.batches)
        for seqs, _, _, out in rec.batches:
            want = np.stack([refs[rec.buffer_of(s)] for s in seqs])
            assert R.max_error(out, want, "float32") <= 1.0
    finally:
        cam.close()


def test_leases_are_released_only_after_the_cuda_event(cp):
    cam = SyntheticCamera("NV12", (1920, 1080), fps=240, buffers=4)
    consumer = CudaConsumer(OutputSpec(224, 224, dtype="float16"))
    rec = Recorder(cp, consumer)
    checked = []
    requeue = cam.requeue

    def checking_requeue(buf):
        if cam.streaming:
            mine = [ev for seqs, _, ev, _ in rec.batches if rec.buffer_of(seqs[-1]) == buf.index]
            assert mine, "a buffer came back that was never converted"
            assert mine[-1].done, "the lease went before the CUDA event completed"
            checked.append(buf.index)
        requeue(buf)
    cam.requeue = checking_requeue
    try:
        make_pipeline(cam, [consumer]).run(frames=40)
        assert len(checked) >= 30
    finally:
        cam.close()


def test_sequence_and_timestamps_travel_into_batches(cp):
    cam = SyntheticCamera("YUYV", (1280, 720), fps=240, buffers=6)
    consumer = CudaConsumer(SPEC, max_batch=4, latency_budget_s=0.020)
    rec = Recorder(cp, consumer)
    try:
        make_pipeline(cam, [consumer]).run(frames=50)
        got = [(s, t) for seqs, stamps, _, _ in rec.batches for s, t in zip(seqs, stamps)]
        assert got == [(s, t) for s, t, _ in rec.taken][:len(got)]
        assert len(got) == consumer.frames
        first = rec.taken[0][1] - rec.taken[0][0] * cam.period_ns
        assert all(t == first + s * cam.period_ns for s, t in got)  # V4L2's, untouched
    finally:
        cam.close()


def test_batching_under_a_latency_budget(cp):
    budget = 0.015
    cam = SyntheticCamera("YUYV", (1920, 1080), fps=480, buffers=12)
    consumer = CudaConsumer(OutputSpec(224, 224, dtype="float16"), max_batch=8, latency_budget_s=budget)
    rec = Recorder(cp, consumer)
    try:
        summary = make_pipeline(cam, [consumer]).run(duration=1.5)
        rep = section(summary, "cuda")
        sizes = [len(seqs) for seqs, *_ in rec.batches]
        assert max(sizes) > 1, "a budget of 15 ms at 480 fps should batch"
        assert max(sizes) <= 8
        assert rep["batches"] == len(sizes) and rep["frames"] == sum(sizes)
        lat = sorted(consumer.latencies_ms)
        assert lat[int(0.95 * (len(lat) - 1))] <= budget * 1e3, rep["latency_ms"]
    finally:
        cam.close()


@pytest.mark.parametrize("how", ["request_stop", "SIGTERM"])
def test_stop_with_a_batch_in_flight_releases_everything(cp, how):
    with SyntheticCamera("YUYV", (1920, 1080), fps=240, buffers=4) as warm:  # CUDA's own fds opened first
        make_pipeline(warm, [CudaConsumer(OutputSpec(224, 224, dtype="float16"))]).run(frames=3)
    gc.collect()
    before = open_fds()
    cam = SyntheticCamera("YUYV", (1920, 1080), fps=240, buffers=4)
    consumer = CudaConsumer(OutputSpec(224, 224, dtype="float16"))
    pipeline = make_pipeline(cam, [consumer])
    in_flight = []

    def on_batch(batch):
        if len(in_flight) == 9:
            # the next batch waits behind ~50 ms of GPU work: surely in flight at the stop
            gate(cp, batch.stream)
        if len(in_flight) == 10:
            in_flight.append(batch.event.done)
            if how == "SIGTERM":
                os.kill(os.getpid(), signal.SIGTERM)
            else:
                pipeline.request_stop("test")
        else:
            in_flight.append(None)
    consumer.on_batch = on_batch
    old = signal.signal(signal.SIGTERM, lambda *_: pipeline.request_stop("SIGTERM"))
    try:
        pipeline.run(duration=5)
    finally:
        signal.signal(signal.SIGTERM, old)
    rep = consumer.report()[1]
    assert in_flight[10] is False  # the stop came while the batch was on the GPU
    assert rep["frames"] == rep["batches"] and rep["abandoned"] == 0
    assert not any(b.leased or b.queued for b in cam.buffers)
    assert len(consumer.registry) == 0
    cam.close()
    del pipeline, consumer
    gc.collect()
    assert open_fds() == before


def test_sigterm_with_conversions_in_flight_in_c_releases_everything(cp):
    """The queue's C converting: SIGTERM mid-run; what was launched completes
    (every launched frame is counted converted), the buffers go back, no fd stays."""
    with SyntheticCamera("YUYV", (1920, 1080), fps=240, buffers=4) as warm:
        make_pipeline(warm, [CudaConsumer(OutputSpec(224, 224, dtype="float16"))]).run(frames=3)
    gc.collect()
    before = open_fds()
    cam = SyntheticCamera("YUYV", (1920, 1080), fps=240, buffers=4)
    consumer = CudaConsumer(OutputSpec(224, 224, dtype="float16"))
    sent = []

    def status(s):
        if s.frames_captured >= 20 and not sent:
            sent.append(s.frames_captured)
            os.kill(os.getpid(), signal.SIGTERM)
    pipeline = Pipeline(cam, consumers=[consumer], on_status=status, status_interval=0.01)
    old = signal.signal(signal.SIGTERM, lambda *_: pipeline.request_stop("SIGTERM"))
    try:
        summary = pipeline.run(duration=10)
    finally:
        signal.signal(signal.SIGTERM, old)
    rep = consumer.report()[1]
    assert sent and summary.stopped_by == "SIGTERM"
    assert rep["converted_in"] == "frame queue (C)"
    assert rep["frames"] == summary.frames_captured   # each launched conversion completed and was counted
    assert len(consumer.registry) == 0
    cam.close()
    del pipeline, consumer
    gc.collect()
    assert open_fds() == before


def test_out_of_memory_is_one_clear_error(cp):
    from sits.cuda.runtime import CudaOutOfMemory
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    cam = SyntheticCamera("YUYV", (640, 360), fps=60, buffers=4)
    pool.set_limit(size=64 * 1024)
    try:
        with pytest.raises(CudaOutOfMemory, match="out of GPU memory while"):
            make_pipeline(cam, [CudaConsumer(OutputSpec(224, 224, dtype="float32"))]).run(frames=4)
        assert not cam.streaming and not any(b.leased for b in cam.buffers)
    finally:
        pool.set_limit(size=0)
        cam.close()


def test_the_example_runs(cp):
    pytest.importorskip("torchvision")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "feature_extraction.py"),
                          "--frames", "60", "--fps", "120"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(
                             filter(None, [ROOT, os.environ.get("PYTHONPATH")]))})
    assert out.returncode == 0, out.stderr
    assert "frames/s" in out.stdout and "capture->features" in out.stdout


def test_in_c_a_buffer_waits_for_its_conversion_and_the_latency_sees_a_stalled_gpu(cp):
    """The queue's C: the GPU held back by a gate (GATE_CYCLES); meanwhile every
    buffer stays with its unfinished conversion and none goes back to the
    "driver" (its ticks are lost, as a camera's), and the frames behind the
    gate are reported done after it, though their own start events ran late."""
    cam = SyntheticCamera("YUYV", (640, 360), fps=240, buffers=4)
    consumer = CudaConsumer(SPEC)
    gated, seen = [], []   # while gated: (conversions in flight, buffers queued)

    def status(s):
        q = pipeline.queue
        if s.frames_captured >= 12 and not gated:
            gated.append(gate(cp, consumer.converter.stream))
        elif gated and not gated[0].done:
            seen.append((consumer.in_flight(), q.with_driver()))
    pipeline = Pipeline(cam, consumers=[consumer], on_status=status, status_interval=0.005)
    try:
        summary = pipeline.run(frames=60)
        rep = section(summary, "cuda")
        assert rep["converted_in"] == "frame queue (C)"
        assert max(n for n, _ in seen) == len(cam.buffers)   # never more in flight than buffers held
        assert (len(cam.buffers), 0) in seen                  # all held, none queued meanwhile
        assert summary.drops["sequence_gap"] > 0
        assert rep["frames"] == summary.frames_captured
        assert max(consumer.latencies_ms) >= 25.0
    finally:
        cam.close()


def test_open_chain_batches_from_the_synthetic_source(cp):
    """open_chain(device="synthetic"): the iterator's batches equal the oracle
    of the buffer each frame landed in, carry the ticks' sequence numbers and
    timestamps, and a buffer goes back only after its batch's CUDA event."""
    from sits.pipeline.chain import open_chain
    buffer_of, outputs, events, early = {}, [], {}, []   # events: sequence -> its batch's CUDA event
    chain = open_chain("synthetic", format="NV12", size=(640, 360), fps=240, buffers=4, cuda=SPEC, frames=30,
                       on_frame=lambda f: buffer_of.__setitem__(f.sequence, f.buffer.index))
    cam = chain.pipeline.source
    collect = chain.cuda.on_batch

    def on_batch(batch):
        events.update((s, batch.event) for s in batch.sequences)
        collect(batch)
    chain.cuda.on_batch = on_batch
    requeue = cam.requeue

    def checking_requeue(buf):
        # the CUDA lease goes last (the on_frame consumer's went at once):
        # the newest frame this buffer held must have its conversion done
        held = [s for s, i in buffer_of.items() if i == buf.index]
        if cam.streaming and held and (max(held) not in events or not events[max(held)].done):
            early.append(buf.index)
        requeue(buf)
    cam.requeue = checking_requeue
    with chain:
        for batch in chain.batches():
            batch.synchronize()
            outputs.append((list(batch.sequences), list(batch.timestamps_ns), cp.asnumpy(batch.tensor)))
        plan = chain.cuda.plan
        refs = {b.index: R.convert_batch([b.memfd.array.copy()], plan)[0] for b in cam.buffers}
    rep = chain.summary.as_dict()["cuda"]
    assert rep["frames"] == len(outputs) >= 30 and rep["converted_in"] == "python"
    assert early == []
    first = outputs[0][1][0] - outputs[0][0][0] * cam.period_ns
    for seqs, stamps, out in outputs:
        assert stamps == [first + s * cam.period_ns for s in seqs]
        want = np.stack([refs[buffer_of[s]] for s in seqs])
        assert R.max_error(out, want, "float32") <= 1.0
    assert sorted({buffer_of[s] for seqs, _, _ in outputs for s in seqs}) == [0, 1, 2, 3]


@pytest.mark.parametrize("batching", [[], ["--cuda-batch", "4", "--latency-budget-ms", "20"]])
def test_sits_capture_to_cuda_from_the_synthetic_source(cp, capsys, batching):
    import json

    from sits.cli.app import main
    argv = ["capture", "--device", "synthetic", "--format", "NV12", "--size", "640x360", "--fps", "240",
            "--frames", "48", "--to-cuda", "96x64", "--json", *batching]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    cuda = data["cuda"]
    assert data["device"] == "synthetic:NV12-640x360@240" and data["memory"] == "memfd"
    assert cuda["import_path"] == "host-registered" and cuda["zero_copy"] is True
    assert cuda["frames"] == data["frames_captured"] == 48
    assert cuda["converted_in"] == ("python" if batching else "frame queue (C)")
    assert (cuda["batches"] < cuda["frames"]) if batching else (cuda["batches"] == cuda["frames"])
    assert 0 < cuda["latency_ms"]["p50"] <= cuda["latency_ms"]["p99"]


@pytest.mark.parametrize("batching", [[], ["--cuda-batch", "4", "--latency-budget-ms", "20"]])
def test_the_timeline_carries_each_frames_cuda_stages(cp, capsys, tmp_path, batching):
    """--timeline with --to-cuda: every frame's record has its launch and its
    completion, in order after its dequeue, and the completion is the one
    the summary's latency counts to (C path and Python path)."""
    import json

    from sits.cli.app import main
    from sits.journey import record
    path = str(tmp_path / "t.ndjson")
    argv = ["capture", "--device", "synthetic", "--format", "NV12", "--size", "640x360", "--fps", "240",
            "--frames", "48", "--to-cuda", "96x64", "--json", "--timeline", path, *batching]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    recs = record.read(path)
    assert len(recs) == data["frames_captured"] == 48
    for r in recs:
        assert r["dequeued_ns"] <= r["cuda_submitted_ns"] <= r["cuda_done_ns"], r
    spans = sorted((r["cuda_done_ns"] - r["captured_ns"]) / 1e6 for r in recs)
    median = (spans[23] + spans[24]) / 2
    assert abs(median - data["cuda"]["latency_ms"]["p50"]) <= 0.01, (median, data["cuda"]["latency_ms"])


def test_a_conversion_that_never_writes_its_end_stamp_is_one_clear_error(cp, monkeypatch):
    """Each buffer's graph made without its end stamp (the last node): the
    queue's C sees the launch late (CU_STAMP_LATE_NS), asks the stream,
    finds it idle, and the run stops with one error naming the buffer;
    every buffer goes back and no fd stays open."""
    from sits.cuda.stamp import Stamps
    from sits.errors import DeviceError
    monkeypatch.setattr(Stamps, "end", lambda self, index, stream: None)
    fds = open_fds()
    cam = SyntheticCamera("YUYV", (640, 360), fps=60, buffers=4)
    try:
        with pytest.raises(DeviceError, match=r"^buffer \d+'s conversion ended without its end stamp"):
            Pipeline(cam, consumers=[CudaConsumer(SPEC)]).run(frames=600)
        assert not cam.streaming and not any(b.leased for b in cam.buffers)
    finally:
        cam.close()
    gc.collect()
    assert open_fds() == fds
