"""`sits probe list|top|audit|export`: kernel-level latency probes.

Every command builds one ProbeSession (sits.ebpf.probes), runs one loop and
closes the session in `finally`, so that q, Ctrl-C and SIGTERM all leave
nothing attached. SIGTERM is turned into the same exit path as Ctrl-C.

The commands are plain functions (run_*); typer declares them (typer_app(),
built on first use) for --help and errors. Nothing heavy is imported before
the probes are attached: `audit`, `top` and `export` with well-formed
options are parsed here (fast_command(), options checked against typer's
by tests/unit/test_ebpf_cli_fast.py) without importing typer, which with
pydantic costs more than attaching the probes; anything else (--help, a
bad or unknown option) goes through typer as before.
"""
import contextlib
import functools
import os
import signal
import sys
import time

from sits.cli import fastargs
from sits.errors import UsageError

PROBES_HELP = "comma-separated groups: syscalls,ioctl,fence,v4l2,drm,avcodec"


class _Terminated(Exception):
    pass


class _Stop:
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
            raise _Terminated()

    def arm(self):
        self.armed = True
        if self.requested:
            raise _Terminated()


@contextlib.contextmanager
def _stop_signals():
    """Ctrl-C, SIGTERM and SIGHUP unwind through every `finally`, then end
    the command normally (exit 0, report printed where there is one)."""
    stop = _Stop()
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, stop.handler) for s in sigs}
    try:
        yield stop
    except _Terminated:
        pass
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _groups(probes: str | None) -> tuple[str, ...]:
    from sits.ebpf.points import DEFAULT_GROUPS
    if not probes:
        return DEFAULT_GROUPS
    return tuple(g.strip() for g in probes.split(",") if g.strip())


def _session(probes, pid, comm, cgroup, lib, *, follow=False, stats=False, per_thread=False,
             stream=False):
    from sits.ebpf.probes import Filters, ProbeSession
    if lib and not os.path.exists(lib):
        raise UsageError(f"--lib {lib}: no such file")
    for p in pid or ():
        if not os.path.exists(f"/proc/{p}"):
            raise UsageError(f"--pid {p}: no such process")
    return ProbeSession(_groups(probes), filters=Filters(tuple(pid or ()), comm, cgroup, follow),
                        avcodec_lib=lib, stats=stats, per_thread=per_thread, stream=stream)


# -- list -------------------------------------------------------------------------

def run_list(lib=None, as_json=False):
    """Probe points available on this kernel, and why any are missing."""
    import json

    from sits.ebpf.points import point_availability
    from sits.ebpf.system import find_avcodec
    lib = lib or find_avcodec()
    items = point_availability(avcodec_lib=lib)
    if as_json:
        print(json.dumps([{"name": p.name, "group": p.group, "key": p.key, "what": p.what,
                           "available": reason is None, "reason": reason} for p, reason in items],
                         indent=2))
        return
    from rich.console import Console
    from rich.table import Table
    t = Table(title="sits probe points")
    for col in ("probe", "group", "key", "measures", "status"):
        t.add_column(col)
    for p, reason in items:
        t.add_row(p.name, p.group, p.key, p.what,
                  "[green]available[/]" if reason is None else f"[yellow]missing[/]: {reason}")
    Console().print(t)


# -- audit ------------------------------------------------------------------------

