#!/usr/bin/env python3
"""How the loop learns that a frame's conversion is done, four ways (GPU
machine; an experiment, not a timed test):

    PYTHONPATH=. python3 tools/bench/cuda_wake_variants.py [--seconds 2] [--fps 240] [--json FILE]

The same per-frame work in each: a timerfd at the frame rate in an epoll
(the camera), each tick one 1080p YUYV -> 224x224 fp16 conversion graph
(copy from a registered memfd, fused kernel) launched by cuGraphLaunch
between two timed events, all through ctypes from one Python loop (the
frame queue's C does the same calls). Only the completion differs:

* ``hostfn``: cuLaunchHostFunc of the binding's C host function, which
  writes {id, CLOCK_MONOTONIC} to a pipe in the epoll: a second wake-up;
* ``sync-blocking``: cuEventSynchronize right after the launch on a
  CU_EVENT_BLOCKING_SYNC event (the loop sleeps in the driver);
* ``sync-spin``: the same on a default event with the context's schedule
  spin (the loop spins for the GPU time);
* ``query``: cuEventQuery at the next tick (what frame_queue.c does);
* ``query-untimed``: the same without the start event and the event
  timing (what the timing costs; no latency).

Per variant: CPU per frame (process, and by thread), the wall time of each
driver call (`calls_us`, means, ctypes' own cost included), and the latency (tick
-> done) two ways: the variant's own clock (the host function's, the
return of cuEventSynchronize; none for query) and frame_queue.c's event
bound (the launch clock and the GPU's event times; a lower bound). For the
sync variants `bound_check_us` is own clock minus the bound: never
negative if the bound is one, and small if it is tight.

It also lists the process's threads after each step of the set-up (what
creates each one) and names the threads that spend CPU in each variant.
"""
import argparse
import ctypes
import json
import os
import select
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from chain_bench import thread_cpu_ns  # noqa: E402

from sits.pipeline.stats import percentiles  # noqa: E402

VARIANTS = ("hostfn", "sync-blocking", "sync-spin", "query", "query-untimed")
LAUNCHES = 64            # the launch ring: a start and a done event each, reused in turn
NOT_READY = 600          # CUDA_ERROR_NOT_READY
DRIFT_PPM = 100          # as frame_queue.c's CU_DRIFT_PPM


class Census:
    """Threads that appear after each step of the set-up."""

    def __init__(self):
        self.seen = set(thread_cpu_ns())
        self.steps = []

    def step(self, what: str) -> None:
        now = thread_cpu_ns()
        new = {tid: name for tid, (name, _) in now.items() if tid not in self.seen}
        self.seen |= set(now)
        self.steps.append({"after": what, "new_threads": sorted(new.values())})


def driver():
    lib = ctypes.CDLL("libcuda.so.1")
    vp = ctypes.c_void_p
    for name, args in (("cuGraphLaunch", (vp, vp)), ("cuEventRecord", (vp, vp)), ("cuEventQuery", (vp,)),
                       ("cuEventSynchronize", (vp,)), ("cuLaunchHostFunc", (vp, vp, vp))):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, ctypes.c_int
    elapsed = getattr(lib, "cuEventElapsedTime_v2", None) or lib.cuEventElapsedTime
    elapsed.argtypes, elapsed.restype = (ctypes.POINTER(ctypes.c_float), vp, vp), ctypes.c_int
    lib.elapsed = elapsed
    return lib


class EventBound:
    """frame_queue.c's cuda_done_ns, in Python: done on CLOCK_MONOTONIC."""

    def __init__(self, cu):
        self.cu, self.bound, self.prev, self.ms = cu, None, None, ctypes.c_float()

    def elapsed_ms(self, a, b) -> float:
        rc = self.cu.elapsed(ctypes.byref(self.ms), a, b)
        if rc:
            raise RuntimeError(f"cuEventElapsedTime: CUresult {rc}")
        return self.ms.value

    def done_ns(self, launch_ns: int, start, done) -> int:
        begin = launch_ns
        if self.prev is not None:
            chained = self.bound + int(self.elapsed_ms(self.prev, start) * (1e6 - DRIFT_PPM))
            begin = max(begin, chained)
        self.bound, self.prev = begin, start
        return begin + int(self.elapsed_ms(start, done) * 1e6)


