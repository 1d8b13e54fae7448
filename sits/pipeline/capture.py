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
import dataclasses
import os

from sits.bayer import OPTIONS as RAW_OPTIONS, given as raw_given, not_raw
from sits.drm.card import Card, card_paths
from sits.drm.output import KmsOutput
from sits.errors import DeviceError, UsageError
from sits.formats import BY_V4L2, bayer, drm_for_v4l2
from sits.options import FLAG, FLOAT, INT, STR, STRS, Option, fourcc, size
from sits.pipeline import overlay as overlay_layer
from sits.v4l2.capture import MEMORY_KINDS, CaptureDevice


SYNTHETIC = "synthetic"   # the device name of the synthetic source

#: what a capture pipeline is built from, declared once: `sits capture`'s
#: options (sits/cli/capture.py), CaptureOptions' fields and open_chain's
#: keywords are made from this table
OPTIONS = (
    Option(("--device",), "device", STR, None,
           "V4L2 capture device (default: the first one), or 'synthetic': frames on a timer in memfd "
           "buffers, no camera (--format, --size, --fps; default YUYV 1920x1080 at 60)."),
    Option(("--to-kms",), "display", FLAG, False, "Show the frames on a KMS display (zero-copy when a plane can)."),
    Option(("--card",), "card", STR, None, "DRM card (default: the first with a connected display)."),
    Option(("--connector",), "connector", STR, None, "Connector name, e.g. HDMI-A-1 or Virtual-1."),
    Option(("--format",), "format", STR, None, "Camera fourcc, e.g. XR24, AR24, RGBP, YUYV.", convert=fourcc),
    Option(("--size",), "size", STR, None, "WxH, e.g. 1280x720.", convert=size),
    Option(("--fps",), "fps", INT, None, "Frame rate to ask the camera for.", min=1),
    Option(("--frames",), "frames", INT, None, "Stop after N captured frames.", min=1),
    Option(("--duration",), "duration", FLOAT, None, "Stop after SECONDS.", min=0.1),
    Option(("--memory",), "memory", STR, None,
           "mmap (driver buffers, exported) | heap | udmabuf (default: mmap; the synthetic source's are memfds).",
           choices=MEMORY_KINDS),
    Option(("--buffers",), "buffers", INT, 4, "Capture buffers.", min=2, max=32),
    Option(("--verify",), "verify", FLAG, False, "Compare shown pixels (writeback) with captured ones."),
    Option(("--verify-every",), "verify_every", INT, 10, "Verify every N-th displayed frame.", min=1),
    Option(("--snapshot",), "snapshot", STR, None, "Write what was on screen (writeback) as a PNG."),
    Option(("--timeline",), "timeline", STR, None,
           "Write one record per frame (its stages' times) to FILE: CSV for FILE.csv, else NDJSON."),
    Option(("--reconnect",), "reconnect", FLAG, False, "Wait for a vanished camera and resume."),
    Option(("--control",), "controls", STRS, None,
           "NAME=VALUE: set a camera control before streaming, checked against its range (repeatable; "
           "names as `v4l2-ctl -l` prints them; a menu takes an item's number or name; set again "
           "after a --reconnect). `sits cameras` lists them."),
    *RAW_OPTIONS,
    *overlay_layer.OPTIONS,
)
BY_DEST = {o.dest: o for o in OPTIONS}

#: the options of a capture pipeline, one field each of OPTIONS (then what
#: no command line sets: stall_timeout, seconds without a frame while
#: streaming before the run gives up)
CaptureOptions = dataclasses.make_dataclass(
    "CaptureOptions", [(o.dest, object, dataclasses.field(default=o.default)) for o in OPTIONS]
    + [("stall_timeout", float, dataclasses.field(default=20.0))])
CaptureOptions.__module__ = __name__


