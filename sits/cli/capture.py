"""`sits capture`: the chain from a camera to a display and/or CUDA.

Every option is declared once, in OPTIONS: the fast parser (fastargs, no
typer at start-up), typer's command (help, usage errors) and run_capture's
keywords are all made from it.
"""
import functools
import inspect
import json
import re
import signal
import sys
from dataclasses import dataclass

from sits.cli import fastargs
from sits.errors import UsageError


@dataclass(frozen=True)
class Opt:
    flag: str
    dest: str
    kind: str            # fastargs kind
    default: object
    help: str
    min: float | None = None
    max: float | None = None
    hidden: bool = False


OPTIONS = [
    Opt("--to-kms", "to_kms", fastargs.FLAG, False, "Show the frames on a KMS display (zero-copy when a plane can)."),
    Opt("--to-cuda", "to_cuda", fastargs.STR, None,
        "WxH: convert every frame on the GPU into a model-ready tensor of this size."),
    Opt("--device", "device", fastargs.STR, None,
        "V4L2 capture device (default: the first one), or 'synthetic': frames on a timer in memfd "
        "buffers, no camera (--format, --size, --fps; default YUYV 1920x1080 at 60)."),
    Opt("--card", "card", fastargs.STR, None, "DRM card (default: the first with a connected display)."),
    Opt("--connector", "connector", fastargs.STR, None, "Connector name, e.g. HDMI-A-1 or Virtual-1."),
    Opt("--format", "fmt", fastargs.STR, None, "Camera fourcc, e.g. XR24, AR24, RGBP, YUYV."),
    Opt("--size", "size", fastargs.STR, None, "WxH, e.g. 1280x720."),
    Opt("--fps", "fps", fastargs.INT, None, "Frame rate to ask the camera for.", min=1),
    Opt("--frames", "frames", fastargs.INT, None, "Stop after N captured frames.", min=1),
    Opt("--duration", "duration", fastargs.FLOAT, None, "Stop after SECONDS.", min=0.1),
    Opt("--memory", "memory", fastargs.STR, "mmap", "mmap (driver buffers, exported) | heap | udmabuf."),
    Opt("--buffers", "buffers", fastargs.INT, 4, "Capture buffers.", min=2, max=32),
    Opt("--verify", "verify", fastargs.FLAG, False, "Compare shown pixels (writeback) with captured ones."),
    Opt("--verify-every", "verify_every", fastargs.INT, 10, "Verify every N-th displayed frame.", min=1),
    Opt("--snapshot", "snapshot", fastargs.STR, None, "Write what was on screen (writeback) as a PNG."),
    Opt("--timeline", "timeline", fastargs.STR, None,
        "Write one record per frame (its stages' times) to FILE: CSV for FILE.csv, else NDJSON."),
    Opt("--reconnect", "reconnect", fastargs.FLAG, False, "Wait for a vanished camera and resume."),
    Opt("--cuda-dtype", "cuda_dtype", fastargs.STR, "float16", "Tensor dtype: uint8 | float16 | bfloat16 | float32."),
    Opt("--cuda-layout", "cuda_layout", fastargs.STR, "NCHW", "Tensor layout: NCHW | NHWC."),
    Opt("--cuda-batch", "cuda_batch", fastargs.INT, 1, "Largest batch of frames per kernel launch.", min=1, max=64),
    Opt("--latency-budget-ms", "latency_budget_ms", fastargs.FLOAT, None,
        "Batch frames while each still meets this capture->tensor budget.", min=0.1),
    Opt("--cuda-matrix", "cuda_matrix", fastargs.STR, None,
        "YUV colour matrix: bt601 | bt709 | bt2020 (default: what the camera's format says)."),
    Opt("--cuda-range", "cuda_range", fastargs.STR, None,
        "Sample range: limited | full (default: what the camera's format says)."),
    Opt("--json", "as_json", fastargs.FLAG, False, "No status line; print the summary as one JSON object."),
]
#: option -> (run_capture keyword, kind), for fastargs
FAST = {o.flag: (o.dest, o.kind) for o in OPTIONS}


