"""CSink: a consumer that is all C half, a sink of the frame queue written
as one file in sits/pipeline/sinks/ (NAME.c: `struct sits_NAME`, its state,
and `sits_NAME_sink()`, its functions, declared between cdef markers; the
build compiles every file there). It runs in the queue's C steady state,
with no Python a frame:

    Pipeline(camera, consumers=[CSink("hold", hold_ns=33_000_000)])

The keyword arguments set fields of its state before the first frame;
its report is the state's integer fields and its port's counts.
"""
from sits._kernel import ffi, lib
from sits.errors import UsageError
from sits.pipeline.consumer import Consumer


class CSink(Consumer):
    in_queue = True

    def __init__(self, kind: str, *, policy: str = "drop-oldest", depth: int = 1, name: str | None = None,
                 **fields):
        ops = getattr(lib, f"sits_{kind}_sink", None)
        if ops is None:
            raise UsageError(f"no C sink {kind!r} (sits/pipeline/sinks/{kind}.c)")
        self.kind, self._ops, self.name = kind, ops, name or kind
        self.policy, self.depth, self.fields = policy, depth, fields
        self.state = self.queue = self.sink = None

    def start(self, ctx) -> None:
        q = ctx.frame_queue
        if q is None:
            raise UsageError(f"sink {self.name}: a C sink needs a source the frame queue drives (V4L2, synthetic)")
        state = ffi.new(f"struct sits_{self.kind} *")
        for field, value in self.fields.items():
            try:
                setattr(state, field, value)
            except (AttributeError, TypeError, OverflowError) as exc:
                raise UsageError(f"sink {self.name}: {field}={value!r}: {exc}") from None
        self.state, self.queue = state, q
        self.sink = q.add_sink(self._ops(), state, self.policy, self.depth, half=self)

    def on_ask(self) -> None:
        """Its C half asked for nothing Python does."""

    def busy(self) -> bool:
        return self.queue is not None and self.queue.holding(self.sink)

    def stop(self) -> None:
        if self.queue is not None:
            self.queue.offer(self.sink, False)
            self.queue.release_all(self.sink)

    def report(self) -> tuple[str, dict]:
        section = {}
        if self.state is not None:
            t = ffi.typeof(self.state).item
            section = {f: getattr(self.state, f) for f, ft in t.fields
                       if ft.type.kind == "primitive" and f not in self.fields}
            section.update(self.queue.sink_counts(self.sink))
        return self.name, section
