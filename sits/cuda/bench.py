"""`sits bench cuda`: the CUDA stage's figures, each against peers measured in
the same run (the library measures and returns numbers; the CLI prints).

Items (issue 5):
  a  fused kernel, 1080p YUYV/NV12 -> 224/640 fp16 NCHW, bilinear and area,
     against a roofline of "input read once + output written once" at the
     device-to-device copy bandwidth measured here;
  b  the same maths unfused: PyTorch, CuPy, kornia (when importable);
  c  eager launches against graph replay, batch 1, per frame;
  d  ingest: host-registered memfd memory against pageable memory;
  e  frames in host memory -> ingest -> fused preprocessing -> ResNet-50
     (bf16, channels_last, CUDA graph, overlapped streams), against
     ResNet-50 alone, the PCIe ingest limit and the article's 1070 FPS.
GPU times are CUDA-event medians after warm-up; inputs are random bytes.
"""
from __future__ import annotations

import statistics
import time
import traceback

import numpy as np

from sits.cuda.formats import OutputSpec, SourceFormat, make_plan
from sits.cuda.runtime import cupy

ARTICLE_FPS = 1070.0
W, H = 1920, 1080
IMAGENET = dict(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))


def _events_ms(cp, stream, fn, iters: int, repeats: int = 5, warmup: int = 3) -> float:
    """Median milliseconds per call of `fn()` (which enqueues on `stream`)."""
    for _ in range(warmup):
        fn()
    stream.synchronize()
    times = []
    for _ in range(repeats):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        for _ in range(iters):
            fn()
        end.record(stream)
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / iters)
    return statistics.median(times)


def _wall_us(fn, sync, iters: int, repeats: int = 5, warmup: int = 20) -> float:
    """Median microseconds per call of `fn()`, host clock, synchronised at the end."""
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(times)


def random_device_frames(cp, src: SourceFormat, n: int, seed: int):
    """n frames of random bytes in device memory."""
    rs = cp.random.RandomState(seed)
    return [rs.randint(0, 256, src.frame_bytes, dtype=cp.uint8) for _ in range(n)]


def d2d_bandwidth(cp, stream, nbytes: int = 4 << 30) -> float:
    """Bytes/s of a large device copy, counting bytes read plus written."""
    a = cp.empty(nbytes, cp.uint8)
    b = cp.empty(nbytes, cp.uint8)
    a.fill(7)
    ms = _events_ms(cp, stream, lambda: b.data.copy_from_device_async(a.data, nbytes, stream), 5)
    del a, b
    return 2 * nbytes / (ms * 1e-3)


def _graph_of(cp, stream, fn, reps: int):
    """A CUDA graph of `reps` back-to-back calls of `fn` (its kernels only)."""
    fn()
    stream.synchronize()
    stream.begin_capture()
    try:
        for _ in range(reps):
            fn()
    finally:
        g = stream.end_capture()
    return g


# -- (a) ------------------------------------------------------------------------
AREA_BANDS = (1, 2, 4, 8)


def time_fixed(cp, stream, fixed, reps: int = 20) -> float:
    """ms per launch of the fused kernel alone: two FixedConversions (of two
    frame sets, replayed alternately so the inputs are not served from L2),
    `reps` launches in one graph."""
    turn = [0]

    def enqueue():
        fixed[turn[0] % 2].enqueue()
        turn[0] += 1
    g = _graph_of(cp, stream, enqueue, reps)
    return _events_ms(cp, stream, lambda: g.launch(stream), 1) / reps


