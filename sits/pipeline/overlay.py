"""The display's overlay layer, its Python half: what a user's callback
draws for a frame, shown on a second plane above the video in the same
atomic commit as that frame.

The callback runs on the drawing stage's worker thread (a Stage with a
Python work, python_work.py), never on the loop's: it is given each frame
(sits.overlay.FrameView over the capture buffer, which the stage holds
while it draws) and returns a sits.overlay.Drawing, which is rendered with
cairo into one of the layer's ARGB8888 buffers (premultiplied, as KMS
blends a plane); with `--overlay-render gpu` CUDA draws the boxes and
masks into memfd buffers the display scans out through udmabuf and the
GPU maps (overlay_buffers.py), and cairo the text on top. The made
drawing carries its frame's identity; the
display's C half (sinks/kms.c) pairs drawings with frames by the policy:
`sync`, each frame waits for its own drawing up to the budget; `latest`,
the newest drawing goes with the newest frame. The video stays zero-copy.

Frames that may wait for their drawing (sync) each hold a capture buffer:
all but three of --buffers (one on screen, one committed, one with the
camera), at least one.
"""
from __future__ import annotations

import errno
import importlib
import os
import sys
import time

from sits._kernel import ffi, lib
from sits.errors import UsageError
from sits.options import FLAG, FLOAT, STR, Option
from sits.pipeline import overlay_buffers, python_work
from sits.pipeline.overlay_buffers import FORMAT
from sits.pipeline.stage import Stage
from sits.pipeline.stats import percentiles

POLICIES = {"sync": lib.SITS_OVERLAY_SYNC, "latest": lib.SITS_OVERLAY_LATEST}
RENDERERS = ("cpu", "gpu")
KEPT_TIMES = 4096      # the callback's and the drawing's times kept for the summary's percentiles


