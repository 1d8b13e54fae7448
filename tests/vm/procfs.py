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
