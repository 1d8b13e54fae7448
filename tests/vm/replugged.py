"""Run a capture command (`--reconnect`) with its camera pulled and
plugged in again mid-run.

    python -m tests.vm.replugged DEVICE -- COMMAND...

Once the device's stream has come some way (QUERYBUF from a second fd,
tests/vm/paused.py's view of the queue), vivid's "Disconnect" control
unregisters it; once the command has let the old device go (rmmod is
refused until then), vivid is loaded again, as tests/vm/vivid.py does.
The command's new queue gets new buffers -- often at the freed ones'
kernel addresses. Exits with the command's status."""
import os
import subprocess
import sys

from tests.vm import vivid
from tests.vm.paused import ADVANCE, reached, wait


def main(argv) -> int:
    device, sep, *command = argv
    assert sep == "--" and command, __doc__
    child = subprocess.Popen(command)
    fd = os.open(device, os.O_RDWR | os.O_NONBLOCK)
    try:
        streaming = wait(child, fd, reached(ADVANCE))
    finally:
        os.close(fd)   # (an open fd keeps vivid loaded)
    if streaming:
        vivid.pull_cable(device)
        if not vivid.replug(stop=lambda: child.poll() is not None):
            raise SystemExit("replugged: the command never let the old device go")
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
