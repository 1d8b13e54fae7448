"""The fused kernel on the GPU against the numpy oracle, graphs, DLPack,
host-registered memfd frames, the completion bridge, the probe, faults."""
import itertools
import select

import numpy as np
import pytest

from sits.cuda import reference as R
from sits.cuda.formats import FORMATS, format_info, MATRICES, OutputSpec, SourceFormat, make_plan
from sits.errors import UsageError

pytestmark = pytest.mark.cuda

IMAGENET_NORM = dict(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
# raw Bayer has tests of its own (test_cuda_bayer.py)
YUV_RGB = [name for name in FORMATS if not format_info(name).cfa]
BPP = {"YUYV": 2, "UYVY": 2, "NV12": 1, "NV16": 1, "P010": 2, "XRGB8888": 4, "XBGR8888": 4, "RGB888": 3, "BGR888": 3}


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def padded(fmt, w, h, pad=20):
    return SourceFormat(fmt, w, h, bytesperline=(w * BPP[fmt] + 3) // 4 * 4 + pad)


def random_frames(src, n, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, src.frame_bytes, dtype=np.uint8) for _ in range(n)]


def convert(cp, plan, frames, variant=None, **kw):
    from sits.cuda.convert import FrameConverter
    from sits.cuda.kernel import PRODUCT
    conv = FrameConverter(plan, max_batch=max(len(frames), 1), tables=1, variant=variant or PRODUCT)
    batch = conv.convert([cp.asarray(f) for f in frames], **kw)
    batch.synchronize()  # the converter's stream does not order with CuPy's default stream
    return cp.asnumpy(batch.tensor), batch, conv


GRID = list(itertools.product(YUV_RGB, MATRICES, ("limited", "full"), ("NCHW", "NHWC"),
                              ("uint8", "float16", "float32")))


@pytest.mark.parametrize("resize", ["bilinear", "area"])
@pytest.mark.parametrize("fmt, matrix, rng, layout, dtype", GRID)
def test_matches_reference(cp, fmt, matrix, rng, layout, dtype, resize):
    # Odd output size, padded stride, offset crop, letterbox band, mean/std.
    src = padded(fmt, 62, 38)
    norm = dict(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)) if dtype != "uint8" else {}
    out = OutputSpec(19, 13, layout=layout, dtype=dtype, order="BGR" if rng == "full" else "RGB", **norm)
    plan = make_plan(src, out, matrix=matrix, range=rng, resize=resize, crop=(4, 2, 54, 34), letterbox=True,
                     pad_rgb=(0.2, 0.4, 0.6))
    frames = random_frames(src, 2, seed=hash((fmt, matrix, rng, layout, dtype, resize)) % 2**32)
    got, _, _ = convert(cp, plan, frames)
    assert R.max_error(got, R.convert_batch(frames, plan), dtype) <= 1.0


@pytest.mark.parametrize("batch", [1, 64])
@pytest.mark.parametrize("fmt, resize", [("YUYV", "area"), ("NV12", "bilinear"), ("P010", "area")])
def test_batch_sizes(cp, batch, fmt, resize):
    src = SourceFormat(fmt, 640, 360)
    plan = make_plan(src, OutputSpec(224, 224, dtype="float16"), resize=resize)
    frames = random_frames(src, batch, seed=batch)
    got, b, _ = convert(cp, plan, frames)
    assert got.shape == (batch, 3, 224, 224)
    assert R.max_error(got, R.convert_batch(frames, plan), "float16") <= 1.0


def test_graph_replay_equals_eager(cp):
    from sits.cuda.convert import FrameConverter
    src = SourceFormat("NV12", 320, 180)
    plan = make_plan(src, OutputSpec(96, 64, dtype="float32"), resize="area")
    conv = FrameConverter(plan, max_batch=8)
    for seed in range(3):  # new frames each time: the graph replays with new addresses
        frames = [cp.asarray(f) for f in random_frames(src, 8, seed)]
        eager = conv.convert(frames, graph=False).tensor
        graph = conv.convert(frames, graph=True).tensor
        cp.cuda.runtime.deviceSynchronize()
        assert cp.array_equal(eager, graph)
        assert conv.last_vec == 4  # 16-byte aligned rows: the vectorised area kernel
    assert conv.graph_captures == len(conv._tables)  # one per pointer table, captured once, then replayed


