"""The frames' report: the JSON dict and the markdown section "Where frames
lose time" for `sits probe audit`, with its hot spots in words.

The markdown is written from the JSON dict alone, so the two cannot
disagree, and the audit report can carry the dict under "frames".
"""
from __future__ import annotations

from sits.journey.stats import DISPLAY_CHAIN, SPAN_FROM, Journey, span_name

SCHEMA = "sits.probe.frames/1"


def frames_report(journey: Journey) -> dict:
    """{"schema", "frames": summary with "hot_spots": [sentences]}."""
    frames = journey.summary()["frames"]
    frames["hot_spots"] = hot_spots(frames)
    return {"schema": SCHEMA, "frames": frames}


def _pct(n: float, of: float) -> str:
    return f"{100 * n / of:.0f}%"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def hot_spots(f: dict) -> list[str]:
    """Where frames lose time, worst first, from a "frames" summary."""
    out = []
    stages, drops, reached = f["stages"], f["drops"], f["reached"]
    vblank = f["vblank_ms"]
    g = f["glass_to_glass_ms"]
    if g["p99"] is not None:
        text = f"p99 captured → scanout {g['p99']:.1f} ms (p50 {g['p50']:.1f} ms"
        text += f", with {f['display_latency_ms']:g} ms display latency)" if f["display_latency_ms"] else ")"
        wait = stages.get("scanout")
        if vblank and wait and reached["committed"]:  # else the span starts at dequeued
            text += f": frames wait {wait['p99_ms'] / vblank:.1f} vblanks ({vblank:.1f} ms) from commit to scanout"
        if reached["committed"]:
            text += f"; {_pct(drops['late'], reached['committed'])} of commits arrive after the vblank start"
        out.append(text)
    display = [s for s in DISPLAY_CHAIN[1:4] if s in stages]  # up to scanout: the glass-to-glass path
    if display:
        worst = max(display, key=lambda s: stages[s]["p99_ms"])
        w = stages[worst]
        text = f"slowest step to the screen: {span_name(worst)}, p99 {w['p99_ms']:.1f} ms (p50 {w['p50_ms']:.1f} ms)"
        to_scanout = g["p50"] - f["display_latency_ms"] if g["p50"] is not None else 0
        if to_scanout > 0:
            text += f", {_pct(w['p50_ms'], to_scanout)} of the median captured → scanout"
        out.append(text)
    for s in ("cuda_submitted", "cuda_done"):
        if s in stages:
            out.append(f"{span_name(s)}: p99 {stages[s]['p99_ms']:.1f} ms (p50 {stages[s]['p50_ms']:.1f} ms)")
    if drops["sequence_gap"]:
        out.append(f"{_count(drops['sequence_gap'], 'frame')} skipped by the driver (sequence gaps: no buffer was queued)")
    if drops["not_shown"]:
        if reached["committed"]:
            out.append(f"{drops['not_shown']} of {_count(reached['dequeued'], 'dequeued frame')} never committed to the display")
        else:
            out.append(f"no frame reached a display ({reached['dequeued']} dequeued)")
    if drops["late"]:
        late = f["late_ms"]
        out.append(f"{_count(drops['late'], 'commit')} late: after the start of a vblank the frame could have made, "
                   f"by p50 {late['p50']:.1f} ms, p99 {late['p99']:.1f} ms")
    if drops["repeated"]:
        out.append(f"{_count(drops['repeated'], 'frame')} shown for more than one vblank")
    fin, fout = f["fps_in"], f["fps_out"]
    if fin and fout and fout < 0.98 * fin:
        out.append(f"{fin:.1f} fps in, {fout:.1f} fps out: the display shows {_pct(fout, fin)} of the frames")
    return out


def _cell(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def to_markdown(report: dict) -> str:
    """The section "Where frames lose time" from frames_report()'s dict
    (or an audit report that carries it under "frames")."""
    f = report["frames"]
    lines = ["## Where frames lose time", ""]
    lines += [f"- {h}" for h in f["hot_spots"]] or ["- no frame records"]
    lines += ["", "| stage | span | frames | p50 ms | p95 ms | p99 ms |", "|---|---|---:|---:|---:|---:|"]
    for s in SPAN_FROM:
        if s in f["stages"]:
            st = f["stages"][s]
            lines.append(f"| {s} | {span_name(s)} | {st['count']} | {_cell(st['p50_ms'])} | "
                         f"{_cell(st['p95_ms'])} | {_cell(st['p99_ms'])} |")
    g = f["glass_to_glass_ms"]
    fps = " ".join(f"{k.replace('_', ' ')} {_cell(f[k])}" for k in ("fps_in", "fps_out"))
    lines += ["", f"{f['count']} frames; glass to glass (captured → scanout + {f['display_latency_ms']:g} ms "
                  f"display latency) p50 {_cell(g['p50'])}, p95 {_cell(g['p95'])}, p99 {_cell(g['p99'])} ms; "
                  f"{fps}; vblank {_cell(f['vblank_ms'])} ms", "",
              "Drops: " + ", ".join(f"{k} {v}" for k, v in f["drops"].items()), ""]
    return "\n".join(lines)
