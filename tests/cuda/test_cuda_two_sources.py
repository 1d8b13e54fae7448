"""Two sources into one CUDA stage on a GPU: each frame converted from its
own source's buffer (the outputs the oracle's, each source's buffers
holding different random frames), the source id carried into the batch,
in the frame queue's C at batch 1 and through Python's batcher above it;
sources of different formats refused before streaming."""
import numpy as np
import pytest

from sits.cuda import reference as R
from sits.cuda.formats import OutputSpec
from sits.errors import UsageError
from sits.pipeline.consumer import Port
from sits.pipeline.cuda import CudaConsumer
from sits.pipeline.pipeline import Pipeline
from sits.pipeline.synthetic import SyntheticCamera, random_fill

pytestmark = pytest.mark.cuda

SPEC = OutputSpec(96, 64, dtype="float32", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def two_cameras(code="YUYV", other_code="YUYV"):
    return (SyntheticCamera(code, (320, 180), fps=240, buffers=4, fill=random_fill(1)),
            SyntheticCamera(other_code, (320, 180), fps=240, buffers=4, fill=random_fill(2)))


def references(plan, cams):
    """(source, buffer index) -> the oracle's output of that buffer."""
    return {(s, b.index): R.convert_batch([b.memfd.array.copy()], plan)[0]
            for s, cam in enumerate(cams) for b in cam.buffers}


def test_both_sources_converted_in_c_each_from_its_own_buffers(cp):
    a, b = two_cameras()
    consumer = CudaConsumer(SPEC)
    outputs = {}

    def status(s):
        if s.frames_captured >= 32 and not outputs:   # every buffer's tensor, while they exist
            cp.cuda.runtime.deviceSynchronize()
            outputs.update({(s_, buf.index): cp.asnumpy(consumer.tensor_for(buf.index, s_))
                            for s_, cam in enumerate((a, b)) for buf in cam.buffers})
    try:
        summary = Pipeline([a, b], consumers=[Port(consumer, takes=(a, b))], on_status=status,
                           status_interval=0.01).run(frames=64)
        rep = summary.as_dict()["cuda"]
        assert rep["converted_in"] == "frame queue (C)"
        assert [s["captured"] > 0 for s in summary.sources] == [True, True]
        assert rep["frames"] == summary.frames_captured == 64
        refs = references(consumer.plan, (a, b))
        assert len(outputs) == len(refs) == 8
        for key, want in refs.items():
            assert R.max_error(outputs[key][0], want, "float32") <= 1.0, key
    finally:
        a.close()
        b.close()


def test_batches_carry_each_frames_source(cp):
    a, b = two_cameras()
    batches, taken = [], {}
    consumer = CudaConsumer(SPEC, max_batch=4, latency_budget_s=0.030)
    take = consumer.take

    def recording_take(frame, lease):
        taken[(frame.source, frame.sequence)] = frame.buffer.index
        take(frame, lease)
    consumer.take = recording_take

    def on_batch(batch):
        batch.event.synchronize()
        batches.append((list(batch.sources), list(batch.sequences), cp.asnumpy(batch.tensor)))
    consumer.on_batch = on_batch
    try:
        summary = Pipeline([a, b], consumers=[Port(consumer, takes=(a, b))]).run(frames=80)
        refs = references(consumer.plan, (a, b))
        assert summary.as_dict()["cuda"]["frames"] == len(taken) == sum(len(s) for s, _, _ in batches)
        assert {src for s, _, _ in batches for src in s} == {0, 1}
        assert any(len(set(s)) == 2 for s, _, _ in batches)   # one batch across both sources
        for sources, seqs, out in batches:
            want = np.stack([refs[(src, taken[(src, seq)])] for src, seq in zip(sources, seqs)])
            assert R.max_error(out, want, "float32") <= 1.0
    finally:
        a.close()
        b.close()


def test_sources_of_different_formats_are_refused_before_streaming(cp):
    a, b = two_cameras("YUYV", "NV12")
    try:
        with pytest.raises(UsageError, match="share a format"):
            Pipeline([a, b], consumers=[Port(CudaConsumer(SPEC), takes=(a, b))]).run(frames=4)
        assert not a.streaming and not b.streaming
    finally:
        a.close()
        b.close()
