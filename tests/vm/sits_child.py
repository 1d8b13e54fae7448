"""A `sits` run in a child process, its stdout and stderr on pipes: forked
from the test process, which has sits imported (a Python start costs
seconds under TCG), or a new interpreter."""
import faulthandler
import os
import select
import signal
import sys
import time

from tests.vm.conftest import EVENT_WAIT_S
from tests.vm.procfs import fd_targets, kernel_view


class Child:
    """`sits ARGV` in a child process; `new_interpreter` execs Python afresh."""

    def __init__(self, argv, new_interpreter: bool):
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.dup2(out_w, 1)
                os.dup2(err_w, 2)
                if new_interpreter:
                    os.execv(sys.executable, [sys.executable, "-m", "sits.cli.app", *argv])
                sys.stdout = open(1, "w", closefd=False)
                sys.stderr = open(2, "w", closefd=False)
                # where it is, should it not end: finish() asks with SIGUSR1
                faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
                from sits.cli.app import main
                code = main(argv)
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
        os.close(out_w)
        os.close(err_w)
        self.pid, self.status = pid, None
        self._pipes = {out_r: [], err_r: []}
        self._out, self._err = out_r, err_r

    def alive(self) -> bool:
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
        return self.status is None

    def finish(self) -> tuple[int, str, str]:
        """Its exit code, stdout and stderr, once it has ended."""
        deadline = time.monotonic() + EVENT_WAIT_S
        open_fds = set(self._pipes)
        while open_fds and time.monotonic() < deadline:
            for fd in select.select(list(open_fds), [], [], 1.0)[0]:
                data = os.read(fd, 65536)
                if data:
                    self._pipes[fd].append(data)
                else:
                    open_fds.discard(fd)
        if open_fds and self.alive():
            raise AssertionError(f"sits did not end within {EVENT_WAIT_S} s; where it was:\n{self._where()}")
        if self.status is None:
            self.status = os.waitpid(self.pid, 0)[1]   # its pipes closed: it is exiting
        self.close()
        return (os.waitstatus_to_exitcode(self.status), b"".join(self._pipes[self._out]).decode(),
                b"".join(self._pipes[self._err]).decode())

    def _where(self) -> str:
        """The kernel's and (for a forked run) Python's view of a run that
        does not end, then the run killed."""
        seen = kernel_view(self.pid)
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if select.select([self._err], [], [], 0.5)[0]:
                data = os.read(self._err, 65536)
                if not data:
                    break
                self._pipes[self._err].append(data)
        self.close()
        err = b"".join(self._pipes[self._err]).decode(errors="replace")
        return seen + "\nstderr:\n" + err[-6000:]

    def close(self) -> None:
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
            self.status = os.waitpid(self.pid, 0)[1]
        for fd in list(self._pipes):
            try:
                os.close(fd)
            except OSError:
                pass  # closed already


def holds(pid, path) -> bool:
    return any(t.startswith(path) for t in fd_targets(pid))   # "(deleted)" once the node went