def run_audit(command=(), duration=None, as_json=False, markdown=False, output=None, probes=None,
              pid=None, comm=None, cgroup=None, lib=None, threshold=None, interval=1.0, top_n=5,
              per_thread=False, stream=None):
    """Record for a while (or while COMMAND runs) and report statistics, hot
    spots, drops and probe overhead."""
    from sits.ebpf.report import Aggregate, audit_report, parse_thresholds, to_markdown
    command = list(command)
    if as_json and markdown:
        raise UsageError("--json and --markdown exclude each other")
    if duration is None and not command:
        raise UsageError("give --duration S, or a command after --")
    if duration is not None and duration <= 0:
        raise UsageError("--duration must be positive")
    if interval <= 0:
        raise UsageError("--interval must be positive")
    thresholds = parse_thresholds(threshold)
    stream_file = _open_stream(stream) if stream else None
    session = _session(probes, pid, comm, cgroup, lib, follow=bool(command), stats=True,
                       per_thread=per_thread, stream=bool(stream))
    agg = Aggregate(session, thresholds)
    ring = writer = None
    child, exit_code = None, None
    t0 = time.monotonic()
    report = None
    with _stop_signals() as stop:
        try:
            session.start()
            if stream_file is not None:
                from sits.ebpf.ringbuf import EventWriter, ring_consumer
                ring = ring_consumer(session)
                writer = EventWriter(stream_file, session.fence_names)
            t0 = time.monotonic()
            if command:
                child = session.spawn(command)
            stop.arm()
            deadline = t0 + duration if duration is not None else None
            next_swap = t0 + interval
            while True:
                now = time.monotonic()
                if child is not None:
                    done, status = os.waitpid(child, os.WNOHANG)
                    if done:
                        exit_code = os.waitstatus_to_exitcode(status)
                        child = None
                        if duration is None:
                            break
                if deadline is not None and now >= deadline:
                    break
                if now >= next_swap:
                    agg.add(*session.collect())
                    next_swap += interval
                if ring is not None:
                    writer.write(ring.drain(copy=False))
                poll = 0.02 if ring is not None else 0.05 if child else None
                wake = min(x for x in (next_swap, deadline, now + poll if poll else None) if x)
                time.sleep(max(0.0, wake - time.monotonic()))
        finally:
            stop.armed = False  # a second signal must not cut the report short
            elapsed = time.monotonic() - t0
            if session.objects:
                agg.add(*session.collect())
                streamed = None
                if ring is not None:
                    writer.write(ring.drain(copy=False))
                    streamed = {"path": stream, "events": writer.events}
                report = audit_report(agg, session, duration_s=elapsed, command=command or None,
                                      exit_code=exit_code, top_n=top_n, stream=streamed)
            if ring is not None:
                ring.close()
            if stream_file is not None:
                stream_file.close()
            session.close()
            if child is not None:  # the duration ended first: stop the command
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGTERM)
                _, status = os.waitpid(child, 0)
                report and report.update(exit_code=os.waitstatus_to_exitcode(status))
    if report is None:
        return
    if as_json:
        import json
        text = json.dumps(report, indent=2) + "\n"
    elif markdown:
        text = to_markdown(report) + "\n"
    else:
        text = None
    if output:
        with open(output, "w") as f:
            f.write(text if text is not None else to_markdown(report) + "\n")
        if text is None:
            _print_report(report)
    elif text is not None:
        sys.stdout.write(text)
    else:
        _print_report(report)


def _open_stream(path: str):
    try:
        return open(path, "w", buffering=1 << 20)
    except OSError as exc:
        raise UsageError(f"--stream {path}: {exc.strerror}") from None


def _print_report(report: dict) -> None:
    from rich.console import Console
    console = Console()
    console.print(_rows_table(report["rows"], title=f"sits probe audit: {report['duration_s']} s"))
    skipped = [p for p in report["probes"] if p["status"] != "attached"]
    for p in skipped:
        console.print(f"[yellow]skipped[/] {p['name']}: {p['reason']}")
    for f in report["hot_spots"]["flagged"]:
        console.print(f"[red]HOT[/] {f['probe']} {f['key']} in {f['comm']} ({f['pid']}): {f['reason']}")
    console.print("drops: " + ", ".join(f"{k} {v}" for k, v in report["drops"].items()))
    if report.get("stream"):
        st = report["stream"]
        console.print(f"streamed {st['events']} samples to {st['path']} ({st['lost']} lost: ring buffer full)")


def _rows_table(rows, title="", selected: int | None = None, limit: int | None = None, rates=False):
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


# -- top ----------------------------------------------------------------------------

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


def run_top(probes=None, pid=None, comm=None, cgroup=None, lib=None, interval=1.0, sort="total", rows=25,
            threshold=None, cumulative=False):
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
    session = _session(probes, pid, comm, cgroup, lib)
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
        parts = [head, _rows_table(data, selected=state["sel"], limit=rows, rates=True)]
        if data:
            parts.append(_histogram_text(agg, data[state["sel"]], cumulative))
        if skipped:
            parts.append(Text("skipped: " + "; ".join(skipped), style="yellow"))
        return Group(*parts)

    with _stop_signals() as stop, _cbreak(stdin) as keys:
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


