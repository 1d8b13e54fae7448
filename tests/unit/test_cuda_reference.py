"""The numpy oracle and the set-up checks of the CUDA conversion (no GPU)."""
import re

import numpy as np
import pytest

from sits.cuda import kernel as K
from sits.cuda import reference as R
from sits.cuda.formats import OutputSpec, SourceFormat, make_plan, yuv_to_rgb_affine
from sits.errors import UsageError


def yuyv_frame(w, h, y, u, v):
    px = np.empty((h, w // 2, 4), np.uint8)
    px[..., 0], px[..., 1], px[..., 2], px[..., 3] = y, u, y, v
    return px.reshape(-1)


def nv12_frame(w, h, y, u, v):
    luma = np.full((h, w), y, np.uint8)
    uv = np.empty((h // 2, w // 2, 2), np.uint8)
    uv[..., 0], uv[..., 1] = u, v
    return np.concatenate([luma.reshape(-1), uv.reshape(-1)])


def p010_frame(w, h, y, u, v):
    luma = np.full((h, w), y << 6, "<u2")
    uv = np.empty((h // 2, w // 2, 2), "<u2")
    uv[..., 0], uv[..., 1] = u << 6, v << 6
    return np.concatenate([luma.reshape(-1), uv.reshape(-1)]).view(np.uint8)


@pytest.mark.parametrize("matrix", ["bt601", "bt709", "bt2020"])
def test_limited_range_white_black_grey(matrix):
    for y, want in ((235, 1.0), (16, 0.0), (126, 110 / 219)):
        plan = make_plan(SourceFormat("YUYV", 8, 4), OutputSpec(8, 4, dtype="float32"), matrix=matrix)
        out = R.convert_frame(yuyv_frame(8, 4, y, 128, 128), plan)
        np.testing.assert_allclose(out, want, atol=1e-12)


def test_bt709_primaries_round_trip():
    # Encode pure red with BT.709 limited (8-bit), decode through the plan.
    kr, kb = 0.2126, 0.0722
    r, g, b = 1.0, 0.0, 0.0
    ey = kr * r + (1 - kr - kb) * g + kb * b
    cb, cr = (b - ey) / (2 * (1 - kb)), (r - ey) / (2 * (1 - kr))
    y, u, v = 16 + 219 * ey, 128 + 224 * cb, 128 + 224 * cr
    aff = yuv_to_rgb_affine("bt709", "limited", 8)
    np.testing.assert_allclose(aff @ [y, u, v, 1.0], [1, 0, 0], atol=1e-12)
    # Same in 10 bits, full range.
    aff10 = yuv_to_rgb_affine("bt2020", "full", 10)
    kr, kb = 0.2627, 0.0593
    ey = kr
    cb, cr = -ey / (2 * (1 - kb)), (1 - ey) / (2 * (1 - kr))
    code = np.array([1023 * ey, 512 + 1023 * cb, 512 + 1023 * cr, 1.0])
    np.testing.assert_allclose(aff10 @ code, [1, 0, 0], atol=1e-12)


def test_nv12_and_p010_white_match():
    for fmt, frame in (("NV12", nv12_frame(8, 4, 235, 128, 128)), ("P010", p010_frame(8, 4, 940, 512, 512))):
        plan = make_plan(SourceFormat(fmt, 8, 4), OutputSpec(4, 2, dtype="float32"))
        np.testing.assert_allclose(R.convert_frame(frame, plan), 1.0, atol=1e-12)


def test_rgb_identity_and_order():
    rng = np.random.default_rng(0)
    px = rng.integers(0, 256, (5, 6, 4), dtype=np.uint8)
    plan = make_plan(SourceFormat("XRGB8888", 6, 5), OutputSpec(6, 5, dtype="uint8", layout="NHWC"),
                     range="full", resize="bilinear")
    out = R.convert_frame(px.reshape(-1), plan)
    np.testing.assert_array_equal(out, px[..., [2, 1, 0]])  # XRGB8888 is B,G,R,X in memory
    plan_bgr = make_plan(SourceFormat("XBGR8888", 6, 5), OutputSpec(6, 5, dtype="uint8", order="BGR"),
                         range="full", resize="bilinear")
    out = R.convert_frame(px.reshape(-1), plan_bgr)  # XBGR8888 is R,G,B,X: BGR planes are 2,1,0
    np.testing.assert_array_equal(out, px[..., [2, 1, 0]].transpose(2, 0, 1))


def test_area_integer_factor_is_block_mean():
    rng = np.random.default_rng(1)
    px = rng.integers(0, 256, (8, 12, 4), dtype=np.uint8)
    plan = make_plan(SourceFormat("XBGR8888", 12, 8), OutputSpec(3, 2, dtype="float32", layout="NHWC"),
                     range="full", resize="area")
    out = R.convert_frame(px.reshape(-1), plan)
    want = px[..., :3].reshape(2, 4, 3, 4, 3).mean(axis=(1, 3)) / 255
    np.testing.assert_allclose(out, want, atol=1e-12)


def test_bilinear_half_scale_matches_pair_mean():
    # align_corners=False at exactly 2x lands halfway between two pixels.
    rng = np.random.default_rng(2)
    px = rng.integers(0, 256, (4, 8, 4), dtype=np.uint8)
    plan = make_plan(SourceFormat("XBGR8888", 8, 4), OutputSpec(4, 2, dtype="float32", layout="NHWC"),
                     range="full", resize="bilinear")
    out = R.convert_frame(px.reshape(-1), plan)
    want = px[..., :3].reshape(2, 2, 4, 2, 3).mean(axis=(1, 3)) / 255
    np.testing.assert_allclose(out, want, atol=1e-12)


def test_letterbox_geometry_and_pad():
    plan = make_plan(SourceFormat("NV12", 1920, 1080), OutputSpec(640, 640), letterbox=True,
                     pad_rgb=(0.5, 0.5, 0.5))
    assert plan.content == (0, 140, 640, 360)
    assert plan.resize == "area"
    frame = nv12_frame(64, 36, 235, 128, 128)
    small = make_plan(SourceFormat("NV12", 64, 36), OutputSpec(16, 16, dtype="float32"), letterbox=True,
                      pad_rgb=(0.25, 0.5, 0.75))
    out = R.convert_frame(frame, small)
    ox, oy, ow, oh = small.content
    assert (ox, ow) == (0, 16) and oh == 9
    np.testing.assert_allclose(out[:, oy:oy + oh], 1.0, atol=1e-12)
    np.testing.assert_allclose(out[:, 0, 0], [0.25, 0.5, 0.75])
    np.testing.assert_allclose(out[:, -1, -1], [0.25, 0.5, 0.75])


def test_mean_std_and_scale():
    plan = make_plan(SourceFormat("YUYV", 4, 2), OutputSpec(4, 2, dtype="float32", mean=(0.5, 0.25, 0.0),
                                                            std=(0.5, 0.25, 2.0)))
    out = R.convert_frame(yuyv_frame(4, 2, 235, 128, 128), plan)
    np.testing.assert_allclose(out[:, 0, 0], [1.0, 3.0, 0.5])
    u8 = make_plan(SourceFormat("YUYV", 4, 2), OutputSpec(4, 2, dtype="uint8"))
    assert R.convert_frame(yuyv_frame(4, 2, 235, 128, 128), u8).max() == 255


@pytest.mark.parametrize("kwargs, message", [
    (dict(src=SourceFormat("YUYV", 7, 4)), "width 7 is odd"),
    (dict(src=SourceFormat("NV12", 8, 5)), "height 5 is odd"),
    (dict(src=SourceFormat("YUYV", 8, 4, bytesperline=12)), "smaller than a row"),
    (dict(src=SourceFormat("NV12", 8, 4, bytesperline=8, bytesperline_uv=4)), "smaller than a chroma row"),
    (dict(src=SourceFormat("NV12", 10, 4)), "not a multiple of 4"),
    (dict(src=SourceFormat("MJPG", 8, 4)), "unsupported pixel format"),
    (dict(src=SourceFormat("YUYV", 0, 4)), "empty"),
    (dict(crop=(1, 0, 4, 4)), "crop x 1 is odd"),
    (dict(src=SourceFormat("NV12", 8, 4), crop=(0, 1, 4, 2)), "crop y 1 is odd"),
    (dict(crop=(0, 0, 9, 4)), "does not fit"),
    (dict(out=OutputSpec(16, 8), resize="area"), "area resampling is for downscaling"),
    (dict(out=OutputSpec(4, 4, std=(1, 0, 1))), "zero"),
    (dict(out=OutputSpec(4, 4, layout="CHW")), "layout"),
    (dict(out=OutputSpec(4, 4, dtype="int16")), "dtype"),
    (dict(matrix="bt2100"), "colour matrix"),
    (dict(range="studio"), "range"),
])
def test_bad_setups_are_refused(kwargs, message):
    args = dict(src=SourceFormat("YUYV", 8, 4), out=OutputSpec(4, 4))
    args.update(kwargs)
    src, out = args.pop("src"), args.pop("out")
    with pytest.raises(UsageError, match=message):
        make_plan(src, out, **args)


def test_area_words_cover_the_crop():
    for fmt, bpp in (("YUYV", 2), ("NV12", 1), ("P010", 2), ("XRGB8888", 4)):
        plan = make_plan(SourceFormat(fmt, 64, 32), OutputSpec(10, 10), resize="area", crop=(6, 2, 50, 28))
        words = K.area_words(plan)
        assert words.word_start0 * 4 <= 6 * bpp
        assert (words.word_start0 + words.word_count0) * 4 >= 56 * bpp
        assert (words.word_start0 + words.word_count0) * 4 <= plan.src.stride(0)


def test_launch_shape_and_table_checks():
    plan = make_plan(SourceFormat("NV12", 64, 32), OutputSpec(10, 10), resize="bilinear")
    assert K.launch_shape(plan, 3) == ((1, 2, 3), (32, 8, 1), 0)
    with pytest.raises(UsageError, match="not positive"):
        K.launch_shape(plan, 0)
    with pytest.raises(UsageError, match="aligned"):
        K.pointer_table(0x1000, [(0x2002, 0x3000)], plan)
    table = K.pointer_table(0x1000, [K.frame_planes(0x2000, plan)], plan)
    assert list(table) == [0x1000, 0x2000, 0x2000 + 64 * 32]
    wide = make_plan(SourceFormat("XRGB8888", 20000, 8), OutputSpec(100, 4), resize="area")
    with pytest.raises(UsageError, match="shared memory"):
        K.launch_shape(wide, 1)


def test_area_launch_from_resident_blocks():
    # Blocks an SM holds: registers in units of 256 a warp, shared memory plus
    # the 1 KB the driver reserves a block, at most 2048 threads.
    assert K.area_resident(48, 30 * 1024, 132, 228 * 1024) == 132 * 5
    assert K.area_resident(49, 30 * 1024, 132, 228 * 1024) == 132 * 4
    assert K.area_resident(32, 100 * 1024, 132, 228 * 1024) == 132 * 2
    assert K.area_resident(16, 1024, 132, 228 * 1024) == 132 * 8
    # Bands of 4 rows once the launch fills the GPU twice over, single rows for a small one.
    plan = make_plan(SourceFormat("YUYV", 1920, 1080), OutputSpec(224, 224), resize="area")
    assert K.launch_shape(plan, 32, 4, 132 * 5)[0] == (56, 32, 1)
    assert K.launch_shape(plan, 1, 4, 132 * 5)[0] == (224, 1, 1)


def test_params_by_value_are_the_packed_head():
    plan = make_plan(SourceFormat("NV12", 64, 32), OutputSpec(10, 7), resize="area")
    packed = K.pack_params(plan, None, 4)
    struct = K.param_struct(packed)
    assert struct.dtype.itemsize == K.PARAM_WORDS * 4
    assert struct.tobytes() == packed[:K.PARAM_WORDS * 4].tobytes()


@pytest.mark.parametrize("fmt", ["YUYV", "NV12", "P010", "XRGB8888"])
def test_area_spans_are_the_oracle_weights(fmt):
    # The kernel's Span table, expanded into weight matrices, is the oracle's
    # box filter (rows of luma and chroma, columns relative to shared memory).
    plan = make_plan(SourceFormat(fmt, 64, 32), OutputSpec(10, 7), resize="area", crop=(6, 2, 50, 28))
    words = K.area_words(plan, 4)
    table, start = K.area_spans(plan, words)
    base0, base1 = words.bases(plan)

    def expand(spans, n_in, base):
        # Both passes weight the end samples by w0, w1 (0 when n == 1) and
        # the samples between them by 1.
        w = np.zeros((len(spans), n_in))
        for k, s in enumerate(spans):
            n, i0 = s["n"], s["i0"] + base
            w[k, i0:i0 + n] = 1.0
            w[k, i0 + n - 1] = s["w1"]
            w[k, i0] = s["w0"]
        return w * spans["inv"][:, None]
    info = plan.info
    rows0 = table[:7] if not start["span_rows1"] else table[:start["span_rows1"]]
    np.testing.assert_allclose(expand(rows0, 32, 0), R.area_weights(7, 32, 2, 28 / 7), atol=1e-6)
    cols0 = table[start["span_cols0"]:start["span_cols0"] + 10]
    np.testing.assert_allclose(expand(cols0, 64, base0), R.area_weights(10, 64, 6, 5.0), atol=1e-6)
    if info.planes == 2:
        rows1 = table[start["span_rows1"]:start["span_cols0"]]
        np.testing.assert_allclose(expand(rows1, 16, 0), R.area_weights(7, 16, 2, 4.0, info.sub_y), atol=1e-6)
    if not info.rgb:
        cols1 = table[start["span_cols1"]:]
        np.testing.assert_allclose(expand(cols1, 32, base1), R.area_weights(10, 32, 6, 5.0, 2), atol=1e-6)
    assert words.shared_bytes == 8 * words.smem_row


def test_kernel_defines_and_source():
    # The block sizes in front of the kernel text come from the variant's
    # fields (the product's by default), as does the launch's block; its
    # own defines follow, and may not restate ours.
    head = K.kernel_source().split("\n")[:4]
    assert head == ["#define SITS_BILINEAR_THREADS 256", "#define SITS_AREA_THREADS 256", "#define SITS_INT_THREADS 256",
                    K.KERNEL_SOURCE_PATH.read_text().split("\n")[0]]
    variant = K.Variant(int_threads=320, defines=(("SITS_INT_MIN_BLOCKS", "4"),))
    head = K.kernel_source(variant).split("\n")[:5]
    assert head == ["#define SITS_BILINEAR_THREADS 256", "#define SITS_AREA_THREADS 256", "#define SITS_INT_THREADS 320",
                    "#define SITS_INT_MIN_BLOCKS 4", K.KERNEL_SOURCE_PATH.read_text().split("\n")[0]]
    plan = make_plan(SourceFormat("YUYV", 1920, 1080), OutputSpec(224, 224), resize="area")
    assert K.launch_shape(plan, 1, 4, variant=variant)[1] == (320, 1, 1)
    assert K.launch_shape(plan, 1, 4)[1] == (256, 1, 1)
    with pytest.raises(ValueError, match="SITS_INT_THREADS"):
        K.kernel_source(K.Variant(defines=(("SITS_INT_THREADS", "256"),)))


def test_the_product_choice_is_no_module_state():
    # Variants are passed, never set: kernel.py has no switch that a caller
    # could flip for everyone (a benchmark's choice stays its own).
    assert K.PRODUCT == K.Variant()
    for name in ("AREA_INTEGER", "AREA_INT_DOT", "AREA_BAND_ROWS", "parse_defines"):
        assert not hasattr(K, name), name
    plan = make_plan(SourceFormat("YUYV", 1920, 1080), OutputSpec(224, 224), resize="area")
    assert K.launch_shape(plan, 32, 4, variant=K.Variant(band_rows=2))[0][0] == 112
    assert K.launch_shape(plan, 32, 4)[0][0] == -(-224 // K.area_band_rows(plan, 32))
