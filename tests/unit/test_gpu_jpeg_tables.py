"""The GPU JPEG stage's Huffman tables: the standard ones it puts in front of
a scan that has none are those libjpeg-turbo writes by default (its own
copy of ITU-T T.81 Annex K.3); a frame without them decodes as with them
once they are put back; a frame with them is left as it is."""
import numpy as np
import pytest

from sits.cuda.jpeg import STANDARD_TABLES, with_huffman_tables
from sits.pipeline.synthetic import block_image
from tests.unit.test_jpeg_stage import strip_huffman_tables

simplejpeg = pytest.importorskip("simplejpeg")


def segments(jpeg: bytes, marker: int) -> list[bytes]:
    out, i = [], 2
    while i < len(jpeg) and jpeg[i + 1] != 0xDA:
        n = int.from_bytes(jpeg[i + 2:i + 4], "big")
        if jpeg[i + 1] == marker:
            out.append(jpeg[i + 4:i + 2 + n])
        i += 2 + n
    return out


def test_the_standard_tables_are_libjpeg_turbos():
    jpeg = simplejpeg.encode_jpeg(block_image((64, 32), 1), quality=80)
    assert b"".join(segments(jpeg, 0xC4)) == STANDARD_TABLES


@pytest.mark.parametrize("subsampling", ["422", "420"])
def test_a_frame_without_tables_decodes_as_with_them(subsampling):
    jpeg = simplejpeg.encode_jpeg(block_image((64, 32), 2), quality=90, colorsubsampling=subsampling)
    bare = strip_huffman_tables(jpeg)
    assert segments(bare, 0xC4) == []
    mended = with_huffman_tables(bare)
    assert segments(mended, 0xC4) == [STANDARD_TABLES]
    assert np.array_equal(simplejpeg.decode_jpeg(mended), simplejpeg.decode_jpeg(jpeg))


def test_a_frame_with_tables_is_left_as_it_is():
    jpeg = simplejpeg.encode_jpeg(block_image((64, 32), 3), quality=90)
    assert with_huffman_tables(memoryview(jpeg)) == jpeg


def test_a_frame_cut_short_is_not_complete():
    from sits.cuda.jpeg import complete
    jpeg = simplejpeg.encode_jpeg(block_image((64, 32), 4), quality=90)
    assert complete(jpeg) and complete(jpeg + b"\0\0\0")
    assert not complete(jpeg[:len(jpeg) // 2]) and not complete(jpeg[:-1])