def options(where: str | None = None, **given) -> CaptureOptions:
    """CaptureOptions from keywords (OPTIONS' `dest`s), each converted and
    checked, then checked together (check()). `where`: a library caller
    (e.g. "open_chain"), whose errors name keywords instead of flags."""
    unknown = sorted(set(given) - set(BY_DEST) - {"stall_timeout"})
    if unknown:
        raise UsageError(f"{where or 'capture'}: unknown option {', '.join(map(repr, unknown))}; "
                         f"options: {', '.join(BY_DEST)}")
    opts = CaptureOptions(**{k: BY_DEST[k].value(v, f"{where}: {k}" if where else None) if k in BY_DEST else v
                             for k, v in given.items()})
    check(opts)
    return opts


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
    """The camera format: the one asked for; else, among those the camera
    lists at the size and rate asked for (a USB webcam sends HD at full rate
    only as MJPEG), the first that a plane can show, else one we can
    convert or decode."""
    if opts.format:
        return opts.format
    offered = [f.fourcc for f in cap.formats()]
    if opts.size is not None:
        meets = [code for code in offered if cap.offers(code, opts.size, opts.fps)]
        if not meets:
            rate = f" at {opts.fps} fps" if opts.fps else ""
            raise UsageError(f"{cap.path}: no format at {opts.size[0]}x{opts.size[1]}{rate}; `sits cameras "
                             f"--device {cap.path}` lists its sizes and rates")
        offered = meets
    if card is None:
        return offered[0]
    showable = KmsOutput.supported_formats(card, opts.connector)
    # our table's order is the preference: 32-bit RGB first
    for code in BY_V4L2:
        if code in offered and drm_for_v4l2(code) in showable:
            return code
    from sits.pipeline.display_stages import MAKERS
    for code in offered:
        if code in MAKERS:
            return code
    raise UsageError(f"camera offers {' '.join(offered)}; none can be shown or converted")


def check(opts: CaptureOptions) -> None:
    """Refuse what the options cannot do together, and a source options it
    cannot honour, before any device or GPU is opened (build() asks too)."""
    if opts.snapshot:
        if not opts.snapshot.lower().endswith(".png"):
            raise UsageError("--snapshot writes a PNG: give a FILE.png")
        _check_output_path("--snapshot", opts.snapshot)
    if opts.timeline:
        _check_output_path("--timeline", opts.timeline)
    if (opts.verify or opts.snapshot) and not opts.display:
        raise UsageError("--verify and --snapshot check the display: add --to-kms")
    overlay_layer.check(opts)
    if opts.format:   # raw options for the format asked for (else: for the one chosen, in build)
        _raw(opts, opts.format)
    if opts.device != SYNTHETIC:
        return
    if opts.display and opts.memory != "udmabuf":
        raise UsageError(f"--device {SYNTHETIC} --to-kms: add --memory udmabuf (a dma-buf over each memfd "
                         "buffer, which the display imports)")
    if opts.reconnect:
        raise UsageError(f"--reconnect: the {SYNTHETIC} source never goes away")
    if opts.memory not in (None, "udmabuf"):
        raise UsageError(f"--device {SYNTHETIC} makes memfd buffers (udmabuf's kind); "
                         f"--memory {opts.memory} is for V4L2")


