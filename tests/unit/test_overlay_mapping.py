"""map_from_tensor inverts the CUDA stage's crop, resize and letterbox:
boxes a model gives in tensor pixels land on the frame's pixels."""
from types import SimpleNamespace

import numpy as np
import pytest

from sits.overlay import Box, Drawing, Mask, Polyline, Text, map_from_tensor

# 1280x720 letterboxed into 640x640: the picture is 640x360, 140 rows down.
LETTERBOX = SimpleNamespace(crop=(0, 0, 1280, 720), content=(0, 140, 640, 360))


def to_tensor(boxes, plan):
    """The forward map, written out independently: frame pixels -> tensor pixels."""
    (cx, cy, cw, ch), (tx, ty, tw, th) = plan.crop, plan.content
    b = np.asarray(boxes, dtype=np.float64)
    return np.stack([tx + (b[:, 0] - cx) * tw / cw, ty + (b[:, 1] - cy) * th / ch,
                     tx + (b[:, 2] - cx) * tw / cw, ty + (b[:, 3] - cy) * th / ch], axis=1)


def test_the_content_rectangle_is_the_whole_frame():
    got = map_from_tensor(np.array([[0, 140, 640, 500]]), LETTERBOX)
    assert got.tolist() == [[0.0, 0.0, 1280.0, 720.0]]


@pytest.mark.parametrize("plan", [
    LETTERBOX,
    SimpleNamespace(crop=(100, 50, 640, 360), content=(0, 0, 320, 180)),   # a crop, halved
    SimpleNamespace(crop=(0, 0, 1920, 1080), content=(0, 0, 224, 224)),    # stretched, no letterbox
    SimpleNamespace(crop=(0, 0, 720, 1280), content=(140, 0, 360, 640)),   # portrait: bars left and right
])
def test_it_inverts_the_forward_map(plan):
    rng = np.random.default_rng(1)
    cx, cy, cw, ch = plan.crop
    x = np.sort(rng.uniform(cx, cx + cw, (50, 2)), axis=1)
    y = np.sort(rng.uniform(cy, cy + ch, (50, 2)), axis=1)
    frame_boxes = np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], axis=1)
    back = map_from_tensor(to_tensor(frame_boxes, plan), plan)
    assert np.allclose(back, frame_boxes, rtol=0, atol=1e-9)


def test_what_lies_on_the_bars_is_clipped_to_the_picture():
    got = map_from_tensor([[-10, 0, 100, 150], [600, 480, 700, 640]], LETTERBOX)
    assert got.tolist() == [[0.0, 0.0, 200.0, 20.0], [1200.0, 680.0, 1280.0, 720.0]]


def test_a_real_plan_maps_the_same():
    from sits.cuda.formats import OutputSpec, SourceFormat, make_plan
    plan = make_plan(SourceFormat("XR24", 1280, 720), OutputSpec(640, 640), letterbox=True)
    assert plan.content == LETTERBOX.content
    boxes = np.array([[10.0, 150.0, 300.0, 400.0]])
    assert np.array_equal(map_from_tensor(boxes, plan), map_from_tensor(boxes, LETTERBOX))


def test_a_drawing_is_mapped_shape_by_shape():
    alpha = np.ones((4, 4), np.uint8)
    d = (Drawing().box(0, 140, 320, 320, "person 0.9", color=(1, 2, 3, 4), width=3)
         .polyline([(0, 140), (640, 500), (700, 600)], closed=True)
         .text(10, 150, "hello", size=20)
         .mask(alpha, 320, 140, scale=2))
    out = map_from_tensor(d, LETTERBOX)
    box, line, text, mask = out
    assert isinstance(out, Drawing) and len(d) == 4  # the original is left as it was
    assert (box.x0, box.y0, box.x1, box.y1) == (0.0, 0.0, 640.0, 360.0)
    assert (box.label, box.color, box.width) == ("person 0.9", (1, 2, 3, 4), 3.0)
    assert line.points.tolist() == [[0.0, 0.0], [1280.0, 720.0], [1280.0, 720.0]] and line.closed
    assert (text.x, text.y, text.size, text.text) == (20.0, 20.0, 20.0, "hello")
    assert (mask.x, mask.y, mask.scale) == (640.0, 0.0, (4.0, 4.0)) and mask.alpha is alpha
    assert next(iter(d)).y0 == 140.0


def test_a_single_shape_is_mapped():
    b = map_from_tensor(Box(0, 140, 640, 500), LETTERBOX)
    assert isinstance(b, Box) and (b.x1, b.y1) == (1280.0, 720.0)
    assert isinstance(map_from_tensor(Polyline([(0, 0), (1, 1)]), LETTERBOX), Polyline)
    assert isinstance(map_from_tensor(Text(0, 0, "t"), LETTERBOX), Text)
    assert isinstance(map_from_tensor(Mask(np.ones((1, 1))), LETTERBOX), Mask)


@pytest.mark.parametrize("plan, match", [
    (SimpleNamespace(crop=(0, 0, 10, 10)), "content"),
    (SimpleNamespace(crop=(0, 0, 10), content=(0, 0, 5, 5)), "crop"),
    (SimpleNamespace(crop=(0, 0, 10, 10), content=(0, 0, 0, 5)), "no area"),
])
def test_a_plan_without_its_rectangles_is_refused(plan, match):
    with pytest.raises(ValueError, match=match):
        map_from_tensor(np.zeros((1, 4)), plan)


def test_mapping_imports_nothing_of_cuda():
    import subprocess
    import sys
    code = ("import sys\nimport sits.overlay\n"
            "print(sorted(m for m in sys.modules if m.startswith(('cupy', 'sits.cuda', 'cairocffi'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
