"""What was on screen: sits' own --snapshot PNG read back (sits/pipeline/png.py
writes RGB, 8 bit, filter 0), and the picture in it."""
import struct
import zlib

import numpy as np


def read_png(path: str) -> np.ndarray:
    """(h, w, 3) uint8 R, G, B."""
    with open(path, "rb") as f:
        data = f.read()
    pos, idat, size = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h = size
    return np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, w * 3 + 1)[:, 1:].reshape(h, w, 3)


def shown(path: str, size: tuple[int, int]) -> np.ndarray:
    """The frame of `size` in the snapshot: centred, unscaled (sits/drm/output.py place())."""
    image = read_png(path)
    h, w = image.shape[:2]
    x, y = (w - size[0]) // 2, (h - size[1]) // 2
    return image[y:y + size[1], x:x + size[0]]
