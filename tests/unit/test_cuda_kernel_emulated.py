"""The CUDA kernel text, run on the CPU (tests/unit/cuda_emulator.py), against
the numpy oracle: every format x resize x dtype, odd sizes, padded strides,
crops, letterbox, strided outputs. The `cuda` tier repeats this on the GPU."""
import numpy as np
import pytest

from sits.cuda import reference as R
from sits.cuda.formats import FORMATS, format_info, OutputSpec, SourceFormat, make_plan

from tests.unit import cuda_emulator as E

pytestmark = pytest.mark.skipif(E.compiler() is None, reason="no C++ compiler for the kernel emulator")

# raw Bayer has tests of its own (test_bayer_kernel_emulated.py)
YUV_RGB = [name for name in FORMATS if not format_info(name).cfa]
BPP = {"YUYV": 2, "UYVY": 2, "NV12": 1, "NV16": 1, "P010": 2, "XRGB8888": 4, "XBGR8888": 4, "RGB888": 3, "BGR888": 3}


def padded_source(fmt, w, h, pad=12, align=4):
    return SourceFormat(fmt, w, h, bytesperline=(w * BPP[fmt] + align - 1) // align * align + pad)


def frames(src, n, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, src.frame_bytes, dtype=np.uint8) for _ in range(n)]


@pytest.mark.parametrize("fmt", YUV_RGB)
@pytest.mark.parametrize("resize", ["bilinear", "area"])
@pytest.mark.parametrize("dtype, layout", [("uint8", "NHWC"), ("float16", "NCHW"), ("float32", "NHWC")])
def test_kernel_matches_reference(fmt, resize, dtype, layout):
    # Odd output sizes, a padded stride, an offset crop and a letterbox band.
    src = padded_source(fmt, 46, 30)
    out = OutputSpec(13, 11, layout=layout, dtype=dtype, order="BGR" if dtype == "float16" else "RGB",
                     mean=(0.485, 0.456, 0.406) if dtype != "uint8" else (0, 0, 0),
                     std=(0.229, 0.224, 0.225) if dtype != "uint8" else (1, 1, 1))
    plan = make_plan(src, out, resize=resize, matrix="bt2020" if fmt == "P010" else "bt601",
                     range="full" if dtype == "float32" else "limited", crop=(4, 2, 40, 26), letterbox=True,
                     pad_rgb=(0.1, 0.2, 0.3))
    batch = frames(src, 2, seed=hash((fmt, resize, dtype)) % 2**32)
    got = E.run(plan, batch)
    ref = R.convert_batch(batch, plan)
    assert R.max_error(got, ref, dtype) <= 1.0


@pytest.mark.parametrize("fmt", [name for name in YUV_RGB if not format_info(name).pixelwise])
def test_area_16_byte_loads(fmt):
    # The vectorised area kernel: 16-byte aligned rows, a crop that starts and
    # ends mid-group, so the rounded word range reads columns it must ignore.
    src = padded_source(fmt, 70, 24, pad=16, align=16)
    if src.info.planes == 2:
        src = SourceFormat(fmt, 70, 24, bytesperline=src.stride(0), uv_offset=src.stride(0) * 24)
    from sits.cuda import kernel as K
    plan = make_plan(src, OutputSpec(11, 5, dtype="float32"), resize="area", crop=(6, 2, 58, 20))
    assert K.vec4_possible(plan)
    batch = frames(src, 2, seed=11)
    got = E.run(plan, batch, vec=4)
    assert R.max_error(got, R.convert_batch(batch, plan), "float32") <= 1.0


@pytest.mark.parametrize("fmt", ["YUYV", "NV12", "P010"])
def test_upscale_bilinear_and_full_frame(fmt):
    src = SourceFormat(fmt, 12, 6)
    plan = make_plan(src, OutputSpec(17, 9, dtype="float32"), resize="bilinear", matrix="bt709")
    batch = frames(src, 1, seed=3)
    assert R.max_error(E.run(plan, batch), R.convert_batch(batch, plan), "float32") <= 1.0


def test_a_wrong_oracle_fails():
    # The comparison can fail: the same frames against a plan with another matrix.
    src = SourceFormat("NV12", 32, 16)
    plan = make_plan(src, OutputSpec(8, 8, dtype="float32"), matrix="bt601")
    other = make_plan(src, OutputSpec(8, 8, dtype="float32"), matrix="bt709")
    batch = frames(src, 1, seed=4)
    assert R.max_error(E.run(plan, batch), R.convert_batch(batch, other), "float32") > 10


