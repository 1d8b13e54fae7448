"""CudaConsumer refuses what the CUDA stage cannot take, before any GPU
work and before streaming, saying what it can (no GPU needed)."""
import types

import pytest

from sits.cuda.formats import OutputSpec
from sits.errors import DeviceError, UsageError
from sits.formats import FORMATS as PIXEL_FORMATS
from sits.pipeline.consumer import PipelineContext
from sits.pipeline.cuda import CudaConsumer
from sits.pipeline.synthetic import SyntheticCamera, synthetic_format
from sits.v4l2.capture import CaptureBuffer

# What sits.cuda.probe.probe() says on a discrete GPU without dma-buf import.
DISCRETE = {"available": True, "reason": None,
            "dmabuf_import": {"supported": False, "error": "CUDA_ERROR_NOT_SUPPORTED"},
            "host_register": {"supported": True}, "import_path": "host-registered", "zero_copy": True}


def ctx_for(source):
    return PipelineContext(source, lambda fd, cb: None, lambda fd: None, lambda exc: None)


class DmabufSource:
    """A V4L2 source with MMAP / dma-heap buffers: dma-bufs, no memfd."""

    def __init__(self, memory="mmap", code="YUYV", size=(640, 360)):
        self.path, self.memory = "/dev/video0", memory
        self.format = synthetic_format(code, *size)
        dmabuf = types.SimpleNamespace(backing=None, size=self.format.sizeimage, fileno=lambda: -1)
        self.buffers = [CaptureBuffer(i, dmabuf, self.format) for i in range(4)]


@pytest.mark.parametrize("memory", ["mmap", "heap"])
def test_memory_that_cannot_reach_the_gpu_is_refused_naming_udmabuf(memory):
    src = DmabufSource(memory)
    consumer = CudaConsumer(OutputSpec(224, 224), probe=DISCRETE)
    with pytest.raises(UsageError, match=rf"{memory} buffers cannot reach this GPU.*udmabuf"):
        consumer.start(ctx_for(src))


def test_formats_the_kernel_cannot_take_are_refused_naming_those_it_can():
    src = DmabufSource()
    src.format = src.format.__class__("GREY", 640, 360, 640, 640 * 360, 1, 0)
    with pytest.raises(UsageError, match=r"cannot take GREY frames; it takes ") as err:
        CudaConsumer(OutputSpec(224, 224), probe=DISCRETE).start(ctx_for(src))
    taken = str(err.value).split("it takes ")[1].split(", ")
    bayer = [f"{f.v4l2} ({f.name})" for f in PIXEL_FORMATS if f.cfa]
    assert len(bayer) == 24
    assert sorted(taken) == sorted(["YUYV", "UYVY", "NV12", "NV16", "P010", "XR24 (XRGB8888)", "XB24 (XBGR8888)",
                                    "BGR3 (RGB888)", "RGB3 (BGR888)", *bayer])


def test_sizes_the_kernel_cannot_take_are_refused_saying_why():
    with SyntheticCamera("NV12", (640, 361), 30, buffers=2) as cam:
        with pytest.raises(UsageError, match="NV12 640x361 for the CUDA stage: .*odd; 4:2:0 formats need an even height"):
            CudaConsumer(OutputSpec(224, 224), probe=DISCRETE).start(ctx_for(cam))
    with SyntheticCamera("YUYV", (63, 48), 30, buffers=2) as cam:
        with pytest.raises(UsageError, match="width 63 is odd"):
            CudaConsumer(OutputSpec(224, 224), probe=DISCRETE).start(ctx_for(cam))


def test_no_gpu_is_a_device_error():
    with SyntheticCamera("YUYV", (64, 48), 30, buffers=2) as cam:
        with pytest.raises(DeviceError, match="needs a GPU: no CUDA driver"):
            CudaConsumer(OutputSpec(32, 32), probe={"available": False, "reason": "no CUDA driver"}).start(
                ctx_for(cam))


def test_bad_options_are_refused():
    with pytest.raises(UsageError, match="need a latency budget"):
        CudaConsumer(OutputSpec(224, 224), max_batch=8)
    with pytest.raises(UsageError, match="ingest 'dma' is not one of copy, direct"):
        CudaConsumer(OutputSpec(224, 224), ingest="dma")
    with pytest.raises(UsageError, match="output dtype"):
        CudaConsumer(OutputSpec(224, 224, dtype="int8"))


@pytest.mark.parametrize("kw", [dict(max_batch=2, latency_budget_s=0.01), dict(on_batch=print), {}])
def test_mjpeg_is_decoded_and_converted_one_frame_at_a_time_in_the_frame_queue(kw):
    # {}: a source the frame queue does not drive
    src = DmabufSource()
    src.format = src.format.__class__("MJPG", 640, 360, 0, 100000, 1, 0)
    with pytest.raises(UsageError, match=r"MJPG frames are decoded and converted on the GPU one at a time"):
        CudaConsumer(OutputSpec(224, 224), probe=DISCRETE, **kw).start(ctx_for(src))
