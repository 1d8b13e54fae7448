"""tools/vm/sitsvm.py stops a VM run on a stall (no output for the idle
bound), not on its length: a stand-in for vng speaks the guest protocol."""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "vm"))
try:
    import sitsvm
finally:
    sys.path.pop(0)

GUEST = """
{boot}
echo 'sits-vm-guest: up' >&2
echo 'sits-vm-guest: run' >&2
{body}
echo 'sits-vm-guest: exit 0' >&2
"""


def supervise(body, *, timeout=None, idle_timeout=None, boot="", boot_timeout=30.0):
    import time
    argv = ["sh", "-c", GUEST.format(body=body, boot=boot)]
    return sitsvm._supervise(argv, dict(os.environ), time.monotonic(), (timeout, idle_timeout, boot_timeout), None)


def test_a_boot_longer_than_the_boot_bound_that_keeps_printing_comes_up():
    # a busy host's boot: 30 console lines 50 ms apart, 1.5 s in all, each gap under the 0.5 s bound
    r = supervise("echo ran", boot="i=0; while [ $i -lt 30 ]; do echo boot $i >&2; i=$((i+1)); sleep 0.05; done",
                  boot_timeout=0.5)
    assert r.error is None and r.returncode == 0, r.error
    assert "ran" in r.output


def test_a_silent_boot_is_stopped_by_the_boot_bound():
    r = supervise("echo ran", boot="echo booting >&2; exec sleep 600", boot_timeout=1.0, timeout=20)
    assert r.returncode == sitsvm.EXIT_VM
    assert "no console output for 1 s" in r.error and "ran" not in r.output


def test_a_run_longer_than_the_idle_bound_that_keeps_writing_goes_on():
    # 50 lines 50 ms apart: 2.5 s in all, each gap far under the 1.5 s bound
    r = supervise("i=0; while [ $i -lt 50 ]; do echo tick $i; i=$((i+1)); sleep 0.05; done", idle_timeout=1.5)
    assert r.error is None and r.returncode == 0, r.error
    assert r.output.count("tick") == 50


def test_a_silent_command_is_stopped_by_the_idle_bound():
    # the total bound is only a backstop here: the idle bound must come first
    r = supervise("echo started; exec sleep 600", timeout=20, idle_timeout=1.0)
    assert r.returncode == sitsvm.EXIT_TIMEOUT
    assert "wrote nothing for 1 s" in r.error and "started" in r.output


def test_a_stalled_guest_is_asked_for_its_stacks_before_it_is_killed(tmp_path, monkeypatch):
    # a stand-in for the QEMU monitor records what it is asked; the guest
    # keeps printing on its console (as a panicking kernel does) until killed
    import socket
    import threading
    import time
    monkeypatch.setattr(sitsvm, "STALL_DUMP_S", 0.5)
    path = str(tmp_path / "monitor.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    asked = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                asked.append((conn.recv(4096).decode().strip(), time.monotonic()))
                conn.sendall(b"(qemu) ")

    threading.Thread(target=serve, daemon=True).start()
    body = "echo started; while :; do echo console tick >&2; sleep 0.1; done"
    start = time.monotonic()
    argv = ["sh", "-c", GUEST.format(body=body, boot="")]
    r = sitsvm._supervise(argv, dict(os.environ), start, (20, 1.0, 30.0), None, path)
    server.close()
    assert r.returncode == sitsvm.EXIT_TIMEOUT and "wrote nothing for 1 s" in r.error
    assert [cmd for cmd, _ in asked] == ["sendkey alt-sysrq-l", "sendkey alt-sysrq-w", "nmi"]
    # the console is still read after the NMI: what the kernel says then is kept
    assert r.elapsed_s >= asked[-1][1] - start + 0.4, (r.elapsed_s, asked)