def test_every_output_element_is_written():
    src = SourceFormat("UYVY", 40, 20)
    plan = make_plan(src, OutputSpec(21, 15, dtype="float32"), resize="area", letterbox=True)
    got = E.run(plan, frames(src, 3, seed=5))  # the emulator poisons the output with NaN
    assert np.isfinite(got).all()


@pytest.mark.parametrize("band", [2, 3, 5])
@pytest.mark.parametrize("fmt", ["YUYV", "NV12", "XRGB8888"])
def test_area_bands_of_rows(fmt, band):
    # Several output rows per block (two shared-memory row buffers, one
    # barrier per row), letterbox rows inside a band, a band count that does
    # not divide the rows.
    from sits.cuda import kernel as K
    variant = K.Variant(band_rows=band)
    src = padded_source(fmt, 64, 40, pad=16, align=16)
    if src.info.planes == 2:
        src = SourceFormat(fmt, 64, 40, bytesperline=src.stride(0), uv_offset=src.stride(0) * 40)
    plan = make_plan(src, OutputSpec(9, 13, dtype="float32"), resize="area", letterbox=True, crop=(2, 4, 58, 30))
    assert K.launch_shape(plan, 2, 4, variant=variant)[0][0] == -(-13 // band)
    batch = frames(src, 2, seed=band)
    for vec in (1, 4):
        got = E.run(plan, batch, vec=vec, variant=variant)
        assert R.max_error(got, R.convert_batch(batch, plan), "float32") <= 1.0


@pytest.mark.parametrize("resize", ["bilinear", "area"])
@pytest.mark.parametrize("fmt", ["YUYV", "NV12", "P010", "XBGR8888"])
def test_bfloat16_output(fmt, resize):
    src = padded_source(fmt, 40, 24)
    out = OutputSpec(10, 7, layout="NHWC", dtype="bfloat16", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    plan = make_plan(src, out, resize=resize, letterbox=True, pad_rgb=(0.5, 0.5, 0.5))
    batch = frames(src, 2, seed=17)
    got = E.run(plan, batch)  # poisoned with a bfloat16 NaN
    assert got.dtype == np.uint16
    assert np.isfinite(R.bfloat16_bits_to_float(got)).all()
    ref = R.convert_batch(batch, plan)
    assert R.max_error(got, ref, "bfloat16") <= 1.0
    # Rounded to bfloat16: the low 16 bits of float32 are gone, and the error
    # is within half a bfloat16 step (not truncation, which can be a whole step).
    err = np.abs(R.bfloat16_bits_to_float(got) - ref)
    half_step = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(ref), 1e-30))) - 8)
    assert (err <= 2e-4 + half_step).all()



@pytest.mark.parametrize("height", [600, 250, 60])
@pytest.mark.parametrize("fmt", ["YUYV", "NV16", "XBGR8888", "P010"])
def test_area_tall_footprints(fmt, height):
    # Many rows into one: the rows between the ends are summed as 16-bit
    # integer lanes up to 256 rows (64 for P010; all-255 frames fill them),
    # taller footprints in floats.
    src = SourceFormat(fmt, 16, height)
    plan = make_plan(src, OutputSpec(3, 1, dtype="float32"), resize="area")
    batch = [np.full(src.frame_bytes, 255, np.uint8), frames(src, 1, seed=8)[0]]
    assert R.max_error(E.run(plan, batch, vec=4), R.convert_batch(batch, plan), "float32") <= 1.0


def integer_source(fmt, w=98, h=56):
    """16-byte aligned, padded rows (and chroma plane): the area_int kernel's input."""
    src = padded_source(fmt, w, h, pad=16, align=16)
    if src.info.planes == 2:
        src = SourceFormat(fmt, w, h, bytesperline=src.stride(0), uv_offset=src.stride(0) * h + 32)
    return src


