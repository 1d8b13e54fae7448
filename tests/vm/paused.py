"""Run a capture command with pauses that leave frames waiting for it.

    python -m tests.vm.paused DEVICE PAUSES -- COMMAND...

Once the device's stream has come some way, the command's process group
is stopped (SIGSTOP) until the driver has filled every buffer the command
gave it, and continued (SIGCONT): it wakes to several frames at once, of
which a display can show only the newest. A second fd on the device sees
the buffers' states (QUERYBUF needs no ownership of the queue), so each
step waits on the driver's own progress, never on a duration. Exits with
the command's status."""
import os
import signal
import subprocess
import sys
import time

from sits._kernel import lib
from sits.errors import IoctlError
from sits.v4l2 import raw
from tests.vm.conftest import EVENT_WAIT_S

ADVANCE = 40       # frames the stream comes between pauses
READY = 3          # filled buffers a wake-up finds, at least: one shown, one next, one dropped


def buffers(fd: int) -> list:
    """(flags, sequence) of each buffer of the device's capture queue."""
    out = []
    for memory in (lib.V4L2_MEMORY_MMAP, lib.V4L2_MEMORY_DMABUF):
        try:
            while True:
                b = raw.querybuf(fd, len(out), memory)
                out.append((b.flags, b.sequence))
        except IoctlError:
            if out:
                return out
    return out


def wait(child, fd: int, ready) -> bool:
    """Until `ready(buffers)`; False if the command ended first."""
    deadline = time.monotonic() + EVENT_WAIT_S
    while child.poll() is None:
        if ready(buffers(fd)):
            return True
        if time.monotonic() > deadline:
            raise SystemExit(f"paused: the driver did not get there in {EVENT_WAIT_S} s: {buffers(fd)}")
        time.sleep(0.01)
    return False


def reached(sequence: int):
    """wait()'s condition: the stream has come to frame `sequence`."""
    return lambda bufs: max((s for _, s in bufs), default=0) >= sequence


def filled(bufs) -> bool:
    queued = sum(1 for flags, _ in bufs if flags & lib.V4L2_BUF_FLAG_QUEUED)
    done = sum(1 for flags, _ in bufs if flags & lib.V4L2_BUF_FLAG_DONE)
    return queued == 0 and done >= READY


def main(argv) -> int:
    device, pauses, sep, *command = argv
    assert sep == "--" and command, __doc__
    child = subprocess.Popen(command, process_group=0)
    fd = os.open(device, os.O_RDWR | os.O_NONBLOCK)
    try:
        at = 0
        for _ in range(int(pauses)):
            at += ADVANCE
            if not wait(child, fd, reached(at)):
                break
            os.killpg(child.pid, signal.SIGSTOP)
            try:
                if not wait(child, fd, filled):
                    break
            finally:
                os.killpg(child.pid, signal.SIGCONT)
            at = max(s for _, s in buffers(fd))
    finally:
        os.close(fd)
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
