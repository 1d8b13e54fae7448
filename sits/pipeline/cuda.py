"""The CUDA stage as a pipeline consumer: capture buffers -> model-ready tensors.

    consumer = CudaConsumer(OutputSpec(224, 224, dtype="float16", mean=..., std=...),
                            on_batch=lambda batch: model(torch.from_dlpack(batch)))
    Pipeline(source, consumers=[consumer]).run(duration=10)

`start()` picks how the GPU reaches the capture buffers, asked of the driver
(`sits.cuda.probe`), never assumed, and refuses before streaming when it
cannot (a UsageError that names the memory that can):

* ``dmabuf``: where the driver imports dma-bufs (Tegra), each buffer is
  imported once (cuImportExternalMemory) and read in place;
* ``host-registered``: memfd-backed buffers (udmabuf, the synthetic source)
  are registered once each (cuMemHostRegister); the GPU reads the captured
  pages over PCIe, by the copy engine into a device staging buffer
  (``ingest="copy"``) or by the kernel itself (``ingest="direct"``);
* ``staged``: the CPU copies each frame into a pinned bounce buffer
  (``zero_copy: false``): memfd buffers the driver will not register, or
  dma-bufs without import when asked for (``staged=True``).

Each capture buffer gets one fixed conversion, set up once: its ingest and
the fused kernel as one CUDA graph writing that buffer's own output tensor,
so a frame at batch 1 costs one cuGraphLaunch. Batches of more than one
frame (a latency budget: the DynamicBatcher) go through
FrameConverter.convert, each into a tensor of its own. A batch carries its
frames' V4L2 sequence numbers and timestamps; `on_batch(batch)` sees it as
soon as its work is enqueued (order GPU work after it with DLPack or
`batch.wait(stream)`). A batch-1 tensor belongs to its capture buffer: it
is written again when that buffer's next frame is converted, at least
len(buffers) frames later.

A frame's lease is released only once its batch's CUDA event has completed,
on the loop's thread: a C host function after each batch writes a pipe
that the pipeline's loop watches (sits.cuda.sink.CompletionQueue).

Where the source is driven by the C frame queue (V4L2, the synthetic
camera), frames one at a time and no Python wants each batch (no
`on_batch`), the steady state leaves Python altogether: each buffer's graph
is handed to the queue (sits.cuda.rawgraph), which launches it when the
buffer's frame is dequeued, and queues the buffer again once the graph's
last node has written its end stamp (sits.cuda.stamp: the GPU's clock, in
host-mapped memory), seen at the next frame's wake-up (frame_queue.c): one
wake-up and one driver call a frame, no CUDA thread at work. A
buffer is so held one frame period longer than its conversion takes (at
batch 1 a ring of 4 leaves 2 for the driver). Its latency is the GPU's
clock (the stamps) placed on CLOCK_MONOTONIC by the launch clock, a lower
bound short by at most a submission delay (frame_queue.c, cuda_done_ns).
`in_queue` says so; the report is the same.
"""
from __future__ import annotations

import collections
import contextlib
import select
import time
from typing import Callable

from sits.bayer import AUTO, AUTO_NOT_ON_GPU, RawOptions
from sits.formats import compressed
from sits.cuda.formats import ALIASES, FORMATS, MATRICES, RANGES, OutputSpec, SourceFormat, make_plan
from sits.errors import DeviceError, UsageError
from sits.pipeline.consumer import Consumer
from sits.pipeline.stats import CUDA_LATENCY_WINDOW, percentiles
from sits.v4l2.colorimetry import of_format

INGESTS = ("copy", "direct")
H2D = 1             # cudaMemcpyHostToDevice
GPU_TIMING_EVERY = 8  # batches between two GPU timings (two timed events cost a little)
CONVERTER_TABLES = 3  # batches > 1 in flight at once (FrameConverter's pointer tables)
# A batch is flushed this long before its deadline: epoll waits in whole
# milliseconds (rounded up), and the loop has other fds to serve.
BATCH_MARGIN_S = 1.5e-3
# device images the GPU's JPEG decode writes in turn: one being written, one
# being converted, one spare
DECODED_IMAGES = 3


def cuda_format_name(fourcc: str) -> str | None:
    """The CUDA stage's name for a V4L2 fourcc, or None when it cannot take it."""
    for key in (fourcc, fourcc.upper()):   # as given first: 'pgAA' and 'pGAA' are two Bayer formats
        name = ALIASES.get(key, key)
        if name in FORMATS:
            return name
    return None


