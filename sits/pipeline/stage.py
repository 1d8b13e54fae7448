"""Stage: the Python half of a frame queue stage (sits/pipeline/stages/stage.c).

A stage takes the frames of one source and makes each into a buffer of its
own, on a worker thread, then offers the made frame (the same sequence,
timestamps and timeline record) to the sinks of its own source. Its work
is a C function (struct sits_stage_work, stages/*.c) with a state of its
own; the stage reads the input buffers' bytes and writes its own buffers'
through pointers that stay valid while it lives (the buffers' mappings,
which their owners keep). Python only sets it up and reads its counts.
"""
from __future__ import annotations

from sits._kernel import ffi, lib
from sits.errors import DeviceError


class Stage:
    def __init__(self, queue, name: str, work, work_state, *, takes: int, inputs: dict[int, object],
                 outputs: list[object], out_bytes: int, dmabufs: dict[int, int] | None = None,
                 policy: str = "latest", depth: int = 1):
        """A stage of `queue` from now on, `name` in the summary (its counts;
        its drops as NAME and NAME_error): `work` (a struct sits_stage_work
        *) with `work_state` (its struct; kept alive here) makes frames of
        source `takes`, whose buffers' bytes are `inputs` (the queue's
        buffer number -> a writable buffer object; `dmabufs`: -> the
        dma-buf fd whose reads are bracketed), into `outputs` (buffer
        objects of its own, or the device addresses of GPU buffers its
        work writes, `out_bytes` of image each); its port's `policy` and
        `depth`."""
        self.queue, self.name = queue, name
        self.work_object = None   # a Python work (python_work.py), for its own counts
        self.S = S = ffi.new("struct sits_stage *")
        self._work_state = work_state
        S.work, S.work_state, S.out_bytes = work, work_state, out_bytes
        S.go_fd = S.done_fd = -1
        S.sink = self.sink = queue.add_sink(lib.sits_stage_sink(), S, policy, depth, half=self, takes=takes)
        S.source = self.source = queue.add_source(lib.sits_stage_source(), S, len(outputs), counted=False, half=self)
        self._inputs: list = []
        self.set_inputs(inputs, dmabufs)
        self._outputs = []   # the buffer objects' pointers, kept until close()
        for index, buf in zip(queue.buffers_of(self.source), outputs):
            if isinstance(buf, int):
                S.out_ptr[index] = ffi.cast("void *", buf)
            else:
                self._outputs.append(ffi.from_buffer(buf))
                S.out_ptr[index] = self._outputs[-1]
        err = lib.sits_stage_start(S)
        if err:
            raise DeviceError(f"a stage's worker thread: {err}")
        queue.set_source_fd(self.source, S.done_fd)
        queue.requeue_idle(self.source)

    def set_inputs(self, inputs: dict[int, object], dmabufs: dict[int, int] | None = None) -> None:
        """The input buffers' bytes (again, for a camera come back: the
        old camera's are not read any more once it could close)."""
        S = self.S
        for p in self._inputs:
            ffi.release(p)
        self._inputs = []
        for index, buf in inputs.items():
            p = ffi.from_buffer(buf)
            self._inputs.append(p)
            S.in_ptr[index] = p
            S.in_dmabuf[index] = 0
        for index, fd in (dmabufs or {}).items():
            S.in_dmabuf[index] = fd + 1

    def busy(self) -> bool:
        """A frame is with the worker."""
        return bool(self.S.busy)

    def drop_waiting(self) -> int:
        """The frames waiting for the stage are dropped (the run stops); the
        one with the worker is made and offered still."""
        return self.queue.step(lib.sits_stage_drop_waiting, self.S)

    def fileno(self) -> int:
        """Readable when the worker has made a frame (the stage's source fd)."""
        return self.S.done_fd

    def counts(self) -> dict:
        S, waits = self.S, self.queue.sink_counts(self.sink)
        return {"frames": S.made, "errors": S.errors, "dropped": waits["dropped"],
                "work_ms_mean": round(S.work_ns / max(1, S.made + S.errors) / 1e6, 3),
                "work_ms_max": round(S.work_max_ns / 1e6, 3)}

    def why(self) -> str:
        """What its errors were, in words (its work's, where it keeps them)."""
        why = getattr(self.work_object, "why", None)
        return why() if why is not None else f"errno {self.S.job_err}"

    def close(self) -> None:
        """The worker ends its job and goes; what the stage holds goes back."""
        if self.S.worker != ffi.NULL:
            lib.sits_stage_stop(self.S)
            self.queue.set_source_fd(self.source, -1)
            self.queue.forget_queued(self.source)
            self.queue.release_all(self.sink)
        for p in self._inputs + self._outputs:
            ffi.release(p)     # the mappings may close now
        self._inputs, self._outputs = [], []
