"""tracefs: where tracepoints are listed and (through perf) attached.

Minimal systems (containers, Firecracker guests) often boot with
/sys/kernel/tracing empty; libbpf then fails tracepoint attaches with
ENOENT. As root we mount it, as perf/bpftrace users expect to just work.
"""
import os

TRACEFS = "/sys/kernel/tracing"
DEBUGFS_TRACING = "/sys/kernel/debug/tracing"


def tracefs_path() -> str | None:
    for path in (TRACEFS, DEBUGFS_TRACING):
        if os.path.exists(os.path.join(path, "events")):
            return path
    return None


def ensure_tracefs() -> str | None:
    """The tracefs mount point, mounting it at /sys/kernel/tracing if we can."""
    path = tracefs_path()
    if path is None and os.geteuid() == 0 and os.path.isdir(TRACEFS):
        import subprocess
        subprocess.run(["mount", "-t", "tracefs", "tracefs", TRACEFS],
                       capture_output=True, check=False)
        path = tracefs_path()
    return path


def has_tracepoint(category: str, name: str) -> bool:
    path = ensure_tracefs()
    return path is not None and os.path.isdir(os.path.join(path, "events", category, name))


def event_fields(category: str, name: str) -> dict[str, tuple[int, int]]:
    """{field: (byte offset, size)} of a tracepoint's record, from its format
    file ({} when it cannot be read): for programs that read a classic
    tracepoint's record at these offsets instead of through CO-RE, which
    would make libbpf parse the kernel's BTF."""
    base = ensure_tracefs()
    fields = {}
    try:
        with open(f"{base}/events/{category}/{name}/format") as f:
            for line in f:
                parts = dict(p.strip().split(":", 1) for p in line.split(";") if ":" in p)
                if "field" in parts:
                    field = parts["field"].split()[-1].split("[")[0]  # "char comm[16]": comm
                    fields[field] = (int(parts["offset"]), int(parts["size"]))
    except (OSError, TypeError, ValueError):
        return {}
    return fields
