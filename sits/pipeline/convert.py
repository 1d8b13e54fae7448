"""CPU fallback conversions into a KMS buffer (numpy, vectorised).

Used only when no plane can show the camera's format; the pipeline then
reports zero_copy=False and one CPU copy per frame. The CUDA stage replaces
this on machines with a GPU.
"""
import numpy as np


def rows(buf, height: int, stride: int, row_bytes: int) -> np.ndarray:
    """A (height, row_bytes) uint8 view of a strided image in `buf`."""
    a = np.frombuffer(buf, dtype=np.uint8, count=stride * height)
    return a.reshape(height, stride)[:, :row_bytes]


def yuyv_to_xrgb(src: np.ndarray, dst: np.ndarray) -> None:
    """YUYV 4:2:2 (BT.601 limited range, what vivid and most UVC cameras
    send) into XRGB8888 (bytes B, G, R, X). src: (h, 2w) uint8, dst: (h, w, 4)."""
    h, w2 = src.shape
    pix = src.reshape(h, w2 // 4, 4).astype(np.int32)
    y = np.empty((h, w2 // 2), np.int32)
    y[:, 0::2], y[:, 1::2] = pix[..., 0], pix[..., 2]
    u = np.repeat(pix[..., 1], 2, axis=1) - 128
    v = np.repeat(pix[..., 3], 2, axis=1) - 128
    c = (y - 16) * 298 + 128
    dst[..., 2] = np.clip((c + 409 * v) >> 8, 0, 255)
    dst[..., 1] = np.clip((c - 100 * u - 208 * v) >> 8, 0, 255)
    dst[..., 0] = np.clip((c + 516 * u) >> 8, 0, 255)
    dst[..., 3] = 255


def uyvy_to_xrgb(src: np.ndarray, dst: np.ndarray) -> None:
    h, w2 = src.shape
    swapped = src.reshape(h, w2 // 2, 2)[..., ::-1].reshape(h, w2)
    yuyv_to_xrgb(np.ascontiguousarray(swapped), dst)


CONVERTERS = {"YUYV": yuyv_to_xrgb, "UYVY": uyvy_to_xrgb}
