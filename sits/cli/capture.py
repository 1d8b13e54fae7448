"""`sits capture --to-kms`: the zero-copy chain from a camera to a display."""
import functools
import json
import re
import signal
import sys

from sits.cli import fastargs
from sits.errors import UsageError

#: option -> (run_capture keyword, kind); must match typer_command() (a unit test checks)
OPTIONS = {
    "--to-kms": ("to_kms", fastargs.FLAG), "--device": ("device", fastargs.STR),
    "--card": ("card", fastargs.STR), "--connector": ("connector", fastargs.STR),
    "--format": ("fmt", fastargs.STR), "--size": ("size", fastargs.STR), "--fps": ("fps", fastargs.INT),
    "--frames": ("frames", fastargs.INT), "--duration": ("duration", fastargs.FLOAT),
    "--memory": ("memory", fastargs.STR), "--buffers": ("buffers", fastargs.INT),
    "--verify": ("verify", fastargs.FLAG), "--verify-every": ("verify_every", fastargs.INT),
    "--snapshot": ("snapshot", fastargs.STR), "--reconnect": ("reconnect", fastargs.FLAG),
    "--json": ("as_json", fastargs.FLAG), "--python-loop": ("python_loop", fastargs.FLAG),
}
#: keyword -> (min, max) as typer declares them; out of range goes to typer's message
LIMITS = {"fps": (1, None), "frames": (1, None), "duration": (0.1, None), "buffers": (2, 32),
          "verify_every": (1, None)}