def bench_fused(cp, stream, d2d_bps: float, batch: int = 32) -> list[dict]:
    from sits.cuda.convert import FrameConverter
    from sits.cuda.kernel import Variant

    rows = []
    cases = [(fmt, size, resize, "float16", "NCHW") for fmt in ("YUYV", "NV12") for size in (224, 640)
             for resize in ("bilinear", "area")]
    cases.append(("YUYV", 224, "area", "bfloat16", "NHWC"))  # what the feature extraction (e) feeds its model
    sets_of = {}
    for fmt, size, resize, dtype, layout in cases:
        src = SourceFormat(fmt, W, H)
        if fmt not in sets_of:
            sets_of = {fmt: [random_device_frames(cp, src, batch, seed) for seed in (1, 2)]}
        sets = sets_of[fmt]
        plan = make_plan(src, OutputSpec(size, size, layout=layout, dtype=dtype, **IMAGENET), resize=resize)
        conv = FrameConverter(plan, max_batch=batch, stream=stream, tables=2)
        outs = [conv.allocate(batch) for _ in range(2)]
        sweep = {}
        if resize == "area":  # the same launches with other rows per block
            for band in AREA_BANDS:
                other = FrameConverter(plan, max_batch=batch, stream=stream, tables=1, variant=Variant(band_rows=band))
                sweep[band] = time_fixed(cp, stream, [other.fixed(sets[i], out=outs[i]) for i in range(2)])
                del other
        fixed = [conv.fixed(sets[i], out=outs[i]) for i in range(2)]
        auto_band = None
        if resize == "area":  # the rows per block of the product's launch
            auto_band = -(-size // fixed[0].launch_shape[0][0])
        ms = time_fixed(cp, stream, fixed)
        in_bytes = batch * src.frame_bytes
        out_bytes = batch * 3 * size * size * (1 if dtype == "uint8" else 2 if dtype != "float32" else 4)
        roof_ms = (in_bytes + out_bytes) / d2d_bps * 1e3
        rows.append(dict(format=fmt, size=size, resize=resize, dtype=dtype, layout=layout, batch=batch, ms=ms,
                         vec=fixed[0].vec, band=auto_band,
                         band_sweep_ms={str(k): v for k, v in sweep.items()},
                         fps=batch / ms * 1e3, gbps=(in_bytes + out_bytes) / ms / 1e6,
                         roofline_ms=roof_ms, roofline_frac=roof_ms / ms, registers=conv.registers))
        del conv, fixed, outs
    del sets_of
    return rows


# -- (b) ------------------------------------------------------------------------
def torch_chain(torch, fmt: str, size: int, antialias: bool):
    """The conversion as a PyTorch user writes it today, unfused: a function
    of a (N, frame_bytes) uint8 CUDA tensor."""
    import torch.nn.functional as F

    mean = torch.tensor(IMAGENET["mean"], device="cuda").view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET["std"], device="cuda").view(1, 3, 1, 1)
    kr, kb = 0.2126, 0.0722
    kg = 1 - kr - kb

    def chain(raw):  # raw: (N, frame_bytes) uint8, as a user writes it today
        n = raw.shape[0]
        if fmt == "YUYV":
            px = raw[:, :H * W * 2].view(n, H, W // 2, 4).float()
            y = torch.stack([px[..., 0], px[..., 2]], dim=-1).reshape(n, H, W)
            u = px[..., 1].repeat_interleave(2, dim=2)
            v = px[..., 3].repeat_interleave(2, dim=2)
        else:
            y = raw[:, :H * W].view(n, H, W).float()
            uv = raw[:, H * W:H * W * 3 // 2].view(n, H // 2, W // 2, 2).float()
            u = uv[..., 0].repeat_interleave(2, dim=1).repeat_interleave(2, dim=2)
            v = uv[..., 1].repeat_interleave(2, dim=1).repeat_interleave(2, dim=2)
        y = (y - 16) / 219
        u = (u - 128) / 224
        v = (v - 128) / 224
        r = y + 2 * (1 - kr) * v
        g = y - 2 * kb * (1 - kb) / kg * u - 2 * kr * (1 - kr) / kg * v
        b = y + 2 * (1 - kb) * u
        rgb = torch.stack([r, g, b], dim=1).clamp(0, 1)
        out = F.interpolate(rgb, size=(size, size), mode="bilinear", align_corners=False, antialias=antialias)
        return ((out - mean) / std).half()
    return chain


def _cupy_chain(cp, fmt: str, size: int):
    import cupyx.scipy.ndimage as ndi

    kr, kb = 0.2126, 0.0722
    kg = 1 - kr - kb
    mean = cp.asarray(IMAGENET["mean"], cp.float32).reshape(1, 3, 1, 1)
    std = cp.asarray(IMAGENET["std"], cp.float32).reshape(1, 3, 1, 1)

    def chain(raw):
        n = raw.shape[0]
        if fmt == "YUYV":
            px = raw[:, :H * W * 2].reshape(n, H, W // 2, 4).astype(cp.float32)
            y = cp.stack([px[..., 0], px[..., 2]], axis=-1).reshape(n, H, W)
            u = cp.repeat(px[..., 1], 2, axis=2)
            v = cp.repeat(px[..., 3], 2, axis=2)
        else:
            y = raw[:, :H * W].reshape(n, H, W).astype(cp.float32)
            uv = raw[:, H * W:H * W * 3 // 2].reshape(n, H // 2, W // 2, 2).astype(cp.float32)
            u = cp.repeat(cp.repeat(uv[..., 0], 2, axis=1), 2, axis=2)
            v = cp.repeat(cp.repeat(uv[..., 1], 2, axis=1), 2, axis=2)
        y = (y - 16) / 219
        u = (u - 128) / 224
        v = (v - 128) / 224
        rgb = cp.stack([y + 2 * (1 - kr) * v, y - 2 * kb * (1 - kb) / kg * u - 2 * kr * (1 - kr) / kg * v,
                        y + 2 * (1 - kb) * u], axis=1).clip(0, 1)
        out = ndi.zoom(rgb, (1, 1, size / H, size / W), order=1, grid_mode=True, mode="nearest")
        return ((out - mean) / std).astype(cp.float16)
    return chain


def _kornia_chain(torch, kornia, fmt: str, size: int):
    import torch.nn.functional as F

    mean = torch.tensor(IMAGENET["mean"], device="cuda").view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET["std"], device="cuda").view(1, 3, 1, 1)

    def chain(raw):
        n = raw.shape[0]
        if fmt == "YUYV":
            px = raw[:, :H * W * 2].view(n, H, W // 2, 4).float() / 255
            y = torch.stack([px[..., 0], px[..., 2]], dim=-1).reshape(n, 1, H, W)
            uv = torch.stack([px[..., 1], px[..., 3]], dim=1) - 0.5
            rgb = kornia.color.yuv422_to_rgb(y, uv)
        else:
            y = raw[:, :H * W].view(n, 1, H, W).float() / 255
            uv = raw[:, H * W:H * W * 3 // 2].view(n, H // 2, W // 2, 2).permute(0, 3, 1, 2).float() / 255 - 0.5
            rgb = kornia.color.yuv420_to_rgb(y, uv)
        out = F.interpolate(rgb.clamp(0, 1), size=(size, size), mode="bilinear", align_corners=False)
        return ((out - mean) / std).half()
    return chain


def bench_unfused(cp, stream, fused_rows: list[dict], batch: int = 32) -> list[dict]:
    rows = []
    fused = {(r["format"], r["size"], r["resize"]): r for r in fused_rows if r["dtype"] == "float16"}
    try:
        import torch
    except ImportError:
        torch = None
    try:
        import kornia
    except Exception:
        kornia = None
    for fmt in ("YUYV", "NV12"):
        src = SourceFormat(fmt, W, H)
        raw = cp.random.RandomState(5).randint(0, 256, (batch, src.frame_bytes), dtype=cp.uint8)
        size = 224
        peers = []
        if torch is not None:
            traw = torch.from_dlpack(raw)
            ts = torch.cuda.ExternalStream(stream.ptr)
            for name, anti in (("pytorch", False), ("pytorch-antialias", True)):
                chain = torch_chain(torch, fmt, size, anti)
                peers.append((name, lambda c=chain: c(traw), ts))
            if kornia is not None:
                chain = _kornia_chain(torch, kornia, fmt, size)
                peers.append(("kornia", lambda c=chain: c(traw), ts))
        chain = _cupy_chain(cp, fmt, size)
        peers.append(("cupy", lambda c=chain: c(raw), None))
        for name, fn, ts in peers:
            try:
                if ts is not None:
                    with torch.cuda.stream(ts):
                        ms = _events_ms(cp, stream, fn, 5)
                else:
                    with stream:
                        ms = _events_ms(cp, stream, fn, 5)
            except Exception as exc:
                rows.append(dict(format=fmt, size=size, peer=name, error=f"{type(exc).__name__}: {exc}"))
                continue
            ref = fused[(fmt, size, "area" if name == "pytorch-antialias" else "bilinear")]
            rows.append(dict(format=fmt, size=size, peer=name, batch=batch, ms=ms, fps=batch / ms * 1e3,
                             input_gbps=batch * src.frame_bytes / ms / 1e6,
                             compared_to=f"sits {ref['resize']}", speedup=ms / ref["ms"]))
        if kornia is None:
            rows.append(dict(format=fmt, size=size, peer="kornia", error="kornia not importable here"))
        del raw
    return rows


# -- (c) ------------------------------------------------------------------------
def bench_graphs(cp, stream) -> dict:
    """Batch 1, one 1080p YUYV frame -> 224 fp16 NCHW, frames issued back to
    back (host wall time per frame, synchronised at the end), eager against
    graph replay of the same pipeline, for two pipelines:

    device: the frame is already in device memory (conversion only);
    host:   the frame is in pinned/registered host memory, and the pipeline
            starts with its ingest copy (4.1 MB over PCIe, ~80 us at
            50 GB/s, which no graph can shorten).
    """
    import torch

    from sits.cuda.convert import FrameConverter
    from sits.cuda.hostmem import HostRegistry
    from sits.dmabuf.udmabuf import MemFd

    res = {}
    src = SourceFormat("YUYV", W, H)
    fb = src.frame_bytes
    frame = random_device_frames(cp, src, 1, 3)[0]
    noise = np.random.default_rng(3).integers(0, 256, fb, dtype=np.uint8)
    s = torch.cuda.Stream()
    ts = cp.cuda.ExternalStream(s.cuda_stream)

    # PyTorch, unfused, as a user writes it.
    traw = torch.from_dlpack(frame).view(1, -1)
    host_t = torch.from_numpy(noise.copy()).pin_memory()
    dev_t = torch.empty_like(host_t, device="cuda")
    chain = torch_chain(torch, "YUYV", 224, False)
    pipelines = {"device": lambda: chain(traw),
                 "host": lambda: chain(dev_t.copy_(host_t, non_blocking=True).view(1, -1))}
    for name, fn in pipelines.items():
        try:
            with torch.cuda.stream(s):
                for _ in range(3):
                    fn()
                eager = _wall_us(fn, s.synchronize, 200)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, stream=s):
                    static_out = fn()
                graph = _wall_us(g.replay, s.synchronize, 200)
                gpu = _events_ms(cp, ts, g.replay, 50) * 1e3
            res[f"pytorch_{name}"] = dict(eager_us=eager, graph_us=graph, gpu_us=gpu, cut=1 - graph / eager)
            del static_out, g
        except Exception as exc:
            res[f"pytorch_{name}"] = dict(error=f"{type(exc).__name__}: {exc}")

    # sits: eager is FrameConverter.convert() (per frame: pointer table, its
    # upload, the kernel); the graph is a FixedConversion's one cuGraphLaunch.
    plan = make_plan(src, OutputSpec(224, 224, dtype="float16", **IMAGENET), resize="bilinear")
    conv = FrameConverter(plan, max_batch=1, stream=stream)
    out = conv.allocate(1)
    eager = _wall_us(lambda: conv.convert([frame], out=out, graph=False), stream.synchronize, 200)
    cached = _wall_us(lambda: conv.convert([frame], out=out, graph=True), stream.synchronize, 200)
    fixed = conv.fixed([frame], out=out)
    graph = _wall_us(fixed.launch, stream.synchronize, 200)
    gpu = _events_ms(cp, stream, fixed.launch, 50) * 1e3
    res["sits_device"] = dict(eager_us=eager, convert_graph_us=cached, graph_us=graph, gpu_us=gpu,
                              cut=1 - graph / eager)

    # sits with the ingest copy: a registered memfd frame copied to a device
    # staging buffer, then converted; the graph holds the copy and the kernel.
    reg = HostRegistry()
    buf = MemFd.create(fb)
    buf.array[:] = noise
    hptr = reg.register(buf).device_pointer
    staging = cp.empty(fb, cp.uint8)
    fixed_h = conv.fixed([staging], out=out)

    def ingest():
        cp.cuda.runtime.memcpyAsync(staging.data.ptr, hptr, fb, 1, stream.ptr)

    def eager_h():
        ingest()
        conv.convert([staging], out=out, graph=False)
    eager = _wall_us(eager_h, stream.synchronize, 100)
    stream.begin_capture()
    try:
        ingest()
        fixed_h.enqueue()
    finally:
        g = stream.end_capture()
    graph = _wall_us(lambda: g.launch(stream), stream.synchronize, 100)
    gpu = _events_ms(cp, stream, lambda: g.launch(stream), 20) * 1e3
    res["sits_host"] = dict(eager_us=eager, graph_us=graph, gpu_us=gpu, cut=1 - graph / eager)
    if "eager_us" in res.get("pytorch_device", {}):
        res["sits_graph_vs_pytorch_eager_cut"] = 1 - res["sits_device"]["graph_us"] / res["pytorch_device"]["eager_us"]
    reg.unregister(buf)
    buf.close()
    return res


# -- (d) ------------------------------------------------------------------------
def bench_ingest(cp, stream, frames: int = 32) -> dict:
    from sits.cuda.convert import FrameConverter, HostFrame
    from sits.cuda.hostmem import HostRegistry
    from sits.dmabuf.udmabuf import MemFd

    src = SourceFormat("YUYV", W, H)
    fb = src.frame_bytes
    bufs = [MemFd.create(fb) for _ in range(frames)]
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 256, fb, dtype=np.uint8)
    for b in bufs:
        b.array[:] = noise
    reg = HostRegistry()
    regs = [reg.register(b) for b in bufs]
    dev = cp.empty((frames, fb), cp.uint8)

    def copy_registered():
        for i, r in enumerate(regs):
            cp.cuda.runtime.memcpyAsync(dev.data.ptr + i * fb, r.device_pointer, fb, 1, stream.ptr)
    ms_reg = _events_ms(cp, stream, copy_registered, 3)
    pageable = [np.array(noise) for _ in range(frames)]

    def copy_pageable():
        for i, a in enumerate(pageable):
            cp.cuda.runtime.memcpyAsync(dev.data.ptr + i * fb, a.ctypes.data, fb, 1, stream.ptr)
    ms_page = _events_ms(cp, stream, copy_pageable, 1, repeats=3, warmup=1)
    # One copy call for the whole batch from one registered ring of frames.
    ring = MemFd.create(frames * fb)
    ring.array[:] = np.tile(noise, frames)
    ring_ptr = reg.register(ring).device_pointer
    ms_ring = _events_ms(cp, stream, lambda: cp.cuda.runtime.memcpyAsync(dev.data.ptr, ring_ptr, frames * fb, 1,
                                                                          stream.ptr), 3)
    reg.unregister(ring)
    ring.close()
    # The fused kernel reading the registered pages directly (no copy at all).
    plan = make_plan(src, OutputSpec(224, 224, dtype="float16", **IMAGENET), resize="area")
    conv = FrameConverter(plan, max_batch=frames, stream=stream, registry=reg)
    direct = conv.fixed([HostFrame(b, sequence=i) for i, b in enumerate(bufs)])
    ms_direct = _events_ms(cp, stream, direct.enqueue, 3)
    total = frames * fb
    out = dict(frame_bytes=fb, frames=frames,
               registered_copy_gbps=total / ms_reg / 1e6, pageable_copy_gbps=total / ms_page / 1e6,
               registered_batch_copy_gbps=total / ms_ring / 1e6,
               direct_kernel_read_gbps=total / ms_direct / 1e6, direct_kernel_fps=frames / ms_direct * 1e3)
    out["registered_vs_pageable"] = out["registered_copy_gbps"] / out["pageable_copy_gbps"]
    out["registered_vs_55gbps"] = out["registered_copy_gbps"] / 55.0
    del direct, conv, dev
    for b in bufs:
        reg.unregister(b)
        b.close()
    return out


# -- (e) ------------------------------------------------------------------------
def bench_features(cp, stream, ingest_gbps: float, batch: int = 256, batches: int = 16) -> dict:
    """Frames in a registered host ring -> one copy per batch (ingest stream)
    -> fused conversion writing the model's bf16 channels_last input ->
    ResNet-50, conversion + model captured as one CUDA graph per staging
    buffer (compute stream); the ingest of batch k+1 overlaps the model on
    batch k. Throughput is measured in the steady state, between the ends of
    the first and the last batch; the wall time including the pipeline's fill
    is reported beside it."""
    import torch
    import torchvision

    from sits.cuda.convert import FrameConverter
    from sits.cuda.hostmem import HostRegistry
    from sits.dmabuf.udmabuf import MemFd

    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50(weights=None)
    model.fc = torch.nn.Identity()  # feature extraction: the 2048-d pooled features
    model = model.cuda().to(memory_format=torch.channels_last).to(torch.bfloat16).eval()
    compute = torch.cuda.Stream()
    ccp = cp.cuda.ExternalStream(compute.cuda_stream)
    static_in = torch.randn(batch, 3, 224, 224, device="cuda").to(torch.bfloat16).contiguous(
        memory_format=torch.channels_last)
    with torch.inference_mode(), torch.cuda.stream(compute):
        for _ in range(3):
            model(static_in)
        compute.synchronize()
        g_model = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g_model, stream=compute):
            model(static_in)
        ms_model = _events_ms(cp, ccp, g_model.replay, 5, repeats=3)
    model_fps = batch / ms_model * 1e3
    del g_model

    src = SourceFormat("YUYV", W, H)
    fb = src.frame_bytes
    reg = HostRegistry()
    ring = MemFd.create(2 * batch * fb)  # two batches of capture frames, one registration
    noise = np.random.default_rng(1).integers(0, 256, fb, dtype=np.uint8)
    ring.array[:] = np.tile(noise, 2 * batch)
    ring_ptr = reg.register(ring).device_pointer
    ingest = cp.cuda.Stream(non_blocking=True)
    depth = 2  # staging buffers: ingest runs one batch ahead of the model
    staging = [cp.empty((batch, fb), cp.uint8) for _ in range(depth)]
    plan = make_plan(src, OutputSpec(224, 224, layout="NHWC", dtype="bfloat16", **IMAGENET), resize="area")
    conv = FrameConverter(plan, max_batch=batch, stream=ccp, tables=1)
    fixed = [conv.fixed(staging[i], out=static_in) for i in range(depth)]
    graphs = []
    with torch.inference_mode(), torch.cuda.stream(compute):
        for i in range(depth):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=compute):
                fixed[i].enqueue()
                static_out = model(static_in)
            graphs.append(g)
    copied = [cp.cuda.Event(disable_timing=True) for _ in range(depth)]
    consumed = [cp.cuda.Event(disable_timing=True) for _ in range(depth)]
    for e in consumed:
        e.record(ccp)

    def run(nb: int):
        done = [cp.cuda.Event() for _ in range(nb)]
        t0 = time.perf_counter()
        with torch.cuda.stream(compute):
            for k in range(nb):
                s = k % depth
                ingest.wait_event(consumed[s])  # staging buffer free again
                cp.cuda.runtime.memcpyAsync(staging[s].data.ptr, ring_ptr + (k % 2) * batch * fb, batch * fb, 1,
                                            ingest.ptr)
                copied[s].record(ingest)
                ccp.wait_event(copied[s])
                graphs[s].replay()  # conversion of staging[s] into the model's input, then the model
                consumed[s].record(ccp)
                done[k].record(ccp)
        ccp.synchronize()
        wall = time.perf_counter() - t0
        return wall, cp.cuda.get_elapsed_time(done[0], done[-1]) * 1e-3
    with torch.inference_mode():
        run(3)
        wall, steady = run(batches)
    pipeline_fps = (batches - 1) * batch / steady
    ingest_limit = ingest_gbps * 1e9 / fb
    bound = min(model_fps, ingest_limit)
    res = dict(batch=batch, batches=batches, resnet50_alone_fps=model_fps, resnet50_ms=ms_model,
               pipeline_fps=pipeline_fps, pipeline_fps_with_fill=batches * batch / wall,
               ingest_gbps=ingest_gbps, ingest_limit_fps=ingest_limit, bound_fps=bound,
               fraction_of_bound=pipeline_fps / bound, vs_article_1070=pipeline_fps / ARTICLE_FPS,
               features_shape=tuple(static_out.shape))
    del graphs, fixed
    reg.unregister(ring)
    ring.close()
    return res


def run(items: str = "abcde") -> dict:
    """Run the chosen items; each item's failure is recorded, not raised."""
    cp = cupy()
    from sits.cuda.probe import probe

    stream = cp.cuda.Stream(non_blocking=True)
    props = cp.cuda.runtime.getDeviceProperties(0)
    results: dict = {"device": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
                     "cupy": cp.__version__, "probe": probe()}
    try:
        import torch
        results["torch"] = torch.__version__
    except ImportError:
        results["torch"] = None
    results["d2d_bytes_per_s"] = d2d_bandwidth(cp, stream)

    def attempt(key, fn):
        try:
            results[key] = fn()
        except Exception as exc:
            results[key] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=4)}

    if "a" in items or "b" in items:
        attempt("a", lambda: bench_fused(cp, stream, results["d2d_bytes_per_s"]))
    if "b" in items and isinstance(results.get("a"), list):
        attempt("b", lambda: bench_unfused(cp, stream, results["a"]))
    if "c" in items:
        attempt("c", lambda: bench_graphs(cp, stream))
    if "d" in items or "e" in items:
        attempt("d", lambda: bench_ingest(cp, stream))
    if "e" in items:
        d = results.get("d", {})
        # The ingest limit is the best registered copy bandwidth measured in (d).
        gbps = max(d.get("registered_copy_gbps", 0), d.get("registered_batch_copy_gbps", 0)) or 55.0
        attempt("e", lambda: bench_features(cp, stream, gbps))
    return results


