"""The display's raw Bayer stage (sits/pipeline/bayer_stage.py: OpenCV's
demosaic on the stage's worker thread) in the C frame queue, one event at
a time: each frame made from its own buffer into XRGB8888 as the oracle's
demosaic (sits/cuda/reference.py, convolutions) says, for every storage;
black level, gains and gamma as sits.bayer says; grey-world white balance
from each frame's own means."""
import numpy as np
import pytest

from sits.bayer import AUTO, RawOptions
from sits.cuda import reference as R
from sits.cuda.formats import SourceFormat
from sits.formats import BY_V4L2
from sits.pipeline.bayer_stage import bayer_stage, passes
from sits.pipeline.frame_queue import NONE
from tests.unit.queue_steps import closing
from tests.unit.stage_chain import StageChain
from tests.unit.test_bayer_kernel_emulated import pack

pytest.importorskip("cv2", reason="OpenCV (sits[raw]) is not installed")

W, H = 48, 32
SLACK = 1.5                              # 8-bit levels: narrowing and the demosaic's rounding
INNER = (slice(1, -1), slice(1, -1))     # OpenCV fills its edge rows its own way


def Chain(code, frames, pitch, raw=None):
    stride = SourceFormat(BY_V4L2[code].name, W, H).stride(0)

    def maker(q, inputs, outputs):
        return bayer_stage(q, code, W, H, stride, inputs, outputs, pitch, raw=raw)
    return StageChain(maker, [f.tobytes() for f in frames], stride * H, (H, pitch))


@pytest.fixture
def chain():
    yield from closing(Chain)


def scene(code, seed, cast=(1.0, 1.0, 1.0)):
    """Samples of a smooth scene (a demosaic's bilinear guess is near the
    truth there), each colour scaled by `cast`, as the format stores them."""
    f = BY_V4L2[code]
    src = SourceFormat(f.name, W, H)
    yy, xx = np.mgrid[0:H, 0:W]
    rng = np.random.default_rng(seed)
    top = (1 << f.bits) - 1
    planes = {c: top * (0.2 + 0.3 * (1 + np.sin(xx / 7 + p) * np.cos(yy / 5 + p)) / 2) * k
              for (c, k), p in zip(zip("RGB", cast), rng.uniform(0, 6, 3))}
    colour = np.array(list(f.cfa)).reshape(2, 2)[yy & 1, xx & 1]
    samples = np.rint(np.select([colour == c for c in "RGB"], [planes[c] for c in "RGB"])).astype(int)
    return pack(samples, src), src


def bounds(frame, src, raw=RawOptions()):
    rgb = np.stack(R.demosaic(R.bayer_samples(frame, src), src.info.cfa), -1)
    unit = 1 << (src.info.bits - 8)
    lin = raw.linear(src.info.bits)

    def curve(v):
        out = np.stack([np.clip(v[..., c] * k + off, 0, 1) for c, (k, off) in enumerate(lin)], -1)
        return np.rint(255 * out ** raw.inv_gamma)
    return curve(rgb - SLACK * unit)[INNER] - 1, curve(rgb + SLACK * unit)[INNER] + 1


def shown(c, index):
    """R, G, B of an XRGB8888 output (bytes B, G, R, X)."""
    return c.output(index)[:, :W * 4].reshape(H, W, 4)[..., 2::-1].astype(float)


@pytest.mark.parametrize("pitch", [W * 4, W * 4 + 64], ids=["packed", "padded"])
@pytest.mark.parametrize("code", ["RGGB", "BA81", "BG10", "pRAA", "pgCC", "GR16"])
def test_each_frame_is_demosaiced_from_its_own_buffer(chain, code, pitch):
    frames = [scene(code, seed) for seed in range(3)]
    c = chain(code, [f for f, _ in frames], pitch)
    for frame, src in frames:
        c.frame()
        out = c.made()
        assert out != NONE
        lo, hi = bounds(frame, src)
        got = shown(c, out)[INNER]
        assert np.all((got >= lo) & (got <= hi))
        assert np.all(c.output(out)[:, :W * 4].reshape(H, W, 4)[..., 3] == 255)
    assert c.stage.counts()["frames"] == 3 and c.stage.counts()["errors"] == 0
    assert passes(code) == (1 if BY_V4L2[code].bits == 8 else 2)


def test_black_level_gains_and_gamma(chain):
    raw = RawOptions(black_level=64, gains=(1.6, 1.0, 1.3), gamma=2.2)
    frame, src = scene("BG10", 4)
    c = chain("BG10", [frame], W * 4, raw=raw)
    c.frame()
    got = shown(c, c.made())[INNER]
    lo, hi = bounds(frame, src, raw)
    assert np.all((got >= lo) & (got <= hi))
    lo, hi = bounds(frame, src)
    assert not np.all((got >= lo) & (got <= hi))     # not the picture without them


def test_grey_world_takes_out_a_colour_cast(chain):
    frame, _ = scene("RGGB", 6, cast=(1.8, 1.0, 0.6))
    c = chain("RGGB", [frame, frame], W * 4, raw=RawOptions(gains=AUTO))
    c.frame()
    r, g, b = shown(c, c.made()).reshape(-1, 3).mean(0)
    assert abs(r - g) <= 3 and abs(b - g) <= 3
    plain = chain("RGGB", [frame], W * 4)
    plain.frame()
    r, g, b = shown(plain, plain.made()).reshape(-1, 3).mean(0)
    assert r > 1.5 * g and b < 0.8 * g                  # the cast is there without it
