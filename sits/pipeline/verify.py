"""Compare what the display showed (writeback) with what was captured.

Colour channels only: vivid writes 0x00 in the X byte, writeback 0xff.
Formats are brought to 8-bit R, G, B the way the display pipeline does it:
vkms expands RGB565 to 16 bit (x * 65535 / 31, rounded) and writes
XRGB8888 as round(v16 / 257), so the expected image uses the same steps.
"""
import numpy as np

from sits.pipeline.convert import rows


def _round_div(a: np.ndarray, b: int) -> np.ndarray:
    return (a + b // 2) // b


def _expand(v: np.ndarray, bits: int) -> np.ndarray:
    top = (1 << bits) - 1
    v16 = _round_div(v.astype(np.int64) * 65535, top)
    return _round_div(v16, 257).astype(np.uint8)


def to_rgb(buf, fourcc: str, width: int, height: int, stride: int) -> np.ndarray:
    """(h, w, 3) uint8 R, G, B of a packed RGB image in memory."""
    if fourcc in ("XR24", "AR24"):          # bytes B, G, R, X
        px = rows(buf, height, stride, width * 4).reshape(height, width, 4)
        return px[..., 2::-1]
    if fourcc in ("XB24", "AB24"):          # bytes R, G, B, X
        return rows(buf, height, stride, width * 4).reshape(height, width, 4)[..., :3]
    if fourcc == "RG16":                    # little-endian R5 G6 B5
        px = rows(buf, height, stride, width * 2).reshape(height, width, 2)
        v = px[..., 0].astype(np.uint16) | (px[..., 1].astype(np.uint16) << 8)
        return np.stack([_expand(v >> 11, 5), _expand((v >> 5) & 0x3F, 6), _expand(v & 0x1F, 5)], -1)
    raise ValueError(f"cannot compare format {fourcc}")


def to_argb(buf, width: int, height: int, stride: int) -> np.ndarray:
    """(h, w, 4) uint8 A, R, G, B of an ARGB8888 image in memory (bytes B, G, R, A)."""
    return rows(buf, height, stride, width * 4).reshape(height, width, 4)[..., ::-1]


def over(above: np.ndarray, below: np.ndarray) -> np.ndarray:
    """R, G, B of premultiplied ARGB `above` blended over R, G, B `below`
    as vkms does it: 16-bit channels (x * 257), src + dst * (1 - alpha)
    rounded in 16 bits (its pre_mul_blend_channel, in a u32), then
    round(v16 / 257)."""
    a = above[..., :1].astype(np.int64) * 257
    src = above[..., 1:].astype(np.int64) * 257
    dst = below.astype(np.int64) * 257
    v16 = _round_div((src * 0xFFFF + dst * (0xFFFF - a)) & 0xFFFFFFFF, 0xFFFF)
    return _round_div(v16, 257).astype(np.uint8)


def mismatches(shown: np.ndarray, expected: np.ndarray) -> int:
    """Number of pixels whose R, G or B differ."""
    return int(np.count_nonzero(np.any(shown != expected, axis=-1)))
