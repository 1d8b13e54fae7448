"""The live view of `sits probe frames`, as text the CLI draws (with the
terminal handling of `sits probe top`): fps in and out, each stage's
p50/p99, drops by cause, and a waterfall of the last frames.

The waterfall has one line per frame, its time starting at its capture,
all lines on one scale: the slowest frame shown fills the width. A frame
that reached both the display and CUDA stages gets a second line for
CUDA, which runs beside the display.
"""
from __future__ import annotations

from sits.journey.stats import SPAN_FROM, Journey, span_name, spans

#: one glyph per stage span, drawn from its start to the stage
GLYPHS = {"dequeued": "d", "committed": "c", "scanout": "s", "replaced": "#", "requeued": "r", "made": "m",
          "cuda_submitted": "u", "cuda_done": "g"}
_CUDA = ("cuda_submitted", "cuda_done")
_LABEL = 8   # the sequence number
_TAIL = 24   # "123.4 ms late x2 +3 skipped"
_WATERFALL_HEAD = 2  # its scale and legend lines


def _ms(v) -> str:
    return "-" if v is None else f"{v:.1f}"


def render(journey: Journey, width: int = 80, frames: int = 16, height: int | None = None) -> str:
    """The view for a terminal `width` columns wide, with the waterfall's
    last `frames` frames (at most the journey's recent ones), and no more
    than `height` lines when given."""
    f = journey.summary()["frames"]
    g = f["glass_to_glass_ms"]
    lines = [f"sits probe frames  {f['count']} frames  fps in {_ms(f['fps_in'])} out {_ms(f['fps_out'])}  "
             f"vblank {_ms(f['vblank_ms'])} ms",
             f"{'stage':<30} {'p50 ms':>8} {'p99 ms':>8}"]
    for s in SPAN_FROM:
        st = f["stages"].get(s)
        if st:
            lines.append(f"{span_name(s):<30} {_ms(st['p50_ms']):>8} {_ms(st['p99_ms']):>8}")
    lines.append(f"{'glass to glass':<30} {_ms(g['p50']):>8} {_ms(g['p99']):>8}")
    lines.append("drops  " + "  ".join(f"{k} {v}" for k, v in f["drops"].items()))
    recent = list(journey.recent)[-frames:] if frames > 0 else []
    if height is not None:
        recent = _fitting(recent, height - len(lines) - _WATERFALL_HEAD)
    lines += waterfall(recent, width)
    return "\n".join(line[:width] for line in lines)


def waterfall(records: list[dict], width: int) -> list[str]:
    """The waterfall lines (a legend first) of `records`, oldest first."""
    bar_w = max(10, width - _LABEL - len(" || ") - _TAIL)
    drawn = [(rec, spans(rec)) for rec in records]
    t0s = [_start(rec, sp) for rec, sp in drawn]
    longest = max((end - t0 for (_, sp), t0 in zip(drawn, t0s) for _, _, end in sp), default=0)
    out = [f"last {len(records)} frames from capture, full width {longest / 1e6:.1f} ms",
           "  ".join(f"{GLYPHS[s]} {s}" for s in SPAN_FROM)]
    scale = bar_w / longest if longest else 0.0
    for (rec, sp), t0 in zip(drawn, t0s):
        display, cuda = _split(sp)
        seq = "" if rec["sequence"] is None else rec["sequence"]
        out.append(f"{seq:>{_LABEL}} |{_bar(display or cuda, t0, scale, bar_w)}| {_tail(rec)}")
        if display and cuda:
            out.append(f"{'cuda':>{_LABEL}} |{_bar(cuda, t0, scale, bar_w)}|")
    return out


def _split(sp) -> tuple[list, list]:
    """A frame's display spans and its CUDA spans."""
    return [x for x in sp if x[0] not in _CUDA], [x for x in sp if x[0] in _CUDA]


def _fitting(records: list[dict], rows: int) -> list[dict]:
    """The last of `records` whose waterfall lines fit in `rows`: a frame
    with both display and CUDA stages takes two."""
    out = []
    for rec in reversed(records):
        display, cuda = _split(spans(rec))
        rows -= 2 if display and cuda else 1
        if rows < 0:
            break
        out.append(rec)
    return out[::-1]


def _start(rec: dict, sp) -> int:
    if rec["captured_ns"] is not None:
        return rec["captured_ns"]
    return min((a for _, a, _ in sp), default=0)


def _bar(sp, t0: int, scale: float, bar_w: int) -> str:
    """Each span's glyph over its columns. A span that starts where the
    one before it ended starts after that one's columns, so that a short
    step keeps one column rather than being drawn over."""
    cells = [" "] * bar_w
    prev_end, prev_c1 = None, 0
    for stage, start, end in sp:
        c0 = int((start - t0) * scale)
        if start == prev_end:
            c0 = max(c0, prev_c1)
        c0 = min(c0, bar_w - 1)
        c1 = min(max(int((end - t0) * scale), c0 + 1), bar_w)
        cells[c0:c1] = GLYPHS[stage] * (c1 - c0)
        prev_end, prev_c1 = end, c1
    return "".join(cells)


def _tail(rec: dict) -> str:
    """Glass to glass, or why the frame was not shown, and its drop marks."""
    words = []
    if rec["captured_ns"] is not None and rec["scanout_ns"] is not None:
        words.append(f"{(rec['scanout_ns'] - rec['captured_ns']) / 1e6:.1f} ms")
    elif rec["dequeued_ns"] is not None and rec["committed_ns"] is None:
        words.append("not shown")
    if rec["late_ns"] is not None:
        words.append("late")
    if rec["vblanks"] is not None and rec["vblanks"] > 1:
        words.append(f"x{rec['vblanks']}")
    if rec["skipped_before"]:
        words.append(f"+{rec['skipped_before']} skipped")
    return " ".join(words)
