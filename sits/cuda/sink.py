"""Bridging CUDA completion to the pipeline's one poll loop.

The capture pipeline hands frames to a `CudaFrameSink` with `submit(frame,
on_done)`; `on_done(done_ns)` (typically releasing a lease) is called only
after the CUDA work that reads the frame has completed, never earlier, and
always from the poll loop's thread (inside `dispatch()`), never from a CUDA
thread.

How the loop learns of completion without busy-waiting: after each batch
the sink records a CUDA event and enqueues a host function on the stream
that writes a completion record {id, CLOCK_MONOTONIC ns} to a pipe;
`fileno()` is the pipe's read end. The host function runs once the work
before it on the stream is done, so its clock says when the batch was
ready, however late the loop reads it; release is still decided by
cuEventQuery. It is C (`sits_completion_host_fn` in the kernel binding,
launched with cuLaunchHostFunc), so the CUDA thread that runs it never
waits for the GIL; without the binding, a Python function writes the same
record through CuPy. Deadline-driven batching uses `timeout()` as the
select timeout.

    sel.register(sink, EVENT_READ)
    while running:
        for key, _ in sel.select(sink.timeout()):
            ...
        sink.dispatch()
"""
from __future__ import annotations

import collections
import ctypes
import functools
import os
import struct
import time
from typing import Callable

from sits.cuda.batcher import DynamicBatcher
from sits.cuda.convert import FrameBatch, FrameConverter
from sits.errors import DeviceError
from sits.fd import FdOwner


RECORD = struct.Struct("=QQ")  # struct sits_completion: id, done_ns


@functools.cache
def _native_wake():
    """(cuLaunchHostFunc, the address of the binding's C host function), or
    None where the binding or the driver lacks either."""
    try:
        from sits._kernel import ffi, lib
        fn = int(ffi.cast("uintptr_t", ffi.addressof(lib, "sits_completion_host_fn")))
        launch = ctypes.CDLL("libcuda.so.1").cuLaunchHostFunc
    except (ImportError, AttributeError, OSError):
        return None
    launch.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    launch.restype = ctypes.c_int
    return launch, fn


class CompletionQueue(FdOwner):
    """Callbacks that wait for CUDA events; a pipe of completion records
    wakes the poll loop. `callback(done_ns)` gets the host function's clock."""

    __slots__ = ("_pending", "_done_at", "_write", "_wake_cb", "_native", "_streams", "_next_id",
                 "launched", "woken")

    def __init__(self, native: bool = True):
        r, w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        super().__init__(r)
        self._write = FdOwner(w)
        self._pending: collections.deque = collections.deque()  # (id, event, callback)
        self._done_at: dict[int, int] = {}  # id -> done_ns, records read ahead of their turn
        self._native = _native_wake() if native else None
        self._streams: dict = {}  # ptr -> stream that has host functions of ours
        self._next_id = 0
        self.launched = 0  # host functions enqueued
        self.woken = 0     # ... and their records read

        def wake(arg, fd=w):  # runs on a CUDA driver thread: no CUDA calls here
            try:
                os.write(fd, RECORD.pack(arg, time.monotonic_ns()))
            except OSError:
                pass
        self._wake_cb = wake

    @property
    def native(self) -> bool:
        """The wake-up is the binding's C host function (no GIL on the CUDA thread)."""
        return self._native is not None

    def watch(self, stream, event, callback: Callable[[int], None]) -> None:
        """Call `callback(done_ns)` from `dispatch()` once `event` (recorded on
        `stream`) completes."""
        ident = self._next_id
        self._next_id = (ident + 1) & 0x7FFFFFFF  # in the host function's arg above the fd
        self._pending.append((ident, event, callback))
        if self._native is not None:
            launch, fn = self._native
            rc = launch(stream.ptr, fn, (ident << 32) | self._write.fileno())
            if rc != 0:
                raise DeviceError(f"cuLaunchHostFunc failed: CUresult {rc}")
        else:
            stream.launch_host_func(self._wake_cb, ident)
        self._streams[stream.ptr] = stream
        self.launched += 1

    def __len__(self) -> int:
        return len(self._pending)

    def _read_records(self) -> None:
        while True:
            try:
                data = os.read(self.fileno(), 4096 * RECORD.size)
            except BlockingIOError:
                return
            for ident, done_ns in RECORD.iter_unpack(data):
                self._done_at[ident] = done_ns
            self.woken += len(data) // RECORD.size
            if len(data) < 4096 * RECORD.size:
                return

    def dispatch(self) -> int:
        """Run the callbacks whose events completed; returns how many ran."""
        self._read_records()
        done_at, pending = self._done_at, self._pending
        ran = 0
        while pending:  # events complete in stream order, mostly
            ident, event, callback = pending[0]
            if ident not in done_at and not event.done:
                break
            pending.popleft()
            callback(done_at.pop(ident, None) or time.monotonic_ns())
            ran += 1
        if len(pending) > 1:  # several streams: a later one may be done first
            keep = collections.deque()
            while pending:
                ident, event, callback = pending.popleft()
                if ident in done_at or event.done:
                    callback(done_at.pop(ident, None) or time.monotonic_ns())
                    ran += 1
                else:
                    keep.append((ident, event, callback))
            self._pending = keep
        return ran

    def drain(self) -> int:
        """Wait for every watched event, then run all callbacks (shutdown)."""
        for _, event, _ in self._pending:
            event.synchronize()
        return self.dispatch()

    def abandon(self) -> None:
        """Forget the pending callbacks without running them, and leave the
        pipe open: a host function of ours may still write to it."""
        self._pending.clear()
        self._streams.clear()
        self._write.detach()
        self.detach()

    def close(self) -> None:
        """Close the pipe once no host function of ours can still write to it
        (a closed fd's number may be reused by then)."""
        if self.closed:
            return
        self._read_records()
        if self.woken < self.launched:
            for stream in self._streams.values():
                stream.synchronize()
        self._streams.clear()
        self._write.close()
        super().close()