def _check_output_path(option: str, path: str) -> None:
    """Before anything streams: a run must not end with nowhere to write."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{option} {path}: no such directory {folder}")
    if os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a directory")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise UsageError(f"{option} {path}: not writable")


def build(opts: CaptureOptions, *, consumers=(), sources=(), on_status=None, status_interval: float = 0.5):
    """The Pipeline for `opts` (camera -> display and/or `consumers`);
    `sources`: more sources beside the camera (configured and allocated,
    the caller's to close), whose frames go to the consumers whose Port
    takes them."""
    from sits.pipeline.pipeline import Pipeline
    from sits.pipeline.reconnect import Reconnect
    from sits.pipeline.stats import Summary
    if not opts.display and not consumers:
        raise UsageError("nothing consumes the frames: give a display (--to-kms) or a consumer (--to-cuda)")
    from sits.v4l2.controls import requests
    controls = requests(opts.controls)
    if controls and opts.device == SYNTHETIC:
        raise UsageError(f"--control: the {SYNTHETIC} source has no controls")
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
        cap.set_controls(controls)
        raw = _raw(opts, code)
        memory = opts.memory or "mmap"
        summary = Summary(memory=memory, format=code, size=f"{fmt.width}x{fmt.height}", device=cap.path)
        display = _display(opts, card, fmt, summary, owned, raw) if card is not None else None
        cap.allocate(opts.buffers, memory)
        if display is not None:
            display.test(cap)
        reconnect = Reconnect(opts.fps, opts.buffers, memory, controls) if opts.reconnect else None
        p = Pipeline([cap, *sources], display=display, consumers=consumers, reconnect=reconnect,
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


def _raw(opts: CaptureOptions, code: str):
    """The raw Bayer options (sits.bayer.RawOptions) for camera format
    `code`, checked; None where none is given."""
    raw = raw_given(opts.black_level, opts.white_balance, opts.gamma)
    if raw is not None:
        if not bayer(code):
            raise not_raw(code)
        raw.check(BY_V4L2[code].bits)
    return raw


def _display(opts: CaptureOptions, card, fmt, summary, owned: list, raw=None):
    """The display of `fmt`'s frames on `card` (zero-copy where a plane
    shows the format, else through a stage that makes them into its own
    buffers; `raw`: a raw Bayer camera's options for it), in `owned`."""
    from sits.pipeline.display import KmsDisplay
    from sits.pipeline.display_stages import MAKERS, cpu_passes
    from sits.pipeline.writeback import WritebackCheck
    code = fmt.fourcc
    drm_code = drm_for_v4l2(code)
    showable = KmsOutput.supported_formats(card, opts.connector)
    zero_copy = drm_code in showable
    if not zero_copy and code not in MAKERS:
        raise UsageError(f"no plane shows {code} and sits cannot convert it; planes show {' '.join(showable)}")
    display_code = drm_code if zero_copy else "XR24"
    checked = opts.verify or bool(opts.snapshot)
    out = KmsOutput(card, display_code, fmt.size, opts.connector, writeback=checked)
    wb = None
    if checked:
        wb = WritebackCheck(card, out, verify=opts.verify, verify_every=opts.verify_every,
                            snapshot=opts.snapshot, frames=opts.frames)
    try:
        display = KmsDisplay(card, out, fmt, zero_copy, writeback=wb, stage_options={"raw": raw} if raw else None,
                             overlay=overlay_layer.from_options(opts))
    except BaseException:
        if wb is not None:
            wb.close()
        raise
    owned.append(display)
    summary.zero_copy, summary.cpu_copies_per_frame = zero_copy, 0 if zero_copy else cpu_passes(code)
    summary.display_format, summary.mode = display_code, str(out.mode)
    summary.card, summary.connector = card.path, out.connector.name
    return display


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
    cam = SyntheticCamera(buffers=opts.buffers, memory="udmabuf" if opts.display else "memfd",
                          **{k: v for k, v in given.items() if v is not None})
    owned = [cam]
    try:
        fmt = cam.format
        raw = _raw(opts, fmt.fourcc)
        summary = Summary(memory=cam.memory, format=fmt.fourcc, size=f"{fmt.width}x{fmt.height}", device=cam.path)
        display = None
        if opts.display:
            card = open_card(opts.card)
            owned.append(card)
            display = _display(opts, card, fmt, summary, owned, raw)
            display.test(cam)
        return Pipeline(cam, display=display, consumers=consumers, closers=[o for o in owned if o is not display],
                        **_run_options(opts, on_status, status_interval, summary))
    except BaseException:
        for obj in reversed(owned):
            try:
                obj.close()
            except Exception:  # noqa: BLE001 - the first error is the one to report
                pass
        raise
