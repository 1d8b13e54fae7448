"""`sits` entry point: sub-commands and the one place errors become lines.

Every sub-command raises (SitsError, OSError); `main()` turns that into one
line on stderr and an exit code: 2 for usage errors, 1 for runtime errors
and for an interrupt (SIGINT or SIGTERM) that no command turned into a stop
of its own. No traceback reaches the user unless SITS_DEBUG=1.
"""
import functools
import os
import signal
import sys

from sits.errors import SitsError


COMMANDS = ("doctor", "cameras", "probe", "bench", "capture")


@functools.cache
def _app(only: str | None = None):
    """The typer app; with `only`, just that sub-command is registered:
    importing the others (the probe and bench modules and what they pull
    in) costs seconds of a `sits capture` start in the test VM."""
    # typer (and the pydantic it brings) costs ~80 ms: built only when used
    import typer

    app = typer.Typer(
        name="sits",
        help="Zero-copy V4L2 -> dma-buf -> KMS/CUDA video chains and eBPF latency probes.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def _root() -> None:
        """Zero-copy V4L2 -> dma-buf -> KMS/CUDA video chains and eBPF latency probes."""

    _register(app, only)
    return app


def __getattr__(name):
    if name == "app":  # sits.cli.app.app: the whole typer app, built when asked for
        return _app()
    raise AttributeError(name)


def _register(app, only: str | None = None) -> None:
    # Each sub-command lives in its own module next to this one.
    if only in (None, "doctor"):
        from sits.cli import doctor
        app.command("doctor")(doctor.doctor)
    if only in (None, "cameras"):
        from sits.cli import cameras
        app.command("cameras")(cameras.cameras)
    if only in (None, "probe"):
        try:
            from sits.cli import probe
        except ImportError:
            pass
        else:
            app.add_typer(probe.typer_app(), name="probe")
    if only in (None, "bench"):
        try:
            from sits.cli import bench
        except ImportError:
            pass
        else:
            app.add_typer(bench.app, name="bench")
    if only in (None, "capture"):
        try:
            from sits.cli import capture
        except ImportError:
            pass
        else:
            app.command("capture")(capture.typer_command())


def fail(message: str, code: int = 1) -> "typer.Exit":  # noqa: F821
    """Print one error line (stderr) and return the Exit to raise."""
    import typer
    print(f"sits: error: {message}", file=sys.stderr)
    return typer.Exit(code)


def _fast(argv: list[str]):
    """`sits probe audit|top|export` and `sits capture` with well-formed
    options: run without typer, so that the probes attach sooner and the
    capture starts sooner (sits.cli.fastargs)."""
    if len(argv) >= 2 and argv[0] == "probe":
        from sits.cli import probe
        return probe.fast_command(argv[1:])
    if argv and argv[0] == "capture":
        from sits.cli import capture
        return capture.fast_command(argv[1:])
    return None


class _Interrupted(BaseException):
    """SIGINT or SIGTERM before a command made it a stop of its own.

    Not a KeyboardInterrupt: CPython marks a KeyboardInterrupt that passes
    out of exec() of a string (dataclasses builds its methods that way as a
    module is imported) as unhandled for good, and then ends the process by
    SIGINT after main() returned 1, whatever main() printed. This type is
    not looked for."""


def _interrupted(signum, frame):
    raise _Interrupted


def main(argv: list[str] | None = None) -> int:
    # SIGINT and SIGTERM are an interrupt from the first line on (SIGTERM's
    # default kills the process mid-way, with no word and no clean-up of its
    # own); `sits capture` makes both a stop with the summary once it
    # streams. The interrupt is caught around the handlers' own installation
    # and removal too: one can land between them and a try inside.
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            for sig in previous:
                signal.signal(sig, _interrupted)
            return _main(argv)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    except (_Interrupted, KeyboardInterrupt):
        print("sits: interrupted", file=sys.stderr)
        return 1


def _main(argv: list[str] | None) -> int:
    try:
        fast = _fast(sys.argv[1:] if argv is None else argv)
        if fast is not None:
            fast()
            return 0
        # standalone mode: click prints usage errors itself (exit 2) and
        # raises SystemExit with the command's code.
        args = sys.argv[1:] if argv is None else argv
        only = args[0] if args and args[0] in COMMANDS else None
        _app(only)(args=argv, prog_name="sits")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except SitsError as exc:
        print(f"sits: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print(f"sits: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - the one place that stops tracebacks
        if os.environ.get("SITS_DEBUG"):
            raise
        print(f"sits: internal error: {type(exc).__name__}: {exc} "
              "(set SITS_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
