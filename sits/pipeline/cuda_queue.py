"""The CUDA conversion as a sink of the frame queue: the Python half of its
C half (sits/pipeline/sinks/cuda.c), which launches each frame's buffer's
graph and lets the buffer go once the graph's end stamp is written. This
object owns the C half's struct; CudaConsumer (cuda.py) makes the graphs
and reads the counts.
"""
import collections

from sits._kernel import ffi, lib
from sits.pipeline.stats import CUDA_LATENCY_WINDOW

SAMPLES = 2048   # latency samples between two drains (the C half asks at half)


class QueueCuda:
    def __init__(self, queue, graphs: dict, stream: int, entry_points, stamps: int, takes: tuple[int, ...] = (0,)):
        """Convert every frame of the sources `takes` in C from now on: `graphs` maps a buffer index
        to its conversion's CUgraphExec, launched on `stream`, whose first
        and last nodes write the buffer's stamp at `stamps` (host memory,
        SITS_CU_STAMP_WORDS u64 a buffer index; sits/cuda/stamp.py);
        `entry_points`: the driver's cuGraphLaunch and cuStreamQuery as
        addresses."""
        self.queue = queue
        C = self.C = ffi.new("struct sits_cuda *")
        for index, exec_ in graphs.items():
            C.graph[index] = exec_
        C.stream = stream
        C.graph_launch, C.stream_query = entry_points
        C.stamps = ffi.cast("uint64_t *", stamps)
        self._latency = ffi.new("float[]", SAMPLES)
        self._release = ffi.new("float[]", SAMPLES)
        C.latency_ms, C.release_ms, C.samples_cap = self._latency, self._release, SAMPLES
        # capture -> done on the GPU, done -> released: windows of the last samples
        self.latencies: collections.deque = collections.deque(maxlen=CUDA_LATENCY_WINDOW)
        self.release_ms: collections.deque = collections.deque(maxlen=CUDA_LATENCY_WINDOW)
        # every frame goes to the GPU: the port never holds one for long
        self.sink = C.sink = queue.add_sink(lib.sits_cuda_sink(), C, "drop-oldest",
                                            lib.SITS_Q_PORT_DEPTH, half=self, takes=takes)

    def on_ask(self) -> None:
        """The C half's sample arrays are half full."""
        self.drain()

    def done(self) -> int:
        """Launches whose end stamp is written let their buffers go."""
        code = self.queue.step(lib.sits_cuda_done, self.C)
        self.drain()
        return lib.SITS_Q_ERROR if code == lib.SITS_Q_ERROR else 0

    def in_flight(self) -> int:
        return self.C.launched - self.C.completed

    @property
    def frames(self) -> int:
        return self.C.frames

    def drain(self) -> None:
        C = self.C
        if C.samples_n:
            self.latencies.extend(ffi.unpack(self._latency, C.samples_n))
            self.release_ms.extend(ffi.unpack(self._release, C.samples_n))
            C.samples_n = 0

    def detach(self) -> None:
        """No frame is offered any more (what is in flight was waited for)."""
        self.queue.offer(self.sink, False)
