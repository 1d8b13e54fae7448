"""FrameView (what an overlay callback gets) and the built-in demo detector
on synthetic frames: a still picture of colour bars gets a "bright" box,
what changes between two frames a "motion" box."""
import numpy as np
import pytest
from cffi import FFI

from sits.overlay import Box, FrameView, Text
from sits.overlay.demo import Demo, groups

W, H = 384, 240  # whole 16-pixel cells; each bar is three cells wide
# 75% colour bars, (r, g, b), as vivid shows them
BARS = [(191, 191, 191), (191, 191, 0), (0, 191, 191), (0, 191, 0), (191, 0, 191), (191, 0, 0), (0, 0, 191), (0, 0, 0)]


def bars_xr24(width=W, height=H, bytesperline=None) -> np.ndarray:
    bpl = bytesperline or width * 4
    buf = np.zeros((height, bpl), np.uint8)
    px = buf[:, :width * 4].reshape(height, width, 4)
    for i, (r, g, b) in enumerate(BARS):
        px[:, i * width // 8:(i + 1) * width // 8] = (b, g, r, 255)
    return buf


def xr24(seq, buf) -> FrameView:
    return FrameView(seq, seq * 33_333_333, "XR24", W, H, buf.shape[1], buf)


def boxes(drawing):
    return [(b.label, b.x0, b.y0, b.x1, b.y1) for b in drawing if isinstance(b, Box)]


# FrameView

def test_pixels_are_a_read_only_view_of_the_rows():
    buf = bytearray(range(256)) * 10
    f = FrameView(3, 5, "GREY", 10, 20, 12, buf)
    assert f.pixels.shape == (20, 12) and f.pixels.dtype == np.uint8
    assert f.pixels[1, 0] == 12
    with pytest.raises(ValueError):
        f.pixels[0, 0] = 1
    with pytest.raises(ValueError):
        f.pixels.flags.writeable = True
    buf[12] = 99
    assert f.pixels[1, 0] == 99  # no copy
    assert (f.sequence, f.timestamp_ns, f.fourcc, f.width, f.height, f.bytesperline) == (3, 5, "GREY", 10, 20, 12)


def test_nv12_spans_one_and_a_half_heights_of_rows():
    assert FrameView(0, 0, "NV12", 8, 6, 16, bytearray(16 * 9)).pixels.shape == (9, 16)
    with pytest.raises(ValueError, match="needs 144 bytes"):
        FrameView(0, 0, "NV12", 8, 6, 16, bytearray(16 * 6))


def test_a_cffi_buffer_is_a_buffer():
    ffi = FFI()
    mem = ffi.new("unsigned char[]", 4 * 2 * 2)
    mem[5] = 200
    f = FrameView(0, 0, "XR24", 2, 2, 8, ffi.buffer(mem))
    assert f.pixels[0, 5] == 200


def test_luma_of_bgrx_is_the_weighted_sum():
    rng = np.random.default_rng(0)
    buf = rng.integers(0, 256, (H, W * 4 + 32), dtype=np.uint8)  # with padding at each row's end
    px = buf[:, :W * 4].reshape(H, W, 4).astype(np.int64)
    expected = (77 * px[..., 2] + 150 * px[..., 1] + 29 * px[..., 0]) // 256
    got = FrameView(0, 0, "XR24", W, H, W * 4 + 32, buf).luma()
    assert got.shape == (H, W) and got.dtype == np.uint8
    assert np.array_equal(got, expected)
    rgbx = FrameView(0, 0, "XB24", W, H, W * 4 + 32, buf).luma()  # R, G, B, X: R and B swap
    assert np.array_equal(rgbx, (77 * px[..., 0] + 150 * px[..., 1] + 29 * px[..., 2]) // 256)
    xrgb = FrameView(0, 0, "BX24", W, H, W * 4 + 32, buf).luma()  # X, R, G, B
    assert np.array_equal(xrgb, (77 * px[..., 1] + 150 * px[..., 2] + 29 * px[..., 3]) // 256)
    white = np.full((2, 8), 255, np.uint8)
    assert (FrameView(0, 0, "AR24", 2, 2, 8, white).luma() == 255).all()
    assert (FrameView(0, 0, "AB24", 2, 2, 8, white).luma() == 255).all()


@pytest.mark.parametrize("fourcc, r, b", [("BGR3", 2, 0), ("RGB3", 0, 2)])
def test_luma_of_24_bit_rgb_is_the_weighted_sum(fourcc, r, b):
    buf = np.random.default_rng(4).integers(0, 256, (H, W * 3 + 4), dtype=np.uint8)
    px = buf[:, :W * 3].reshape(H, W, 3).astype(np.int64)
    expected = (77 * px[..., r] + 150 * px[..., 1] + 29 * px[..., b]) // 256
    assert np.array_equal(FrameView(0, 0, fourcc, W, H, W * 3 + 4, buf).luma(), expected)


@pytest.mark.parametrize("fourcc, y_at", [("YUYV", 0), ("UYVY", 1)])
def test_luma_of_packed_yuv_is_its_y_bytes(fourcc, y_at):
    buf = np.arange(4 * 40, dtype=np.uint32).astype(np.uint8).reshape(4, 40)  # 16 pixels wide, 8 bytes padding
    y = FrameView(0, 0, fourcc, 16, 4, 40, buf).luma()
    assert np.array_equal(y, buf[:, y_at:32:2])


@pytest.mark.parametrize("fourcc", ["NV12", "NV21", "YU12", "YV12", "GREY"])
def test_luma_of_planar_yuv_is_the_y_plane(fourcc):
    rows = 9 if fourcc != "GREY" else 6
    buf = np.random.default_rng(2).integers(0, 256, (rows, 12), dtype=np.uint8)
    y = FrameView(0, 0, fourcc, 10, 6, 12, buf).luma()
    assert np.array_equal(y, buf[:6, :10])


@pytest.mark.parametrize("fourcc, bpl", [("XR24", W * 4), ("BGR3", W * 3), ("YUYV", W * 2), ("GREY", W)])
def test_luma_into_out_is_a_copy_of_the_same_values(fourcc, bpl):
    buf = np.random.default_rng(5).integers(0, 256, (H, bpl), dtype=np.uint8)
    f = FrameView(0, 0, fourcc, W, H, bpl, buf)
    out = np.empty((H, W), np.uint8)
    assert f.luma(out=out) is out
    assert np.array_equal(out, f.luma())
    kept = out.copy()
    buf[:] = 0  # the capture buffer refilled: what went into out stays
    assert np.array_equal(out, kept)
    with pytest.raises(ValueError, match="out must be"):
        f.luma(out=np.empty((H, W + 1), np.uint8))


def test_luma_of_an_unknown_format_names_it():
    with pytest.raises(ValueError, match="'MJPG'"):
        FrameView(0, 0, "MJPG", 4, 4, 16, bytearray(64)).luma()


# the demo

def test_a_still_picture_gets_a_bright_box_around_the_white_bar():
    d = Demo()
    buf = bars_xr24()
    for seq in (0, 1):  # the first frame has nothing to compare with, the second nothing moved
        assert boxes(d(xr24(seq, buf))) == [("bright", 0.0, 0.0, W / 8, float(H))]


def test_text_on_the_white_bar_does_not_shrink_the_bright_box_to_the_text():
    buf = bars_xr24()
    buf[20:30:2, 4 * 8:4 * 40] = 255  # vivid's text: a few brighter strokes on the white bar
    assert boxes(Demo()(xr24(0, buf))) == [("bright", 0.0, 0.0, W / 8, float(H))]


def test_what_changes_between_two_frames_gets_a_motion_box():
    d = Demo()
    first = bars_xr24()
    d(xr24(0, first))
    second = first.copy()
    # a "text line" that changes: a few glyph-like strokes over cells 2..4 (x) of cell row 3 (y)
    second[50:62:2, 4 * (40):4 * 70] = 255
    drawing = d(xr24(1, second))
    assert boxes(drawing) == [("motion", 32.0, 48.0, 80.0, 64.0)]
    texts = [s for s in drawing if isinstance(s, Text)]
    assert [t.text for t in texts] == ["sits overlay demo  frame 1"] and (texts[0].x, texts[0].y) == (8.0, 8.0)


def test_a_buffer_refilled_in_place_still_shows_motion():
    # A capture ring reuses its buffers: the demo keeps its own copy of the previous picture.
    buf = np.zeros((H, W), np.uint8)
    d = Demo()
    d(FrameView(0, 0, "GREY", W, H, W, buf))
    buf[100:110, 100:110] = 200
    assert [b[0] for b in boxes(d(FrameView(1, 0, "GREY", W, H, W, buf)))] == ["motion"]


def test_noise_is_not_motion():
    rng = np.random.default_rng(3)
    base = bars_xr24().astype(np.int16)
    d = Demo()
    for seq in range(3):
        noisy = np.clip(base + rng.integers(-8, 9, base.shape), 0, 255).astype(np.uint8)
        assert [b[0] for b in boxes(d(xr24(seq, noisy)))] == ["bright"]


def test_at_most_eight_boxes_largest_first():
    d = Demo()
    d(FrameView(0, 0, "GREY", W, H, W, np.zeros((H, W), np.uint8)))
    moved = np.zeros((H, W), np.uint8)
    for i in range(12):  # twelve separate changes, two cells between them, the last ones larger
        x = (i % 6) * 48
        y = (i // 6) * 96
        moved[y:y + 16 + 16 * (i >= 10), x:x + 16] = 255
    got = boxes(d(FrameView(1, 0, "GREY", W, H, W, moved)))
    assert len(got) == 8 and all(b[0] == "motion" for b in got)
    assert got[0][4] - got[0][2] == 32 and got[1][4] - got[1][2] == 32


def test_groups_join_cells_one_apart_and_box_their_own_cells():
    cells = np.zeros((6, 10), bool)
    cells[1, 1] = cells[1, 3] = True   # one cell between: one group
    cells[3, 5] = True                 # one cell between, diagonally: the same group
    cells[3, 8] = True                 # two cells between: a group of its own
    assert groups(cells, 8) == [(1, 1, 4, 6), (3, 8, 4, 9)]
    assert groups(cells, 1) == [(1, 1, 4, 6)]
    assert groups(np.zeros((3, 3), bool), 8) == []


def flood_groups(cells):
    """The groups by brute force: cells join when both coordinates differ by at most 2."""
    todo = {tuple(c) for c in np.argwhere(cells).tolist()}
    out = []
    while todo:
        stack = [todo.pop()]
        members = []
        while stack:
            y, x = stack.pop()
            members.append((y, x))
            near = {c for c in todo if abs(c[0] - y) <= 2 and abs(c[1] - x) <= 2}
            todo -= near
            stack.extend(near)
        ys, xs = zip(*members)
        out.append((min(ys), min(xs), max(ys) + 1, max(xs) + 1))
    return sorted(out)


@pytest.mark.parametrize("density", [0.02, 0.1, 0.3, 0.9])
def test_groups_are_the_brute_force_groups(density):
    rng = np.random.default_rng(int(density * 100))
    for _ in range(20):
        cells = rng.random((15, 24)) < density
        assert sorted(groups(cells, 10_000)) == flood_groups(cells)


def test_a_frame_smaller_than_a_cell_still_gets_its_text():
    drawing = Demo()(FrameView(7, 0, "GREY", 8, 8, 8, bytearray(64)))
    assert boxes(drawing) == [] and [type(s) for s in drawing] == [Text]