class CudaFrameSink:
    """Frames in (`submit`), converted batches out (`on_batch`), leases back (`on_done`).

    `frame` is anything `FrameConverter.convert` takes (HostFrame for memfd
    capture buffers). Batches are formed by `batcher` (a DynamicBatcher; the
    default flushes every frame at once) and handed to `on_batch(batch)` as
    soon as their kernel is enqueued; a consumer orders its own work after
    it with `batch.wait(stream)` or DLPack's stream hand-shake.
    """

    def __init__(self, converter: FrameConverter, on_batch: Callable[[FrameBatch], None],
                 batcher: DynamicBatcher | None = None, clock: Callable[[], float] = time.monotonic):
        self.converter = converter
        self.on_batch = on_batch
        self.batcher = batcher if batcher is not None else DynamicBatcher(1.0, max_batch=1)
        self.clock = clock
        self.completions = CompletionQueue()
        self.released = 0

    def fileno(self) -> int:
        return self.completions.fileno()

    def submit(self, frame, on_done: Callable[[], None]) -> None:
        """`on_done()` runs once the frame's batch is done (on dispatch())."""
        now = self.clock()
        self.batcher.add((frame, on_done), now)
        if self.batcher.due(now):
            self._flush()

    def timeout(self) -> float | None:
        return self.batcher.timeout(self.clock())

    def dispatch(self) -> int:
        """Release finished frames and flush a due batch; call when fileno() is
        readable or timeout() has passed."""
        ran = self.completions.dispatch()
        while self.batcher.due(self.clock()):
            self._flush()
        return ran

    def _flush(self) -> None:
        items = self.batcher.take()
        if not items:
            return
        frames = [f for f, _ in items]
        dones = [d for _, d in items]
        started = self.clock()
        batch = self.converter.convert(frames)

        def finished(_done_ns, dones=dones, n=len(items), started=started):
            self.batcher.observe(n, self.clock() - started)
            for done in dones:
                done()
            self.released += len(dones)
        self.completions.watch(self.converter.stream, batch.event, finished)
        self.on_batch(batch)

    def close(self) -> None:
        """Flush what is queued, wait for the GPU, release every lease."""
        while len(self.batcher):
            self._flush()
        self.completions.drain()
        self.completions.close()
