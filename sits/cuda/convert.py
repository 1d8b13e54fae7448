"""The CUDA conversion stage: frames in, one fused kernel per batch, a tensor out.

    plan = make_plan(SourceFormat("YUYV", 1920, 1080), OutputSpec(224, 224, dtype="float16"))
    conv = FrameConverter(plan, max_batch=32)
    batch = conv.convert([HostFrame(buf, sequence=s, timestamp_ns=t) for ...])
    logits = model(torch.from_dlpack(batch))

Frames are read where they are: device memory, or host memory registered
once per buffer (`HostFrame`, the `host-registered` path: the kernel reads
the mapped pages over PCIe, no CPU copy). Plain numpy frames take the
`staged` path (a pinned bounce buffer, then a device copy; `zero_copy` is
False). Each batch size is captured once as a CUDA graph (pointer-table
upload + kernel) and replayed with the new frames' addresses.

Frames at fixed addresses (a ring of capture buffers, a staging array) can
be set up once instead: `conv.fixed(frames, out=...)` uploads their table
once and captures the kernel alone, so each frame costs one cuGraphLaunch
(`fixed.launch()`) and no other Python work; `fixed.enqueue()` launches the
kernel into someone else's graph capture (preprocessing + model in one graph).

`out=` takes a CuPy array or a torch tensor of the plan's shape, or, for an
NHWC plan, an NCHW torch tensor in channels_last memory (what a
channels_last model takes), so the kernel writes the model's input itself.
bfloat16 outputs are torch tensors (CuPy has no bfloat16), or, without
PyTorch, uint16 arrays holding the bit patterns.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from sits.cuda import kernel as K
from sits.cuda.formats import DTYPES, Plan
from sits.cuda.hostmem import HostRegistry
from sits.cuda.runtime import cupy, out_of_memory
from sits.errors import DeviceError, UsageError

H2D = 1  # cudaMemcpyHostToDevice


@dataclasses.dataclass
class HostFrame:
    """A frame in host memory sits allocated (a memfd capture buffer).

    `buffer` has `address` and `size` (a MemFd); the frame starts at
    `offset`. `sequence`/`timestamp_ns` are V4L2's, carried to the batch.
    """

    buffer: object
    sequence: int = -1
    timestamp_ns: int = -1
    offset: int = 0


@dataclasses.dataclass
class DeviceFrame:
    """A frame already in device memory (a CuPy array, or anything with
    __cuda_array_interface__), e.g. an ingest ring buffer."""

    array: object
    sequence: int = -1
    timestamp_ns: int = -1


def _kernel(name: str, variant: K.Variant = K.PRODUCT):
    """The kernel `name` (kernel.kernel_name) of the variant's text."""
    return _built(name, K.kernel_source(variant))


@functools.cache
def _built(name: str, source: str):
    """The kernel `name` of `source`, compiled by NVRTC for this GPU on its
    own, when a plan first needs it: a kernel that does not build costs only
    the plans that use it, with one line saying why."""
    cp = cupy()
    mod = cp.RawModule(code=source, options=("-std=c++17",), name_expressions=(name,))
    try:
        mod.compile()
    except cp.cuda.compiler.CompileException as exc:
        arch = cp.cuda.Device().compute_capability
        raise DeviceError(f"the CUDA kernel {name} does not build for sm_{arch}: "
                          f"{K.compiler_error(exc.get_message())}") from None
    return mod.get_function(name)


