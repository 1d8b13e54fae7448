"""`sits probe list|top|audit|export`: kernel-level latency probes.

Every command builds one ProbeSession (sits.ebpf.probes), runs one loop and
closes the session in `finally`, so that q, Ctrl-C and SIGTERM all leave
nothing attached (common.py). Each command is a plain function, run_<name>
in its own module, taking every option as a keyword.

Each option is declared once, in COMMANDS below, and read twice: by the
parser of sits.cli.fastargs, which runs `audit`, `top` and `export` with
well-formed options without importing typer (with pydantic it costs more
than attaching the probes), and by typer_app(), built for --help and for
anything unusual (a bad or unknown option), with typer's usage messages.
This module imports nothing heavy: a command's module is imported once it
runs.
"""
import collections
import functools
import importlib

from sits.cli import fastargs
from sits.cli.fastargs import FLAG, FLOAT, INT, INTS, STR, STRS, Option

PROBES_HELP = "comma-separated groups: syscalls,ioctl,fence,v4l2,drm,avcodec"

_LIB = Option(("--lib",), "lib", STR, None, "libavcodec to probe")
_FILTERS = (
    Option(("--probes",), "probes", STR, None, PROBES_HELP),
    Option(("--pid",), "pid", INTS, None, "only these processes"),
    Option(("--comm",), "comm", STR, None, "only processes with this name"),
    Option(("--cgroup",), "cgroup", STR, None, "only this cgroup (v2 path)"),
    _LIB,
)
_SWAP_INTERVAL = Option(("--interval",), "interval", FLOAT, 1.0, "seconds between histogram swaps")
_THRESHOLD = Option(("--threshold",), "threshold", STRS, None,
                    "NAME=MS p95 threshold; NAME is decode, buffer_wait or a probe point")

#: a command: the module and function that run it, its options, whether
#: it takes a COMMAND after `--` (as keyword `command`), and whether
#: well-formed command lines skip typer
Command = collections.namedtuple("Command", "module run options rest fast")

COMMANDS = {
    "list": Command("listing", "run_list", (
        _LIB,
        Option(("--json",), "as_json", FLAG, False, "machine-readable output"),
    ), None, False),
    "audit": Command("audit", "run_audit", (
        Option(("--duration", "-d"), "duration", FLOAT, None, "seconds to record (default: until COMMAND exits)"),
        Option(("--json",), "as_json", FLAG, False, "JSON report (schema sits.probe.audit/1)"),
        Option(("--markdown",), "markdown", FLAG, False, "markdown report"),
        Option(("-o", "--output"), "output", STR, None, "write the report here"),
        *_FILTERS,
        _THRESHOLD,
        _SWAP_INTERVAL,
        Option(("--top",), "top_n", INT, 5, "hot-spot list length"),
        Option(("--per-thread",), "per_thread", FLAG, False, "one row per thread"),
        Option(("--stream",), "stream", STR, None,
               "also write every sample to this CSV file (ts_ns,pid,tid,probe,key,latency_ns)"),
    ), "command", True),
    "top": Command("top", "run_top", (
        *_FILTERS,
        Option(("--interval",), "interval", FLOAT, 1.0, "refresh period, seconds"),
        Option(("--sort",), "sort", STR, "total", "total|p95|p99|count|max (key s cycles)"),
        Option(("--rows",), "rows", INT, 25, "rows shown"),
        _THRESHOLD,
        Option(("--cumulative",), "cumulative", FLAG, False, "whole run instead of last interval"),
    ), None, True),
    "frames": Command("frames", "run_frames", (
        Option(("--duration", "-d"), "duration", FLOAT, None, "seconds to follow (default: until COMMAND exits)"),
        Option(("--json",), "as_json", FLAG, False, "JSON report (schema sits.probe.frames/1)"),
        Option(("--markdown",), "markdown", FLAG, False, "markdown report"),
        Option(("-o", "--output"), "output", STR, None, "write the report here (JSON when FILE ends in .json)"),
        Option(("--stream",), "stream", STR, None, "every frame's record to this file (CSV when it ends "
                                                   "in .csv, NDJSON otherwise)"),
        Option(("--display-latency-ms",), "display_latency_ms", FLOAT, 0.0,
               "the panel's own latency, added to glass to glass"),
        Option(("-p", "--pid"), "pid", INTS, None, "only these processes"),
        Option(("--comm",), "comm", STR, None, "only processes with this name"),
        Option(("--cgroup",), "cgroup", STR, None, "only this cgroup (v2 path)"),
        Option(("--interval",), "interval", FLOAT, 1.0, "live view refresh period, seconds"),
    ), "command", True),
    "export": Command("export", "run_export", (
        Option(("--listen",), "listen", STR, "127.0.0.1:9435", "ADDR:PORT to serve /metrics on"),
        *_FILTERS,
        _SWAP_INTERVAL,
        Option(("--duration",), "duration", FLOAT, None, "stop after S seconds"),
    ), None, True),
}


def run_function(name: str):
    """run_<name>, from the command's module (imported now)."""
    cmd = COMMANDS[name]
    return getattr(importlib.import_module(f"{__name__}.{cmd.module}"), cmd.run)


def parse_fast(name: str, argv: list[str]) -> dict | None:
    """Every keyword of run_<name> from `argv` (defaults for the options not
    given), or None when anything is unusual (help, an unknown option, a
    missing or malformed value, a positional argument): typer then handles
    argv exactly as before."""
    cmd = COMMANDS.get(name)
    if cmd is None or not cmd.fast:
        return None
    kw = fastargs.parse(fastargs.table(cmd.options), argv, command=cmd.rest is not None)
    if kw is None:
        return None
    out = fastargs.defaults(cmd.options)
    if cmd.rest:
        out[cmd.rest] = kw.pop("command", [])
    out.update(kw)
    return out


def fast_command(argv: list[str]):
    """A callable running `sits probe ...` for a well-formed `audit`, `top`
    or `export` command line, or None (typer handles it)."""
    if not argv:
        return None
    kw = parse_fast(argv[0], argv[1:])
    if kw is None:
        return None
    return functools.partial(run_function(argv[0]), **kw)


@functools.cache
def typer_app():
    """The `sits probe` typer app, declared from COMMANDS, for --help and
    usage errors; each command calls its run_* function."""
    import typer

    app = typer.Typer(help="Kernel-level latency probes (eBPF): where a video pipeline loses time.",
                      no_args_is_help=True)
    for name, cmd in COMMANDS.items():
        run = run_function(name)
        settings = {"allow_extra_args": True, "ignore_unknown_options": False} if cmd.rest else {}
        app.command(name, context_settings=settings)(
            fastargs.typer_command(run, cmd.options, name=name, doc=run.__doc__, rest=cmd.rest))
    return app


def __getattr__(name):
    if name == "app":  # sits.cli.probe.app: its typer app, built when asked for
        return typer_app()
    raise AttributeError(name)