def report_lines(r: dict) -> list[str]:
    """The results as text lines (the CLI and tools/bench print these)."""
    lines = [f"device: {r.get('device')}   cupy {r.get('cupy')}   torch {r.get('torch')}",
             f"import path: {r.get('probe', {}).get('import_path')}   dmabuf import: "
             f"{r.get('probe', {}).get('dmabuf_import')}",
             f"device-to-device copy: {r['d2d_bytes_per_s'] / 1e12:.2f} TB/s (read+write)"]
    a = r.get("a")
    if isinstance(a, list):
        lines.append("(a) fused kernel alone, batch 32, 1080p -> 224/640, roofline = input read once + output "
                     "written once at the copy bandwidth")
        lines.append(f"    {'fmt':5} {'size':>4} {'resize':8} {'out':13} {'ms/batch':>9} {'frames/s':>9} {'GB/s':>6} "
                     f"{'roofline':>8}  area rows/block: ms")
        for x in a:
            sweep = "  ".join(f"{k}:{v:.4f}" for k, v in x.get("band_sweep_ms", {}).items())
            band = f"  [{x['band']} used]  {sweep}" if x.get("band") else ""
            lines.append(f"    {x['format']:5} {x['size']:4d} {x['resize']:8} {x['dtype'] + ' ' + x['layout']:13} "
                         f"{x['ms']:9.4f} {x['fps']:9.0f} {x['gbps']:6.0f} {x['roofline_frac'] * 100:7.1f}%{band}")
    elif a:
        lines.append(f"(a) failed: {a['error']}")
    b = r.get("b")
    if isinstance(b, list):
        lines.append("(b) unfused peers, batch 32, 1080p -> 224 fp16 (speedup = peer time / sits time)")
        for x in b:
            if "error" in x:
                lines.append(f"    {x['format']:5} {x['peer']:18} error: {x['error']}")
            else:
                lines.append(f"    {x['format']:5} {x['peer']:18} {x['ms']:8.3f} ms {x['fps']:9.0f} f/s  input "
                             f"{x['input_gbps']:6.0f} GB/s  sits is {x['speedup']:6.1f}x faster ({x['compared_to']})")
    elif b:
        lines.append(f"(b) failed: {b['error']}")
    c = r.get("c")
    if c and "error" not in c:
        lines.append("(c) batch-1 per-frame pipeline, 1080p YUYV -> 224 fp16, host wall time per frame (frames "
                     "issued back to back), eager vs graph replay of the same pipeline")
        for key, what in (("pytorch_device", "PyTorch unfused, frame on the device"),
                          ("sits_device", "sits, frame on the device (eager: convert(); graph: one cuGraphLaunch)"),
                          ("pytorch_host", "PyTorch unfused, ingest copy from pinned host memory included"),
                          ("sits_host", "sits, ingest copy from registered host memory included")):
            x = c.get(key, {})
            if "error" in x:
                lines.append(f"    {what}: error: {x['error']}")
            elif x:
                lines.append(f"    {what}:")
                lines.append(f"        eager {x['eager_us']:8.1f} us  graph {x['graph_us']:8.1f} us  cut "
                             f"{x['cut'] * 100:5.1f}%  (GPU time of the graph {x['gpu_us']:.1f} us)")
        if "sits_graph_vs_pytorch_eager_cut" in c:
            lines.append(f"    sits graph vs PyTorch eager (frame on the device): cut "
                         f"{c['sits_graph_vs_pytorch_eager_cut'] * 100:.1f}%")
    elif c:
        lines.append(f"(c) failed: {c['error']}")
    d = r.get("d")
    if d and "error" not in d:
        lines.append(f"(d) ingest of {d['frames']} 1080p YUYV frames: registered, one copy per frame "
                     f"{d['registered_copy_gbps']:.1f} GB/s, one copy per batch {d['registered_batch_copy_gbps']:.1f} "
                     f"GB/s (x{d['registered_vs_pageable']:.1f} pageable {d['pageable_copy_gbps']:.1f} GB/s; "
                     f"{d['registered_vs_55gbps'] * 100:.0f}% of 55 GB/s); fused kernel reading registered pages "
                     f"directly {d['direct_kernel_read_gbps']:.1f} GB/s = {d['direct_kernel_fps']:.0f} frames/s")
    elif d:
        lines.append(f"(d) failed: {d['error']}")
    e = r.get("e")
    if e and "error" not in e:
        lines.append(f"(e) feature extraction, batch {e['batch']}: pipeline {e['pipeline_fps']:.0f} frames/s steady "
                     f"({e['pipeline_fps_with_fill']:.0f} with the fill of {e['batches']} batches); ResNet-50 alone "
                     f"{e['resnet50_alone_fps']:.0f} img/s; ingest limit {e['ingest_limit_fps']:.0f} frames/s "
                     f"({e['ingest_gbps']:.1f} GB/s); {e['fraction_of_bound'] * 100:.1f}% of the bound; "
                     f"{e['vs_article_1070']:.1f}x the article's 1070 FPS")
    elif e:
        lines.append(f"(e) failed: {e['error']}")
    return lines
