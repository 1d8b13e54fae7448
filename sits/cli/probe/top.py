"""`sits probe top`: a live table of the slowest probe points."""
import contextlib
import os
import sys
import time

from sits.cli.probe.common import probe_session, rows_table, stop_signals
from sits.errors import UsageError

SORTS = {"total": "total_ms", "p95": "p95_us", "p99": "p99_us", "count": "count", "max": "max_us"}


@contextlib.contextmanager
def _cbreak(fd: int):
    """Keys without Enter, restored on the way out; a no-op without a tty."""
    if not os.isatty(fd):
        yield False
        return
    import termios
    import tty
    old = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)


def run_top(*, probes, pid, comm, cgroup, lib, interval, sort, rows, threshold, cumulative):
    """Live table of the slowest probe points: q quits, s changes the sort,
    j/k (or arrows) select a row whose histogram is drawn below."""
    import select

    from sits.ebpf.points import POINTS
    from sits.ebpf.report import Aggregate, parse_thresholds
    if sort not in SORTS:
        raise UsageError(f"--sort {sort}: one of {', '.join(SORTS)}")
    if interval <= 0:
        raise UsageError("--interval must be positive")
    thresholds = parse_thresholds(threshold)
    session = probe_session(probes, pid, comm, cgroup, lib)
    agg = Aggregate(session, thresholds)
    sort_keys = list(SORTS)
    state = {"sort": sort, "sel": 0}
    stdin = sys.stdin.fileno() if sys.stdin and not sys.stdin.closed else -1

    def render():
        from rich.console import Group
        from rich.text import Text
        data = agg.rows(interval=not cumulative)
        data.sort(key=lambda r: -r[SORTS[state["sort"]]])
        state["sel"] = min(state["sel"], max(len(data) - 1, 0))
        skipped = [f"{p.name}: {session.point_reason(p)}" for p in POINTS
                   if p.group in session.groups and session.point_reason(p)]
        drops = session.drops()
        head = Text(f"sits probe top  interval {interval:g}s  sort {state['sort']}  "
                    f"rows {len(data)}  drops " + " ".join(f"{k}={v}" for k, v in drops.items() if v)
                    + ("" if any(drops.values()) else "0") + "   q quit  s sort  j/k select")
        parts = [head, rows_table(data, selected=state["sel"], limit=rows, rates=True)]
        if data:
            parts.append(_histogram_text(agg, data[state["sel"]], cumulative))
        if skipped:
            parts.append(Text("skipped: " + "; ".join(skipped), style="yellow"))
        return Group(*parts)

    with stop_signals() as stop, _cbreak(stdin) as keys:
        try:
            session.start()
            stop.arm()
            from rich.live import Live  # once the probes run: rich costs ~20 ms
            with Live(render(), auto_refresh=False, screen=False, transient=False) as live:
                next_swap = time.monotonic() + interval
                while True:
                    timeout = max(0.0, next_swap - time.monotonic())
                    ready = select.select([stdin], [], [], timeout)[0] if keys else time.sleep(timeout)
                    if ready:
                        data = os.read(stdin, 64)
                        if not data or _handle_keys(data, state, sort_keys):
                            break
                        live.update(render(), refresh=True)
                        continue
                    agg.add(*session.collect())
                    next_swap += interval
                    live.update(render(), refresh=True)
        finally:
            stop.armed = False
            session.close()


def _handle_keys(data: bytes, state: dict, sort_keys: list[str]) -> bool:
    """Apply the keys in `data` to `state`; True when one of them quits."""
    data = data.replace(b"\x1b[A", b"k").replace(b"\x1b[B", b"j")
    for key in data.decode(errors="ignore"):
        if key in "qQ":
            return True
        if key == "s":
            state["sort"] = sort_keys[(sort_keys.index(state["sort"]) + 1) % len(sort_keys)]
        elif key == "j":
            state["sel"] += 1
        elif key == "k":
            state["sel"] = max(0, state["sel"] - 1)
    return False


def _histogram_text(agg, row, cumulative):
    from rich.text import Text

    from sits.ebpf.histogram import RowKey
    from sits.ebpf.points import POINT_BY_NAME
    src = agg.total if cumulative else agg.last
    h = src.get(RowKey(row["pid"], row["tid"], POINT_BY_NAME[row["probe"]].id, row["key_raw"]))
    if h is None:
        return Text("")
    buckets = h.log2_buckets()
    peak = max(n for _, n in buckets)
    lines = [f"{row['probe']} {row['key']} ({row['comm']} {row['pid']}):"]
    for top_ns, n in buckets:
        bar = "#" * max(1, round(30 * n / peak))
        lines.append(f"  < {_fmt_ns(top_ns):>8} {n:>9} {bar}")
    return Text("\n".join(lines))


def _fmt_ns(ns: int) -> str:
    if ns < 1_000:
        return f"{ns}ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:.0f}µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.0f}ms"
    return f"{ns / 1e9:.0f}s"
