"""Raw Bayer through the CUDA conversion: the kernel text (run on the CPU,
tests/unit/cuda_emulator.py) against the numpy oracle for every storage
(8 bits, 16-bit words, 10 and 12 bits MIPI-packed), every pattern, both
resamplings; the oracle's unpacking and demosaic against what V4L2's
documentation and OpenCV say."""
import numpy as np
import pytest

from sits.bayer import RawOptions
from sits.cuda import reference as R
from sits.cuda.formats import OutputSpec, SourceFormat, make_plan
from sits.errors import UsageError

from tests.unit import cuda_emulator as E

STORAGES = ("SRGGB8", "SRGGB10", "SRGGB10P", "SRGGB12P", "SRGGB16")
PATTERNS = ("RGGB", "BGGR", "GRBG", "GBRG")


def frame(src, seed):
    """Random samples of the format's bits, stored as the format stores them."""
    info = src.info
    rng = np.random.default_rng(seed)
    samples = rng.integers(0, 1 << info.bits, (src.height, src.width))
    return pack(samples, src), samples


def pack(samples, src):
    """Samples laid out as V4L2's pixfmt-srggb*.rst draws them (written here
    from the documentation, not from the oracle)."""
    info = src.info
    h, w = samples.shape
    out = np.zeros((h, src.stride(0)), np.uint8)
    for y in range(h):
        for x in range(w):
            v = int(samples[y, x])
            if info.bpp == 8:
                out[y, x] = v
            elif info.bpp == 16:
                out[y, 2 * x], out[y, 2 * x + 1] = v & 0xFF, v >> 8
            elif info.bits == 10:   # 4 samples: their bits 9-2, then a byte of bits 1-0, sample 0 lowest
                g = 5 * (x // 4)
                out[y, g + x % 4] = v >> 2
                out[y, g + 4] |= (v & 3) << (2 * (x % 4))
            else:                   # 12: 2 samples: their bits 11-4, then a byte of bits 3-0, sample 0 lowest
                g = 3 * (x // 2)
                out[y, g + x % 2] = v >> 4
                out[y, g + 2] |= (v & 15) << (4 * (x % 2))
    return out.reshape(-1)


@pytest.mark.parametrize("name", STORAGES)
def test_oracle_unpacks_as_v4l2_documents(name):
    src = SourceFormat(name, 12, 4, bytesperline=SourceFormat(name, 12, 4).stride(0) + 4)
    buf, samples = frame(src, seed=3)
    assert np.array_equal(R.bayer_samples(buf, src), samples)


@pytest.mark.parametrize("cfa", PATTERNS)
def test_oracle_demosaic_of_one_colour(cfa):
    # A scene of pure red: red samples 200, the rest 0. Bilinear demosaic
    # gives R 200, G and B 0 everywhere (edges included: reflected).
    pattern = np.array(list(cfa)).reshape(2, 2)
    raw = np.where(np.tile(pattern, (4, 5)) == "R", 200.0, 0.0)
    r, g, b = R.demosaic(raw, cfa)
    assert np.all(r == 200) and np.all(g == 0) and np.all(b == 0)


def test_oracle_demosaic_against_opencv():
    cv2 = pytest.importorskip("cv2", reason="OpenCV (opencv-python-headless) is not installed")
    rng = np.random.default_rng(5)
    raw = rng.integers(0, 256, (16, 20)).astype(np.uint8)
    rgb = cv2.cvtColor(raw, cv2.COLOR_BayerRGGB2RGB).astype(float)
    ours = np.stack(R.demosaic(raw * 1.0, "RGGB"), -1)
    inner = (slice(1, -1), slice(1, -1))   # OpenCV fills its border rows its own way
    assert np.max(np.abs(ours[inner] - rgb[inner])) <= 0.5 + 1e-9


@pytest.mark.skipif(E.compiler() is None, reason="no C++ compiler for the kernel emulator")
@pytest.mark.parametrize("resize", ["bilinear", "area"])
@pytest.mark.parametrize("name", STORAGES)
def test_kernel_matches_oracle(name, resize):
    # A padded stride, an odd crop, a letterbox, black level, gains, gamma.
    base = SourceFormat(name, 24, 14)
    src = SourceFormat(name, 24, 14, bytesperline=base.stride(0) + 8)
    bits = src.info.bits
    raw = RawOptions(black_level=(1 << bits) // 16, gains=(1.9, 1.0, 1.4), gamma=2.2)
    out = OutputSpec(9, 7, dtype="float32", order="BGR", mean=(0.4, 0.5, 0.6), std=(0.2, 0.25, 0.3))
    plan = make_plan(src, out, resize=resize, crop=(3, 1, 19, 12), letterbox=True, pad_rgb=(0.1, 0.2, 0.3),
                     raw=raw)
    batch = [frame(src, seed)[0] for seed in (1, 2)]
    got = E.run(plan, batch)
    assert R.max_error(got, R.convert_batch(batch, plan), "float32") <= 1.0


@pytest.mark.skipif(E.compiler() is None, reason="no C++ compiler for the kernel emulator")
@pytest.mark.parametrize("cfa", PATTERNS)
def test_kernel_patterns(cfa):
    src = SourceFormat(f"S{cfa}8", 16, 10)
    plan = make_plan(src, OutputSpec(16, 10, dtype="uint8", layout="NHWC"), resize="bilinear")
    batch = [frame(src, 9)[0]]
    got = E.run(plan, batch)
    assert R.max_error(got, R.convert_batch(batch, plan), "uint8") <= 1.0


def test_refusals():
    with pytest.raises(UsageError, match="whole 2x2 tiles"):
        make_plan(SourceFormat("SRGGB8", 15, 10), OutputSpec(8, 8))
    with pytest.raises(UsageError, match="multiple of 4"):
        make_plan(SourceFormat("SRGGB10P", 18, 10), OutputSpec(8, 8))
    with pytest.raises(UsageError, match="black level"):
        make_plan(SourceFormat("SRGGB8", 16, 10), OutputSpec(8, 8), raw=RawOptions(black_level=255))
    with pytest.raises(UsageError, match="not raw Bayer"):
        make_plan(SourceFormat("YUYV", 16, 10), OutputSpec(8, 8), raw=RawOptions(gamma=2.2))
