"""Helper processes with known behaviour, for the accuracy tests.

    python -m tests.bpf.ground_truth pipe MS,MS,...   a reader blocked on a
        pipe whose writer (a child) waits each MS before writing one byte
    python -m tests.bpf.ground_truth ioctl N NAME...  N ioctls of each named
        command on /dev/null (they fail with ENOTTY, but are made)

Each waits for one line on stdin ("go", sent once the probes are attached),
then prints a JSON line: its pid and the latencies it measured itself
around the same calls (ns).
"""
import fcntl
import json
import os
import sys
import time


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


def main(argv):
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