def load(spec: str, flag: str = "--overlay"):
    """The callable MODULE:FUNCTION names (the current directory importable,
    as for `python -m`)."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise UsageError(f"{flag} takes MODULE:FUNCTION, not {spec!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        fn = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise UsageError(f"{flag} {spec}: cannot import {module}: {exc}") from None
    except AttributeError:
        raise UsageError(f"{flag} {spec}: {module} has no {name}") from None
    if not callable(fn):
        raise UsageError(f"{flag} {spec}: {name} is not callable")
    return fn


#: the overlay layer's options, declared once: `sits capture`'s flags and
#: open_chain's keywords (sits/pipeline/capture.py's OPTIONS)
OPTIONS = (
    Option(("--overlay",), "overlay", STR, None,
           "MODULE:FUNCTION called with each frame (a sits.overlay.FrameView) on a thread of its own; the "
           "sits.overlay.Drawing it returns is shown on a second plane above the video, in the same commit "
           "as that frame (with --to-kms).", convert=load),
    Option(("--overlay-demo",), "overlay_demo", FLAG, False,
           "Show a built-in stand-in detector's boxes (motion, bright areas) and the frame's sequence."),
    Option(("--overlay-policy",), "overlay_policy", STR, "sync",
           "sync: each frame waits for its own drawing, up to --overlay-budget-ms; latest: the newest "
           "drawing with the newest frame.", choices=tuple(POLICIES)),
    Option(("--overlay-budget-ms",), "overlay_budget_ms", FLOAT, 50.0,
           "sync: how long a frame waits for its drawing before it is shown with the last one.", min=0),
    Option(("--overlay-render",), "overlay_render", STR, "cpu",
           "cpu: cairo draws into the display's buffers; gpu: CUDA draws boxes and masks into memfd buffers "
           "the display scans out (udmabuf) and the GPU maps, cairo the text on top.", choices=RENDERERS),
)


def wanted(opts) -> bool:
    """The options ask for an overlay layer."""
    return opts.overlay is not None or bool(opts.overlay_demo)


def check(opts) -> None:
    """Before any device opens."""
    if not wanted(opts):
        return
    if not opts.display:
        raise UsageError("--overlay draws on the display: add --to-kms")
    if opts.overlay is not None and opts.overlay_demo:
        raise UsageError("--overlay and --overlay-demo: give one")
    try:
        import cairocffi  # noqa: F401 - the renderer's library, checked before streaming
    except (ImportError, OSError) as exc:
        raise UsageError(f"the overlay draws with cairo: pip install 'sits[overlay]' (and libcairo2) ({exc})") from None


def from_options(opts) -> "Overlay | None":
    if not wanted(opts):
        return None
    if opts.overlay_demo:
        from sits.overlay.demo import Demo
        draw, name = Demo(), "--overlay-demo"
    else:
        draw = opts.overlay
        name = f"{getattr(draw, '__module__', '?')}:{getattr(draw, '__qualname__', repr(draw))}"
    return Overlay(draw, name, opts.overlay_policy, opts.overlay_budget_ms, opts.buffers, opts.overlay_render)


class DrawWork:
    """The stage's work: the callback's drawing of one frame, rendered into
    one of the layer's buffers. A callback that raises ends the run (the
    loop reads `failed_fd`)."""

    def __init__(self, draw, name: str, queue, fmt, width: int, height: int, pitch: int, gpu=None):
        """`gpu`: a sits.cuda.overlay.GpuDrawing that draws boxes and masks
        (at `device_pointers`, the GPU's addresses of the buffers by the
        queue's numbering), or None: cairo draws everything."""
        self.draw, self.name, self.queue, self.format = draw, name, queue, fmt
        self.gpu, self.device_pointers = gpu, {}
        self.width, self.height, self.pitch = width, height, pitch
        self.inputs: dict[int, object] = {}
        self.failed_fd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self.failure: str | None = None
        self.callback_ms: list[float] = []
        self.draw_ms: list[float] = []

    def why(self) -> str:
        return self.failure or "none"

    def make(self, S, index, bytesused, out) -> int:
        from sits.overlay import Drawing, FrameView, render
        f = self.queue.c_queue.frames[index]
        fmt = self.format
        doing = f"the overlay's view of frame {f.sequence}"
        try:
            view = FrameView(f.sequence, f.timestamp_ns, fmt.fourcc, fmt.width, fmt.height, fmt.bytesperline,
                             self.inputs[index])
            doing = f"the overlay callback {self.name}"
            t0 = time.perf_counter_ns()
            drawing = self.draw(view)
            t1 = time.perf_counter_ns()
            doing = f"the overlay's drawing of frame {f.sequence}"
            drawing = drawing if drawing is not None else Drawing()
            clear = True
            if self.gpu is not None:
                drawing = self.gpu.draw(drawing, self.device_pointers[out])
                self.gpu.wait()
                clear = False
            if clear or len(drawing):
                render(drawing, ffi.buffer(S.out_ptr[out], S.out_bytes), self.width, self.height, self.pitch,
                       clear=clear)
        except BaseException as exc:  # noqa: BLE001 - the run ends with its one line
            self.failure = f"{doing} raised {type(exc).__name__}: {exc}"
            os.eventfd_write(self.failed_fd, 1)
            return errno.ECANCELED
        t2 = time.perf_counter_ns()
        if len(self.callback_ms) < KEPT_TIMES:
            self.callback_ms.append((t1 - t0) / 1e6)
            self.draw_ms.append((t2 - t1) / 1e6)
        return 0

    def close(self) -> None:
        if self.failed_fd >= 0:
            os.close(self.failed_fd)
            self.failed_fd = -1


class Overlay:
    """An overlay layer of a KmsDisplay: its buffers, its drawing stage and
    its port in the display's C half."""

    name = "overlay"

    def __init__(self, draw, name: str, policy: str = "sync", budget_ms: float = 50.0, buffers: int = 4,
                 render: str = "cpu"):
        if policy not in POLICIES:
            raise UsageError(f"--overlay-policy must be {' or '.join(POLICIES)}, not {policy!r}")
        if render not in RENDERERS:
            raise UsageError(f"--overlay-render must be {' or '.join(RENDERERS)}, not {render!r}")
        self.draw, self.callback, self.policy, self.budget_ms = draw, name, policy, budget_ms
        self.render = render
        self.gpu = None
        #: frames that may wait for their drawing (sync): each holds a capture buffer
        self.waiting = max(1, min(lib.SITS_Q_PORT_DEPTH, buffers - 3)) if policy == "sync" else 1
        self.buffers: list = []
        self.blank = None
        self.stage = self.work = None
        self.sink = None
        self.K = None
        self._failed = None

    def display_port(self) -> tuple[str, int]:
        """The display's port. sync: the frames waiting for their drawings,
        in order, a frame that comes to a full port dropped (a waiting one
        goes only once its budget has passed)."""
        return ("drop-newest", self.waiting) if self.policy == "sync" else ("latest", 1)

    def prepare(self, card, out, width: int, height: int) -> None:
        """Its buffers (at the frame's size, placed as the video is) and its
        plane (out.use_overlay: refused before anything streams)."""
        from sits.drm.framebuffer import DumbBuffer
        from sits.overlay import Drawing, render
        # cairo's first text loads the fonts (seconds in the test VM): here,
        # before streaming, not on the first frame
        render(Drawing().text(0, 0, "sits"), bytearray(64 * 4 * 32), 64, 32, 64 * 4)
        # drawing + waiting + committed + on the plane; new buffers are
        # zero-filled, which is transparent
        try:
            self.blank = DumbBuffer(card, width, height, FORMAT)
            out.use_overlay(FORMAT, self.blank.fb)
            self.buffers = overlay_buffers.make(card, "gpu" if self.render == "gpu" else "dumb",
                                                self.waiting + 3, width, height)
            if self.render == "gpu":   # the kernel compiled, and the GPU there, before streaming
                from sits.cuda.overlay import GpuDrawing
                self.gpu = GpuDrawing(width, height, self.buffers[0].pitch)
                self.gpu.draw(Drawing(), self.buffers[0].device_pointer)
                self.gpu.wait()
        except BaseException:
            self.close()
            raise

    def attach(self, queue, cap, display, pipeline) -> None:
        """Draw the frames `display` (its C half's struct K) shows from now
        on: `cap`'s, or those its conversion stage makes of them (an MJPEG
        or raw camera's frames, which the callback sees as the display's
        XRGB8888)."""
        K = self.K = display.K
        takes, fmt, inputs, dmabufs = self._frames(queue, cap, display)
        if self.stage is not None:     # a camera come back
            self.work.inputs = inputs
            self.stage.set_inputs(inputs, dmabufs)
            return
        d = self.buffers[0]
        self.work = DrawWork(self.draw, self.callback, queue, fmt, d.width, d.height, d.pitch, self.gpu)
        self.work.inputs = inputs
        # sync: the same frames wait here as in the display's port (the newest dropped)
        policy = "drop-newest" if self.policy == "sync" else "latest"
        self.stage = Stage(queue, "overlay", python_work.WORK, python_work.handle(self.work), takes=takes,
                           inputs=inputs, dmabufs=dmabufs, outputs=[b.map() for b in self.buffers],
                           out_bytes=d.pitch * d.height, policy=policy, depth=self.waiting)
        self.stage.work_object = self.work
        pipeline.watch_stage(self.stage)
        pipeline.watch(self.work.failed_fd, self._raise)
        self.sink = queue.add_sink(lib.sits_kms_overlay_sink(), K, "drop-oldest", len(self.buffers), half=self,
                                   takes=self.stage.source)
        K.overlay_sink = self.sink
        K.overlay_plane_id = display.out.overlay_plane_id
        K.overlay_fb_prop = display.card.prop_id(display.out.overlay_plane_id, "FB_ID")
        K.overlay_policy = POLICIES[self.policy]
        K.overlay_budget_ns = int(self.budget_ms * 1e6)
        K.overlay_shown = lib.SITS_Q_NONE
        K.overlay_seq = -1
        for index, buf in zip(queue.buffers_of(self.stage.source), self.buffers):
            K.fb_id[index] = buf.fb.id
            if self.gpu is not None:
                self.work.device_pointers[index] = buf.device_pointer
        K.overlay_on = 1

    @staticmethod
    def _frames(queue, cap, display) -> tuple:
        """The source whose frames the display shows, their format and
        buffers' bytes (and dma-bufs) by the queue's numbering."""
        if display.stage is None:
            return (queue.camera, cap.format) + display.inputs(cap)
        import types
        d = display.dumbs[0]
        fmt = types.SimpleNamespace(fourcc="XR24", width=d.width, height=d.height, bytesperline=d.pitch)
        maps = dict(zip(queue.buffers_of(display.stage.source), (b.map() for b in display.dumbs)))
        return display.stage.source, fmt, maps, {}

    def _raise(self) -> None:
        from sits.pipeline.pipeline import ConsumerError
        raise ConsumerError(self.work.failure)

    def framebuffer(self, index: int):
        """The framebuffer of the layer's buffer `index` (the queue's numbering)."""
        return self._buffer(index).fb

    def pixels(self, index: int):
        """The drawing in buffer `index` (the queue's numbering; NONE: the
        blank one), as a DumbBuffer to read."""
        return self.blank if index == lib.SITS_Q_NONE else self._buffer(index)

    def _buffer(self, index: int):
        return self.buffers[self.stage.queue.buffers_of(self.stage.source).index(index)]

    def report(self) -> dict:
        """The summary's `overlay` section."""
        K, w = self.K, self.work
        if K is None or w is None:
            return {"policy": self.policy}
        shown, made = K.with_own + K.with_older, self.stage.counts()
        return {"callback": self.callback, "policy": self.policy, "render": self.render,
                "budget_ms": self.budget_ms if self.policy == "sync" else None,
                "frames_may_wait": self.waiting, "plane": K.overlay_plane_id,
                "drawings": made["frames"], "drawing_errors": made["errors"],
                "shown_with_own": K.with_own, "shown_with_older": K.with_older, "shown_with_none": K.with_none,
                "dropped_waiting": K.dropped_waiting,
                "age_frames_mean": round(K.age_sum / shown, 3) if shown else None, "age_frames_max": K.age_max,
                "callback_ms": percentiles(w.callback_ms), "draw_ms": percentiles(w.draw_ms)}

    def close(self) -> None:
        if self.stage is not None:
            self.stage.close()
            self.stage.queue.release_all(self.sink)
        if self.work is not None:
            self.work.close()
        for buf in self.buffers + ([self.blank] if self.blank else []):
            buf.close()
        self.buffers, self.blank = [], None
