"""Helper processes with known behaviour, for the accuracy tests.

    python -m tests.bpf.ground_truth pipe MS,MS,...   a reader blocked on a
        pipe whose writer (a child) waits each MS before writing one byte
    python -m tests.bpf.ground_truth ioctl N NAME...  N ioctls of each named
        command on /dev/null (they fail with ENOTTY, but are made)
    python -m tests.bpf.ground_truth comm STAGE DIR   one-byte reads of
        /dev/zero on fd 100 under names that change (COMM_READS): run as
        DIR/<name> (links to this interpreter), it forks, execs, renames
        itself and a thread; see test_ebpf_comm.py

Each waits for one line on stdin ("go", sent once the probes are attached),
then prints a JSON line: its pid and the latencies it measured itself
around the same calls (ns).
"""
import fcntl
import json
import os
import signal
import sys
import threading
import time

#: comm stages: (name the reads are made under, reads); the test filters on
#: "sits-cmA" (a name is at most 15 bytes)
COMM_READS = {"older": 900, "main": 1000, "thread": 100, "thread-renamed": 200, "prctl-other": 300,
              "prctl-back": 400, "child": 500, "exec-other": 600, "exec-back": 700}


def pipe(schedule_ms):
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        for ms in schedule_ms:
            time.sleep(ms / 1000)
            os.write(w, b"x")
        os._exit(0)
    os.close(w)
    os.dup2(r, 100)  # a number the interpreter's own reads never use
    os.close(r)
    r = 100
    measured = []
    for _ in schedule_ms:
        t = time.perf_counter_ns()
        os.read(r, 1)
        measured.append(time.perf_counter_ns() - t)
    os.waitpid(child, 0)
    return {"pid": os.getpid(), "writer": child, "latency_ns": measured, "fd": r}


def ioctl(n, names):
    from sits._kernel import ioctl_number
    fd = os.open("/dev/null", os.O_RDONLY)
    buf = bytearray(256)
    for name in names:
        cmd = ioctl_number(name)
        for _ in range(n):
            try:
                fcntl.ioctl(fd, cmd, buf)
            except OSError:
                pass
    return {"pid": os.getpid(), "fd": fd}


def _reads(n):
    for _ in range(n):
        os.read(100, 1)


def _set_name(name: str) -> None:
    """prctl(PR_SET_NAME): this thread renames itself."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(15, name.encode(), 0, 0, 0) != 0:  # PR_SET_NAME
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NAME)")


def comm(stage, where):
    """One stage of the comm chain; prints a JSON line for the test. Its
    names: DIR/sits-cmA and DIR/sits-cmB are links to this interpreter."""
    zero = os.open("/dev/zero", os.O_RDONLY)
    os.dup2(zero, 100)  # a number the interpreter's own reads never use
    me = [sys.executable, "-m", "tests.bpf.ground_truth", "comm"]
    if stage == "older":  # started before the session: decided at its first event
        sys.stdin.readline()
        _reads(COMM_READS["older"])
        return {"pid": os.getpid()}
    if stage == "main":
        sys.stdin.readline()
        _reads(COMM_READS["main"])
        renamed, tid = threading.Event(), []

        def thread():
            tid.append(threading.get_native_id())
            _reads(COMM_READS["thread"])
            started.set()
            renamed.wait()
            _reads(COMM_READS["thread-renamed"])
        started = threading.Event()
        t = threading.Thread(target=thread)
        t.start()
        started.wait()
        with open(f"/proc/self/task/{tid[0]}/comm", "w") as f:  # renamed by another thread
            f.write("sits-other")
        renamed.set()
        t.join()
        _set_name("sits-cmX")
        _reads(COMM_READS["prctl-other"])
        _set_name("sits-cmA")
        _reads(COMM_READS["prctl-back"])
        child = os.fork()
        if child == 0:
            os.kill(os.getpid(), signal.SIGSTOP)  # the test looks at its row first
            _reads(COMM_READS["child"])
            os.execv(os.path.join(where, "sits-cmB"), [os.path.join(where, "sits-cmB"), *me[1:], "exec-other",
                                                       where])
        print(json.dumps({"child": child}), flush=True)
        _, status = os.waitpid(child, 0)
        return {"pid": os.getpid(), "child": child, "child_exit": os.waitstatus_to_exitcode(status)}
    if stage == "exec-other":
        _reads(COMM_READS["exec-other"])
        os.execv(os.path.join(where, "sits-cmA"), [os.path.join(where, "sits-cmA"), *me[1:], "exec-back", where])
    if stage == "exec-back":
        _reads(COMM_READS["exec-back"])
        return None
    raise SystemExit(f"unknown comm stage {stage}")


def main(argv):
    if argv[0] == "comm":
        out = comm(argv[1], argv[2])
        if out is not None:
            print(json.dumps(out), flush=True)
        return
    sys.stdin.readline()
    if argv[0] == "pipe":
        out = pipe([float(x) for x in argv[1].split(",")])
    elif argv[0] == "ioctl":
        out = ioctl(int(argv[1]), argv[2:])
    else:
        raise SystemExit(f"unknown helper {argv[0]}")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
