"""JPEG frames decoded on the GPU: the work of a stage (the CUDA stage sets
it up, sits/pipeline/cuda.py) that decodes each MJPEG frame from the
camera's buffer into device memory, as interleaved R, G, B bytes, with
nvImageCodec (NVIDIA's maintained codec library: the GPU's hardware JPEG
engine where it has one, as H100, H200 and Jetson do, else its CUDA/CPU
hybrid), for the CUDA stage's fused conversion to read in place.

The decoder's images are the stage's buffers, allocated once by the
library (a first decode at the camera's size) and written again in place
for each frame. The worker thread waits for the decode with a sleeping
wait (a blocking-sync CUDA event) so that the frame is whole when it is
offered, and the camera's buffer is not read after it goes back.

UVC cameras often send frames without Huffman tables (DHT), which the
hardware decoder refuses: the standard tables (ITU-T T.81 Annex K.3) are
put in front of the scan, as FFmpeg's mjpeg2jpeg does. A frame the
decoder cannot decode, of another size, or cut short (no end-of-image
marker: the hardware decoder decodes a truncated scan without a word,
into a picture partly garbage) is the stage's error.
"""
from __future__ import annotations

import errno

from sits._kernel import ffi
from sits.errors import DeviceError, UsageError

#: the camera formats it decodes (V4L2 fourccs)
FROM = ("MJPG", "JPEG")
#: what it makes: V4L2 RGB24 (bytes R, G, B)
MADE = "RGB3"

# The DHT segment's body (its four tables: luma DC, luma AC, chroma DC,
# chroma AC) of ITU-T T.81 Annex K.3 (tables K.3 to K.6).
STANDARD_TABLES = bytes.fromhex(
    "0000010501010101010100000000000000000102030405060708090a0b100002010303020403050504040000017d0102"
    "0300041105122131410613516107227114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a"
    "3435363738393a434445464748494a535455565758595a636465666768696a737475767778797a838485868788898a92"
    "939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4"
    "e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9fa0100030101010101010101010000000000000102030405060708090a0b110002"
    "0102040403040705040400010277000102031104052131061241510761711322328108144291a1b1c109233352f01562"
    "72d10a162434e125f11718191a262728292a35363738393a434445464748494a535455565758595a636465666768696a"
    "737475767778797a82838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5"
    "c6c7c8c9cad2d3d4d5d6d7d8d9dae2e3e4e5e6e7e8e9eaf2f3f4f5f6f7f8f9fa")
_DHT = b"\xff\xc4" + (len(STANDARD_TABLES) + 2).to_bytes(2, "big") + STANDARD_TABLES


def complete(jpeg: bytes) -> bool:
    """`jpeg` ends with its end-of-image marker (trailing zero bytes, which
    some cameras pad a frame with, aside)."""
    return jpeg.rstrip(b"\0").endswith(b"\xff\xd9")


def with_huffman_tables(jpeg) -> bytes:
    """`jpeg` (bytes-like) with the standard Huffman tables in front of its
    scan when it carries none; as it is (bytes) when it does, or when its
    markers end before a scan (the decoder refuses it then)."""
    data = bytes(jpeg)
    i = 2
    while i + 4 <= len(data) and data[i] == 0xFF:
        marker = data[i + 1]
        if marker == 0xC4:
            return data
        if marker == 0xDA:
            return data[:i] + _DHT + data[i:]
        i += 2 + int.from_bytes(data[i + 2:i + 4], "big")
    return data


