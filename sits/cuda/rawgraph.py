"""CUDA graphs as the driver's handles, for C code that launches them.

CuPy keeps a graph's CUgraphExec to itself; the frame queue (frame_queue.c)
launches a capture buffer's conversion with cuGraphLaunch from C (and asks
cuStreamQuery when a launch is late; sits/cuda/stamp.py times it), so the
graph is captured here through the driver API around the same enqueue
(CuPy's launches on the stream are captured like any other work), and its
handles live in a RawGraph. The driver's entry points, as addresses for C:
`entry_points()`.
"""
from __future__ import annotations

import ctypes
import functools

from sits.errors import DeviceError

CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1   # only this thread's calls are captured


@functools.cache
def _cuda():
    lib = ctypes.CDLL("libcuda.so.1")
    for name, args in (("cuStreamBeginCapture_v2", (ctypes.c_void_p, ctypes.c_int)),
                       ("cuStreamEndCapture", (ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))),
                       ("cuGraphInstantiateWithFlags",
                        (ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_ulonglong)),
                       ("cuGraphLaunch", (ctypes.c_void_p, ctypes.c_void_p)),
                       ("cuGraphExecDestroy", (ctypes.c_void_p,)), ("cuGraphDestroy", (ctypes.c_void_p,))):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, ctypes.c_int
    return lib


def _check(rc: int, call: str) -> None:
    if rc != 0:
        raise DeviceError(f"{call}: CUresult {rc}")


def entry_points() -> tuple[int, int]:
    """(cuGraphLaunch, cuStreamQuery) as addresses."""
    lib = _cuda()
    return tuple(ctypes.cast(fn, ctypes.c_void_p).value for fn in (lib.cuGraphLaunch, lib.cuStreamQuery))


class RawGraph:
    """The work `enqueue()` puts on `stream_ptr`, captured once as a graph
    and instantiated: `exec` is its CUgraphExec."""

    __slots__ = ("graph", "exec")

    def __init__(self, stream_ptr: int, enqueue):
        lib = _cuda()
        self.graph = self.exec = None
        _check(lib.cuStreamBeginCapture_v2(stream_ptr, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture")
        graph = ctypes.c_void_p()
        try:
            enqueue()
        finally:
            rc = lib.cuStreamEndCapture(stream_ptr, ctypes.byref(graph))
        _check(rc, "cuStreamEndCapture")
        self.graph = graph.value
        exec_ = ctypes.c_void_p()
        _check(lib.cuGraphInstantiateWithFlags(ctypes.byref(exec_), graph, 0), "cuGraphInstantiateWithFlags")
        self.exec = exec_.value

    def launch(self, stream_ptr: int) -> None:
        _check(_cuda().cuGraphLaunch(self.exec, stream_ptr), "cuGraphLaunch")

    def close(self) -> None:
        lib = _cuda()
        if self.exec:
            lib.cuGraphExecDestroy(self.exec)
        if self.graph:
            lib.cuGraphDestroy(self.graph)
        self.graph = self.exec = None
