"""Frame consumers: the one small interface every frame sink of a Pipeline
implements, and the port that puts back-pressure between the source and it.

A consumer is handed a Frame with a Lease of its own; it releases the lease
when it is done with the pixels (after a flip, a CUDA event, a callback) and
the buffer goes back to the driver once every consumer has released it. A
consumer's events (a completion fd, a fence) join the pipeline's one event
loop through `PipelineContext.watch()`; its deadline (a batch that must be
flushed) through `timeout()`. Leases are released on the loop's thread only:
work done elsewhere wakes the loop (an eventfd) and releases there.

Back-pressure is explicit and per consumer (`Port`): each consumer is a
sink of the frame queue of its own, whose port (in C, frame_queue.c) keeps
its frames while it is not `ready()`, up to `depth`; past that its policy
decides and every drop is counted under the consumer's name:

* ``drop-oldest``: the oldest waiting frame is released, the new one waits;
* ``drop-newest``: the new frame is not given to this consumer;
* ``latest``: only the newest frame waits (any depth);
* ``block``: the pipeline stops dequeuing until the consumer takes a
  waiting frame; the driver then runs out of buffers and skips frames itself
  (counted as ``sequence_gap``, from V4L2's sequence numbers).
"""
from __future__ import annotations

from typing import Callable

from sits.errors import UsageError
from sits.pipeline.frame_queue import PORT_DEPTH, POLICIES


class Consumer:
    """Base class of frame consumers; override `take` and what you need."""

    #: the holder name of its leases and the key of its drop counter
    name = "consumer"
    #: it works inside the frame queue (PipelineContext.frame_queue, set up in
    #: start()): frames never come to take(), the queue's C hands them over
    in_queue = False

    def start(self, ctx: "PipelineContext") -> None:
        """The source is configured (ctx.format, ctx.buffers): set up."""

    def ready(self) -> bool:
        """Can it take a frame now? (False: the port queues, then its policy drops.)"""
        return True

    def take(self, frame, lease) -> None:
        """A frame for this consumer; `lease.release()` when done with it."""
        raise NotImplementedError

    def timeout(self) -> float | None:
        """Seconds until `tick()` is due (a batch deadline); None: no deadline."""
        return None

    def tick(self) -> None:
        """Called once `timeout()` has passed."""

    def busy(self) -> bool:
        """Work in flight that should finish before the pipeline closes."""
        return False

    def stop(self) -> None:
        """The pipeline ends: release every lease still held (after a bounded
        wait for `busy()` to clear)."""

    def report(self) -> tuple[str, dict] | None:
        """(key, section) for the pipeline's summary, or None."""
        return None


class PipelineContext:
    """What a consumer sees of the pipeline it is attached to."""

    def __init__(self, source, watch: Callable, unwatch: Callable, fail: Callable, frame_queue=None,
                 sources: dict | None = None, watch_stage: Callable | None = None):
        #: the source whose frames it takes (the first, where it takes several)
        self.source = source
        #: every source whose frames it takes, by the id its frames carry (frame.source)
        self.sources = sources if sources is not None else {0: source}
        self._watch, self._unwatch, self._fail = watch, unwatch, fail
        #: the C frame queue that drives the source (V4L2, timer sources), or None
        self.frame_queue = frame_queue
        self._watch_stage = watch_stage

    @property
    def format(self):
        """The capture buffers' format (fourcc, width, height, bytesperline, sizeimage)."""
        return self.source.format

    @property
    def buffers(self) -> list:
        """The capture buffers (index, dmabuf, memfd), for set-up done once per buffer."""
        return self.source.buffers

    @property
    def memory(self) -> str:
        return self.source.memory

    def watch(self, fd: int, callback: Callable[[], None]) -> None:
        """Call `callback()` from the loop whenever `fd` is readable."""
        self._watch(fd, callback)

    def unwatch(self, fd: int) -> None:
        self._unwatch(fd)

    def watch_stage(self, stage) -> None:
        """The loop takes what `stage` (a stage of the frame queue the
        consumer set up) makes, as it takes the sources' frames."""
        self._watch_stage(stage)

    def fail(self, exc: BaseException) -> None:
        """Stop the pipeline with this error (raised by run() after cleanup)."""
        self._fail(exc)


class Port:
    """A consumer's sink in the frame queue: the Python half of a sink with
    no C half, whose port (its policy, its depth) is the queue's."""

    def __init__(self, consumer: Consumer, policy: str = "drop-oldest", depth: int = 1, takes=None):
        if policy not in POLICIES:
            raise UsageError(f"unknown drop policy {policy!r}; use one of {', '.join(POLICIES)}")
        if not 1 <= depth <= PORT_DEPTH:
            raise UsageError(f"queue depth {depth}: 1 to {PORT_DEPTH}")
        self.consumer, self.policy, self.depth = consumer, policy, depth
        #: the source (or a tuple of sources) whose frames it takes, each a
        #: source object or its place in the pipeline's list; None: the first
        self.takes = takes
        self.queue = self.sink = None
        self.left = 0       # still waiting when the pipeline stopped (released then)

    def attach(self, queue, takes: tuple[int, ...] = (0,)) -> None:
        """Take frames of the sources `takes` (their ids) from `queue` from
        now on (a consumer that works in Python)."""
        self.queue = queue
        self.sink = queue.add_sink(None, None, self.policy, self.depth, half=self, takes=takes)
        self.ready_changed()

    def give(self, frame) -> None:
        """A frame the queue handed over: the consumer takes it with a lease of its own."""
        self.consumer.take(frame, frame.lease(self.consumer.name))
        self.ready_changed()

    def ready_changed(self) -> None:
        """Tell the queue whether the consumer takes a frame now."""
        if self.queue is not None:
            self.queue.set_ready(self.sink, self.consumer.ready())

    def clear(self) -> None:
        """The pipeline stops: what waits is released (counted as left)."""
        if self.queue is not None:
            self.left += self.queue.sink_counts(self.sink)["waiting"]
            self.queue.release_all(self.sink)

    @property
    def drops(self) -> int:
        return self.queue.sink_counts(self.sink)["dropped"] if self.queue is not None else 0

    def counts(self) -> dict:
        """Every frame offered is one of these."""
        c = self.queue.sink_counts(self.sink) if self.queue is not None else {"taken": 0, "dropped": 0}
        return {"taken": c["taken"], "dropped": c["dropped"], "left": self.left}


class CallbackConsumer(Consumer):
    """User code as a consumer: `callback(frame)` on the loop's thread; the
    lease is released when it returns (the frame must not be kept)."""

    def __init__(self, callback: Callable, name: str = "callback"):
        self.callback, self.name = callback, name

    def take(self, frame, lease) -> None:
        try:
            self.callback(frame)
        finally:
            lease.release()
