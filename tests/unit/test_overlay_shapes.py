"""The overlay's shapes check their fields when they are made (one
ValueError naming the field), and a Drawing keeps them in order."""
import numpy as np
import pytest

from sits.overlay import Box, Drawing, Mask, Polyline, Text


@pytest.mark.parametrize("make, field", [
    (lambda: Box(0, 0, 10, 10, color=(0, 300, 0, 255)), "Box.color"),
    (lambda: Box(0, 0, 10, 10, color=(0, 255)), "Box.color"),
    (lambda: Box(0, 0, 10, 10, color="green"), "Box.color"),
    (lambda: Box(0, 0, 10, 10, color=(0.5, 0, 0, 255)), "Box.color"),
    (lambda: Box(float("nan"), 0, 10, 10), "Box.x0"),
    (lambda: Box(0, "1", 10, 10), "Box.y0"),
    (lambda: Box(10, 0, 5, 10), "x1 < x0"),
    (lambda: Box(0, 10, 5, 5), "y1 < y0"),
    (lambda: Box(0, 0, 10, 10, width=-1), "Box.width"),
    (lambda: Box(0, 0, 10, 10, fill_alpha=256), "Box.fill_alpha"),
    (lambda: Box(0, 0, 10, 10, label=3), "Box.label"),
    (lambda: Polyline([(0, 0)]), "Polyline.points"),
    (lambda: Polyline([(0, 0, 1), (1, 1, 1)]), "Polyline.points"),
    (lambda: Polyline([(0, 0), (1, float("inf"))]), "Polyline.points"),
    (lambda: Polyline([(0, 0), (1, 1)], width=0), "Polyline.width"),
    (lambda: Polyline([(0, 0), (1, 1)], color=(1, 2, 3, 4, 5)), "Polyline.color"),
    (lambda: Mask(np.zeros((2, 2, 3), np.uint8)), "Mask.alpha"),
    (lambda: Mask([[0, 1]]), "Mask.alpha"),
    (lambda: Mask(np.zeros((2, 2), np.int32)), "Mask.alpha"),
    (lambda: Mask(np.full((2, 2), 1.5)), "Mask.alpha"),
    (lambda: Mask(np.zeros((2, 2), np.uint8), color=(0, 0, 0, -1)), "Mask.color"),
    (lambda: Mask(np.zeros((2, 2), np.uint8), scale=0), "Mask.scale"),
    (lambda: Text(0, 0, b"bytes"), "Text.text"),
    (lambda: Text(0, 0, "x", size=0), "Text.size"),
    (lambda: Text(0, 0, "x", background=(0, 0, 0, 999)), "Text.background"),
])
def test_a_bad_field_is_one_value_error_naming_it(make, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        make()


def test_fields_are_normalised():
    b = Box(np.int64(1), 2.5, np.float32(10), 20, color=(1, 2, 3))
    assert (b.x0, b.y0, b.x1, b.y1) == (1.0, 2.5, 10.0, 20.0)
    assert b.color == (1, 2, 3, 255) and isinstance(b.x0, float)
    assert Box(0, 0, 1, 1, color=np.array([4, 5, 6, 7], np.uint8)).color == (4, 5, 6, 7)
    p = Polyline([[0, 0], [3, 4]])
    assert p.points.dtype == np.float64 and not p.points.flags.writeable
    m = Mask(np.zeros((2, 3), np.uint8), 1, 2, scale=2)
    assert m.scale == (2.0, 2.0) and (m.x, m.y) == (1.0, 2.0)
    assert Mask(np.zeros((2, 3), np.uint8), scale=(1, 3)).scale == (1.0, 3.0)


def test_mask_alpha_u8_rounds_floats():
    ramp = np.linspace(0, 1, 11).reshape(1, 11)
    assert Mask(ramp).alpha_u8().tolist() == [np.rint(ramp[0] * 255).astype(int).tolist()]
    u8 = np.arange(6, dtype=np.uint8).reshape(2, 3)
    assert Mask(u8).alpha_u8() is u8


def test_drawing_methods_append_in_order_and_chain():
    d = Drawing()
    same = d.box(0, 0, 4, 4, "a").polyline([(0, 0), (1, 1)]).mask(np.ones((1, 1), np.uint8)).text(1, 2, "t")
    assert same is d and len(d) == 4
    assert [type(s) for s in d] == [Box, Polyline, Mask, Text]
    assert list(Drawing(d)) == list(d)
    assert len(Drawing()) == 0 and list(Drawing()) == []
    with pytest.raises(TypeError, match="dict"):
        Drawing().add({"x0": 1})
    with pytest.raises(ValueError, match="Box.color"):
        Drawing().box(0, 0, 1, 1, color=(0, 0, 0, 256))


def test_from_boxes_labels_and_scores():
    boxes = np.array([[10, 20, 30, 40], [1.5, 2.5, 3.5, 4.5]], dtype=np.float32)
    d = Drawing.from_boxes(boxes, labels=["person", 7], scores=np.array([0.934, 0.5]), color=(255, 0, 0, 255))
    got = [(b.x0, b.y0, b.x1, b.y1, b.label, b.color) for b in d]
    assert got == [(10.0, 20.0, 30.0, 40.0, "person 0.93", (255, 0, 0, 255)),
                   (1.5, 2.5, 3.5, 4.5, "7 0.50", (255, 0, 0, 255))]
    assert [b.label for b in Drawing.from_boxes(boxes)] == [None, None]
    assert [b.label for b in Drawing.from_boxes(boxes, scores=[0.1, 0.2])] == ["0.10", "0.20"]
    assert len(Drawing.from_boxes(np.zeros((0, 4)))) == 0 and len(Drawing.from_boxes([])) == 0


@pytest.mark.parametrize("boxes", [np.zeros((3, 5)), np.zeros(4), [[1, 2, 3]], "boxes"])
def test_from_boxes_refuses_other_shapes(boxes):
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        Drawing.from_boxes(boxes)


def test_from_boxes_refuses_mismatched_labels():
    with pytest.raises(ValueError, match="1 labels for 2 boxes"):
        Drawing.from_boxes(np.zeros((2, 4)), labels=["a"])
