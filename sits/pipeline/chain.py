"""The chain as a Python API: camera -> display and/or CUDA tensors.

    from sits import open_chain
    from sits.cuda.formats import OutputSpec

    spec = OutputSpec(224, 224, dtype="float16", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    with open_chain(device="/dev/video0", memory="udmabuf", display=True, cuda=spec, frames=300) as chain:
        for batch in chain.batches():
            x = torch.from_dlpack(batch)          # (n, 3, 224, 224) on the GPU, no host sync
            features = model(x)
    print(chain.summary.as_dict())

`device="synthetic"` streams from a source without a camera (memfd
buffers filled on a timer, `format`/`size`/`fps` as for a camera; see
sits/pipeline/capture.py): the same chain where there is no V4L2, as on a
GPU server.

Leaving the `with` block stops the capture, restores the display and
closes every fd, also after an error or Ctrl-C. `on_frame=` adds user code
as a consumer (called on the loop's thread for every frame; the frame must
not be kept past the call), `on_batch=` takes each CUDA batch as a callback
instead of the iterator.
"""
import collections

from sits.errors import UsageError


class Chain:
    def __init__(self, pipeline, cuda_consumer=None):
        self.pipeline = pipeline
        self._cuda = cuda_consumer
        self._ready: collections.deque = collections.deque()
        self._cm = None

    def __enter__(self) -> "Chain":
        self._cm = self.pipeline.started()
        self._cm.__enter__()
        return self

    def __exit__(self, *exc):
        cm, self._cm = self._cm, None
        self._ready.clear()
        return cm.__exit__(*exc)

    @property
    def summary(self):
        return self.pipeline.summary

    @property
    def cuda(self):
        """The CUDA consumer (sits.pipeline.cuda.CudaConsumer), or None."""
        return self._cuda

    def stop(self) -> None:
        """End the run (the iterators then finish); safe from a signal handler."""
        self.pipeline.request_stop("stopped")

    def _collect(self, batch) -> None:
        self._ready.append(batch)

    def batches(self):
        """The CUDA batches as they are enqueued (DLPack /
        __cuda_array_interface__, with their frames' sequence numbers and
        timestamps), until the run ends. A batch-of-one tensor belongs to
        its capture buffer: it is written again a few frames later."""
        if self._cuda is None:
            raise UsageError("this chain has no CUDA output (open_chain(cuda=OutputSpec(...)))")
        while True:
            while self._ready:
                yield self._ready.popleft()
            if not self.pipeline.step():
                break
        while self._ready:
            yield self._ready.popleft()

    def run(self):
        """Run to the end (callbacks only); the summary."""
        while self.pipeline.step():
            self._ready.clear()
        return self.summary


def open_chain(device: str | None = None, *, cuda=None, on_batch=None, on_frame=None, max_batch: int = 1,
               latency_budget_s: float | None = None, matrix: str | None = None, range: str | None = None,
               **options) -> Chain:
    """A chain from V4L2 `device` (default: the first camera; "synthetic":
    no camera, frames on a timer) to the display (`display=True`), to CUDA
    (`cuda=OutputSpec(...)`: batches from `Chain.batches()` or
    `on_batch(batch)`), and/or to `on_frame(frame)`. `options` are `sits
    capture`'s, by keyword (sits.pipeline.capture.OPTIONS: display, card,
    connector, format, size, fps, memory, buffers, frames, duration, verify,
    verify_every, snapshot, timeline, reconnect, controls; a raw Bayer
    camera's black_level, white_balance, gamma), checked as the CLI checks
    them. `timeline=FILE` writes every frame's record there
    (sits/journey/record.py; CSV for FILE.csv, else NDJSON). `matrix` and
    `range` override the colorimetry the camera's format says. Nothing
    streams until the `with` block is entered."""
    from sits.pipeline.capture import build, options as capture_options
    from sits.pipeline.consumer import CallbackConsumer
    opts = capture_options("open_chain", device=device, **options)
    consumers, chain_ref = [], []
    cuda_consumer = None
    if cuda is not None:
        from sits.pipeline.cuda import CudaConsumer

        def collect(batch):
            if on_batch is not None:
                on_batch(batch)
            else:
                chain_ref[0]._collect(batch)
        from sits.bayer import given as raw_given
        cuda_consumer = CudaConsumer(cuda, matrix=matrix, range=range, max_batch=max_batch,
                                     latency_budget_s=latency_budget_s, on_batch=collect,
                                     raw=raw_given(opts.black_level, opts.white_balance, opts.gamma))
        consumers.append(cuda_consumer)
    if on_frame is not None:
        consumers.append(CallbackConsumer(on_frame))
    chain = Chain(build(opts, consumers=consumers), cuda_consumer)
    chain_ref.append(chain)
    return chain


def _signature():
    """open_chain's signature with the capture options spelled out (help(), IDEs)."""
    import inspect

    from sits.pipeline.capture import OPTIONS
    sig = inspect.signature(open_chain)
    params = [p for p in sig.parameters.values() if p.kind != inspect.Parameter.VAR_KEYWORD]
    params += [inspect.Parameter(o.dest, inspect.Parameter.KEYWORD_ONLY, default=o.default)
               for o in OPTIONS if o.dest != "device"]
    return sig.replace(parameters=params)


open_chain.__signature__ = _signature()