def test_rows_of_one_array_and_unaligned_frames(cp):
    from sits.cuda.convert import FrameConverter
    src = SourceFormat("YUYV", 320, 180)
    plan = make_plan(src, OutputSpec(64, 48, dtype="float32"), resize="area")
    conv = FrameConverter(plan, max_batch=4)
    frames = random_frames(src, 4, 21)
    rows = cp.asarray(np.stack(frames))
    a = conv.convert(rows).tensor
    assert conv.last_vec == 4
    # The same bytes 4 bytes off a 16-byte boundary: the 4-byte kernel, same result.
    shifted = cp.empty(4 * src.frame_bytes + 16, cp.uint8)
    views = [shifted[4 + i * src.frame_bytes:4 + (i + 1) * src.frame_bytes] for i in range(4)]
    for v, f in zip(views, frames):
        v.set(f)
    b = conv.convert(views).tensor
    assert conv.last_vec == 1
    cp.cuda.runtime.deviceSynchronize()
    ref = R.convert_batch(frames, plan)
    assert R.max_error(cp.asnumpy(a), ref, "float32") <= 1.0
    assert R.max_error(cp.asnumpy(b), ref, "float32") <= 1.0


def test_dlpack_and_cuda_array_interface_share_memory(cp):
    torch = pytest.importorskip("torch")
    src = SourceFormat("YUYV", 64, 32)
    plan = make_plan(src, OutputSpec(20, 10, layout="NHWC", dtype="float16"))
    _, batch, _ = convert(cp, plan, random_frames(src, 3, 0))
    t = torch.from_dlpack(batch)
    assert t.data_ptr() == batch.tensor.data.ptr
    assert tuple(t.shape) == (3, 10, 20, 3) and t.stride() == (600, 60, 3, 1)
    assert t.dtype == torch.float16
    c = cp.asarray(batch)
    assert c.data.ptr == batch.tensor.data.ptr and c.strides == batch.tensor.strides
    assert batch.__cuda_array_interface__["stream"] == batch.stream.ptr
    np.testing.assert_array_equal(t.cpu().numpy(), cp.asnumpy(c))


def test_host_registered_memfd_frames(cp):
    from sits.cuda.convert import FrameConverter, HostFrame
    from sits.dmabuf.udmabuf import MemFd
    src = SourceFormat("YUYV", 128, 72)
    plan = make_plan(src, OutputSpec(32, 18, dtype="float32"))
    bufs = [MemFd.create(src.frame_bytes) for _ in range(4)]
    conv = FrameConverter(plan, max_batch=4)
    rng = np.random.default_rng(7)
    for round_ in range(3):
        # The CPU writes after registration; the GPU must see the new bytes.
        for b in bufs:
            b.array[:] = rng.integers(0, 256, b.size, dtype=np.uint8)
        frames = [HostFrame(b, sequence=10 * round_ + i, timestamp_ns=1000 + i) for i, b in enumerate(bufs)]
        batch = conv.convert(frames)
        batch.synchronize()
        assert batch.import_path == "host-registered" and batch.zero_copy
        assert list(batch.sequences) == [10 * round_ + i for i in range(4)]
        assert list(batch.timestamps_ns) == [1000, 1001, 1002, 1003]
        ref = R.convert_batch([b.array.copy() for b in bufs], plan)
        assert R.max_error(cp.asnumpy(batch.tensor), ref, "float32") <= 1.0
    assert conv.registry.registrations == 4  # once per buffer, not per frame
    for b in bufs:
        conv.registry.unregister(b)
        b.close()


def test_staged_numpy_frames(cp):
    from sits.cuda.convert import FrameConverter
    src = SourceFormat("NV16", 96, 54)
    plan = make_plan(src, OutputSpec(40, 30, dtype="uint8"))
    frames = random_frames(src, 3, 9)
    batch = FrameConverter(plan, max_batch=3).convert(frames)
    assert batch.import_path == "staged" and not batch.zero_copy
    assert R.max_error(cp.asnumpy(batch.tensor), R.convert_batch(frames, plan), "uint8") <= 1.0


