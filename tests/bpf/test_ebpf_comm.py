"""--comm on the real kernel: exact counts for a process whose name changes
by every way a name changes (tests/bpf/ground_truth.py `comm`): started
before the session, forked, exec'd away from the name and back, renamed by
prctl and back, a thread renamed by another thread. The decision is taken
once per task (sits.ebpf.probes, comm.bpf.c): a forked child has its row
before its first event, and an exited task's row is deleted."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from sits.ebpf import maps
from sits.ebpf.points import POINT_BY_NAME
from sits.ebpf.probes import Filters, ProbeSession
from tests.bpf.ground_truth import COMM_READS

pytestmark = pytest.mark.bpf
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
READ = POINT_BY_NAME["sys_read"].id


def stage(where, name, *args, **kw):
    exe = os.path.join(where, name)
    return subprocess.Popen([exe, "-m", "tests.bpf.ground_truth", "comm", *args, where], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, **kw)


def wait_stopped(pid, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.01)
    raise AssertionError(f"{pid} never stopped")


def test_comm_counts_exact_across_fork_exec_and_renames(tmp_path):
    # the stages' names: links to the interpreter (stdlib only: no venv needed)
    for name in ("sits-cmA", "sits-cmB"):
        os.symlink(os.path.realpath(sys.executable), tmp_path / name)
    older = stage(str(tmp_path), "sits-cmA", "older")
    with ProbeSession(("syscalls",), filters=Filters(comm="sits-cmA")) as s:
        main = stage(str(tmp_path), "sits-cmA", "main")
        older.stdin.write("go\n")
        older.stdin.flush()
        main.stdin.write("go\n")
        main.stdin.flush()
        child = json.loads(main.stdout.readline())["child"]
        wait_stopped(child)
        # decided at fork, from the name it was given (the parent's)
        assert maps.lookup_u32_u8(s.map_fd("comm_match"), child) == 1
        os.kill(child, signal.SIGCONT)
        report = json.loads(main.stdout.readline())
        assert main.wait(timeout=60) == 0 and report["child_exit"] == 0
        older_pid = json.loads(older.communicate(timeout=60)[0])["pid"]
        rows, _ = s.collect()
        # an exited task's row is gone (its tid may be given to another task)
        gone = [pid for pid in (older_pid, report["pid"], child)
                if maps.lookup_u32_u8(s.map_fd("comm_match"), pid) is not None]
        assert gone == []
    reads = {}
    for k, h in rows.items():
        if k.probe == READ and k.key == 100:
            reads[k.pid] = reads.get(k.pid, 0) + h.count
    c = COMM_READS
    assert reads == {
        older_pid: c["older"],
        report["pid"]: c["main"] + c["thread"] + c["prctl-back"],  # not thread-renamed, prctl-other
        child: c["child"] + c["exec-back"],                         # not exec-other
    }
