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


def _random_device_frames(cp, src: SourceFormat, n: int, seed: int):
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
def bench_fused(cp, stream, d2d_bps: float, batch: int = 32) -> list[dict]:
    from sits.cuda.convert import FrameConverter

    rows = []
    for fmt in ("YUYV", "NV12"):
        src = SourceFormat(fmt, W, H)
        sets = [_random_device_frames(cp, src, batch, seed) for seed in (1, 2)]
        for size in (224, 640):
            for resize in ("bilinear", "area"):
                plan = make_plan(src, OutputSpec(size, size, dtype="float16", **IMAGENET), resize=resize)
                conv = FrameConverter(plan, max_batch=batch, stream=stream, slots=2)
                # Two slots hold the two frame sets' tables; replaying both
                # alternately keeps the inputs out of L2.
                keep = [conv.convert(sets[0], graph=False), conv.convert(sets[1], graph=False)]
                stream.synchronize()
                slots = conv._slots

                def launch(k=[0]):
                    conv._enqueue(slots[k[0] % 2], batch, conv.last_vec)
                    k[0] += 1
                g = _graph_of(cp, stream, launch, 20)
                ms = _events_ms(cp, stream, lambda: g.launch(stream), 1) / 20
                in_bytes = batch * src.frame_bytes
                out_bytes = batch * 3 * size * size * 2
                roof_ms = (in_bytes + out_bytes) / d2d_bps * 1e3
                rows.append(dict(format=fmt, size=size, resize=resize, batch=batch, ms=ms, vec=conv.last_vec,
                                 fps=batch / ms * 1e3, gbps=(in_bytes + out_bytes) / ms / 1e6,
                                 roofline_ms=roof_ms, roofline_frac=roof_ms / ms, registers=conv.registers))
                del conv, g, keep
        del sets
    return rows


# -- (b) ------------------------------------------------------------------------
def _torch_chain(torch, fmt: str, size: int, antialias: bool):
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
    fused = {(r["format"], r["size"], r["resize"]): r for r in fused_rows}
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
                chain = _torch_chain(torch, fmt, size, anti)
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
    from sits.cuda.convert import FrameConverter

    res = {}
    src = SourceFormat("YUYV", W, H)
    frame = _random_device_frames(cp, src, 1, 3)
    try:
        import torch
        traw = torch.from_dlpack(frame[0]).view(1, -1)
        chain = _torch_chain(torch, "YUYV", 224, False)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            for _ in range(3):
                chain(traw)
            eager = _wall_us(lambda: chain(traw), s.synchronize, 200)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):
                static_out = chain(traw)
            graph = _wall_us(g.replay, s.synchronize, 200)
        res["pytorch_unfused"] = dict(eager_us=eager, graph_us=graph, cut=1 - graph / eager)
        del static_out
    except Exception as exc:
        res["pytorch_unfused"] = dict(error=f"{type(exc).__name__}: {exc}")
    plan = make_plan(src, OutputSpec(224, 224, dtype="float16", **IMAGENET), resize="bilinear")
    conv = FrameConverter(plan, max_batch=1, stream=stream)
    eager = _wall_us(lambda: conv.convert(frame, graph=False), stream.synchronize, 200)
    graph = _wall_us(lambda: conv.convert(frame, graph=True), stream.synchronize, 200)
    gpu_ms = _events_ms(cp, stream, lambda: conv._enqueue(conv._slots[0], 1, conv.last_vec), 50)
    res["sits_fused"] = dict(eager_us=eager, graph_us=graph, cut=1 - graph / eager, gpu_us=gpu_ms * 1e3)
    if "eager_us" in res.get("pytorch_unfused", {}):
        res["sits_graph_vs_pytorch_eager_cut"] = 1 - graph / res["pytorch_unfused"]["eager_us"]
    return res