def _size(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    m = re.fullmatch(r"(\d+)x(\d+)", text)
    if not m:
        raise UsageError(f"--size must look like 1280x720, not {text!r}")
    return int(m.group(1)), int(m.group(2))


def _status_line(s) -> str:
    if s.disconnects > s.reconnects:
        return f"camera lost ({s.device}); waiting for it to come back  shown {s.frames_displayed}"
    lat = s.latency_ms
    p50 = f"{lat['p50']:.1f}" if lat.get("p50") is not None else "-"
    p95 = f"{lat['p95']:.1f}" if lat.get("p95") is not None else "-"
    return (f"{s.fps:6.1f} fps  captured {s.frames_captured}  shown {s.frames_displayed}  "
            f"dropped {s.frames_dropped}  errors {s.buffer_errors}  "
            f"capture->flip p50 {p50} ms p95 {p95} ms  cpu {s.cpu_ms_per_frame:.2f} ms/frame")


def run_capture(to_kms: bool = False, device: str | None = None, card: str | None = None,
                connector: str | None = None, fmt: str | None = None, size: str | None = None,
                fps: int | None = None, frames: int | None = None, duration: float | None = None,
                memory: str = "mmap", buffers: int = 4, verify: bool = False, verify_every: int = 10,
                snapshot: str | None = None, reconnect: bool = False, as_json: bool = False,
                python_loop: bool = False) -> None:
    """Capture from V4L2 and show on DRM/KMS, zero-copy where the display can."""
    from sits.pipeline.capture_to_kms import CaptureOptions, CaptureToKms
    if not to_kms:
        raise UsageError("only --to-kms is implemented: sits capture --to-kms ...")
    if memory not in ("mmap", "heap", "udmabuf"):
        raise UsageError(f"--memory must be mmap, heap or udmabuf, not {memory!r}")
    if fmt is not None and len(fmt) != 4:
        raise UsageError(f"--format takes a fourcc such as XR24, not {fmt!r}")
    if snapshot and not snapshot.lower().endswith(".png"):
        raise UsageError("--snapshot writes a PNG: give a FILE.png")
    opts = CaptureOptions(device=device, card=card, connector=connector, format=fmt, size=_size(size),
                          fps=fps, frames=frames, duration=duration, memory=memory, buffers=buffers,
                          verify=verify, verify_every=verify_every, snapshot=snapshot, reconnect=reconnect,
                          c_loop=not python_loop)
    live = None
    if not as_json and sys.stderr.isatty():
        from rich.console import Console
        from rich.live import Live
        live = Live("", console=Console(stderr=True), refresh_per_second=4, transient=True)

    def show(summary):
        if live is not None:
            live.update(_status_line(summary))

    # No status line (--json, no tty): no per-interval summary work in the loop.
    pipeline = CaptureToKms(opts, on_status=show if live is not None else None)
    previous = {sig: signal.signal(sig, lambda *_: pipeline.request_stop("signal"))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if live is not None:
            with live:
                summary = pipeline.run()
        else:
            summary = pipeline.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    data = summary.as_dict()
    if as_json:
        print(json.dumps(data))
        return
    from rich.console import Console
    con = Console()
    con.print(f"[bold]sits capture[/] {data['device']} {data['format']} {data['size']} ({data['memory']}) -> "
              f"{data['card']} {data['connector']} {data['mode']} as {data['display_format']}")
    con.print(f"  frames: captured {data['frames_captured']}, displayed {data['frames_displayed']}, "
              f"dropped {data['frames_dropped']}, buffer errors {data['buffer_errors']}")
    con.print(f"  zero-copy: {data['zero_copy']}  CPU copies/frame: {data['cpu_copies_per_frame']}  "
              f"CPU: {data['cpu_ms_per_frame']} ms/frame  {data['fps']} fps")
    lat = data["latency_ms"]
    con.print(f"  capture->flip latency: p50 {lat['p50']} ms, p95 {lat['p95']} ms, p99 {lat['p99']} ms")
    if verify:
        v = data["verify"]
        con.print(f"  verify (writeback): checked {v['checked']}, mismatched {v['mismatched']}")
    if data["disconnects"]:
        con.print(f"  camera lost {data['disconnects']} time(s), back {data['reconnects']} time(s)")
    if data.get("snapshot"):
        con.print(f"  snapshot: {data['snapshot']}")
    if summary.stopped_by == "signal":
        con.print("  stopped by signal")


def fast_command(argv: list[str]):
    """run_capture for a well-formed command line, or None (typer handles
    it): `sits capture` then starts without building typer's parameters."""
    kw = fastargs.parse(OPTIONS, argv)
    if kw is None:
        return None
    for name, (lo, hi) in LIMITS.items():
        v = kw.get(name)
        if v is not None and (v < lo or (hi is not None and v > hi)):
            return None
    return functools.partial(run_capture, **kw)


def typer_command():
    """`sits capture` declared for typer: --help, usage errors, and any
    command line fast_command leaves alone."""
    import typer

    def capture(
        to_kms: bool = typer.Option(False, "--to-kms", help="Show the frames on a KMS display (zero-copy when a plane can)."),
        device: str = typer.Option(None, "--device", help="V4L2 capture device (default: the first one)."),
        card: str = typer.Option(None, "--card", help="DRM card (default: the first with a connected display)."),
        connector: str = typer.Option(None, "--connector", help="Connector name, e.g. HDMI-A-1 or Virtual-1."),
        fmt: str = typer.Option(None, "--format", help="Camera fourcc, e.g. XR24, AR24, RGBP, YUYV."),
        size: str = typer.Option(None, "--size", help="WxH, e.g. 1280x720."),
        fps: int = typer.Option(None, "--fps", min=1, help="Frame rate to ask the camera for."),
        frames: int = typer.Option(None, "--frames", min=1, help="Stop after N captured frames."),
        duration: float = typer.Option(None, "--duration", min=0.1, help="Stop after SECONDS."),
        memory: str = typer.Option("mmap", "--memory", help="mmap (driver buffers, exported) | heap | udmabuf."),
        buffers: int = typer.Option(4, "--buffers", min=2, max=32, help="Capture buffers."),
        verify: bool = typer.Option(False, "--verify", help="Compare shown pixels (writeback) with captured ones."),
        verify_every: int = typer.Option(10, "--verify-every", min=1, help="Verify every N-th displayed frame."),
        snapshot: str = typer.Option(None, "--snapshot", help="Write what was on screen (writeback) as a PNG."),
        reconnect: bool = typer.Option(False, "--reconnect", help="Wait for a vanished camera and resume."),
        as_json: bool = typer.Option(False, "--json", help="No status line; print the summary as one JSON object."),
        python_loop: bool = typer.Option(False, "--python-loop", hidden=True,
                                         help="Every frame through the Python loop (no C flip loop); for comparison."),
    ) -> None:
        """Capture from V4L2 and show on DRM/KMS, zero-copy where the display can."""
        run_capture(to_kms, device, card, connector, fmt, size, fps, frames, duration, memory, buffers,
                    verify, verify_every, snapshot, reconnect, as_json, python_loop)

    return capture