class FrameBatch:
    """A converted batch: the tensor plus the frames' sources, V4L2 sequence
    numbers and timestamps. Exports __dlpack__ and __cuda_array_interface__ (the
    tensor's, with the producing stream), so torch.from_dlpack(batch) and
    cupy.asarray(batch) share its memory; `event` completes when the kernel
    is done (and so has finished reading the frames)."""

    def __init__(self, tensor, stream, event, sequences, timestamps_ns, import_path: str, zero_copy: bool,
                 sources=None, plan=None):
        self.tensor = tensor
        #: the conversion's Plan (crop, letterbox): sits.overlay.map_from_tensor
        #: takes a model's boxes in this tensor back to frame pixels through it
        self.plan = plan
        self.stream = stream
        self.event = event
        self.sequences = np.asarray(sequences, dtype=np.int64)
        #: each frame's source (its place in the pipeline's sources; 0 for all where one source)
        self.sources = np.zeros(len(self.sequences), np.int64) if sources is None else np.asarray(sources, np.int64)
        self.timestamps_ns = np.asarray(timestamps_ns, dtype=np.int64)
        self.import_path = import_path
        self.zero_copy = zero_copy

    def __len__(self) -> int:
        return int(self.tensor.shape[0])

    def __dlpack__(self, **kwargs):
        if _is_torch(self.tensor):
            consumer = kwargs.get("stream")
            if consumer is not None and consumer != -1:  # the consumer's stream waits on our kernel
                cp = cupy()
                ptr = {1: 0, 2: cp.cuda.Stream.ptds.ptr}.get(consumer, consumer)
                cp.cuda.ExternalStream(ptr).wait_event(self.event)
            # Pass the rest on (max_version: a consumer that asked for a
            # versioned capsule reads the answer as one).
            return self.tensor.__dlpack__(**{k: v for k, v in kwargs.items() if k != "stream"})
        with self.stream:  # the consumer's stream waits on ours
            return self.tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()

    @property
    def __cuda_array_interface__(self) -> dict:
        cai = dict(self.tensor.__cuda_array_interface__)
        cai["stream"] = self.stream.ptr or 1
        return cai

    @property
    def done(self) -> bool:
        return self.event.done

    def wait(self, stream) -> None:
        """Make `stream` (a CuPy stream) wait for this batch."""
        stream.wait_event(self.event)

    def synchronize(self) -> None:
        self.event.synchronize()


_TORCH_DTYPES = {"uint8": "torch.uint8", "float16": "torch.float16", "float32": "torch.float32",
                 "bfloat16": "torch.bfloat16"}


def _is_torch(t) -> bool:
    return type(t).__module__.startswith("torch") and hasattr(t, "data_ptr")


