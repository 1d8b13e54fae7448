"""What the GPU's overlay kernel is given (sits/cuda/overlay.split): each
box and mask as a record of kernels/overlay.cu's SitsShape, masks' bytes
one after another, the rest (labels, text, polylines) for cairo."""
import numpy as np

from sits.cuda.overlay import SHAPE, split
from sits.overlay import Drawing


def test_the_struct_is_thirteen_words():
    assert SHAPE.itemsize == 52


def test_boxes_and_masks_become_records_and_labels_stay_for_cairo():
    a = np.full((2, 3), 200, np.uint8)
    b = np.ones((4, 5), np.float32)
    d = (Drawing().box(1, 2, 30, 40, label="cat", color=(10, 20, 30, 128), width=2, fill_alpha=255)
         .mask(a, x=5, y=6, color=(1, 2, 3, 4), scale=2).text(0, 0, "hi").mask(b, x=0, y=0))
    table, masks, rest = split(d)
    assert list(table["kind"]) == [0, 1, 1]
    box, m1, m2 = table
    assert (box["x0"], box["y1"], box["line"], box["fill"]) == (1, 40, 2, 128)
    assert box["rgba"] == 10 | 20 << 8 | 30 << 16 | 128 << 24
    assert (m1["x1"], m1["y1"], m1["sx"], m1["mask_at"], m1["mask_w"], m1["mask_h"]) == (11, 10, 0.5, 0, 3, 2)
    assert (m2["mask_at"], m2["mask_w"], m2["mask_h"]) == (6, 5, 4)
    assert masks.size == 26 and (masks[:6] == 200).all() and (masks[6:] == 255).all()
    labels = list(rest)
    assert [type(s).__name__ for s in labels] == ["Box", "Text"]
    assert labels[0].label == "cat" and labels[0].width == 0 and labels[0].fill_alpha == 0