# (output size, plan options, SHORT path, dtype, layout): odd sizes, offset
# crops, letterbox bands both ways; footprints of 3x3 samples (SHORT; 16-bit
# NCHW outputs two pixels a thread, a pair across the letterbox edge and an
# odd width), of 9x17 and 6x7 (loops).
INTEGER_SHAPES = [((30, 29), dict(crop=(2, 4, 90, 51)), True, "float16", "NCHW"),
                  ((30, 41), dict(crop=(2, 4, 90, 51), letterbox=True), True, "bfloat16", "NCHW"),
                  ((41, 17), dict(crop=(2, 4, 90, 51), letterbox=True), True, "float16", "NCHW"),
                  ((30, 29), dict(crop=(2, 4, 90, 51)), True, "uint8", "NHWC"),
                  ((10, 3), dict(crop=(6, 2, 90, 51)), False, "float16", "NCHW"),
                  ((15, 8), dict(crop=(2, 4, 90, 51)), False, "bfloat16", "NHWC"),
                  ((31, 3), dict(crop=(6, 2, 90, 51), letterbox=True), False, "float32", "NHWC")]


@pytest.mark.parametrize("band", [None, 3])
@pytest.mark.parametrize("size, options, short, dtype, layout", INTEGER_SHAPES)
@pytest.mark.parametrize("fmt", ["YUYV", "UYVY", "NV12", "NV16"])
def test_area_integer_kernel(fmt, size, options, short, dtype, layout, band):
    # Exact integer weights (area_int), against the oracle's float64 box filter.
    from sits.cuda import kernel as K
    src = integer_source(fmt)
    plan = make_plan(src, OutputSpec(*size, layout=layout, dtype=dtype), resize="area", pad_rgb=(0.2, 0.4, 0.6),
                     **options)
    assert K.area_integer(plan, 4) and K.area_int_short(plan) == short
    assert K.kernel_name(plan, 4) == f"sits::area_int<{src.info.code}, {K.OUT_CODES[dtype]}, {int(short)}>"
    batch = frames(src, 2, seed=hash((fmt, size, band)) % 2**32)
    batch[0][:] = 255  # every lane at its largest sum
    got = E.run(plan, batch, vec=4, variant=K.Variant(band_rows=band))
    assert R.max_error(got, R.convert_batch(batch, plan), dtype) <= 1.0


# SHORT outputs wider than two pixels for each of a block's 256 threads (as
# 640): a second pass of pixel pairs; odd widths, letterbox bands and crops.
WIDE_SHAPES = [((650, 7), {}, None), ((650, 7), {}, 3), ((625, 7), {}, 3),
               ((650, 9), dict(letterbox=True), 3), ((640, 5), dict(crop=(16, 2, 960, 10)), 2)]


@pytest.mark.parametrize("size, options, band", WIDE_SHAPES)
@pytest.mark.parametrize("fmt", ["YUYV", "NV12"])
def test_area_integer_wide_short(fmt, size, options, band):
    from sits.cuda import kernel as K
    src = integer_source(fmt, 1000, 12)
    plan = make_plan(src, OutputSpec(*size, dtype="float16"), resize="area", pad_rgb=(0.2, 0.4, 0.6), **options)
    assert K.area_integer(plan, 4) and K.area_int_short(plan)
    batch = frames(src, 2, seed=hash((fmt, size, band)) % 2**32)
    batch[0][:] = 255
    got = E.run(plan, batch, vec=4, variant=K.Variant(band_rows=band))
    assert R.max_error(got, R.convert_batch(batch, plan), "float16") <= 1.0


def test_area_integer_short_needs_byte_luma_weights():
    # 260 columns into 257: footprints SHORT could take, but luma column
    # weights over 255, which do not fit a byte of its dot products
    # (kernel.short_columns): the general path, still exact.
    from sits.cuda import kernel as K
    src = SourceFormat("NV16", 260, 8)
    plan = make_plan(src, OutputSpec(257, 8, dtype="float32"), resize="area")
    _, _, cols0, _ = K._integer_spans(plan)
    assert max(max(K._taps(s)) for s in cols0) > 255
    assert K.area_integer(plan, 4) and not K.area_int_short(plan) and K.short_columns(plan) is None
    batch = frames(src, 2, seed=3)
    batch[0][:] = 255
    assert R.max_error(E.run(plan, batch, vec=4), R.convert_batch(batch, plan), "float32") <= 1.0