def supported_formats() -> str:
    """The V4L2 fourccs the CUDA stage takes, with its name where it differs."""
    from sits.formats import FORMATS as PIXEL_FORMATS

    v4l2 = {f.name: f.v4l2 for f in PIXEL_FORMATS}
    return ", ".join(f"{v4l2[n]} ({n})" if n in v4l2 and v4l2[n] != n else n for n in FORMATS)


class _BufferOnGpu:
    """What one capture buffer has on the GPU: where the GPU reads it, its
    graph, its output tensor and events."""

    __slots__ = ("frame_src", "staging", "fixed", "graph", "tensor", "event", "start", "memfd", "imported")

    def __init__(self):
        self.frame_src = None   # what FrameConverter.convert reads for batches > 1
        self.staging = None     # device copy (ingest="copy")
        self.fixed = None       # the FixedConversion: its pointer table lives as long as it
        self.graph = None       # ingest + kernel, one launch (batch 1)
        self.tensor = None
        self.event = None       # completes when this buffer's batch-1 conversion is done
        self.start = None       # timing event before it
        self.memfd = None
        self.imported = None    # ImportedDmabuf


class CudaConsumer(Consumer):
    """Converts every frame into the output spec's tensor; see the module doc.

    `matrix` ("bt601", "bt709", "bt2020") and `range` ("limited", "full"):
    None follows what the camera's format says (sits.v4l2.colorimetry).
    `max_batch` > 1 needs `latency_budget_s` (frames wait at most that long,
    capture to tensor-ready, less the batcher's margin). `ingest`: "copy" or
    "direct" (host-registered buffers). `staged=True` allows the CPU copy for
    buffers the GPU cannot reach. `probe` is a `sits.cuda.probe.probe()`
    answer (asked at start when None). `stop_timeout_s`: how long stop()
    waits for batches in flight before it abandons them. `schedule`
    ("blocking", "yield", "spin"; None leaves CUDA's choice): how the
    context's waiting threads wait while the consumer runs (cuCtxSetFlags,
    restored at stop), the driver's host-function thread among them.
    `raw`: how a raw Bayer camera's samples become RGB (sits.bayer: black
    level, fixed white-balance gains, gamma), demosaiced in the kernel.
    """

    name = "cuda"

    def __init__(self, output: OutputSpec, *, matrix: str | None = None, range: str | None = None,
                 resize: str = "auto", crop=None, letterbox: bool = False, max_batch: int = 1,
                 latency_budget_s: float | None = None, on_batch: Callable | None = None,
                 ingest: str = "copy", staged: bool = False, probe: dict | None = None,
                 stop_timeout_s: float = 2.0, latency_samples: int = CUDA_LATENCY_WINDOW, schedule: str | None = None,
                 name: str | None = None, raw: RawOptions | None = None):
        if ingest not in INGESTS:
            raise UsageError(f"ingest {ingest!r} is not one of {', '.join(INGESTS)}")
        if max_batch < 1:
            raise UsageError(f"max batch {max_batch} is not positive")
        if matrix is not None and matrix not in MATRICES:
            raise UsageError(f"colour matrix {matrix!r} is not one of {', '.join(MATRICES)}")
        if range is not None and range not in RANGES:
            raise UsageError(f"range {range!r} is not one of {', '.join(RANGES)}")
        if raw is not None and raw.gains == AUTO:
            raise UsageError(AUTO_NOT_ON_GPU)
        if max_batch > 1 and latency_budget_s is None:
            raise UsageError("batches of more than one frame need a latency budget (latency_budget_s)")
        output.validate()
        self.output = output
        self.plan_options = dict(matrix=matrix, range=range, resize=resize, crop=crop, letterbox=letterbox, raw=raw)
        self.max_batch = max_batch
        self.latency_budget_s = latency_budget_s
        self.on_batch = on_batch
        self.ingest = ingest
        self.allow_staged = staged
        self.probe_answer = probe
        self.stop_timeout_s = stop_timeout_s
        self.schedule = schedule
        self._old_ctx_flags = None
        if schedule is not None:
            from sits.cuda.runtime import SCHEDULES
            if schedule not in SCHEDULES:
                raise UsageError(f"CUDA schedule {schedule!r} is not one of {', '.join(SCHEDULES)}")
        if name:
            self.name = name
        self.import_path = None
        self.zero_copy = None
        self.plan = None
        self.converter = None
        self.registry = None
        self.completions = None
        self.batcher = None
        self.frames = 0          # frames converted (their leases released after the event)
        self.batches = 0
        self.abandoned = 0       # frames released at stop() without their conversion done
        self.dropped = 0         # frames still waiting for a batch at stop() (never converted)
        # capture (V4L2 timestamp) -> the batch done on the GPU, per frame
        self.latencies_ms: collections.deque = collections.deque(maxlen=latency_samples)
        # the batch done -> its leases released on the loop, per batch
        self.release_ms: collections.deque = collections.deque(maxlen=latency_samples)
        self._gpu_ms: list[float] = []
        self._on_gpu: dict[tuple, _BufferOnGpu] = {}  # by (source, buffer index)
        self._in_flight: collections.deque = collections.deque()  # items of batches not yet done
        self._ctx = None
        self._stream = None
        self._cp = None
        self._stopping = False
        self.in_queue = False       # converting inside the frame queue's C (start() decides)
        self.decode = None          # the stage that decodes compressed frames on the GPU (sits.cuda.jpeg)
        self._queue_stopped = False
        self._queue = None
        self._frame_queue = None    # the source's frame queue: its timeline takes the CUDA stages
        self._raw_graphs: list = []
        self._stamps = None              # the queue's graphs' GPU clock stamps (sits/cuda/stamp.py)

    # ------------------------------------------------------------ set-up
    def start(self, ctx) -> None:
        """Plan the conversion for the source's format, choose the import path,
        register / import every capture buffer once and build its graph."""
        from sits.cuda.runtime import CudaOutOfMemory, cupy, out_of_memory

        self._ctx = ctx
        self._stopping = False
        fmt = ctx.format
        for other in ctx.sources.values():   # one conversion for every frame: one format
            f = other.format
            if (f.fourcc, f.width, f.height, f.bytesperline) != (fmt.fourcc, fmt.width, fmt.height, fmt.bytesperline):
                raise UsageError(f"the CUDA stage converts the frames of {ctx.source.path} "
                                 f"({fmt.fourcc} {fmt.width}x{fmt.height}) and of {other.path} "
                                 f"({f.fourcc} {f.width}x{f.height}): the sources of one CUDA stage "
                                 "share a format and size")
        if compressed(fmt.fourcc):   # decoded on the GPU by a stage of the frame queue, then converted
            fmt, keyed = self._decode_on_gpu(ctx)
        else:
            keyed = [((source, b.index), b) for source, src in ctx.sources.items() for b in src.buffers]
        buffers = [b for _, b in keyed]
        try:
            self.plan = self.plan_for(fmt, ctx.source.path)
        except BaseException:
            self._release_gpu()   # the decode stage, where one was set up
            raise
        # a decoder's images are read where they are; capture buffers as the driver lets the GPU reach them
        self.import_path = "device" if self.decode is not None else self._choose_path(ctx, buffers)
        self.zero_copy = self.import_path != "staged"
        cp = self._cp = cupy()
        if self.schedule is not None:
            from sits.cuda.runtime import set_schedule
            self._old_ctx_flags = set_schedule(self.schedule)
        from sits.cuda.convert import FrameBatch, FrameConverter
        from sits.cuda.hostmem import HostRegistry

        # A batch must leave each source a buffer to fill.
        cap = max(1, min(self.max_batch, len(buffers) - len(ctx.sources)))
        self._batch_type = FrameBatch
        self.registry = HostRegistry()
        try:
            self.converter = FrameConverter(self.plan, max_batch=cap, tables=CONVERTER_TABLES, registry=self.registry)
            self._stream = self.converter.stream
            self._on_gpu = {key: self._set_up(b) for key, b in keyed}
        except BaseException as exc:
            self._release_gpu()
            oom = None if isinstance(exc, CudaOutOfMemory) else out_of_memory(
                exc, f"setting up the CUDA stage for {len(buffers)} buffers")
            if oom:
                raise oom from None
            raise
        from sits.cuda.sink import CompletionQueue
        if cap > 1:
            from sits.cuda.batcher import DynamicBatcher
            self.batcher = DynamicBatcher(self.latency_budget_s, max_batch=cap, margin_s=BATCH_MARGIN_S)
            self._warm_up(cap)
        # Every graph launched once before the first frame: first launches
        # cost more than the rest.
        for on_gpu in self._on_gpu.values():
            if on_gpu.graph is not None:
                on_gpu.graph.launch(self._stream)
        cp.cuda.runtime.deviceSynchronize()
        q = self._frame_queue = getattr(ctx, "frame_queue", None)
        if self.decode is not None:
            self._hand_to_queue(q, (self.decode.source,))
            ctx.watch_stage(self.decode)
            return
        if q is not None and cap == 1 and self.on_batch is None and self.import_path != "staged":
            self._hand_to_queue(q, tuple(ctx.sources))
            return
        self.completions = CompletionQueue()
        warm = cp.cuda.Event(disable_timing=True)  # the wake-up path used once, too
        warm.record(self._stream)
        self.completions.watch(self._stream, warm, lambda _done_ns: None)
        self.completions.drain()
        ctx.watch(self.completions.fileno(), self._on_completions)

    def _decode_on_gpu(self, ctx):
        """The JPEG decode stage (sits.cuda.jpeg) for the sources' frames: (the
        format of what it makes, its device images keyed as buffers)."""
        from sits.cuda.jpeg import MADE, GpuJpegDecode
        from sits.pipeline import python_work
        from sits.pipeline.stage import Stage
        q, fmt = ctx.frame_queue, ctx.format
        if q is None or self.max_batch > 1 or self.on_batch is not None:
            raise UsageError(f"{ctx.source.path}: {fmt.fourcc} frames are decoded and converted on the GPU one "
                             "at a time in the frame queue: no batches, no on_batch")
        self._probe()
        from sits.cuda.runtime import cupy
        self._cp = cupy()
        inputs = {q.number(source, b.index): b.view() for source, src in ctx.sources.items() for b in src.buffers}
        work = GpuJpegDecode(fmt.width, fmt.height, DECODED_IMAGES)
        try:
            self.decode = Stage(q, "decode", python_work.WORK, python_work.handle(work), takes=tuple(ctx.sources),
                                inputs=inputs, outputs=[work.address(img) for img in work.images],
                                out_bytes=work.pitch * fmt.height)
        except BaseException:
            work.close()
            raise
        self.decode.work_object = work
        from sits.v4l2.raw import Format
        made = Format(MADE, fmt.width, fmt.height, work.pitch, work.pitch * fmt.height, fmt.field, 0)
        cp = self._cp
        keyed = []
        for i, image in enumerate(work.images):
            memory = cp.cuda.UnownedMemory(work.address(image), made.sizeimage, image)
            keyed.append(((self.decode.source, i), cp.ndarray((made.sizeimage,), cp.uint8, cp.cuda.MemoryPointer(memory, 0))))
        return made, keyed

    def _hand_to_queue(self, q, sources: tuple[int, ...]) -> None:
        """Each buffer's conversion as a driver graph, launched by the frame
        queue's C (by the queue's numbering of the buffers of `sources`)."""
        from sits.cuda.rawgraph import RawGraph, entry_points
        from sits.cuda.stamp import Stamps
        cp, stream = self._cp, self._stream
        nbytes = self.plan.src.frame_bytes
        graphs = {}
        numbered = {q.number(source, index): on_gpu for (source, index), on_gpu in self._on_gpu.items()}
        stamps = self._stamps = Stamps(max(numbered) + 1)
        try:
            for queue_index, on_gpu in numbered.items():
                def enqueue(on_gpu=on_gpu, index=queue_index):
                    stamps.begin(index, stream)
                    if on_gpu.staging is not None:
                        cp.cuda.runtime.memcpyAsync(on_gpu.staging.data.ptr, on_gpu.memfd.address, nbytes, H2D,
                                                    stream.ptr)
                    on_gpu.fixed.enqueue()
                    stamps.end(index, stream)
                raw = RawGraph(stream.ptr, enqueue)
                self._raw_graphs.append(raw)
                graphs[queue_index] = raw.exec
            for raw in self._raw_graphs:   # first launches cost more than the rest
                raw.launch(stream.ptr)
            # the GPU time of one frame's conversion, for the report: the graph C launches
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record(stream)
            for _ in range(GPU_TIMING_EVERY):
                self._raw_graphs[0].launch(stream.ptr)
            end.record(stream)
            end.synchronize()
        except BaseException:
            self._close_queue_graphs()
            raise
        self._gpu_ms.append(cp.cuda.get_elapsed_time(start, end) / GPU_TIMING_EVERY)
        from sits.pipeline.cuda_queue import QueueCuda
        self._queue = QueueCuda(q, graphs, stream.ptr, entry_points(), stamps.address, takes=sources)
        self.in_queue = True

    def plan_for(self, fmt, where: str):
        """The conversion of frames in V4L2 format `fmt` (sits.v4l2.raw.Format)
        from source `where`: its colorimetry as the format says, unless this
        consumer's options say otherwise."""
        name = cuda_format_name(fmt.fourcc)
        if name is None:
            raise UsageError(f"{where}: the CUDA stage cannot take {fmt.fourcc} frames; "
                             f"it takes {supported_formats()}")
        src = SourceFormat(name, fmt.width, fmt.height, bytesperline=fmt.bytesperline)
        try:
            # the colorimetry the driver reports, unless the options say otherwise
            matrix, range_ = of_format(fmt, rgb=src.info.rgb)
            options = {**self.plan_options, "matrix": self.plan_options["matrix"] or matrix,
                       "range": self.plan_options["range"] or range_}
            plan = make_plan(src, self.output, **options)
        except UsageError as exc:
            raise UsageError(f"{where}: {fmt.fourcc} {fmt.width}x{fmt.height} for the CUDA stage: "
                             f"{exc}") from None
        if fmt.sizeimage < src.frame_bytes:
            raise UsageError(f"{where}: sizeimage {fmt.sizeimage} B is smaller than a "
                             f"{fmt.fourcc} {fmt.width}x{fmt.height} frame ({src.frame_bytes} B)")
        return plan

    def _probe(self) -> dict:
        """What the driver says this GPU can do; refused where there is none."""
        answer = self.probe_answer
        if answer is None:
            from sits.cuda.probe import probe
            answer = self.probe_answer = probe()
        if not answer.get("available"):
            raise DeviceError(f"the CUDA stage needs a GPU: {answer.get('reason')}")
        return answer

    def _choose_path(self, ctx, buffers) -> str:
        """dmabuf where the driver imports them, host-registered for memfd
        buffers, staged only where it is the honest answer; else refuse."""
        answer = self._probe()
        memfds = all(b.memfd is not None for b in buffers)
        dmabufs = all(b.dmabuf is not None for b in buffers)
        if dmabufs and answer.get("dmabuf_import", {}).get("supported"):
            return "dmabuf"
        if memfds:
            # Registration refused: the pages are still ours to copy from.
            return "host-registered" if answer.get("host_register", {}).get("supported") else "staged"
        if dmabufs and self.allow_staged:
            return "staged"
        why = answer.get("dmabuf_import", {}).get("error") or "not supported"
        raise UsageError(f"{ctx.source.path}: {ctx.memory} buffers cannot reach this GPU without a CPU copy "
                         f"(dma-buf import: {why}); use udmabuf buffers (--memory udmabuf: memfd pages, "
                         "registered with CUDA once), or allow the staged copy")

    def _set_up(self, buf) -> _BufferOnGpu:
        cp, conv, stream = self._cp, self.converter, self._stream
        nbytes = self.plan.src.frame_bytes
        on_gpu = _BufferOnGpu()
        on_gpu.event = cp.cuda.Event(disable_timing=False)
        on_gpu.start = cp.cuda.Event(disable_timing=False)
        if self.import_path == "staged":
            return on_gpu  # converted per frame through the bounce buffer
        if self.import_path == "device":   # a decoder's image in device memory: read in place
            on_gpu.frame_src = buf
            on_gpu.fixed = fixed = conv.fixed([buf])
            on_gpu.graph, on_gpu.tensor = fixed.graph, fixed.tensor
            return on_gpu
        from sits.cuda.convert import HostFrame

        if self.import_path == "dmabuf":
            from sits.cuda.extmem import ImportedDmabuf
            on_gpu.imported = ImportedDmabuf(buf.dmabuf.fileno(), buf.dmabuf.size)
            on_gpu.frame_src = on_gpu.imported
            on_gpu.fixed = fixed = conv.fixed([on_gpu.imported])
            on_gpu.graph, on_gpu.tensor = fixed.graph, fixed.tensor
            return on_gpu
        on_gpu.memfd = buf.memfd
        self.registry.register(buf.memfd)  # once per buffer, for its life here
        if self.ingest == "direct":
            on_gpu.frame_src = HostFrame(buf.memfd)
            on_gpu.fixed = fixed = conv.fixed([on_gpu.frame_src])
            on_gpu.graph, on_gpu.tensor = fixed.graph, fixed.tensor
            return on_gpu
        on_gpu.staging = cp.empty(nbytes, cp.uint8)
        on_gpu.frame_src = on_gpu.staging
        on_gpu.fixed = fixed = conv.fixed([on_gpu.staging])
        host = buf.memfd.address
        stream.begin_capture()
        try:
            cp.cuda.runtime.memcpyAsync(on_gpu.staging.data.ptr, host, nbytes, H2D, stream.ptr)
            fixed.enqueue()
        finally:
            on_gpu.graph = stream.end_capture()
        on_gpu.tensor = fixed.tensor
        return on_gpu

    def _warm_up(self, cap: int) -> None:
        """Capture each batch size's graphs now, not in a frame's latency, and
        seed the batcher's cost model with what each size takes on this GPU
        (the buffers are idle: streaming has not started)."""
        if self.import_path == "staged":
            return

        class Idle:  # a stand-in for a frame of the buffer `key` names
            def __init__(self, key):
                self.source = key[0]
                self.buffer = type("B", (), {"index": key[1]})()
                self.sequence = self.timestamp_ns = -1
        keys = list(self._on_gpu)
        for n in range(2, cap + 1):
            items = [(Idle(key), None) for key in keys[:n]]
            for _ in range(CONVERTER_TABLES):  # every pointer table captures its own graph
                self.converter.convert(self._frames(items)).synchronize()
            started = time.monotonic()
            self.converter.convert(self._frames(items)).synchronize()
            self.batcher.observe(n, time.monotonic() - started)

    def tensor_for(self, index: int, source: int = 0):
        """The output tensor of capture buffer `index`'s (of `source`) own
        conversion (batches of one): written again with each of that
        buffer's frames."""
        return self._on_gpu[(source, index)].tensor

    def _streaming(self) -> bool:
        """Some source it takes still streams (a frame may still come)."""
        return any(src is not None and src.streaming for src in self._ctx.sources.values())

    # ------------------------------------------------------------ frames
    def ready(self) -> bool:
        return not self._stopping

    def take(self, frame, lease) -> None:
        if self.batcher is None:
            self._submit([(frame, lease)])
            return
        # The budget runs from capture (the V4L2 timestamp, CLOCK_MONOTONIC),
        # not from when the loop got round to the frame.
        self.batcher.add((frame, lease), frame.timestamp_ns / 1e9)
        if self.batcher.due(time.monotonic()):
            self._flush()

    def timeout(self) -> float | None:
        if self.batcher is None:
            return None
        if len(self.batcher) and not self._streaming():
            return 0.0  # capture stopped: no frame will join these
        return self.batcher.timeout(time.monotonic())

    def tick(self) -> None:
        if self.batcher is None:
            return
        flush_all = not self._streaming()
        while len(self.batcher) and (flush_all or self.batcher.due(time.monotonic())):
            self._flush()

    def busy(self) -> bool:
        if self.in_queue:
            q = self._queue
            if q.in_flight() and not self._streaming():
                # No frame will come to ask for these: the last conversions
                # (a few frames' GPU work) are waited for here.
                self._stream.synchronize()
                self._queue_done()
            return bool(q.in_flight())
        return bool(self.completions) or bool(self.batcher)

    def in_flight(self) -> int:
        """Conversions the frame queue's C launched that have not been seen done."""
        return self._queue.in_flight() if self.in_queue else 0

    def _queue_done(self) -> None:
        """The queue's completed conversions release their buffers."""
        from sits._kernel import lib
        if self._queue.done() == lib.SITS_Q_ERROR:
            raise self._queue.queue.error().error

    def _flush(self) -> None:
        items = self.batcher.take()
        if items:
            self._submit(items)

    def _submit(self, items) -> None:
        stream = self._stream
        submitted = time.monotonic()
        q = self._frame_queue
        if q is not None:
            for frame, _ in items:
                q.cuda_stage(q.number(frame.source, frame.buffer.index))
        timed = self.batches % GPU_TIMING_EVERY == 0
        if len(items) == 1 and self.import_path != "staged":
            frame = items[0][0]
            on_gpu = self._on_gpu[(frame.source, frame.buffer.index)]
            if timed:
                on_gpu.start.record(stream)
            on_gpu.graph.launch(stream)
            on_gpu.event.record(stream)
            batch = self._batch_type(on_gpu.tensor, stream, on_gpu.event, (frame.sequence,), (frame.timestamp_ns,),
                                     self.import_path, True, sources=(frame.source,), plan=self.plan)
            start, end = (on_gpu.start, on_gpu.event) if timed else (None, None)
        else:
            start = end = None
            if timed:
                start = self._cp.cuda.Event()
                start.record(stream)
            with contextlib.ExitStack() as cpu:
                if self.import_path == "staged":  # the CPU reads dma-bufs between SYNC_START/END
                    for frame, _ in items:
                        if frame.buffer.memfd is None:
                            cpu.enter_context(frame.buffer.dmabuf.cpu_access())
                batch = self.converter.convert(self._frames(items))
                batch.sources[:] = [frame.source for frame, _ in items]
            if timed:
                end = self._cp.cuda.Event()
                end.record(stream)
        self.batches += 1
        self._in_flight.append(items)

        def finished(done_ns, items=items, start=start, end=end, submitted=submitted):
            self._finished(items, done_ns, start, end, submitted)
        self.completions.watch(stream, batch.event, finished)
        if self.on_batch is not None:
            self.on_batch(batch)

    def _frames(self, items) -> list:
        """What FrameConverter.convert reads for these frames."""
        from sits.cuda.convert import DeviceFrame, HostFrame

        if self.import_path == "staged":
            return [self._cpu_view(f) for f, _ in items]
        cp, stream = self._cp, self._stream
        nbytes = self.plan.src.frame_bytes
        out = []
        for frame, _ in items:
            on_gpu = self._on_gpu[(frame.source, frame.buffer.index)]
            if on_gpu.staging is not None:
                cp.cuda.runtime.memcpyAsync(on_gpu.staging.data.ptr, on_gpu.memfd.address, nbytes, H2D, stream.ptr)
                out.append(DeviceFrame(on_gpu.staging, frame.sequence, frame.timestamp_ns))
            elif isinstance(on_gpu.frame_src, HostFrame):
                out.append(HostFrame(on_gpu.memfd, frame.sequence, frame.timestamp_ns))
            else:
                out.append(DeviceFrame(on_gpu.frame_src, frame.sequence, frame.timestamp_ns))
        return out

    def _cpu_view(self, frame):
        """The frame's bytes as the CPU sees them (the staged path's source)."""
        nbytes = self.plan.src.frame_bytes
        buf = frame.buffer
        if buf.memfd is not None:
            return buf.memfd.array[:nbytes]
        import numpy as np

        return np.frombuffer(buf.dmabuf.map(), dtype=np.uint8, count=nbytes)

    def _finished(self, items, done_ns, start, end, submitted) -> None:
        """On the loop's thread, once the batch's event completed (`done_ns`:
        when, by the host function's CLOCK_MONOTONIC)."""
        now_ns = time.monotonic_ns()
        self._in_flight.remove(items)  # the first, but for the one stream's order
        q = self._frame_queue
        for frame, lease in items:
            self.latencies_ms.append((done_ns - frame.timestamp_ns) / 1e6)
            if q is not None:
                q.cuda_stage(q.number(frame.source, frame.buffer.index), done_ns)
            lease.release()
        self.release_ms.append((now_ns - done_ns) / 1e6)
        self.frames += len(items)
        if start is not None:
            self._gpu_ms.append(self._cp.cuda.get_elapsed_time(start, end))
        if self.batcher is not None:
            self.batcher.observe(len(items), done_ns / 1e9 - submitted)

    def _on_completions(self) -> None:
        self.completions.dispatch()

    # ------------------------------------------------------------ the end
    def stop(self) -> None:
        """Frames still waiting for a batch are released unconverted; batches
        in flight are waited for (at most stop_timeout_s) and their leases
        released; then every registration, import and graph goes."""
        self._stopping = True
        if self.decode is not None:   # it makes no more frames; what it holds goes back
            self.decode.close()
        if self.in_queue:
            self._stop_queue()
        while self.batcher is not None and len(self.batcher):
            for _, lease in self.batcher.take():
                lease.release()
                self.dropped += 1
        if self.completions is None:
            self._release_gpu()
            return
        done = self._wait_in_flight(self.stop_timeout_s)
        if self._ctx is not None:
            self._ctx.unwatch(self.completions.fileno())
        if done:
            self.completions.close()
            self._release_gpu()
            return
        # Abandoned: the GPU may still read these buffers and a host function
        # may still write the eventfd. The leases go (the source has
        # stopped); the registrations and the eventfd stay until the process
        # ends rather than be freed under the GPU.
        while self._in_flight:
            for _, lease in self._in_flight.popleft():
                lease.release()
                self.abandoned += 1
        self.completions.abandon()
        self._restore_schedule()

    def _stop_queue(self) -> None:
        """The frame queue converts no more: what is in flight completes
        (the stream is waited for: the buffers are read by it), the buffers
        go back, the graphs and events go."""
        q = self._queue
        self._stream.synchronize()
        try:
            self._queue_done()
        finally:
            self._read_queue()
            q.detach()
            self._close_queue_graphs()
            self.in_queue = False
            self._queue_stopped = True

    def _close_queue_graphs(self) -> None:
        """The queue's graphs, then the stamps their nodes write (nothing in flight)."""
        for raw in self._raw_graphs:
            raw.close()
        self._raw_graphs = []
        if self._stamps is not None:
            self._stamps.close()
            self._stamps = None

    def _read_queue(self) -> None:
        """The queue's counts and samples, as this consumer's."""
        q = self._queue
        q.drain()
        self.frames = self.batches = q.frames
        self.latencies_ms.clear()
        self.latencies_ms.extend(q.latencies)
        self.release_ms.clear()
        self.release_ms.extend(q.release_ms)

    def _wait_in_flight(self, timeout_s: float) -> bool:
        """Dispatch completions until none is pending or the time is up; the
        completion eventfd wakes us, nothing spins."""
        deadline = time.monotonic() + timeout_s
        poller = select.poll()
        poller.register(self.completions.fileno(), select.POLLIN)
        while True:
            self.completions.dispatch()
            if not len(self.completions):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            poller.poll(max(1, int(left * 1000)))

    def _restore_schedule(self) -> None:
        if self._old_ctx_flags is not None:
            from sits.cuda.runtime import restore_schedule
            restore_schedule(self._old_ctx_flags)
            self._old_ctx_flags = None

    def _release_gpu(self) -> None:
        self._restore_schedule()
        if self.decode is not None:   # it stops before the images it writes go (its counts stay)
            self.decode.close()
        for on_gpu in self._on_gpu.values():
            if on_gpu.imported is not None:
                on_gpu.imported.close()
        self._on_gpu = {}
        if self.decode is not None:   # nothing reads its images now
            self.decode.work_object.close()
        if self.registry is not None:
            self.registry.close()
        self.converter = None

    def report(self) -> tuple[str, dict]:
        if self.in_queue:   # still running: the queue's counts
            self._read_queue()
        gpu = sum(self._gpu_ms) / len(self._gpu_ms) if self._gpu_ms else None
        return self.name, {
            "frames": self.frames,
            "batches": self.batches,
            "import_path": self.import_path,
            "zero_copy": self.zero_copy,
            "ingest": self.ingest if self.import_path == "host-registered" else None,
            "latency_ms": percentiles(list(self.latencies_ms)),
            "release_ms": percentiles(list(self.release_ms)),
            "gpu_ms_per_batch": None if gpu is None else round(gpu, 4),
            "dropped_at_stop": self.dropped,
            "abandoned": self.abandoned,
            "registrations": self.registry.registrations if self.registry is not None else 0,
            "wake": ("next frame (end stamp)" if self.in_queue or self._queue_stopped
                     else "c" if self.completions is not None and self.completions.native else "python"),
            "converted_in": "frame queue (C)" if self.in_queue or self._queue_stopped else "python",
            "schedule": self.schedule or "cuda's",
            "decode": None if self.decode is None else {
                **self.decode.counts(), "on": self.decode.work_object.backend, "errors_are": self.decode.why()},
        }
