"""`sits capture`: the chain from a camera to a display and/or CUDA.

Every option is declared once: the capture pipeline's in
sits.pipeline.capture.OPTIONS (CaptureOptions and open_chain read the same
table), the CUDA stage's and the output's here. The fast parser (fastargs,
no typer at start-up), typer's command (help, usage errors) and
run_capture's keywords are all made from OPTIONS.
"""
import functools
import json
import signal
import sys

from sits.cli import fastargs
from sits.errors import UsageError
from sits.options import FLOAT, INT, STR, Option, size
from sits.pipeline import capture as pipeline_capture

OPTIONS = [
    *pipeline_capture.OPTIONS,
    Option(("--to-cuda",), "to_cuda", STR, None,
           "WxH: convert every frame on the GPU into a model-ready tensor of this size.", convert=size),
    Option(("--cuda-dtype",), "cuda_dtype", STR, "float16", "Tensor dtype: uint8 | float16 | bfloat16 | float32."),
    Option(("--cuda-layout",), "cuda_layout", STR, "NCHW", "Tensor layout: NCHW | NHWC."),
    Option(("--cuda-batch",), "cuda_batch", INT, 1, "Largest batch of frames per kernel launch.", min=1, max=64),
    Option(("--latency-budget-ms",), "latency_budget_ms", FLOAT, None,
           "Batch frames while each still meets this capture->tensor budget.", min=0.1),
    Option(("--cuda-matrix",), "cuda_matrix", STR, None,
           "YUV colour matrix: bt601 | bt709 | bt2020 (default: what the camera's format says)."),
    Option(("--cuda-range",), "cuda_range", STR, None,
           "Sample range: limited | full (default: what the camera's format says)."),
    Option(("--json",), "as_json", fastargs.FLAG, False, "No status line; print the summary as one JSON object."),
]
#: option -> (run_capture keyword, kind), for fastargs
FAST = fastargs.table(OPTIONS)


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
    from sits.bayer import given as raw_given
    from sits.cuda.formats import OutputSpec
    from sits.errors import DeviceError
    from sits.pipeline.cuda import CudaConsumer
    w, h = kw["to_cuda"]
    budget = kw["latency_budget_ms"]
    if kw["cuda_batch"] > 1 and budget is None:
        raise UsageError("--cuda-batch above 1 needs --latency-budget-ms (how long a frame may wait for its batch)")
    consumer = CudaConsumer(OutputSpec(w, h, layout=kw["cuda_layout"], dtype=kw["cuda_dtype"]),
                            matrix=kw["cuda_matrix"], range=kw["cuda_range"], max_batch=kw["cuda_batch"],
                            latency_budget_s=budget / 1000 if budget else None,
                            raw=raw_given(kw["black_level"], kw["white_balance"], kw["gamma"]))
    if probe is None:
        from sits.cuda.probe import probe as ask
        probe = ask()
    if not probe.get("available"):
        raise DeviceError(f"--to-cuda needs a CUDA GPU: {probe.get('reason')}")
    from sits.cuda.runtime import cupy
    cupy()   # CuPy installed and seeing the GPU, or one line saying why not
    consumer.probe_answer = probe
    return consumer


def run_capture(consumers=(), **kw) -> None:
    """Capture from V4L2 and show on DRM/KMS and/or convert on CUDA.
    `consumers`: more frame consumers (library callers, benchmarks)."""
    kw = {**fastargs.defaults(OPTIONS), **kw}
    cli = {o.dest: o.value(kw[o.dest]) for o in OPTIONS if o.dest not in pipeline_capture.BY_DEST}
    if not kw["display"] and not cli["to_cuda"] and not consumers:
        raise UsageError("say where the frames go: --to-kms, --to-cuda WxH, or both")
    opts = pipeline_capture.options(**{k: kw[k] for k in pipeline_capture.BY_DEST})
    kw.update(cli)
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
    pipeline = pipeline_capture.build(opts, consumers=consumers, on_status=show if live is not None else None)
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
    where = f"{data['card']} {data['connector']} {data['mode']} as {data['display_format']}" if kw["display"] else ""
    if kw["to_cuda"]:
        where += (" + " if where else "") + "CUDA {}x{}".format(*kw["to_cuda"])
    con.print(f"[bold]sits capture[/] {data['device']} {data['format']} {data['size']} ({data['memory']}) -> {where}")
    con.print(f"  frames: captured {data['frames_captured']}, displayed {data['frames_displayed']}, "
              f"dropped {data['frames_dropped']}, buffer errors {data['buffer_errors']}")
    if kw["display"]:
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
    if kw is None or not fastargs.in_bounds(OPTIONS, kw):
        return None
    return functools.partial(run_capture, **kw)


def typer_command():
    """`sits capture` declared for typer, from OPTIONS: --help, usage
    errors, and any command line fast_command leaves alone."""
    return fastargs.typer_command(run_capture, OPTIONS, name="capture",
                                  doc="Capture from V4L2 and show on DRM/KMS and/or convert on CUDA.")
