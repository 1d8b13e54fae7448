"""The JPEG decode stage in the C frame queue (its work in Python on the
stage's worker thread: sits/pipeline/jpeg_stage.py, python_work.py),
driven one event at a time: the timer source stands in for an MJPEG
camera whose buffers hold JPEG frames of their own lengths (bytesused);
a Python sink of the stage's frames takes what it makes. The queue's
conservation check ends every step."""
import numpy as np
import pytest

from sits.pipeline.frame_queue import NONE
from sits.pipeline.jpeg_stage import jpeg_stage
from sits.pipeline.synthetic import block_image
from tests.unit.queue_steps import closing
from tests.unit.stage_chain import StageChain
from tests.vm.loopback import truncated

simplejpeg = pytest.importorskip("simplejpeg")

W, H = 64, 32
ROOM = W * H * 2


def image(seed: int) -> np.ndarray:
    return block_image((W, H), seed)


def strip_huffman_tables(jpeg: bytes) -> bytes:
    """The frame as many UVC cameras send it: no DHT segment (the decoder
    must use the standard tables)."""
    out, i = bytearray(jpeg[:2]), 2
    while i < len(jpeg):
        marker, length = jpeg[i + 1], int.from_bytes(jpeg[i + 2:i + 4], "big")
        if marker == 0xDA:     # start of scan: the rest is entropy-coded data
            out += jpeg[i:]
            break
        if marker != 0xC4:
            out += jpeg[i:i + 2 + length]
        i += 2 + length
    return bytes(out)


def Chain(frames: list[bytes], pitch: int, bytesused: dict[int, int] | None = None, outputs: int = 2):
    def maker(q, inputs, outs):
        return jpeg_stage(q, "MJPG", W, H, 0, inputs, outs, pitch)
    return StageChain(maker, frames, ROOM, (H, pitch), bytesused, outputs)


@pytest.fixture
def chain():
    yield from closing(Chain)


@pytest.mark.parametrize("subsampling", ["422", "420"])
@pytest.mark.parametrize("pitch", [W * 4, W * 4 + 64], ids=["packed", "padded"])
def test_each_frame_is_decoded_from_its_own_buffer_into_xrgb(chain, subsampling, pitch):
    images = [image(seed) for seed in range(3)]
    c = chain([simplejpeg.encode_jpeg(im, quality=95, colorsubsampling=subsampling) for im in images], pitch)
    for n in range(3):
        c.frame()
        out = c.made()
        assert out != NONE
        xrgb = c.output(out)[:, :W * 4].reshape(H, W, 4)
        # XRGB8888 in memory: B, G, R, X; the camera's own image, within
        # JPEG's error inside each block (chroma is interpolated across edges)
        inner = (slice(None), slice(4, 12), slice(None), slice(4, 12))
        got = xrgb[:, :, :3].reshape(H // 16, 16, W // 16, 16, 3)[inner].astype(int)
        want = images[n][:, :, ::-1].reshape(H // 16, 16, W // 16, 16, 3)[inner].astype(int)
        assert np.abs(got - want).max() <= 12
    assert c.stage.counts()["frames"] == 3 and c.stage.counts()["errors"] == 0


def test_a_frame_without_huffman_tables_decodes_as_with_them(chain):
    jpeg = simplejpeg.encode_jpeg(image(5), quality=90, colorsubsampling="422")
    c = chain([jpeg, strip_huffman_tables(jpeg)], W * 4)
    c.frame()
    with_tables = c.output(c.made()).copy()
    c.frame()
    assert np.array_equal(c.output(c.made()), with_tables)


def test_a_truncated_frame_is_a_decode_error_and_the_next_is_decoded(chain):
    good = simplejpeg.encode_jpeg(image(1), quality=90)
    # buffer 1 says it holds its headers and the scan's first bytes only:
    # libjpeg-turbo would warn and fill the rest grey
    c = chain([good, good, good], W * 4, bytesused={1: len(truncated(good))})
    L = c.q.c_queue
    c.frame()
    assert c.made() != NONE
    c.frame()
    assert c.made() == NONE              # nothing made of the truncated frame
    assert L.queued[1]                   # its buffer went back to the camera
    c.frame()
    assert c.made() != NONE              # the stage goes on
    counts = c.stage.counts()
    assert counts["frames"] == 2 and counts["errors"] == 1 and c.stage.work_object.corrupt == 1


def test_a_frame_of_another_size_is_an_error_not_an_overflow(chain):
    other = simplejpeg.encode_jpeg(np.zeros((H * 2, W, 3), np.uint8), quality=90)
    c = chain([other], W * 4)
    c.frame()
    assert c.made() == NONE
    assert c.stage.counts()["errors"] == 1 and c.stage.work_object.wrong_size == 1