def _size(text: str | None, option: str = "--size") -> tuple[int, int] | None:
    if text is None:
        return None
    m = re.fullmatch(r"(\d+)x(\d+)", text)
    if not m or 0 in (int(m.group(1)), int(m.group(2))):
        raise UsageError(f"{option} must look like 1280x720, not {text!r}")
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


def _cuda_consumer(kw: dict, probe=None):
    """The CUDA consumer --to-cuda asks for; refused (one line) before any
    device is opened when the options, the GPU or CuPy are not usable."""
    from sits.cuda.formats import OutputSpec
    from sits.errors import DeviceError
    from sits.pipeline.cuda import CudaConsumer
    w, h = _size(kw["to_cuda"], "--to-cuda")
    budget = kw["latency_budget_ms"]
    if kw["cuda_batch"] > 1 and budget is None:
        raise UsageError("--cuda-batch above 1 needs --latency-budget-ms (how long a frame may wait for its batch)")
    consumer = CudaConsumer(OutputSpec(w, h, layout=kw["cuda_layout"], dtype=kw["cuda_dtype"]),
                            matrix=kw["cuda_matrix"], range=kw["cuda_range"], max_batch=kw["cuda_batch"],
                            latency_budget_s=budget / 1000 if budget else None)
    if probe is None:
        from sits.cuda.probe import probe as ask
        probe = ask()
    if not probe.get("available"):
        raise DeviceError(f"--to-cuda needs a CUDA GPU: {probe.get('reason')}")
    from sits.cuda.runtime import cupy
    cupy()   # CuPy installed and seeing the GPU, or one line saying why not
    consumer.probe_answer = probe
    return consumer


def _check_output_path(option: str, path: str) -> None:
    """Before anything streams: a run must not end with nowhere to write."""
    import os
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{option} {path}: no such directory {folder}")
    if os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a directory")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise UsageError(f"{option} {path}: not writable")