def test_area_integer_choice():
    # Exact weights whose sums fit: the integer kernel; otherwise, and for the
    # 4-byte kernel, P010 and RGB, the float kernel.
    from sits.cuda import kernel as K
    src = SourceFormat("YUYV", 1920, 1080)
    for size, short in ((224, False), (640, True)):
        plan = make_plan(src, OutputSpec(size, size), resize="area")
        assert K.area_integer(plan, 4) and K.area_int_short(plan) == short
        assert not K.area_integer(plan, 1)
    # 1080 rows into 223: q = 223, a footprint row weighs 1080 > 65535 / 255.
    assert not K.area_integer(make_plan(src, OutputSpec(224, 223), resize="area"), 4)
    # a plane of 4 GiB or more: its rows are past the kernel's 32-bit offsets
    # (footprints of 100 and 150 rows: 255 * 150 fits a 16-bit lane)
    for rows, want in ((224 * 100, True), (224 * 150, False)):
        tall = SourceFormat("YUYV", 1920, rows, bytesperline=1 << 17)
        assert (tall.stride(0) * rows >= 1 << 32) == (not want)
        assert K.area_integer(make_plan(tall, OutputSpec(224, 224), resize="area"), 4) == want
    assert not K.area_integer(make_plan(src, OutputSpec(224, 224), resize="bilinear"), 4)
    for fmt in ("P010", "XRGB8888"):
        assert not K.area_integer(make_plan(SourceFormat(fmt, 1920, 1080), OutputSpec(224, 224), resize="area"), 4)


@pytest.mark.parametrize("rows", [257, 258])
def test_area_integer_lane_limit(rows, monkeypatch):
    # 257 rows into one: 255 * 257 = 65535 fills a 16-bit lane exactly (the
    # integer kernel); one more row would overflow it (the float kernel).
    from sits.cuda import kernel as K
    src = SourceFormat("NV16", 32, rows)
    plan = make_plan(src, OutputSpec(5, 1, dtype="float32"), resize="area")
    assert K.area_integer(plan, 4) == (rows == 257)
    batch = [np.full(src.frame_bytes, 255, np.uint8), frames(src, 1, seed=rows)[0]]
    assert R.max_error(E.run(plan, batch, vec=4), R.convert_batch(batch, plan), "float32") <= 1.0


@pytest.mark.parametrize("fmt", ["YUYV", "NV12"])
def test_area_float_kernel_with_16_byte_loads(fmt):
    # Variant(integer=False) keeps the float kernel for plans the integer one
    # takes; the product's choice stays the integer kernel.
    from sits.cuda import kernel as K
    variant = K.Variant(integer=False)
    src = integer_source(fmt)
    plan = make_plan(src, OutputSpec(30, 29, dtype="float32"), resize="area", crop=(2, 4, 90, 51))
    assert K.kernel_name(plan, 4, variant) == f"sits::area<{src.info.code}, 2, 4>"
    assert K.kernel_name(plan, 4) == f"sits::area_int<{src.info.code}, 2, 1>"
    batch = frames(src, 2, seed=5)
    got = E.run(plan, batch, vec=4, variant=variant)
    assert R.max_error(got, R.convert_batch(batch, plan), "float32") <= 1.0


@pytest.mark.parametrize("fmt", ["YUYV", "NV12"])
@pytest.mark.parametrize("size, options", [((10, 3), dict(crop=(6, 2, 90, 51))), ((15, 8), {}),
                                           ((17, 9), dict(crop=(2, 4, 90, 51), letterbox=True))])
def test_area_integer_dot_products_equal_the_loops(fmt, size, options):
    # The general path's horizontal sums as byte-weighted dot products
    # (kernel.dot_columns) are the loops' exact integers: the same output bits.
    from sits.cuda import kernel as K
    src = integer_source(fmt)
    plan = make_plan(src, OutputSpec(*size, dtype="float32"), resize="area", **options)
    assert not K.area_int_short(plan) and K.dot_columns(plan) is not None
    batch = frames(src, 2, seed=11)
    batch[0][:] = 255
    dots = E.run(plan, batch, vec=4)
    loops = K.Variant(dot=False)
    assert K.dot_columns(plan, loops) is None
    np.testing.assert_array_equal(dots, E.run(plan, batch, vec=4, variant=loops))


def test_area_integer_dot_columns_choice():
    # 1080p into 224 takes the dot products; SHORT footprints (640) their own
    # fixed taps; a footprint wider than 12 luma samples (1080p into 96) the loops.
    from sits.cuda import kernel as K
    for fmt in ("YUYV", "NV12"):
        src = SourceFormat(fmt, 1920, 1080)
        assert K.dot_columns(make_plan(src, OutputSpec(224, 224), resize="area")) is not None
        assert K.dot_columns(make_plan(src, OutputSpec(640, 640), resize="area")) is None
        assert K.dot_columns(make_plan(src, OutputSpec(96, 96), resize="area")) is None
