"""render() writes premultiplied ARGB8888 (B, G, R, A bytes) straight into
the buffer it is given, checked against numpy-built expectations."""
import gc
import mmap
import subprocess
import sys
import weakref

import numpy as np
import pytest

from sits.errors import UsageError
from sits.overlay import Box, Drawing, Mask, render
from sits.overlay.render import blank

cairocffi = pytest.importorskip("cairocffi", reason="the overlay's renderer needs cairocffi (pip install 'sits[overlay]')")

W, H = 64, 48


def draw(drawing, width=W, height=H, stride=None, fill=0xAB):
    """The picture as (height, width, 4) B, G, R, A bytes, drawn over garbage."""
    stride = stride or width * 4
    buf = np.full(stride * height, fill, dtype=np.uint8)
    render(drawing, buf, width, height, stride)
    return buf.reshape(height, stride)[:, :width * 4].reshape(height, width, 4)


def bgra(color):
    """Premultiplied B, G, R, A bytes of a straight (r, g, b, a) colour."""
    r, g, b, a = color
    return np.array([round(c * a / 255) for c in (b, g, r)] + [a], dtype=np.uint8)


def test_an_opaque_box_is_its_outline_exactly_and_nothing_else():
    color = (200, 100, 50, 255)
    img = draw(Drawing().box(10, 5, 30, 25, color=color, width=2))
    expected = np.zeros((H, W, 4), np.uint8)
    expected[5:25, 10:30] = bgra(color)
    expected[7:23, 12:28] = 0  # inside the 2-pixel outline
    assert np.array_equal(img, expected)


def test_an_opaque_filled_box_interior_is_exactly_b_g_r_255():
    img = draw(Drawing().box(8, 8, 40, 30, color=(17, 130, 240), fill_alpha=255))
    assert (img[8:30, 8:40] == [240, 130, 17, 255]).all()
    img[8:30, 8:40] = 0
    assert not img.any()


def test_a_half_alpha_fill_is_premultiplied():
    color = (255, 128, 10, 128)
    img = draw(Drawing().box(0, 0, 20, 20, color=color, width=0, fill_alpha=255))
    got = img[0:20, 0:20].reshape(-1, 4).astype(int)
    assert (np.abs(got - bgra(color).astype(int)) <= 1).all()
    assert (got[:, 3] == 128).all()


def test_fill_alpha_scales_the_colour_alpha():
    img = draw(Drawing().box(0, 0, 20, 20, color=(0, 255, 0, 255), width=0, fill_alpha=64))
    assert (np.abs(img[10, 10].astype(int) - [0, 64, 0, 64]) <= 1).all()


def test_the_whole_frame_is_cleared_first():
    assert not draw(Drawing()).any()
    img = draw(Drawing().box(0, 0, 4, 4, fill_alpha=255))
    img[0:4, 0:4] = 0
    assert not img.any()


def test_blank_only_clears():
    buf = bytearray(b"\xff" * W * H * 4)
    blank(buf, W, H, W * 4)
    assert not any(buf)


def test_rows_land_at_stride_offsets_and_padding_is_left_alone():
    stride = W * 4 + 64
    buf = np.full(stride * H, 0xAB, dtype=np.uint8)
    render(Drawing().box(0, 10, W, 12, color=(255, 255, 255, 255), width=0, fill_alpha=255), buf, W, H, stride)
    rows = buf.reshape(H, stride)
    assert (rows[:, W * 4:] == 0xAB).all()  # the plane never scans them out
    px = rows[:, :W * 4].reshape(H, W, 4)
    assert (px[10:12] == 255).all()
    assert not px[:10].any() and not px[12:].any()


def test_a_mask_ramp_gives_proportional_premultiplied_values():
    ramp = np.tile(np.arange(256, dtype=np.uint8), (4, 1))  # 4 rows, alpha 0..255 across
    color = (255, 128, 0, 200)
    img = draw(Drawing().mask(ramp, x=0, y=3, color=color), width=256, height=10)
    coverage = ramp[0].astype(float) * color[3] / 255  # the mask's alpha times the colour's
    expected = np.stack([np.zeros(256), coverage * 128 / 255, coverage, coverage], axis=1)
    for row in range(3, 7):
        assert np.abs(img[row].astype(float) - expected).max() <= 1.0
    assert not img[:3].any() and not img[7:].any()


def test_a_float_mask_is_the_uint8_mask_and_scale_stretches_it():
    u8 = np.array([[0, 255], [128, 64]], dtype=np.uint8)
    as_u8 = draw(Drawing().mask(u8, 5, 6, color=(0, 0, 255, 255)))
    as_float = draw(Drawing().mask(u8 / 255.0, 5, 6, color=(0, 0, 255, 255)))
    assert np.array_equal(as_u8, as_float)
    assert as_u8[6, 6, 3] == 255 and as_u8[6, 5, 3] == 0 and as_u8[7, 5, 3] == 128
    solid = np.full((2, 3), 255, np.uint8)
    img = draw(Drawing().mask(solid, 4, 8, scale=(4, 2)))
    assert np.array_equal(np.argwhere(img[..., 3] == 255)[[0, -1]], [[8, 4], [11, 15]])


def test_text_is_drawn_only_near_its_position():
    size = 16
    img = draw(Drawing().text(20, 10, "Hi 42", size=size), width=200, height=100)
    ys, xs = np.nonzero(img[..., 3])
    assert len(ys) > 20
    assert ys.min() >= 10 and ys.max() < 10 + 1.5 * size
    assert xs.min() >= 19 and xs.max() < 20 + 5 * size
    # white text: premultiplied, so no colour byte exceeds its alpha
    assert (img[..., :3] <= img[..., 3:4]).all()