# -- export -------------------------------------------------------------------------

def run_export(listen="127.0.0.1:9435", probes=None, pid=None, comm=None, cgroup=None, lib=None,
               interval=1.0, duration=None):
    """Serve the latency histograms to Prometheus (classic buckets, and
    native histograms to scrapers that ask for OpenMetrics 2.0)."""
    from sits.ebpf.export import Exporter, parse_listen  # no prometheus_client yet
    addr, port = parse_listen(listen)
    session = _session(probes, pid, comm, cgroup, lib)
    with _stop_signals() as stop:
        try:
            session.start()
            stop.arm()
            exporter = Exporter(session)
            server = exporter.serve(addr, port)
            print(f"sits: serving http://{addr}:{server.server_port}/metrics", file=sys.stderr, flush=True)
            t_end = time.monotonic() + duration if duration else None
            next_swap = time.monotonic() + interval
            try:
                while t_end is None or time.monotonic() < t_end:
                    time.sleep(max(0.0, min(next_swap, t_end or next_swap) - time.monotonic()))
                    if time.monotonic() >= next_swap:
                        exporter.update()
                        next_swap += interval
            finally:
                stop.armed = False
                server.shutdown()
        finally:
            stop.armed = False
            session.close()



# -- argv without typer ---------------------------------------------------------------

_FLAG, _STR, _INT, _FLOAT, _INTS, _STRS = (fastargs.FLAG, fastargs.STR, fastargs.INT, fastargs.FLOAT,
                                          fastargs.INTS, fastargs.STRS)
_FILTERS = {"--probes": ("probes", _STR), "--pid": ("pid", _INTS), "--comm": ("comm", _STR),
            "--cgroup": ("cgroup", _STR), "--lib": ("lib", _STR)}
#: option -> (run_* keyword, kind); must match typer_app() (a unit test checks)
OPTIONS = {
    "audit": {**_FILTERS, "--duration": ("duration", _FLOAT), "-d": ("duration", _FLOAT),
              "--json": ("as_json", _FLAG), "--markdown": ("markdown", _FLAG),
              "-o": ("output", _STR), "--output": ("output", _STR),
              "--threshold": ("threshold", _STRS), "--interval": ("interval", _FLOAT),
              "--top": ("top_n", _INT), "--per-thread": ("per_thread", _FLAG),
              "--stream": ("stream", _STR)},
    "top": {**_FILTERS, "--interval": ("interval", _FLOAT), "--sort": ("sort", _STR),
            "--rows": ("rows", _INT), "--threshold": ("threshold", _STRS),
            "--cumulative": ("cumulative", _FLAG)},
    "export": {**_FILTERS, "--listen": ("listen", _STR), "--interval": ("interval", _FLOAT),
               "--duration": ("duration", _FLOAT)},
}


def parse_fast(name: str, argv: list[str]) -> dict | None:
    """run_<name>'s keywords from `argv`, or None when anything is unusual
    (help, an unknown option, a missing or malformed value, a positional
    argument): typer then handles argv exactly as before."""
    table = OPTIONS.get(name)
    if table is None:
        return None
    return fastargs.parse(table, argv, command=name == "audit")


def fast_command(argv: list[str]):
    """A callable running `sits probe ...` for a well-formed `audit`, `top`
    or `export` command line, or None (typer handles it)."""
    if len(argv) < 1 or argv[0] not in OPTIONS:
        return None
    kw = parse_fast(argv[0], argv[1:])
    if kw is None:
        return None
    run = {"audit": run_audit, "top": run_top, "export": run_export}[argv[0]]
    return functools.partial(run, **kw)


# -- typer ----------------------------------------------------------------------------