def set_up(census: Census, buffers: int, ingest: str):
    from sits.cuda.runtime import cupy
    cp = cupy()
    census.step("import cupy")
    cp.cuda.runtime.free(0)
    census.step("CUDA context")
    from sits.cuda.convert import FrameConverter, HostFrame
    from sits.cuda.formats import OutputSpec, SourceFormat, make_plan
    from sits.cuda.hostmem import HostRegistry
    from sits.cuda.rawgraph import RawGraph
    from sits.dmabuf.udmabuf import MemFd
    plan = make_plan(SourceFormat("YUYV", 1920, 1080),
                     OutputSpec(224, 224, dtype="float16", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)))
    registry = HostRegistry()
    conv = FrameConverter(plan, max_batch=1, registry=registry)
    stream = conv.stream
    nbytes = plan.src.frame_bytes
    mems, graphs, keep = [], [], []
    for i in range(buffers):
        m = MemFd.create(nbytes, f"wake-variants-{i}")
        m.array[:] = i
        registry.register(m)
        if ingest == "direct":   # the kernel reads the registered pages itself
            staging, fixed = None, conv.fixed([HostFrame(m)])
            enqueue = fixed.enqueue
        else:
            staging = cp.empty(nbytes, cp.uint8)
            fixed = conv.fixed([staging])

            def enqueue(staging=staging, fixed=fixed, host=m.address):
                cp.cuda.runtime.memcpyAsync(staging.data.ptr, host, nbytes, 1, stream.ptr)
                fixed.enqueue()
        graphs.append(RawGraph(stream.ptr, enqueue))
        mems.append(m)
        keep.append((staging, fixed))
    census.step("kernels compiled, buffers registered, graphs captured")
    return cp, stream, graphs, (mems, keep, registry)


