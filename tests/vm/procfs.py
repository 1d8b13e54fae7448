"""What a test sees of another process from /proc: the phase it reached,
without tracing it."""
import os
import time

# a hang guard for waits on another process's phase: passed as soon as it is reached
PHASE_WAIT_S = 600


def fd_targets(pid) -> list[str]:
    out = []
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in fds:
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass  # closed while we looked
    return out


def catches(pid, signum) -> bool:
    """Whether `pid` has a handler of its own for `signum` (SigCgt)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except OSError:
        pass
    return False


def wait_for(alive, reached, what: str) -> None:
    """Poll until `reached()`; fails if `alive()` turns false first."""
    deadline = time.monotonic() + PHASE_WAIT_S
    while not reached():
        assert alive(), f"the process ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {PHASE_WAIT_S} s"
        time.sleep(0.002)


def kernel_view(pid) -> str:
    """Where a process that does not end is, as the kernel says (wchan,
    its kernel stack, the syscall it is in)."""
    seen = []
    for name in ("wchan", "stack", "syscall"):
        try:
            with open(f"/proc/{pid}/{name}") as f:
                seen.append(f"{name}: {f.read().strip()}")
        except OSError as exc:
            seen.append(f"{name}: {exc}")
    return "\n".join(seen)


def _stat(pid) -> tuple[str, int] | None:
    """(state, ppid) from /proc/PID/stat; None once it has gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return rest[0], int(rest[1])
    except (OSError, IndexError, ValueError):
        return None


def stuck_view(root_pid) -> str:
    """The kernel's view (kernel_view) of every descendant of `root_pid` and
    of every task in uninterruptible sleep (D) anywhere: what a hung test
    waits on, when its own timeout cannot interrupt it."""
    stats = {int(p): s for p in os.listdir("/proc") if p.isdigit() and (s := _stat(p))}
    parents = {pid: ppid for pid, (_, ppid) in stats.items()}

    def below_root(pid):
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == root_pid:
                return True
        return False

    out = []
    for pid, (state, _) in sorted(stats.items()):
        if state == "D" or below_root(pid):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                cmd = "?"
            out.append(f"--- pid {pid} state {state}: {cmd[:200]}\n{kernel_view(pid)}")
    return "\n".join(out) or "no descendant and no task in D state"
