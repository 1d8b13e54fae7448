"""Overlay drawings' boxes and masks drawn by the GPU (sits/cuda/overlay.py)
into device memory and into host memory the GPU maps (as the overlay
plane's registered buffers are): equal to cairo's drawing of the same
shapes where cairo is here (whole-pixel boxes, unscaled masks), and to a
numpy drawing of a pixel's centre and the nearest mask sample for scaled
masks; labels and text left for cairo."""
import ctypes

import numpy as np
import pytest

from sits.overlay import Drawing

pytestmark = pytest.mark.cuda

W, H = 200, 120
PITCH = 208 * 4     # wider than the rows: rows land at the pitch


@pytest.fixture(scope="module")
def gpu():
    pytest.importorskip("cupy")
    from sits.cuda.overlay import GpuDrawing
    return GpuDrawing(W, H, PITCH)


def shapes() -> Drawing:
    ramp = np.tile(np.linspace(0, 255, 40).astype(np.uint8), (30, 1))
    return (Drawing()
            .box(10, 10, 90, 60, color=(255, 0, 0, 255), width=3)                      # an outline
            .box(30, 20, 120, 100, color=(0, 128, 255, 200), width=2, fill_alpha=96)   # translucent, over it
            .mask(ramp, x=100, y=60, color=(0, 255, 0, 180))                         # an alpha ramp, over both
            .box(150, 5, 190, 40, color=(255, 255, 0, 255), width=30))               # an outline that fills it


def draw_on_device(gpu, drawing) -> np.ndarray:
    import cupy as cp
    out = cp.full((H, PITCH), 7, cp.uint8)      # garbage that must go
    rest = gpu.draw(drawing, out.data.ptr)
    cp.cuda.get_current_stream().synchronize()
    img = cp.asnumpy(out)
    assert (img[:, W * 4:] == 7).all()          # the padding is not the image's
    return img[:, :W * 4].reshape(H, W, 4), rest


