"""Minimal PNG writer (RGB, 8 bit). Hand-written on purpose: 20 lines of
zlib + struct instead of a Pillow dependency on appliances."""
import struct
import zlib

import numpy as np


def write_png(path: str, rgb: np.ndarray) -> None:
    """`rgb`: (h, w, 3) uint8."""
    h, w, _ = rgb.shape
    raw = np.zeros((h, w * 3 + 1), np.uint8)  # filter byte 0 per row
    raw[:, 1:] = rgb.reshape(h, w * 3)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw.tobytes(), 6)))
        f.write(chunk(b"IEND", b""))