def run_variant(variant: str, cp, cu, stream, graphs, fps: float, seconds: float, census: Census) -> dict:
    from sits._kernel import ffi, lib
    from sits.cuda.runtime import restore_schedule, set_schedule
    from sits.timerfd import TimerFd
    old_flags = set_schedule("spin") if variant == "sync-spin" else None
    timed = variant != "query-untimed"
    starts = [cp.cuda.Event() for _ in range(LAUNCHES)]
    dones = [cp.cuda.Event(block=variant == "sync-blocking", disable_timing=not timed) for _ in range(LAUNCHES)]
    calls: dict = {}
    clock = time.perf_counter_ns

    def call(name, fn, *args):
        t = clock()
        rc = fn(*args)
        calls[name] = calls.get(name, 0) + clock() - t
        if rc and not (name == "cuEventQuery" and rc == NOT_READY):
            raise RuntimeError(f"{name}: CUresult {rc}")
        return rc
    host_fn = int(ffi.cast("uintptr_t", ffi.addressof(lib, "sits_completion_host_fn")))
    r, w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    ep = select.epoll()
    timer = TimerFd.create()
    period = round(1e9 / fps)
    frames = int(seconds * fps)
    skip = min(20, frames // 4)
    bound = EventBound(cu)
    own, by_bound, check, in_flight = [], [], [], []
    marks = {}

    def complete(launch, ts, launch_ns, seen_ns):
        if not timed:
            return
        t = clock()
        done = bound.done_ns(launch_ns, starts[launch].ptr, dones[launch].ptr)
        calls["cuEventElapsedTime x2"] = calls.get("cuEventElapsedTime x2", 0) + clock() - t
        by_bound.append((done - ts) / 1e6)
        if seen_ns is not None:
            own.append((seen_ns - ts) / 1e6)
            check.append((seen_ns - done) / 1e3)
    try:
        ep.register(timer.fileno(), select.EPOLLIN)
        ep.register(r, select.EPOLLIN)
        first = time.monotonic_ns() + period
        timer.start(first, period)
        k = 0
        while k < frames:
            for fd, _ in ep.poll(1.0):
                if fd == r:
                    data = os.read(r, 4096)
                    for i in range(0, len(data), 16):
                        done_ns = int.from_bytes(data[i + 8:i + 16], "little")   # after the id
                        j, ts, launch_ns = in_flight.pop(0)
                        complete(j, ts, launch_ns, done_ns)
                    continue
                ticks = timer.expirations()
                if not ticks:
                    continue
                while (variant.startswith("query") and in_flight
                       and call("cuEventQuery", cu.cuEventQuery, dones[in_flight[0][0]].ptr) != NOT_READY):
                    j, ts, launch_ns = in_flight.pop(0)
                    complete(j, ts, launch_ns, None)
                seq = k + ticks - 1
                ts = first + seq * period
                if k == skip:
                    marks["a"] = (time.process_time(), thread_cpu_ns(), k)
                launch = k % LAUNCHES
                launch_ns = time.monotonic_ns()
                if timed:
                    call("cuEventRecord start", cu.cuEventRecord, starts[launch].ptr, stream.ptr)
                call("cuGraphLaunch", cu.cuGraphLaunch, graphs[k % len(graphs)].exec, stream.ptr)
                call("cuEventRecord done", cu.cuEventRecord, dones[launch].ptr, stream.ptr)
                if variant == "hostfn":
                    call("cuLaunchHostFunc", cu.cuLaunchHostFunc, stream.ptr, host_fn, (launch << 32) | w)
                    in_flight.append((launch, ts, launch_ns))
                elif variant.startswith("sync"):
                    call("cuEventSynchronize", cu.cuEventSynchronize, dones[launch].ptr)
                    complete(launch, ts, launch_ns, time.monotonic_ns())
                else:
                    in_flight.append((launch, ts, launch_ns))
                k += ticks
        marks["b"] = (time.process_time(), thread_cpu_ns(), k)
        stream.synchronize()
        for j, ts, launch_ns in in_flight:
            complete(j, ts, launch_ns, None)
    finally:
        timer.close()
        ep.close()
        os.close(r)
        os.close(w)
        if old_flags is not None:
            restore_schedule(old_flags)
    census.step(f"variant {variant}")
    (ca, ta, ka), (cb, tb, kb) = marks["a"], marks["b"]
    n = max(1, kb - ka)
    main = os.getpid()
    threads = {}
    for tid, (name, ns) in tb.items():
        key = "main" if tid == main else f"{name}[{tid}]"
        spent = (ns - ta.get(tid, (name, 0))[1]) / 1e3 / n
        if spent >= 0.1:
            threads[key] = round(spent, 1)
    frames = max(1, k)
    return dict(variant=variant, fps=fps, frames=k, cpu_us_per_frame=round(1e6 * (cb - ca) / n, 1),
                calls_us={name: round(ns / 1e3 / frames, 2) for name, ns in calls.items()},
                cpu_us_per_frame_by_thread=dict(sorted(threads.items(), key=lambda kv: -kv[1])),
                latency_ms_event_bound=percentiles(by_bound[skip:]) if by_bound else None,
                latency_ms_own_clock=percentiles(own[skip:]) if own else None,
                bound_check_us=({"min": round(min(check[skip:]), 2), **percentiles(check[skip:])}
                                if check[skip:] else None))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--fps", default="240")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--ingest", default="copy", choices=("copy", "direct"))
    ap.add_argument("--json")
    args = ap.parse_args()
    census = Census()
    cp, stream, graphs, keep = set_up(census, 4, args.ingest)
    cu = driver()
    rows = []
    for fps in (float(f) for f in args.fps.split(",")):
        for variant in args.variants.split(","):
            run_variant(variant, cp, cu, stream, graphs, fps, 0.3, census)   # warm-up
            row = run_variant(variant, cp, cu, stream, graphs, fps, args.seconds, census)
            rows.append(row)
            print(json.dumps(row), flush=True)
    threads = {f"{name}[{tid}]": round(ns / 1e6, 1) for tid, (name, ns) in thread_cpu_ns().items()}
    out = {"ingest": args.ingest, "census": census.steps, "thread_cpu_ms_total": threads, "rows": rows}
    print(json.dumps({"census": census.steps, "thread_cpu_ms_total": threads}))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
