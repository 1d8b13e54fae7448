"""Set-up of a capture pipeline from options: open the camera and the
display, negotiate a format both can use, and build the Pipeline.

Frames are shown zero-copy when a plane can scan out the camera's format
(the capture dma-buf itself, PRIME-imported once per buffer); otherwise the
CPU converts into a dumb buffer and the summary says so. Everything opened
here is owned by the pipeline (closed by its run()), or closed here when
the set-up fails.

`device="synthetic"` (SYNTHETIC) is a source without a camera, as
GStreamer's videotestsrc: SyntheticCamera's memfd buffers filled on a
timer, through the same frame queue, consumers and summary (the CUDA chain
where there is no V4L2, as on a GPU server). No display can scan its
buffers out.
"""
from dataclasses import dataclass

from sits.drm.card import Card, card_paths
from sits.drm.output import KmsOutput
from sits.errors import DeviceError, UsageError
from sits.formats import BY_V4L2, drm_for_v4l2
from sits.v4l2.capture import CaptureDevice


SYNTHETIC = "synthetic"   # the device name of the synthetic source


@dataclass
class CaptureOptions:
    device: str | None = None
    card: str | None = None
    connector: str | None = None
    format: str | None = None
    size: tuple[int, int] | None = None
    fps: int | None = None
    frames: int | None = None
    duration: float | None = None
    memory: str = "mmap"
    buffers: int = 4
    display: bool = True          # --to-kms
    verify: bool = False
    verify_every: int = 10
    snapshot: str | None = None
    timeline: str | None = None   # every frame's record to this file (sits/pipeline/timeline.py)
    reconnect: bool = False
    stall_timeout: float = 20.0   # no frame for this long while streaming: give up


def open_card(path: str | None) -> Card:
    """The card asked for, or the first with atomic modesetting and a
    connected display."""
    paths = [path] if path else card_paths()
    if not paths:
        raise DeviceError("no DRM card found (/dev/dri/card*)")
    last = None
    for p in paths:
        card = Card.open(p)
        try:
            if card.atomic and any(c.connected and not c.is_writeback for c in card.connectors()):
                return card
            last = DeviceError(f"{p}: no connected connector" if card.atomic else f"{p}: no atomic modesetting")
        except BaseException:
            card.close()
            raise
        card.close()
    raise last


def choose_format(opts: CaptureOptions, cap: CaptureDevice, card: Card | None) -> str:
    """The camera format: the one asked for, else the first the camera
    offers that a plane can show, else one we can convert."""
    if opts.format:
        return opts.format
    offered = [f.fourcc for f in cap.formats()]
    if card is None:
        return offered[0]
    showable = KmsOutput.supported_formats(card, opts.connector)
    # our table's order is the preference: 32-bit RGB first
    for code in BY_V4L2:
        if code in offered and drm_for_v4l2(code) in showable:
            return code
    from sits.pipeline import convert
    for code in offered:
        if code in convert.CONVERTERS:
            return code
    raise UsageError(f"camera offers {' '.join(offered)}; none can be shown or converted")


def check(opts: CaptureOptions) -> None:
    """Refuse what the options cannot do together, before any device or GPU
    is opened (build() asks too)."""
    if opts.device != SYNTHETIC:
        return
    if opts.display:
        raise UsageError(f"--device {SYNTHETIC} makes memfd buffers, which no display scans out; "
                         "use it with --to-cuda (or a V4L2 device with --to-kms)")
    if opts.reconnect:
        raise UsageError(f"--reconnect: the {SYNTHETIC} source never goes away")
    if opts.memory == "heap":
        raise UsageError(f"--device {SYNTHETIC} makes memfd buffers (udmabuf's kind); --memory heap is for V4L2")