def _contiguous_strides(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for dim in reversed(shape):
        strides.append(acc)
        acc *= dim
    return tuple(reversed(strides))


def _out_pointer(out, plan: Plan, n: int) -> int:
    """The device address of `out` if it holds n frames of the plan's output in
    the kernel's layout; UsageError otherwise."""
    shape = plan.out_shape(n)
    if _is_torch(out):
        if not out.is_cuda or str(out.dtype) != _TORCH_DTYPES[plan.out.dtype]:
            raise UsageError(f"out must be a CUDA {plan.out.dtype} tensor, not {out.dtype} on {out.device}")
        got_shape, got_strides = tuple(out.shape), tuple(out.stride())
        ptr = out.data_ptr()
    else:
        if out.dtype != DTYPES[plan.out.dtype] or not out.flags.c_contiguous:
            raise UsageError(f"out must be a contiguous {plan.out.dtype} array of shape {shape}")
        got_shape, ptr = tuple(out.shape), out.data.ptr
        got_strides = _contiguous_strides(got_shape)
    if got_shape == shape and got_strides == _contiguous_strides(shape):
        return ptr
    h, w = plan.out.height, plan.out.width
    if plan.out.layout == "NHWC" and got_shape == (n, 3, h, w) and got_strides == K.default_out_strides(plan):
        return ptr  # NCHW in channels_last memory: the same bytes as NHWC
    raise UsageError(f"out of shape {got_shape} and element strides {got_strides} is not the "
                     f"{plan.out.layout} {shape} output (contiguous, or NCHW channels_last for NHWC plans)")


def _as_batch(frames, max_batch: int):
    """The frames of a batch as a sequence: a 2-D device array is one frame a
    row; anything else is iterated. 1..max_batch frames, else a UsageError."""
    if getattr(frames, "ndim", 1) == 2 and hasattr(frames, "__cuda_array_interface__"):
        frames = _RowFrames(frames)
    else:
        frames = list(frames)
    if not 1 <= len(frames) <= max_batch:
        raise UsageError(f"batch of {len(frames)} frames; this converter takes 1 to {max_batch}")
    return frames


class _RowFrames(list):
    """A (batch, frame_bytes) device array taken as `batch` frames, one per row."""

    def __init__(self, array):
        super().__init__(range(array.shape[0]))
        self.array = array

    def planes(self, plan: Plan) -> list[tuple[int, int]]:
        a = self.array
        if not a.flags.c_contiguous or a.dtype.itemsize != 1:
            raise UsageError("a batch array must be contiguous uint8 (batch, frame bytes)")
        if a.shape[1] < plan.src.frame_bytes:
            raise UsageError(f"rows of {a.shape[1]} B are smaller than the format's {plan.src.frame_bytes} B")
        base, row = a.data.ptr, a.shape[1]
        return [K.frame_planes(base + i * row, plan) for i in range(a.shape[0])]


class _PointerTable:
    """A launch's pointer table (pinned host + device), the graphs that read
    it and its staging buffers; FrameConverter uses its tables in turn."""

    def __init__(self, cp, max_batch: int):
        import cupyx

        n = 1 + 2 * max_batch
        self.host = cupyx.empty_pinned((n,), dtype=np.uint64)
        self.dev = cp.empty((n,), dtype=np.uint64)
        self.free = cp.cuda.Event(disable_timing=True)  # the table was read
        self.free.record()
        self.graphs: dict[int, object] = {}
        self.staging = None


class FrameConverter:
    """Converts batches of frames of one plan (see the module doc).
    `variant` is how its kernels are built and launched: the product's
    unless a test or a benchmark gives another (kernel.Variant). `tables`:
    pointer tables used in turn: that many launches may be in flight before
    convert() waits for the oldest to have read its table."""

    def __init__(self, plan: Plan, *, max_batch: int = 64, stream=None, tables: int = 3,
                 use_graphs: bool = True, registry: HostRegistry | None = None,
                 variant: K.Variant = K.PRODUCT):
        cp = cupy()
        self.plan = plan
        self.max_batch = max_batch
        self.variant = variant
        # Area may use 16-byte loads when rows are 16-byte aligned; frames whose
        # addresses are not get the 4-byte kernel (chosen per launch).
        self._vecs = (1, 4) if plan.resize == "area" and K.vec4_possible(plan) else (1,)
        self._smem = {v: K.launch_shape(plan, max_batch, v, variant=variant)[2]
                      for v in self._vecs}  # refuses bad sizes now
        try:
            self._kernels, self._params = {}, {}
            for v in self._vecs:
                kern = _kernel(K.kernel_name(plan, v, variant), variant)
                most = self._smem[v]
                if K.area_integer(plan, v, variant):  # its shared memory grows with the band's rows
                    most = K.area_int_shared(plan, K.area_int_max_rows(plan))
                if most > 48 * 1024:
                    kern.max_dynamic_shared_size_bytes = most
                kern.num_regs  # loads the module now, outside any graph capture
                self._kernels[v] = kern
                packed = K.pack_params(plan, None, v, variant)
                self._params[v] = (K.param_struct(packed), cp.asarray(packed))
            self.registers = self._kernels[self._vecs[-1]].num_regs
            # Area blocks the GPU holds at once, per load width (vec words;
            # kernel.area_resident); empty for plans launched as bilinear.
            self.resident: dict[int, int] = {}
            if K.word_area(plan):
                props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
                for v in self._vecs:
                    self.resident[v] = K.area_resident(
                        self._kernels[v].num_regs, self._smem[v], props["multiProcessorCount"],
                        props.get("sharedMemPerMultiprocessor", 228 * 1024),
                        props.get("reservedSharedMemPerBlock", 1024),
                        K.launch_shape(plan, 1, v, variant=variant)[1][0])
            self.stream = stream or cp.cuda.Stream(non_blocking=True)
            self._tables = [_PointerTable(cp, max_batch) for _ in range(max(1, tables))]
        except Exception as exc:
            oom = out_of_memory(exc, "setting up the conversion")
            if oom:
                raise oom from None
            raise
        self._next = 0
        self.last_vec = 1
        self.use_graphs = use_graphs
        self.registry = registry if registry is not None else HostRegistry()
        self.graph_captures = 0
        self.launches = 0

    def allocate(self, n: int):
        """A new output for n frames of the plan on the converter's stream
        (what convert() fills when given no out=)."""
        cp = cupy()
        shape = self.plan.out_shape(n)
        if self.plan.out.dtype == "bfloat16":
            try:
                import torch
            except ImportError:
                torch = None
            if torch is not None:
                # Allocated on our stream, so the caching allocator reuses it in
                # that stream's order (record_stream() would make it record an
                # event on our stream when freed, after the stream may be gone).
                with torch.cuda.stream(torch.cuda.ExternalStream(self.stream.ptr)):
                    return torch.empty(shape, dtype=torch.bfloat16, device=f"cuda:{cp.cuda.Device().id}")
        with self.stream:
            return cp.empty(shape, dtype=DTYPES[self.plan.out.dtype])

    # -- frames -> plane addresses -------------------------------------------------
    def _planes(self, frame) -> tuple[tuple[int, int], str]:
        need = self.plan.src.frame_bytes
        if isinstance(frame, HostFrame):
            if frame.offset + need > frame.buffer.size:
                raise UsageError(f"frame of {need} B at offset {frame.offset} overruns its "
                                 f"{frame.buffer.size} B buffer")
            reg = self.registry.register(frame.buffer)
            return K.frame_planes(reg.device_pointer + frame.offset, self.plan), "host-registered"
        array = frame.array if isinstance(frame, DeviceFrame) else frame
        cai = getattr(array, "__cuda_array_interface__", None)
        if cai is None:
            raise UsageError(f"cannot convert a {type(frame).__name__}: give a HostFrame, a DeviceFrame, "
                             "a device array, or a numpy array (staged)")
        nbytes = int(np.prod(cai["shape"])) * np.dtype(cai["typestr"]).itemsize
        if cai.get("strides") is not None and not (hasattr(array, "flags") and array.flags.c_contiguous):
            raise UsageError("device frames must be contiguous")
        if nbytes < need:
            raise UsageError(f"device frame of {nbytes} B is smaller than the format's {need} B")
        return K.frame_planes(cai["data"][0], self.plan), "device"

    def _resolve(self, frames) -> tuple[list[tuple[int, int]], str]:
        """Plane addresses of frames that stay where they are, and the import path."""
        if isinstance(frames, _RowFrames):
            return frames.planes(self.plan), "device"
        resolved = [self._planes(f) for f in frames]
        kinds = {k for _, k in resolved}
        return [p for p, _ in resolved], (kinds.pop() if len(kinds) == 1 else "mixed")

    def _stage(self, table: _PointerTable, frames: list[np.ndarray]) -> list[tuple[int, int]]:
        """The staged path: numpy frames -> pinned bounce buffer -> device staging."""
        cp = cupy()
        import cupyx

        need = self.plan.src.frame_bytes
        if table.staging is None:
            table.staging = (cupyx.empty_pinned((self.max_batch, need), np.uint8),
                             cp.empty((self.max_batch, need), np.uint8))
        bounce, dev = table.staging
        for i, f in enumerate(frames):
            flat = np.asarray(f, dtype=np.uint8).reshape(-1)
            if flat.size < need:
                raise UsageError(f"frame of {flat.size} B is smaller than the format's {need} B")
            bounce[i] = flat[:need]
        cp.cuda.runtime.memcpyAsync(dev.data.ptr, bounce.ctypes.data, len(frames) * need, H2D, self.stream.ptr)
        return [K.frame_planes(dev.data.ptr + i * need, self.plan) for i in range(len(frames))]

    # -- launching -----------------------------------------------------------------
    def _enqueue(self, table: _PointerTable, n: int, vec: int = 1) -> None:
        cp = cupy()
        grid, block, smem = K.launch_shape(self.plan, n, vec, self.resident.get(vec), self.variant)
        cp.cuda.runtime.memcpyAsync(table.dev.data.ptr, table.host.ctypes.data, (1 + 2 * n) * 8, H2D,
                                    self.stream.ptr)
        with self.stream:
            self._kernels[vec](grid, block, (*self._params[vec], table.dev), shared_mem=smem)

    def fixed(self, frames, *, out=None) -> "FixedConversion":
        """Set up the conversion of frames that stay at these addresses (see the module doc)."""
        return FixedConversion(self, frames, out)

    def convert(self, frames, *, out=None, graph: bool | None = None) -> FrameBatch:
        """Convert a batch (1..max_batch frames) with one kernel launch."""
        cp = cupy()
        frames = _as_batch(frames, self.max_batch)
        n = len(frames)
        try:
            if out is None:
                out = self.allocate(n)
            out_ptr = _out_pointer(out, self.plan, n)
            table = self._tables[self._next]
            self._next = (self._next + 1) % len(self._tables)
            table.free.synchronize()  # its previous launch has read the table (long done, normally)
            staged = [f for f in frames if isinstance(f, np.ndarray)]
            if staged and len(staged) != n:
                raise UsageError("a batch is either all numpy (staged) frames or none")
            if staged:
                planes = self._stage(table, staged)
                path, zero_copy = "staged", False
            else:
                planes, path = self._resolve(frames)
                zero_copy = True
            table.host[:1 + 2 * n] = K.pointer_table(out_ptr, planes, self.plan)
            vec = 4 if 4 in self._vecs and K.aligned16(planes) else 1
            self.last_vec = vec
            use_graph = self.use_graphs if graph is None else graph
            if use_graph and not staged:
                g = table.graphs.get((n, vec))
                if g is None:
                    self.stream.begin_capture()
                    try:
                        self._enqueue(table, n, vec)
                    finally:
                        g = self.stream.end_capture()
                    table.graphs[(n, vec)] = g
                    self.graph_captures += 1
                g.launch(self.stream)
            else:
                self._enqueue(table, n, vec)
            table.free.record(self.stream)
            event = cp.cuda.Event(disable_timing=True)
            event.record(self.stream)
        except UsageError:
            raise
        except Exception as exc:
            oom = out_of_memory(exc, f"converting a batch of {n}")
            if oom:
                raise oom from None
            raise
        self.launches += 1
        seqs = [getattr(f, "sequence", -1) for f in frames]
        stamps = [getattr(f, "timestamp_ns", -1) for f in frames]
        return FrameBatch(out, self.stream, event, seqs, stamps, path, zero_copy, plan=self.plan)


class FixedConversion:
    """The conversion of frames at fixed addresses into a fixed output.

    The pointer table is uploaded once, here; the kernel alone is captured as
    a CUDA graph. Per frame, `launch()` is a single cuGraphLaunch on the
    converter's stream (no other Python work; the caller orders and waits
    with its own events); `enqueue()` launches the kernel, for capture into
    a larger graph. The frames' bytes may change between launches, their
    addresses may not (the HostFrames' registrations and the arrays must
    stay alive: this object keeps references to them).
    """

    def __init__(self, conv: FrameConverter, frames, out=None):
        cp = cupy()
        frames = _as_batch(frames, conv.max_batch)
        n = len(frames)
        if any(isinstance(f, np.ndarray) for f in frames):
            raise UsageError("fixed conversions read frames where they are: give HostFrames or device "
                             "arrays, not numpy frames")
        if out is None:
            out = conv.allocate(n)
        planes, self.import_path = conv._resolve(frames)
        self.zero_copy = True
        self.frames, self.tensor, self.stream, self.plan = frames, out, conv.stream, conv.plan
        self.vec = 4 if 4 in conv._vecs and K.aligned16(planes) else 1
        table = K.pointer_table(_out_pointer(out, conv.plan, n), planes, conv.plan)
        self._table = cp.asarray(table)  # uploaded once, synchronously
        cp.cuda.runtime.deviceSynchronize()
        # (grid, block, dynamic shared bytes) of its launch (kernel.launch_shape).
        self.launch_shape = K.launch_shape(conv.plan, n, self.vec, conv.resident.get(self.vec), conv.variant)
        grid, block, smem = self.launch_shape
        kernel, params = conv._kernels[self.vec], conv._params[self.vec]
        self._launch_args = (grid, block, (*params, self._table))
        self._smem = smem
        self._kernel = kernel
        self.stream.begin_capture()
        try:
            self.enqueue()
        finally:
            self.graph = self.stream.end_capture()
        self.launch = functools.partial(self.graph.launch, self.stream)
        self.sequences = np.asarray([getattr(f, "sequence", -1) for f in frames], dtype=np.int64)

    def enqueue(self) -> None:
        """Launch the kernel on the converter's stream (capturable)."""
        with self.stream:
            self._kernel(*self._launch_args, shared_mem=self._smem)

    def launch(self) -> None:  # replaced per instance by the bound cuGraphLaunch
        raise NotImplementedError