def test_a_label_sits_above_the_box_on_its_colour():
    color = (0, 0, 255, 255)
    img = draw(Drawing().box(30, 50, 90, 90, "car", color=color), width=160, height=100)
    above = img[20:50, 30:90]
    assert (above == bgra(color)).all(axis=2).sum() > 100  # the background
    assert (above[..., :3] == 255).all(axis=2).any()  # white text on the blue
    assert not img[:, :29].any()  # starts at the box's left edge
    assert not img[:20].any()


def test_a_label_with_no_room_above_goes_inside_the_frame():
    img = draw(Drawing().box(140, 0, 160, 30, "long label text", color=(255, 0, 0, 255)), width=160, height=60)
    top_row = img[1]
    assert (top_row == [0, 0, 255, 255]).all(axis=1).sum() > 40  # the background, pulled left into the frame
    assert not img[35:].any()


def test_a_polyline_is_stroked_and_closed_when_asked():
    img = draw(Drawing().polyline([(10, 20), (50, 20)], color=(255, 255, 255, 255), width=2))
    assert (img[19:21, 12:48] == 255).all()
    assert not img[:17].any() and not img[23:].any()
    tri = [(10, 10), (40, 10), (40, 40)]
    open_ = draw(Drawing().polyline(tri, width=2))
    closed = draw(Drawing().polyline(tri, width=2, closed=True))
    assert not open_[25, 25].any() and closed[25, 25, 3] > 0  # on the closing diagonal


def test_render_keeps_no_reference_to_the_buffer():
    m = mmap.mmap(-1, W * H * 4)
    render(Drawing().box(1, 1, 9, 9, "x"), m, W, H, W * 4)
    m.close()  # BufferError if something still exported its memory
    ba = bytearray(W * H * 4)
    render(Drawing().mask(np.ones((3, 3), np.uint8)), ba, W, H, W * 4)
    ba.extend(b"more")  # BufferError while exported
    arr = np.zeros(W * H * 4, np.uint8)
    ref = weakref.ref(arr)
    before = sys.getrefcount(arr)
    render(Drawing().box(1, 1, 9, 9), arr, W, H, W * 4)
    assert sys.getrefcount(arr) == before
    del arr
    gc.collect()
    assert ref() is None


def test_a_2d_uint32_array_is_a_buffer_too():
    arr = np.zeros((H, W), dtype=np.uint32)
    render(Drawing().box(0, 0, 2, 2, color=(1, 2, 3, 255), width=0, fill_alpha=255), arr, W, H, W * 4)
    assert arr[0, 0] == 0xFF010203  # ARGB8888 as one little-endian word


@pytest.mark.parametrize("buf, stride, match", [
    (bytearray(W * H * 4), W * 4 - 4, "stride"),
    (bytearray(W * H * 4 - 1), W * 4, "needs"),
    (bytes(W * H * 4), W * 4, "read-only"),
    (np.zeros((H, W * 8), np.uint8)[:, ::2], W * 4, "contiguous"),
])
def test_bad_buffers_are_refused(buf, stride, match):
    with pytest.raises(ValueError, match=match):
        render(Drawing(), buf, W, H, stride)


def test_numpy_integers_are_sizes_too():
    buf = np.full(W * H * 4, 7, np.uint8)
    render(Drawing(), buf, np.int64(W), np.uint32(H), np.int32(W * 4))
    assert not buf.any()
    with pytest.raises(ValueError, match="width"):
        render(Drawing(), buf, 0, H, W * 4)


def test_render_takes_only_a_drawing():
    with pytest.raises(TypeError):
        render([Box(0, 0, 1, 1)], bytearray(W * H * 4), W, H, W * 4)


def test_without_cairocffi_import_works_and_render_says_what_to_install():
    code = ("import sys; sys.modules['cairocffi'] = None\n"
            "import sits.overlay as o\n"
            "from sits.errors import UsageError\n"
            "try:\n"
            "    o.render(o.Drawing(), bytearray(16), 2, 2, 8)\n"
            "except UsageError as e:\n"
            "    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "pip install 'sits[overlay]'" in r.stdout


def test_a_missing_cairocffi_is_a_usage_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cairocffi", None)
    with pytest.raises(UsageError, match="cairocffi"):
        render(Drawing(), bytearray(16), 2, 2, 8)


def test_mask_shape_is_premultiplied_like_a_box():
    # The same coverage through a mask and through a fill gives the same bytes.
    color = (90, 180, 30, 255)
    via_mask = draw(Drawing().mask(np.full((8, 8), 128, np.uint8), 4, 4, color=color))
    via_fill = draw(Drawing().add(Box(4, 4, 12, 12, color=color, width=0, fill_alpha=128)))
    assert np.abs(via_mask.astype(int) - via_fill.astype(int)).max() <= 1
    assert isinstance(Mask(np.zeros((1, 1), np.uint8)), Mask)


def test_render_without_clear_draws_over_what_is_there():
    buf = np.zeros((20, 20 * 4), np.uint8)
    render(Drawing().box(0, 0, 10, 10, color=(255, 0, 0, 255), width=0, fill_alpha=255), buf, 20, 20, 80)
    render(Drawing().box(10, 10, 20, 20, color=(0, 0, 255, 255), width=0, fill_alpha=255), buf, 20, 20, 80,
           clear=False)
    px = buf.reshape(20, 20, 4)
    assert (px[5, 5] == [0, 0, 255, 255]).all() and (px[15, 15] == [255, 0, 0, 255]).all()