def build(opts: CaptureOptions, *, consumers=(), on_status=None, status_interval: float = 0.5):
    """The Pipeline for `opts` (camera -> display and/or `consumers`)."""
    from sits.pipeline.display import KmsDisplay
    from sits.pipeline.pipeline import Pipeline
    from sits.pipeline.reconnect import Reconnect
    from sits.pipeline.stats import Summary
    from sits.pipeline.writeback import WritebackCheck
    if not opts.display and not consumers:
        raise UsageError("nothing consumes the frames: give a display (--to-kms) or a consumer (--to-cuda)")
    if opts.device == SYNTHETIC:
        return _build_synthetic(opts, consumers, on_status, status_interval)
    owned = []
    try:
        cap = CaptureDevice.open(opts.device) if opts.device else CaptureDevice.first()
        owned.append(cap)
        card = open_card(opts.card) if opts.display else None
        if card is not None:
            owned.append(card)
        code = choose_format(opts, cap, card)
        fmt = cap.configure(code, opts.size, opts.fps)
        summary = Summary(memory=opts.memory, format=code, size=f"{fmt.width}x{fmt.height}", device=cap.path)
        display = None
        if card is not None:
            drm_code = drm_for_v4l2(code)
            showable = KmsOutput.supported_formats(card, opts.connector)
            zero_copy = drm_code in showable
            if not zero_copy:
                from sits.pipeline import convert  # numpy: only the conversion path needs it
                if code not in convert.CONVERTERS:
                    raise UsageError(f"no plane shows {code} and sits cannot convert it; "
                                     f"planes show {' '.join(showable)}")
            display_code = drm_code if zero_copy else "XR24"
            checked = opts.verify or bool(opts.snapshot)
            out = KmsOutput(card, display_code, fmt.size, opts.connector, writeback=checked)
            wb = None
            if checked:
                wb = WritebackCheck(card, out, verify=opts.verify, verify_every=opts.verify_every,
                                    snapshot=opts.snapshot, frames=opts.frames)
            display = KmsDisplay(card, out, fmt, zero_copy, writeback=wb)
            owned.append(display)
            summary.zero_copy, summary.cpu_copies_per_frame = zero_copy, 0 if zero_copy else 1
            summary.display_format, summary.mode = display_code, str(out.mode)
            summary.card, summary.connector = card.path, out.connector.name
        cap.allocate(opts.buffers, opts.memory)
        if display is not None:
            display.test(cap)
        reconnect = Reconnect(opts.fps, opts.buffers, opts.memory) if opts.reconnect else None
        p = Pipeline(cap, display=display, consumers=consumers, reconnect=reconnect,
                     closers=[o for o in owned if o is not display],
                     **_run_options(opts, on_status, status_interval, summary))
    except BaseException:
        for obj in reversed(owned):
            try:
                obj.close()
            except Exception:  # noqa: BLE001 - the first error is the one to report
                pass
        raise
    return p


def _run_options(opts: CaptureOptions, on_status, status_interval: float, summary) -> dict:
    """The Pipeline's keywords that come from the options alike for every
    source: how long it runs, what it reports and records."""
    return dict(on_status=on_status, status_interval=status_interval, stall_timeout=opts.stall_timeout,
                frames=opts.frames, duration=opts.duration, summary=summary,
                timeline=opts.timeline)


def _build_synthetic(opts: CaptureOptions, consumers, on_status, status_interval: float):
    """The Pipeline from the synthetic source (SyntheticCamera's defaults for
    what the options leave open) to `consumers`."""
    from sits.pipeline.pipeline import Pipeline
    from sits.pipeline.stats import Summary
    from sits.pipeline.synthetic import SyntheticCamera
    check(opts)
    given = dict(code=opts.format, size=opts.size, fps=opts.fps)
    cam = SyntheticCamera(buffers=opts.buffers, **{k: v for k, v in given.items() if v is not None})
    try:
        fmt = cam.format
        summary = Summary(memory=cam.memory, format=fmt.fourcc, size=f"{fmt.width}x{fmt.height}", device=cam.path)
        return Pipeline(cam, consumers=consumers, closers=[cam],
                        **_run_options(opts, on_status, status_interval, summary))
    except BaseException:
        cam.close()
        raise
