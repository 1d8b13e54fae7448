"""The completion queue without a GPU: the binding's C host function writes
{id, CLOCK_MONOTONIC ns} records that dispatch() matches to its callbacks,
in order, only for events that are done."""
import time

from sits._kernel import ffi, lib
from sits.cuda.sink import CompletionQueue


class Event:
    def __init__(self, done=False):
        self.done = done


class Stream:
    ptr = 0

    def __init__(self):
        self.host_fns = []

    def launch_host_func(self, fn, arg):  # what CuPy would run on a CUDA thread
        self.host_fns.append(arg)


def run_c_host_fn(q, ident):
    """What CUDA does once the work before the host function is done."""
    lib.sits_completion_host_fn(ffi.cast("void *", (ident << 32) | q._write.fileno()))


def test_records_carry_the_completion_time_and_release_in_order():
    q = CompletionQueue(native=False)
    s = Stream()
    got = []
    events = [Event(), Event(), Event()]
    for i, ev in enumerate(events):
        q.watch(s, ev, lambda ns, i=i: got.append((i, ns)))
    assert s.host_fns == [0, 1, 2] and len(q) == 3
    assert q.dispatch() == 0  # nothing done, nothing ran
    before = time.monotonic_ns()
    events[0].done = True
    run_c_host_fn(q, 0)
    after = time.monotonic_ns()
    assert q.dispatch() == 1
    assert got[0][0] == 0 and before <= got[0][1] <= after  # the host function's clock
    # a batch done ahead of an earlier one (another stream) goes first
    run_c_host_fn(q, 2)
    assert q.dispatch() == 1 and got[-1][0] == 2
    events[1].done = True
    run_c_host_fn(q, 1)
    assert q.dispatch() == 1
    assert [i for i, _ in got] == [0, 2, 1]
    assert q.woken == 3 and q.launched == 3 and len(q) == 0
    q.close()
    assert q.closed


def test_an_event_done_without_its_record_still_releases():
    q = CompletionQueue(native=False)
    got = []
    q.watch(Stream(), Event(done=True), got.append)
    assert q.dispatch() == 1 and got[0] > 0


def test_abandon_leaves_the_pipe_to_the_host_functions():
    import os
    q = CompletionQueue(native=False)
    q.watch(Stream(), Event(), lambda ns: None)
    r, w = q.fileno(), q._write.fileno()
    q.abandon()
    os.fstat(w)  # still open: a late host function writes into a pipe, not a reused fd
    os.close(w)
    os.close(r)
