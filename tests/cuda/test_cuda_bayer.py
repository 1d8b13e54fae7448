"""Raw Bayer on the GPU: every format (pattern x storage) through the
fused kernel equal to the numpy oracle at camera sizes; the demosaic at
full size equal to OpenCV's (an independent implementation) inside the
frame; and the chain from a raw source through the CUDA consumer, with
black level, gains and gamma, equal to the oracle per buffer."""
import numpy as np
import pytest

from sits.bayer import RawOptions
from sits.cuda import reference as R
from sits.cuda.formats import FORMATS, OutputSpec, SourceFormat, format_info, make_plan
from sits.formats import BY_V4L2

pytestmark = pytest.mark.cuda

BAYER = [name for name in FORMATS if format_info(name).cfa]


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def convert(cp, plan, frames):
    from sits.cuda.convert import FrameConverter
    conv = FrameConverter(plan, max_batch=len(frames), tables=1)
    batch = conv.convert([cp.asarray(f) for f in frames])
    batch.synchronize()
    return cp.asnumpy(batch.tensor)


def raw_frames(src, n, seed):
    """Random samples within the format's bits (the high bits of 16-bit words zero, as V4L2 says)."""
    rng = np.random.default_rng(seed)
    info = src.info
    out = []
    for _ in range(n):
        buf = rng.integers(0, 256, src.frame_bytes, dtype=np.uint8)
        if info.bpp == 16 and info.bits < 16:
            words = buf.view("<u2")
            words &= (1 << info.bits) - 1
        out.append(buf)
    return out


@pytest.mark.parametrize("resize, size", [("area", (224, 224)), ("bilinear", (320, 180))])
@pytest.mark.parametrize("name", BAYER)
def test_every_bayer_format_equals_the_oracle(cp, name, resize, size):
    src = SourceFormat(name, 1280, 720)
    bits = src.info.bits
    raw = RawOptions(black_level=(1 << bits) // 16, gains=(1.7, 1.0, 1.5), gamma=2.2)
    plan = make_plan(src, OutputSpec(*size, dtype="float32", mean=(0.485, 0.456, 0.406),
                                     std=(0.229, 0.224, 0.225)), resize=resize, letterbox=True, raw=raw)
    frames = raw_frames(src, 2, seed=hash(name) % 2**32)
    assert R.max_error(convert(cp, plan, frames), R.convert_batch(frames, plan), "float32") <= 1.0


@pytest.mark.parametrize("cfa", ["RGGB", "BGGR", "GRBG", "GBRG"])
def test_full_size_demosaic_equals_opencv_inside_the_frame(cp, cfa):
    cv2 = pytest.importorskip("cv2")
    src = SourceFormat(f"S{cfa}8", 640, 360)
    plan = make_plan(src, OutputSpec(640, 360, dtype="uint8", layout="NHWC"), resize="bilinear")
    frame = raw_frames(src, 1, seed=7)[0]
    got = convert(cp, plan, [frame])[0].astype(int)
    want = cv2.cvtColor(frame.reshape(360, 640), getattr(cv2, f"COLOR_Bayer{cfa}2RGB")).astype(int)
    assert np.max(np.abs(got[1:-1, 1:-1] - want[1:-1, 1:-1])) <= 1


@pytest.mark.parametrize("ingest", ["copy", "direct"])
@pytest.mark.parametrize("code", ["RG10", "pBAA"])
def test_a_raw_camera_through_the_cuda_consumer(cp, code, ingest):
    from sits.pipeline.cuda import CudaConsumer
    from sits.pipeline.pipeline import Pipeline
    from sits.pipeline.synthetic import SyntheticCamera
    bits = BY_V4L2[code].bits
    cam = SyntheticCamera(code, (640, 360), fps=240, buffers=4)
    spec = OutputSpec(96, 64, dtype="float32")
    consumer = CudaConsumer(spec, ingest=ingest, raw=RawOptions(black_level=64, gains=(1.8, 1.0, 1.4), gamma=2.2))
    outs = []

    def on_batch(batch):
        batch.synchronize()
        outs.append((batch.sequences[0], cp.asnumpy(batch.tensor)))
    consumer.on_batch = on_batch
    taken = {}
    take = consumer.take

    def recording_take(frame, lease):
        taken[frame.sequence] = frame.buffer.index
        take(frame, lease)
    consumer.take = recording_take
    try:
        summary = Pipeline(cam, consumers=[consumer]).run(frames=16)
        assert summary.as_dict()["cuda"]["frames"] >= 8
        refs = {b.index: R.convert_batch([b.memfd.array.copy()], consumer.plan) for b in cam.buffers}
        assert bits == consumer.plan.info.bits and outs
        for seq, out in outs:
            assert R.max_error(out, refs[taken[seq]], "float32") <= 1.0
    finally:
        cam.close()