# -- (d) ------------------------------------------------------------------------
def bench_ingest(cp, stream, frames: int = 32) -> dict:
    from sits.cuda.convert import FrameConverter, HostFrame
    from sits.cuda.hostmem import HostRegistry, MemfdBuffer

    src = SourceFormat("YUYV", W, H)
    fb = src.frame_bytes
    bufs = [MemfdBuffer.create(fb) for _ in range(frames)]
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
    # The fused kernel reading the registered pages directly (no copy at all).
    plan = make_plan(src, OutputSpec(224, 224, dtype="float16", **IMAGENET), resize="area")
    conv = FrameConverter(plan, max_batch=frames, stream=stream, registry=reg)
    hf = [HostFrame(b, sequence=i) for i, b in enumerate(bufs)]
    conv.convert(hf)
    ms_direct = _events_ms(cp, stream, lambda: conv._enqueue(conv._slots[0], frames, conv.last_vec), 3)
    total = frames * fb
    out = dict(frame_bytes=fb, frames=frames,
               registered_copy_gbps=total / ms_reg / 1e6, pageable_copy_gbps=total / ms_page / 1e6,
               direct_kernel_read_gbps=total / ms_direct / 1e6, direct_kernel_fps=frames / ms_direct * 1e3)
    out["registered_vs_pageable"] = out["registered_copy_gbps"] / out["pageable_copy_gbps"]
    out["registered_vs_55gbps"] = out["registered_copy_gbps"] / 55.0
    del conv, dev
    for b in bufs:
        reg.unregister(b)
        b.close()
    return out