def run_capture(consumers=(), **kw) -> None:
    """Capture from V4L2 and show on DRM/KMS and/or convert on CUDA.
    `consumers`: more frame consumers (library callers, benchmarks)."""
    kw = {**{o.dest: o.default for o in OPTIONS}, **kw}
    from sits.pipeline.capture import CaptureOptions, build, check
    if not kw["to_kms"] and not kw["to_cuda"] and not consumers:
        raise UsageError("say where the frames go: --to-kms, --to-cuda WxH, or both")
    if kw["memory"] not in ("mmap", "heap", "udmabuf"):
        raise UsageError(f"--memory must be mmap, heap or udmabuf, not {kw['memory']!r}")
    if kw["fmt"] is not None and len(kw["fmt"]) != 4:
        raise UsageError(f"--format takes a fourcc such as XR24, not {kw['fmt']!r}")
    if kw["snapshot"]:
        if not kw["snapshot"].lower().endswith(".png"):
            raise UsageError("--snapshot writes a PNG: give a FILE.png")
        _check_output_path("--snapshot", kw["snapshot"])
    if kw["timeline"]:
        _check_output_path("--timeline", kw["timeline"])
    if (kw["verify"] or kw["snapshot"]) and not kw["to_kms"]:
        raise UsageError("--verify and --snapshot check the display: add --to-kms")
    opts = CaptureOptions(device=kw["device"], card=kw["card"], connector=kw["connector"], format=kw["fmt"],
                          size=_size(kw["size"]), fps=kw["fps"], frames=kw["frames"], duration=kw["duration"],
                          memory=kw["memory"], buffers=kw["buffers"], display=kw["to_kms"], verify=kw["verify"],
                          verify_every=kw["verify_every"], snapshot=kw["snapshot"], timeline=kw["timeline"],
                          reconnect=kw["reconnect"])
    check(opts)
    consumers = list(consumers) + ([_cuda_consumer(kw)] if kw["to_cuda"] else [])
    live = None
    if not kw["as_json"] and sys.stderr.isatty():
        from rich.console import Console
        from rich.live import Live
        live = Live("", console=Console(stderr=True), refresh_per_second=4, transient=True)

    def show(summary):
        if live is not None:
            live.update(_status_line(summary))

    # No status line (--json, no tty): no per-interval summary work in the loop.
    pipeline = build(opts, consumers=consumers, on_status=show if live is not None else None)
    # From here a signal is a stop: the run winds down and the summary is
    # printed (a signal while it is printed asks for the stop once more)
    previous = {sig: signal.signal(sig, lambda *_: pipeline.request_stop("signal"))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if live is not None:
            with live:
                summary = pipeline.run()
        else:
            summary = pipeline.run()
        data = summary.as_dict()
        if kw["as_json"]:
            print(json.dumps(data), flush=True)
        else:
            _print_summary(data, kw, summary.stopped_by)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if kw["verify"] and not data["verify"]["checked"]:
        from sits.errors import DeviceError
        raise DeviceError(f"--verify checked no frame: none of the {data['frames_displayed']} shown "
                          "was written back before the run ended")


def _print_summary(data: dict, kw: dict, stopped_by: str) -> None:
    from rich.console import Console
    con = Console()
    where = f"{data['card']} {data['connector']} {data['mode']} as {data['display_format']}" if kw["to_kms"] else ""
    if kw["to_cuda"]:
        where += (" + " if where else "") + f"CUDA {kw['to_cuda']}"
    con.print(f"[bold]sits capture[/] {data['device']} {data['format']} {data['size']} ({data['memory']}) -> {where}")
    con.print(f"  frames: captured {data['frames_captured']}, displayed {data['frames_displayed']}, "
              f"dropped {data['frames_dropped']}, buffer errors {data['buffer_errors']}")
    if kw["to_kms"]:
        con.print(f"  zero-copy: {data['zero_copy']}  CPU copies/frame: {data['cpu_copies_per_frame']}  "
                  f"CPU: {data['cpu_ms_per_frame']} ms/frame  {data['fps']} fps")
        lat = data["latency_ms"]
        con.print(f"  capture->flip latency: p50 {lat['p50']} ms, p95 {lat['p95']} ms, p99 {lat['p99']} ms")
    cuda = data.get("cuda")
    if cuda:
        lat = cuda["latency_ms"]
        con.print(f"  cuda: {cuda['frames']} frames in {cuda['batches']} batches, {cuda['import_path']} "
                  f"(zero-copy: {cuda['zero_copy']}), capture->tensor p50 {lat['p50']} ms, p99 {lat['p99']} ms")
    if kw["verify"]:
        v = data["verify"]
        con.print(f"  verify (writeback): checked {v['checked']}, mismatched {v['mismatched']}")
    if data["disconnects"]:
        con.print(f"  camera lost {data['disconnects']} time(s), back {data['reconnects']} time(s)")
    if data.get("snapshot"):
        con.print(f"  snapshot: {data['snapshot']}")
    if data.get("timeline"):
        con.print(f"  timeline: {data['timeline']['records']} frame records in {data['timeline']['file']}")
    if stopped_by == "signal":
        con.print("  stopped by signal")


def fast_command(argv: list[str]):
    """run_capture for a well-formed command line, or None (typer handles
    it): `sits capture` then starts without building typer's parameters."""
    kw = fastargs.parse(FAST, argv)
    if kw is None:
        return None
    for o in OPTIONS:
        v = kw.get(o.dest)
        if v is not None and o.kind != fastargs.FLAG and (
                (o.min is not None and v < o.min) or (o.max is not None and v > o.max)):
            return None
    return functools.partial(run_capture, **kw)


def typer_command():
    """`sits capture` declared for typer, from OPTIONS: --help, usage
    errors, and any command line fast_command leaves alone."""
    import typer
    types = {fastargs.FLAG: bool, fastargs.STR: str, fastargs.INT: int, fastargs.FLOAT: float}
    params = [inspect.Parameter(o.dest, inspect.Parameter.KEYWORD_ONLY, annotation=types[o.kind],
                                default=typer.Option(o.default, o.flag, help=o.help, min=o.min, max=o.max,
                                                     hidden=o.hidden))
              for o in OPTIONS]

    def capture(**kw) -> None:
        run_capture(**kw)
    capture.__doc__ = run_capture.__doc__
    capture.__signature__ = inspect.Signature(params)
    capture.__annotations__ = {p.name: p.annotation for p in params}
    return capture