def test_sink_releases_only_after_the_event(cp):
    from sits.cuda.batcher import DynamicBatcher
    from sits.cuda.convert import FrameConverter
    from sits.cuda.sink import CudaFrameSink
    src = SourceFormat("YUYV", 1920, 1080)
    plan = make_plan(src, OutputSpec(224, 224), resize="area")
    conv = FrameConverter(plan, max_batch=8)
    batches, released = [], []
    sink = CudaFrameSink(conv, batches.append, DynamicBatcher(10.0, max_batch=8))
    frames = [cp.asarray(f) for f in random_frames(src, 16, 3)]

    def done(i):
        assert batches[i // 8].event.done, "released before its CUDA event completed"
        released.append(i)
    for i, f in enumerate(frames):
        sink.submit(f, lambda i=i: done(i))
    assert len(batches) == 2  # full batches flush at once
    while len(released) < 16:
        r, _, _ = select.select([sink], [], [], 5.0)
        assert r, "no completion record came"
        sink.dispatch()
    assert sorted(released) == list(range(16))
    sink.close()


def test_probe_reports_strategies():
    from sits.cuda.probe import probe
    result = probe()
    print("probe:", result)
    assert result["available"], result
    assert result["host_register"]["supported"], result
    # the path follows the answers: dma-buf import where the driver does it, else the registered pages
    want = "dmabuf" if result["dmabuf_import"]["supported"] is True else "host-registered"
    assert result["import_path"] == want, result


def test_out_of_memory_is_a_clear_error(cp):
    from sits.cuda.convert import FrameConverter
    from sits.cuda.runtime import CudaOutOfMemory
    src = SourceFormat("YUYV", 64, 32)
    plan = make_plan(src, OutputSpec(16384, 16384, dtype="float32"), resize="bilinear")
    conv = FrameConverter(plan, max_batch=128, tables=1)
    frame = cp.asarray(random_frames(src, 1, 0)[0])
    with pytest.raises(CudaOutOfMemory, match="out of GPU memory"):
        conv.convert([frame] * 128)  # 412 GB of output
    small = conv.convert([frame]).tensor  # and the converter still works
    assert small.shape == (1, 3, 16384, 16384)


def test_bad_frames_are_refused(cp):
    from sits.cuda.convert import FrameConverter
    src = SourceFormat("NV12", 64, 32)
    conv = FrameConverter(make_plan(src, OutputSpec(8, 8)), max_batch=2)
    with pytest.raises(UsageError, match="smaller than the format"):
        conv.convert([cp.zeros(100, cp.uint8)])
    with pytest.raises(UsageError, match="1 to 2"):
        conv.convert([cp.zeros(src.frame_bytes, cp.uint8)] * 3)


@pytest.mark.parametrize("band", [1, 2, 3, 8])
@pytest.mark.parametrize("fmt", ["YUYV", "NV12", "P010", "XRGB8888"])
def test_area_bands_on_the_gpu(cp, fmt, band):
    # Several output rows per block (two shared-memory row buffers, one
    # barrier per row): a missing barrier would show as a moving error here.
    from sits.cuda import kernel as K
    variant = K.Variant(band_rows=band)
    src = SourceFormat(fmt, 1280, 720)
    plan = make_plan(src, OutputSpec(160, 100, dtype="float32"), resize="area", letterbox=True)
    frames = random_frames(src, 3, seed=band)
    ref = R.convert_batch(frames, plan)
    for _ in range(2):
        got, _, conv = convert(cp, plan, frames, variant)
        assert conv.last_vec == 4
        assert conv.fixed([cp.asarray(f) for f in frames]).launch_shape[0][0] == -(-100 // band)
        assert R.max_error(got, ref, "float32") <= 1.0


@pytest.mark.parametrize("resize", ["bilinear", "area"])
@pytest.mark.parametrize("fmt", YUV_RGB)
def test_bfloat16_output_as_torch(cp, fmt, resize):
    torch = pytest.importorskip("torch")
    src = padded(fmt, 62, 38)
    out = OutputSpec(19, 13, layout="NHWC", dtype="bfloat16", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    plan = make_plan(src, out, resize=resize, letterbox=True, pad_rgb=(0.2, 0.4, 0.6))
    frames = random_frames(src, 2, seed=31)
    from sits.cuda.convert import FrameConverter
    batch = FrameConverter(plan, max_batch=2).convert([cp.asarray(f) for f in frames])
    t = torch.from_dlpack(batch)
    assert t.dtype == torch.bfloat16 and t.data_ptr() == batch.tensor.data_ptr()
    got = t.float().cpu().numpy()
    assert R.max_error(got, R.convert_batch(frames, plan), "bfloat16") <= 1.0


def test_writes_a_channels_last_model_input(cp):
    # An NHWC plan writes straight into an NCHW channels_last bf16 tensor.
    torch = pytest.importorskip("torch")
    from sits.cuda.convert import FrameConverter
    src = SourceFormat("YUYV", 640, 360)
    plan = make_plan(src, OutputSpec(64, 48, layout="NHWC", dtype="bfloat16"), resize="area")
    x = torch.full((4, 3, 48, 64), float("nan"), device="cuda", dtype=torch.bfloat16).contiguous(
        memory_format=torch.channels_last)
    frames = random_frames(src, 4, 5)
    batch = FrameConverter(plan, max_batch=4).convert([cp.asarray(f) for f in frames], out=x)
    batch.synchronize()
    assert batch.tensor is x
    ref = R.convert_batch(frames, plan)  # (N, H, W, C)
    assert R.max_error(x.permute(0, 2, 3, 1).float().cpu().numpy(), ref, "bfloat16") <= 1.0
    with pytest.raises(UsageError, match="channels_last"):
        FrameConverter(plan, max_batch=4).convert([cp.asarray(f) for f in frames], out=x.contiguous())


@pytest.mark.parametrize("resize", ["bilinear", "area"])
def test_fixed_conversion_replays_new_bytes(cp, resize):
    # Frames at fixed addresses: one graph launch per frame, reading whatever
    # the buffers hold now (device arrays and registered host memory).
    from sits.cuda.convert import FrameConverter, HostFrame
    from sits.dmabuf.udmabuf import MemFd
    src = SourceFormat("NV12", 320, 180)
    plan = make_plan(src, OutputSpec(96, 64, dtype="float32"), resize=resize)
    conv = FrameConverter(plan, max_batch=2)
    dev = [cp.empty(src.frame_bytes, cp.uint8) for _ in range(2)]
    host = MemFd.create(2 * src.frame_bytes)
    fixed_dev = conv.fixed(dev)
    fixed_host = conv.fixed([HostFrame(host, offset=i * src.frame_bytes) for i in range(2)])
    assert fixed_host.import_path == "host-registered" and fixed_dev.import_path == "device"
    for seed in range(3):
        frames = random_frames(src, 2, seed)
        for d, f in zip(dev, frames):
            d.set(f)
        host.array[:] = np.concatenate(frames)
        fixed_dev.launch()
        fixed_host.launch()
        conv.stream.synchronize()
        ref = R.convert_batch(frames, plan)
        assert R.max_error(cp.asnumpy(fixed_dev.tensor), ref, "float32") <= 1.0
        assert R.max_error(cp.asnumpy(fixed_host.tensor), ref, "float32") <= 1.0
        eager = conv.convert(dev, graph=False).tensor
        conv.stream.synchronize()
        assert cp.array_equal(eager, fixed_dev.tensor)
    with pytest.raises(UsageError, match="numpy"):
        conv.fixed(random_frames(src, 1, 0))
    conv.registry.unregister(host)
    host.close()


# (output size, plan options, SHORT path) for 962x542 frames: odd sizes,
# offset crops, letterbox bands both ways; 3x1.8 footprints (SHORT), 9x9
# (loops); SHORT wider than two pixels a thread (a second pass of pairs).
INTEGER_SHAPES = [((315, 295), dict(crop=(2, 4, 945, 531)), True),
                  ((315, 401), dict(crop=(2, 4, 945, 531), letterbox=True), True),
                  ((630, 315), dict(crop=(0, 0, 945, 531)), True),
                  ((630, 400), dict(crop=(0, 0, 945, 531), letterbox=True), True),
                  ((105, 59), dict(crop=(6, 2, 945, 531)), False),
                  ((411, 59), dict(crop=(6, 2, 945, 531), letterbox=True), False)]


@pytest.mark.parametrize("batch", [1, 64])
@pytest.mark.parametrize("size, options, short", INTEGER_SHAPES)
@pytest.mark.parametrize("fmt", ["YUYV", "UYVY", "NV12", "NV16"])
def test_area_integer_kernel_on_the_gpu(cp, fmt, size, options, short, batch):
    # The integer area kernel (exact weights) on padded 16-byte aligned rows,
    # against the oracle; the all-255 frame fills its lanes the most.
    from sits.cuda import kernel as K
    w, h = 962, 542
    stride = (w * BPP[fmt] + 15) // 16 * 16 + 32
    src = SourceFormat(fmt, w, h, bytesperline=stride, **({"uv_offset": stride * h + 64} if BPP[fmt] == 1 else {}))
    dtype = "bfloat16" if batch == 1 and short and size[0] < 512 else "float16"  # wide: fp16 NCHW pairs
    plan = make_plan(src, OutputSpec(*size, dtype=dtype, layout="NHWC" if dtype == "bfloat16" else "NCHW",
                                     **IMAGENET_NORM), resize="area", pad_rgb=(0.2, 0.4, 0.6), **options)
    assert K.area_integer(plan, 4) and K.area_int_short(plan) == short
    frames = random_frames(src, batch, seed=hash((fmt, size, batch)) % 2**32)
    frames[0][:] = 255
    from sits.cuda.convert import FrameConverter
    conv = FrameConverter(plan, max_batch=batch, tables=1)
    batch_out = conv.convert([cp.asarray(f) for f in frames])
    batch_out.synchronize()
    out = batch_out.tensor
    assert conv.last_vec == 4
    got = out.float().cpu().numpy() if dtype == "bfloat16" else cp.asnumpy(out)
    assert R.max_error(got, R.convert_batch(frames, plan), dtype) <= 1.0