# -- (e) ------------------------------------------------------------------------
def bench_features(cp, stream, ingest_gbps: float, batch: int = 256, batches: int = 12) -> dict:
    import torch
    import torchvision

    from sits.cuda.convert import FrameConverter
    from sits.cuda.hostmem import HostRegistry, MemfdBuffer

    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50(weights=None)
    model.fc = torch.nn.Identity()  # feature extraction: the 2048-d pooled features
    model = model.cuda().to(memory_format=torch.channels_last).to(torch.bfloat16).eval()
    compute = torch.cuda.Stream()
    static_in = torch.randn(batch, 3, 224, 224, device="cuda", dtype=torch.float16)
    with torch.inference_mode(), torch.cuda.stream(compute):
        def forward():
            return model(static_in.to(torch.bfloat16).contiguous(memory_format=torch.channels_last))
        for _ in range(3):
            forward()
        compute.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=compute):
            static_out = forward()
        ms_model = _events_ms(cp, cp.cuda.ExternalStream(compute.cuda_stream), g.replay, 5, repeats=3)
    model_fps = batch / ms_model * 1e3

    src = SourceFormat("YUYV", W, H)
    fb = src.frame_bytes
    nbuf = 2 * batch
    reg = HostRegistry()
    bufs = [MemfdBuffer.create(fb) for _ in range(nbuf)]
    noise = np.random.default_rng(1).integers(0, 256, fb, dtype=np.uint8)
    for b in bufs:
        b.array[:] = noise
    regs = [reg.register(b) for b in bufs]
    ingest = cp.cuda.Stream(non_blocking=True)
    prep = cp.cuda.ExternalStream(compute.cuda_stream)
    depth = 3  # staging buffers: ingest runs up to two batches ahead of the model
    staging = [cp.empty((batch, fb), cp.uint8) for _ in range(depth)]
    plan = make_plan(src, OutputSpec(224, 224, dtype="float16", **IMAGENET), resize="area")
    conv = FrameConverter(plan, max_batch=batch, stream=prep, slots=4)
    copied = [cp.cuda.Event(disable_timing=True) for _ in range(depth)]
    consumed = [cp.cuda.Event(disable_timing=True) for _ in range(depth)]
    for e in consumed:
        e.record(prep)

    def run(nb: int) -> float:
        t0 = time.perf_counter()
        for k in range(nb):
            s = k % depth
            ingest.wait_event(consumed[s])  # staging slot free again
            base = (k % 2) * batch
            for i in range(batch):
                cp.cuda.runtime.memcpyAsync(staging[s].data.ptr + i * fb, regs[base + i].device_pointer, fb, 1,
                                            ingest.ptr)
            copied[s].record(ingest)
            prep.wait_event(copied[s])
            out = conv.convert(staging[s])
            consumed[s].record(prep)
            with torch.cuda.stream(compute):
                static_in.copy_(torch.from_dlpack(out))
                g.replay()
        compute.synchronize()
        return time.perf_counter() - t0
    with torch.inference_mode():
        run(2)
        wall = run(batches)
    pipeline_fps = batches * batch / wall
    ingest_limit = ingest_gbps * 1e9 / fb
    bound = min(model_fps, ingest_limit)
    res = dict(batch=batch, resnet50_alone_fps=model_fps, resnet50_ms=ms_model, pipeline_fps=pipeline_fps,
               ingest_limit_fps=ingest_limit, bound_fps=bound, fraction_of_bound=pipeline_fps / bound,
               vs_article_1070=pipeline_fps / ARTICLE_FPS, features_shape=tuple(static_out.shape))
    for b in bufs:
        reg.unregister(b)
        b.close()
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
        gbps = results["d"]["registered_copy_gbps"] if "registered_copy_gbps" in results.get("d", {}) else 55.0
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
        lines.append("(a) fused kernel, batch 32, 1080p -> fp16 NCHW")
        lines.append(f"    {'fmt':5} {'size':>4} {'resize':8} {'ms/batch':>9} {'frames/s':>9} {'GB/s':>7} "
                     f"{'roofline':>8}")
        for x in a:
            lines.append(f"    {x['format']:5} {x['size']:4d} {x['resize']:8} {x['ms']:9.4f} {x['fps']:9.0f} "
                         f"{x['gbps']:7.0f} {x['roofline_frac'] * 100:7.1f}%")
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
        lines.append("(c) batch-1 per-frame pipeline, 1080p YUYV -> 224 fp16, wall time per frame")
        for key in ("pytorch_unfused", "sits_fused"):
            x = c.get(key, {})
            if "error" in x:
                lines.append(f"    {key:16} error: {x['error']}")
            elif x:
                lines.append(f"    {key:16} eager {x['eager_us']:8.1f} us  graph {x['graph_us']:8.1f} us  "
                             f"cut {x['cut'] * 100:5.1f}%")
        if "sits_graph_vs_pytorch_eager_cut" in c:
            lines.append(f"    sits graph vs PyTorch eager: cut {c['sits_graph_vs_pytorch_eager_cut'] * 100:.1f}%  "
                         f"(sits kernel alone {c['sits_fused']['gpu_us']:.1f} us on the GPU)")
    elif c:
        lines.append(f"(c) failed: {c['error']}")
    d = r.get("d")
    if d and "error" not in d:
        lines.append(f"(d) ingest of {d['frames']} 1080p YUYV frames: registered {d['registered_copy_gbps']:.1f} GB/s "
                     f"(x{d['registered_vs_pageable']:.1f} pageable {d['pageable_copy_gbps']:.1f} GB/s; "
                     f"{d['registered_vs_55gbps'] * 100:.0f}% of 55 GB/s); fused kernel reading registered pages "
                     f"directly {d['direct_kernel_read_gbps']:.1f} GB/s = {d['direct_kernel_fps']:.0f} frames/s")
    elif d:
        lines.append(f"(d) failed: {d['error']}")
    e = r.get("e")
    if e and "error" not in e:
        lines.append(f"(e) feature extraction, batch {e['batch']}: pipeline {e['pipeline_fps']:.0f} frames/s; "
                     f"ResNet-50 alone {e['resnet50_alone_fps']:.0f} img/s; ingest limit "
                     f"{e['ingest_limit_fps']:.0f} frames/s; {e['fraction_of_bound'] * 100:.1f}% of the bound; "
                     f"{e['vs_article_1070']:.1f}x the article's 1070 FPS")
    elif e:
        lines.append(f"(e) failed: {e['error']}")
    return lines