class GpuJpegDecode:
    """The work: one frame's JPEG bytes decoded into one of its device images."""

    def __init__(self, width: int, height: int, count: int):
        try:
            from nvidia import nvimgcodec as nv
        except ImportError as exc:
            raise UsageError(f"MJPEG frames on the GPU need nvImageCodec: pip install nvidia-nvimgcodec-cu13 "
                             f"(or -cu12) ({exc})") from None
        import cupy as cp
        self.nv, self.cp = nv, cp
        self.width, self.height = width, height
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.done = cp.cuda.Event(block=True, disable_timing=True)   # a sleeping wait
        blank = blank_jpeg(width, height)
        self.decoder, self.backend = _decoder(nv, blank, self.stream.ptr)
        if self.decoder is None:
            raise DeviceError("nvImageCodec has no GPU JPEG decoder here (neither the hardware engine nor CUDA)")
        self.images = [self.decoder.decode(nv.CodeStream(blank), cuda_stream=self.stream.ptr) for _ in range(count)]
        self.stream.synchronize()
        self.by_address = {self.address(img): img for img in self.images}
        self.pitch = self.images[0].__cuda_array_interface__.get("strides") or (width * 3, 3, 1)
        self.pitch = self.pitch[0]
        self.corrupt = self.wrong_size = 0
        self.last_error = ""

    def close(self) -> None:
        """Its images, then its decoder, in that order (an image outliving
        the decoder that made it is not safe to free); the stage has stopped
        and nothing reads the images any more."""
        self.stream.synchronize()
        self.by_address, self.images = {}, []
        self.decoder = None

    @staticmethod
    def address(image) -> int:
        return image.__cuda_array_interface__["data"][0]

    def why(self) -> str:
        parts = []
        if self.corrupt:
            parts.append(f"{self.corrupt} the decoder refused, the last: {self.last_error}")
        if self.wrong_size:
            parts.append(f"{self.wrong_size} not {self.width}x{self.height}")
        return "; ".join(parts) or "none"

    def make(self, S, index, bytesused, out) -> int:
        nv = self.nv
        image = self.by_address[int(ffi.cast("uintptr_t", S.out_ptr[out]))]
        data = with_huffman_tables(ffi.buffer(S.in_ptr[index], bytesused))
        if not complete(data):
            self.corrupt += 1
            self.last_error = "cut short (no end-of-image marker)"
            return errno.EBADMSG
        try:
            code = nv.CodeStream(data)
            if (code.width, code.height) != (self.width, self.height):
                self.wrong_size += 1
                self.last_error = f"a {code.width}x{code.height} frame"
                return errno.EBADMSG
            made = self.decoder.decode(code, image=image, cuda_stream=self.stream.ptr)
        except (RuntimeError, ValueError) as exc:
            made, self.last_error = None, str(exc)
        if made is None:
            self.corrupt += 1
            self.last_error = self.last_error or "not decodable"
            return errno.EBADMSG
        if self.address(made) != self.address(image):
            raise DeviceError("nvImageCodec moved a decoded image: the conversion reads it where it was")
        self.done.record(self.stream)
        self.done.synchronize()
        return 0


def _decoder(nv, jpeg: bytes, stream: int = 0):
    """(nvImageCodec decoder, "hardware" or "cuda"): the GPU's JPEG engine
    where it decodes `jpeg`, else nvImageCodec's CUDA decoder; (None, None)
    where neither does."""
    for backend, name in (("HW_GPU_ONLY", "hardware"), ("HYBRID_CPU_GPU", "cuda")):
        try:
            decoder = nv.Decoder(backends=[nv.Backend(getattr(nv.BackendKind, backend))])
            if decoder.decode(nv.CodeStream(jpeg), cuda_stream=stream) is not None:
                return decoder, name
        except RuntimeError:
            continue
    return None, None


def engine() -> str | None:
    """Where this machine decodes JPEG on the GPU: "hardware" (its JPEG
    engine), "cuda", or None (no GPU decoder; nvImageCodec missing)."""
    try:
        from nvidia import nvimgcodec as nv
    except ImportError:
        return None
    return _decoder(nv, blank_jpeg(64, 64))[1]


def blank_jpeg(width: int, height: int) -> bytes:
    """A grey JPEG of the camera's size: the first decode allocates the
    images, which hold it until a frame is decoded into them."""
    import numpy as np
    import simplejpeg
    return simplejpeg.encode_jpeg(np.full((height, width, 3), 128, np.uint8), quality=50)