@functools.cache
def typer_app():
    """The `sits probe` typer app: declares the commands for --help and
    usage errors; each calls its run_* function."""
    from typing import List, Optional

    import typer

    app = typer.Typer(help="Kernel-level latency probes (eBPF): where a video pipeline loses time.",
                      no_args_is_help=True)

    @app.command("list")
    def list_(lib: Optional[str] = typer.Option(None, "--lib", help="libavcodec to probe"),
              as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
        """Probe points available on this kernel, and why any are missing."""
        run_list(lib, as_json)

    @app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": False})
    def audit(ctx: typer.Context,
              duration: Optional[float] = typer.Option(None, "--duration", "-d", help="seconds to record "
                                                       "(default: until COMMAND exits)"),
              as_json: bool = typer.Option(False, "--json", help="JSON report (schema sits.probe.audit/1)"),
              markdown: bool = typer.Option(False, "--markdown", help="markdown report"),
              output: Optional[str] = typer.Option(None, "-o", "--output", help="write the report here"),
              probes: Optional[str] = typer.Option(None, "--probes", help=PROBES_HELP),
              pid: Optional[List[int]] = typer.Option(None, "--pid", help="only these processes"),
              comm: Optional[str] = typer.Option(None, "--comm", help="only processes with this name"),
              cgroup: Optional[str] = typer.Option(None, "--cgroup", help="only this cgroup (v2 path)"),
              lib: Optional[str] = typer.Option(None, "--lib", help="libavcodec to probe"),
              threshold: Optional[List[str]] = typer.Option(None, "--threshold",
                                                            help="NAME=MS p95 threshold; NAME is decode, "
                                                                 "buffer_wait or a probe point"),
              interval: float = typer.Option(1.0, "--interval", help="seconds between histogram swaps"),
              top_n: int = typer.Option(5, "--top", help="hot-spot list length"),
              per_thread: bool = typer.Option(False, "--per-thread", help="one row per thread"),
              stream: Optional[str] = typer.Option(None, "--stream", help="also write every sample to this "
                                                   "CSV file (ts_ns,pid,tid,probe,key,latency_ns)")):
        """Record for a while (or while COMMAND runs) and report statistics, hot
        spots, drops and probe overhead.  Usage: sits probe audit [OPTIONS] [-- COMMAND ...]"""
        run_audit(list(ctx.args), duration, as_json, markdown, output, probes, pid, comm, cgroup, lib,
                  threshold, interval, top_n, per_thread, stream)

    @app.command()
    def top(probes: Optional[str] = typer.Option(None, "--probes", help=PROBES_HELP),
            pid: Optional[List[int]] = typer.Option(None, "--pid", help="only these processes"),
            comm: Optional[str] = typer.Option(None, "--comm", help="only processes with this name"),
            cgroup: Optional[str] = typer.Option(None, "--cgroup", help="only this cgroup (v2 path)"),
            lib: Optional[str] = typer.Option(None, "--lib", help="libavcodec to probe"),
            interval: float = typer.Option(1.0, "--interval", help="refresh period, seconds"),
            sort: str = typer.Option("total", "--sort", help="total|p95|p99|count|max (key s cycles)"),
            rows: int = typer.Option(25, "--rows", help="rows shown"),
            threshold: Optional[List[str]] = typer.Option(None, "--threshold", help="NAME=MS p95 threshold"),
            cumulative: bool = typer.Option(False, "--cumulative", help="whole run instead of last interval")):
        """Live table of the slowest probe points: q quits, s changes the sort,
        j/k (or arrows) select a row whose histogram is drawn below."""
        run_top(probes, pid, comm, cgroup, lib, interval, sort, rows, threshold, cumulative)

    @app.command()
    def export(listen: str = typer.Option("127.0.0.1:9435", "--listen", help="ADDR:PORT to serve /metrics on"),
               probes: Optional[str] = typer.Option(None, "--probes", help=PROBES_HELP),
               pid: Optional[List[int]] = typer.Option(None, "--pid", help="only these processes"),
               comm: Optional[str] = typer.Option(None, "--comm", help="only processes with this name"),
               cgroup: Optional[str] = typer.Option(None, "--cgroup", help="only this cgroup (v2 path)"),
               lib: Optional[str] = typer.Option(None, "--lib", help="libavcodec to probe"),
               interval: float = typer.Option(1.0, "--interval", help="seconds between histogram swaps"),
               duration: Optional[float] = typer.Option(None, "--duration", help="stop after S seconds")):
        """Serve the latency histograms to Prometheus (classic buckets, and
        native histograms to scrapers that ask for OpenMetrics 2.0)."""
        run_export(listen, probes, pid, comm, cgroup, lib, interval, duration)

    return app


def __getattr__(name):
    if name == "app":  # sits.cli.probe.app, as before
        return typer_app()
    raise AttributeError(name)
