"""What every `sits probe` command shares: the session it builds from its
filters, the signals that end it, and the rows table of `audit` and `top`."""
import contextlib
import os
import signal

from sits.errors import UsageError


class Terminated(Exception):
    pass


class Stop:
    """SIGINT/SIGTERM/SIGHUP become one exception, raised only once armed:
    while libbpf loads and attaches it calls back into Python (its log), and
    an exception raised inside that callback would be swallowed by cffi. A
    signal that arrives before arm() is kept and raised by arm()."""

    def __init__(self):
        self.requested = False
        self.armed = False

    def handler(self, signum, frame):
        self.requested = True
        if self.armed:
            raise Terminated()

    def arm(self):
        self.armed = True
        if self.requested:
            raise Terminated()


@contextlib.contextmanager
def stop_signals():
    """Ctrl-C, SIGTERM and SIGHUP unwind through every `finally`, then end
    the command normally (exit 0, report printed where there is one)."""
    stop = Stop()
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, stop.handler) for s in sigs}
    try:
        yield stop
    except Terminated:
        pass
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def stop_child(pid: int) -> int:
    """SIGTERM a followed command that outlived the duration; its exit code."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def groups(probes: str | None) -> tuple[str, ...]:
    """--probes a,b as groups; every group when not given."""
    from sits.ebpf.points import DEFAULT_GROUPS
    if not probes:
        return DEFAULT_GROUPS
    return tuple(g.strip() for g in probes.split(",") if g.strip())


def probe_session(probes, pid, comm, cgroup, lib, *, follow=False, stats=False, per_thread=False,
                  stream=False, configure=None):
    """The ProbeSession the filter options ask for (not started); `configure`
    is the session's (objects' settings before they load)."""
    from sits.ebpf.probes import Filters, ProbeSession
    if lib and not os.path.exists(lib):
        raise UsageError(f"--lib {lib}: no such file")
    for p in pid or ():
        if not os.path.exists(f"/proc/{p}"):
            raise UsageError(f"--pid {p}: no such process")
    return ProbeSession(groups(probes), filters=Filters(tuple(pid or ()), comm, cgroup, follow),
                        avcodec_lib=lib, stats=stats, per_thread=per_thread, stream=stream,
                        configure=configure)


def rows_table(rows, title="", selected: int | None = None, limit: int | None = None, rates=False):
    from rich.table import Table
    t = Table(title=title, expand=False)
    cols = ["pid", "comm", "probe", "key", "count"] + (["rate/s"] if rates else []) + \
        ["p50 µs", "p95 µs", "p99 µs", "max µs", "total ms", "hot"]
    for c in cols:
        t.add_column(c, justify="right" if c not in ("comm", "probe", "key", "hot") else "left",
                     no_wrap=True, overflow="ellipsis", max_width=36 if c == "key" else None)
    for i, r in enumerate(rows[:limit] if limit else rows):
        cells = [str(r["pid"]), r["comm"], r["probe"], r["key"], str(r["count"])]
        if rates:
            cells.append(f"{r.get('rate_per_s', 0):.0f}")
        cells += [f"{r['p50_us']:.1f}", f"{r['p95_us']:.1f}", f"{r['p99_us']:.1f}",
                  f"{r['max_us']:.1f}", f"{r['total_ms']:.2f}", "HOT" if r["hot"] else ""]
        style = "reverse" if i == selected else ("red" if r["hot"] else None)
        t.add_row(*cells, style=style)
    return t