def numpy_drawing(drawing) -> np.ndarray:
    """Premultiplied B, G, R, A bytes: each shape over the last at each pixel's centre, in float64."""
    yy, xx = np.mgrid[0:H, 0:W] + 0.5
    p = np.zeros((H, W, 4))     # R, G, B, A
    for s in drawing:
        inside = (xx >= s.x0) & (yy >= s.y0) if hasattr(s, "x0") else None

        def over(k, color):
            rgb = np.asarray(color[:3], float) / 255
            k = k[..., None]
            p[..., :3] = rgb * k + p[..., :3] * (1 - k)
            p[..., 3:] = k + p[..., 3:] * (1 - k)
        if hasattr(s, "x0"):
            inside &= (xx < s.x1) & (yy < s.y1)
            a = s.color[3] / 255
            if s.fill_alpha:
                over(np.where(inside, (s.color[3] * s.fill_alpha // 255) / 255, 0.0), s.color)
            lw = s.width
            ring = inside & ((2 * lw >= min(s.x1 - s.x0, s.y1 - s.y0)) | (xx < s.x0 + lw) | (xx >= s.x1 - lw)
                             | (yy < s.y0 + lw) | (yy >= s.y1 - lw))
            over(np.where(ring & (lw > 0), a, 0.0), s.color)
        else:
            alpha = s.alpha_u8()
            h, w = alpha.shape
            sx, sy = s.scale
            inside = (xx >= s.x) & (yy >= s.y) & (xx < s.x + w * sx) & (yy < s.y + h * sy)
            mx = np.clip(((xx - s.x) / sx).astype(int), 0, w - 1)
            my = np.clip(((yy - s.y) / sy).astype(int), 0, h - 1)
            over(np.where(inside, s.color[3] / 255 * alpha[my, mx] / 255, 0.0), s.color)
    return np.rint(p[..., [2, 1, 0, 3]] * 255).astype(np.uint8)


def test_boxes_and_masks_equal_cairos_drawing_of_them(gpu):
    try:
        import cairocffi  # noqa: F401 - the independent drawing
    except (ImportError, OSError) as exc:   # OSError: cairocffi found no libcairo
        pytest.skip(f"no cairo here to compare with: {str(exc).splitlines()[0]}")
    from sits.overlay import render
    drawing = shapes()
    mine, _ = draw_on_device(gpu, drawing)
    theirs = np.zeros((H, PITCH), np.uint8)
    render(drawing, theirs, W, H, PITCH)
    theirs = theirs[:, :W * 4].reshape(H, W, 4)
    assert np.abs(mine.astype(int) - theirs).max() <= 1


def test_a_scaled_mask_takes_its_nearest_sample(gpu):
    alpha = np.array([[0, 255], [128, 64]], np.uint8)
    drawing = Drawing().mask(alpha, x=20, y=30, color=(255, 128, 0, 255), scale=(16, 8)).box(
        5, 5, 15, 15, color=(10, 20, 30, 255), width=0, fill_alpha=255)
    mine, _ = draw_on_device(gpu, drawing)
    assert np.abs(mine.astype(int) - numpy_drawing(drawing)).max() <= 1
    assert (mine[30:38, 36:52] == [0, 128, 255, 255]).all()     # the 255 sample, 16 x 8 pixels, opaque orange


def test_labels_and_text_are_left_for_cairo(gpu):
    drawing = Drawing().box(10, 10, 50, 50, label="person 0.9").text(0, 0, "frame 3").polyline([(0, 0), (9, 9)])
    _, rest = draw_on_device(gpu, drawing)
    kinds = [type(s).__name__ for s in rest]
    assert kinds == ["Box", "Text", "Polyline"] and rest._shapes[0].width == 0 and rest._shapes[0].label


def test_it_draws_into_host_memory_the_gpu_maps(gpu):
    import cupy as cp

    from sits.cuda.hostmem import host_device_pointer
    rt = cp.cuda.runtime
    host = rt.hostAlloc(H * PITCH, 0x02)     # cudaHostAllocMapped: what a registered buffer is to the GPU
    try:
        ctypes.memset(host, 0x55, H * PITCH)
        drawing = shapes()
        gpu.draw(drawing, host_device_pointer(cp, host))
        cp.cuda.get_current_stream().synchronize()
        img = np.ctypeslib.as_array((ctypes.c_uint8 * (H * PITCH)).from_address(host)).reshape(H, PITCH).copy()
    finally:
        rt.freeHost(host)
    mine = img[:, :W * 4].reshape(H, W, 4)
    assert np.abs(mine.astype(int) - numpy_drawing(drawing)).max() <= 1
    assert (mine[0, 0] == 0).all()           # cleared where no shape is


def test_a_box_off_the_pixel_grid_takes_the_pixels_whose_centres_it_holds(gpu):
    drawing = Drawing().box(10.6, 10.2, 20.4, 20.5, color=(255, 255, 255, 255), width=0, fill_alpha=255)
    mine, _ = draw_on_device(gpu, drawing)
    covered = mine[..., 3] == 255
    rows, cols = np.nonzero(covered)
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (10, 19, 11, 19)
    assert (mine == numpy_drawing(drawing)).all()


def test_it_draws_into_a_registered_memfd_as_the_overlay_planes_buffers_are(gpu):
    from sits.cuda.hostmem import HostRegistry
    from sits.dmabuf.udmabuf import MemFd
    memfd = MemFd.create(H * PITCH, "sits-overlay-test")
    registry = HostRegistry()
    try:
        memfd.map()[:] = b"\x55" * (H * PITCH)
        drawing = shapes()
        gpu.draw(drawing, registry.register(memfd).device_pointer)
        gpu.wait()
        img = np.frombuffer(memfd.map(), np.uint8).reshape(H, PITCH)[:, :W * 4].reshape(H, W, 4).copy()
    finally:
        registry.unregister(memfd)
        memfd.close()
    assert np.abs(img.astype(int) - numpy_drawing(drawing)).max() <= 1
