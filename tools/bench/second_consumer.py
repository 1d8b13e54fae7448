#!/usr/bin/env python3
"""`sits capture` with a second consumer beside the display, for the
capture benchmark: the same command line as `sits capture` (the same
option table), plus a consumer that holds every frame's lease and has it
released from another thread through an eventfd, as a CUDA completion or
user code in a worker would. It measures what the second consumer costs
the chain (a delivery of every frame to Python, a wake-up for its
release); it is a benchmark's consumer, not a product one.

    .venv/bin/python tools/bench/second_consumer.py --to-kms --device /dev/video0 ... --json
"""
import collections
import os
import sys
import threading

from sits.cli import fastargs
from sits.cli.capture import FAST, run_capture
from sits.pipeline.consumer import Consumer


class WorkerRelease(Consumer):
    """Each frame to a worker thread, which hands it back at once through
    an eventfd; the lease is released on the loop's thread."""

    name = "worker"

    def __init__(self):
        self.todo, self.done = collections.deque(), collections.deque()
        self.wake = threading.Event()
        self.stopping = False

    def start(self, ctx):
        self.efd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        ctx.watch(self.efd, self._released)
        self.worker = threading.Thread(target=self._work, daemon=True)
        self.worker.start()

    def take(self, frame, lease):
        self.todo.append(lease)
        self.wake.set()

    def _work(self):
        while not self.stopping:
            self.wake.wait()
            self.wake.clear()
            while self.todo:
                self.done.append(self.todo.popleft())
                os.eventfd_write(self.efd, 1)

    def _released(self):
        try:
            os.eventfd_read(self.efd)
        except BlockingIOError:
            pass
        while self.done:
            self.done.popleft().release()

    def busy(self):
        return bool(self.todo or self.done)

    def stop(self):
        self.stopping = True
        self.wake.set()
        self.worker.join(5)
        while self.todo:
            self.todo.popleft().release()
        self._released()
        os.close(self.efd)


def main() -> int:
    kw = fastargs.parse(FAST, sys.argv[1:])
    if kw is None:
        print("second_consumer: give a well-formed `sits capture` command line", file=sys.stderr)
        return 2
    from sits.errors import SitsError
    try:
        run_capture(consumers=[WorkerRelease()], **kw)
    except SitsError as exc:
        print(f"second_consumer: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
