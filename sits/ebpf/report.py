"""Rows, labels, hot spots and the audit report (JSON and markdown).

`Aggregate` takes the per-interval histograms of a ProbeSession and keeps
both the last interval and the whole run. Rows are labelled here (process
name, what the key means: fd path, ioctl name, fence timeline, ...) and
flagged hot against thresholds.

The audit JSON layout is stable (schema "sits.probe.audit/1", docs/probe.md):
{"schema", "duration_s", "kernel", "command", "exit_code", "probes": [...],
 "rows": [{"pid", "comm", "probe", "key", "count", "p50_us", "p95_us",
 "p99_us", "max_us", "total_ms", "hot", ...}], "hot_spots", "drops",
 "overhead", "thresholds"}, and "frames" (sits/journey/report.py) when
the frames' journey was followed: the CLI adds it, and its markdown, since
sits.journey builds on this package and not the other way round.
"""
from __future__ import annotations

import errno
import os

from sits.ebpf.histogram import Histogram, RowKey
from sits.ebpf.ioctl_names import ioctl_name
from sits.ebpf.points import POINT_BY_ID, POINT_BY_NAME, POINTS

SCHEMA = "sits.probe.audit/1"

#: defaults from the background article: decode p95 > 12 ms, buffer wait > 8 ms
DEFAULT_THRESHOLDS_MS = {"decode": 12.0, "buffer_wait": 8.0}
#: ioctls that wait for a buffer or a fence
BUFFER_WAIT_IOCTLS = {"VIDIOC_DQBUF", "DMA_BUF_IOCTL_SYNC", "SYNC_IOC_MERGE",
                      "SYNC_IOC_FILE_INFO", "DMA_BUF_IOCTL_EXPORT_SYNC_FILE",
                      "DRM_IOCTL_WAIT_VBLANK"}

V4L2_BUF_TYPES = {1: "VIDEO_CAPTURE", 2: "VIDEO_OUTPUT", 3: "VIDEO_OVERLAY",
                  9: "VIDEO_CAPTURE_MPLANE", 10: "VIDEO_OUTPUT_MPLANE", 13: "META_CAPTURE",
                  14: "META_OUTPUT"}
AVERROR_EOF = -0x20464F45  # -MKTAG('E','O','F',' ')


def parse_thresholds(items) -> dict[str, float]:
    """['decode=12', 'sys_read=5'] -> {name: ms}; names are a threshold
    class (decode, buffer_wait) or a probe point name."""
    from sits.errors import UsageError
    out = dict(DEFAULT_THRESHOLDS_MS)
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--threshold {item!r}: expected NAME=MS")
        if name not in DEFAULT_THRESHOLDS_MS and name not in POINT_BY_NAME:
            raise UsageError(f"--threshold {name}: not a probe point or one of "
                             f"{', '.join(DEFAULT_THRESHOLDS_MS)}")
        try:
            out[name] = float(value)
        except ValueError:
            raise UsageError(f"--threshold {item!r}: {value!r} is not a number of ms") from None
    return out


def key_kind(probe: int) -> str:
    """What a row's key is for probe id `probe` (ProbePoint.key), "" if unknown."""
    point = POINT_BY_ID.get(probe)
    return point.key if point else ""


def key_label(probe: int, key: int, pid: int, fence_names: dict[int, str] | None = None,
              fd_paths: dict | None = None) -> str:
    kind = key_kind(probe)
    if kind == "fd":
        path = None
        if fd_paths is not None:
            path = fd_paths.get((pid, key))
            if (pid, key) not in fd_paths:
                try:
                    path = os.readlink(f"/proc/{pid}/fd/{key}")
                except OSError:
                    path = None
                fd_paths[(pid, key)] = path
        return f"fd {key} {path}" if path else f"fd {key}"
    if kind == "cmd":
        return ioctl_name(key)
    if kind == "epfd":
        return f"epfd {key}"
    if kind == "context":
        name = (fence_names or {}).get(key)
        return name or f"context {key}"
    if kind == "buf_type":
        return V4L2_BUF_TYPES.get(key, f"type {key}")
    if kind == "crtc":
        return f"crtc {key}"
    if kind == "ret":
        ret = key - (1 << 64) if key >= 1 << 63 else key
        if ret >= 0:
            return "ok" if ret == 0 else f"ret {ret}"
        if ret == -errno.EAGAIN:
            return "EAGAIN"
        if ret == AVERROR_EOF:
            return "EOF"
        return f"ret {ret}"
    return str(key) if key else ""


def threshold_for(probe: int, key: int, thresholds: dict[str, float]) -> tuple[str, float] | None:
    """(threshold name, ms) that applies to a row, or None."""
    point = POINT_BY_ID.get(probe)
    if point is None:
        return None
    if point.name in thresholds:
        return point.name, thresholds[point.name]
    kind = point.kind
    if point.key == "cmd" and ioctl_name(key) in BUFFER_WAIT_IOCTLS:
        kind = "buffer_wait"
    if kind and kind in thresholds:
        return kind, thresholds[kind]
    return None


class Aggregate:
    """The run so far and the last interval, labelled."""

    def __init__(self, session=None, thresholds: dict[str, float] | None = None):
        self.session = session
        self.thresholds = thresholds if thresholds is not None else dict(DEFAULT_THRESHOLDS_MS)
        self.total: dict[RowKey, Histogram] = {}
        self.last: dict[RowKey, Histogram] = {}
        self.last_elapsed = 0.0
        self.elapsed = 0.0
        self.comm: dict[int, str] = {}
        self.fd_paths: dict = {}
        self.fence_names: dict[int, str] = {}
        self.alive: set[int] = set()

    def add(self, rows: dict[RowKey, Histogram], elapsed: float) -> None:
        self.last, self.last_elapsed = rows, elapsed
        self.elapsed += elapsed
        for k, h in rows.items():
            t = self.total.get(k)
            if t is None:
                self.total[k] = h.copy()
            else:
                t.merge(h)
        for k in rows:  # name fds while their process is alive
            if key_kind(k.probe) == "fd" and (k.pid, k.key) not in self.fd_paths:
                key_label(k.probe, k.key, k.pid, fd_paths=self.fd_paths)
        new = {k.pid for k in rows if k.pid not in self.comm}
        if new and self.session is not None:
            self.comm.update(self.session.comms(new))
        for pid in new:
            if pid not in self.comm:
                self.comm[pid] = _proc_comm(pid)
        if self.session is not None and any(key_kind(k.probe) == "context" for k in rows):
            self.fence_names.update(self.session.fence_names())
        self.alive = {pid for pid in {k.pid for k in self.total} if os.path.exists(f"/proc/{pid}")}

    def row(self, k: RowKey, h: Histogram, elapsed: float | None = None) -> dict:
        point = POINT_BY_ID.get(k.probe)
        p95 = h.quantile(0.95)
        rule = threshold_for(k.probe, k.key, self.thresholds)
        hot = bool(rule and p95 > rule[1] * 1e6)
        row = {
            "pid": k.pid,
            "comm": self.comm.get(k.pid, ""),
            "probe": point.name if point else str(k.probe),
            "key": key_label(k.probe, k.key, k.pid, self.fence_names, self.fd_paths),
            "count": h.count,
            "p50_us": round(h.quantile(0.50) / 1e3, 3),
            "p95_us": round(p95 / 1e3, 3),
            "p99_us": round(h.quantile(0.99) / 1e3, 3),
            "max_us": round(h.max_ns / 1e3, 3),
            "total_ms": round(h.sum_ns / 1e6, 3),
            "hot": hot,
            "tid": k.tid,
            "key_raw": k.key,
            "mean_us": round(h.mean() / 1e3, 3),
            "hot_reason": (f"p95 {p95 / 1e6:.1f} ms > {rule[0]} {rule[1]:g} ms" if hot else None),
        }
        if elapsed:
            row["rate_per_s"] = round(h.count / elapsed, 2)
        return row

    def rows(self, interval: bool = False) -> list[dict]:
        src, el = (self.last, self.last_elapsed) if interval else (self.total, self.elapsed)
        out = [self.row(k, h, el) for k, h in src.items()]
        out.sort(key=lambda r: (-r["total_ms"], r["pid"], r["probe"], r["key"]))
        return out


def _proc_comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def hot_spots(rows: list[dict], n: int = 5) -> dict:
    def top(field):
        ranked = sorted((r for r in rows if r["count"]), key=lambda r: -r[field])[:n]
        return [{"pid": r["pid"], "comm": r["comm"], "probe": r["probe"], "key": r["key"],
                 field: r[field]} for r in ranked]
    return {
        "by_p95": top("p95_us"),
        "by_p99": top("p99_us"),
        "by_total": top("total_ms"),
        "flagged": [{"pid": r["pid"], "comm": r["comm"], "probe": r["probe"], "key": r["key"],
                     "reason": r["hot_reason"]} for r in rows if r["hot"]],
    }


def probes_status(session) -> list[dict]:
    out = []
    for p in POINTS:
        if p.group not in session.groups:
            continue
        reason = session.point_reason(p)
        out.append({"name": p.name, "group": p.group, "key": p.key,
                    "status": "attached" if reason is None else "skipped", "reason": reason})
    return out


def overhead(session, duration_s: float) -> dict:
    progs = session.program_stats() if session.stats else []
    total_ns = sum(p["run_time_ns"] for p in progs)
    runs = sum(p["run_cnt"] for p in progs)
    for p in progs:
        p["ns_per_run"] = round(p["run_time_ns"] / p["run_cnt"], 1) if p["run_cnt"] else None
    return {
        "programs": progs,
        "bpf_cpu_ms": round(total_ns / 1e6, 3),
        "bpf_ns_per_run": round(total_ns / runs, 1) if runs else None,
        "bpf_cpu_percent": round(100.0 * total_ns / 1e9 / duration_s / (os.cpu_count() or 1), 4)
        if duration_s else None,
        "note": "kernel run-time accounting of our programs (bpf_stats); excludes the "
                "trampoline/tracepoint entry cost",
    }


def audit_report(agg: Aggregate, session, *, duration_s: float, command=None, exit_code=None,
                 top_n: int = 5, stream: dict | None = None) -> dict:
    """The audit report; `stream` ({"path", "events"}) when samples were
    also streamed, completed here with the ones lost (ring buffer full)."""
    from sits.ebpf.system import kernel_info
    rows = agg.rows()
    drops = session.drops()
    report = {
        "schema": SCHEMA,
        "duration_s": round(duration_s, 3),
        "kernel": kernel_info(),
        "command": list(command) if command else None,
        "exit_code": exit_code,
        "probes": probes_status(session),
        "rows": rows,
        "hot_spots": hot_spots(rows, top_n),
        "drops": drops,
        "overhead": overhead(session, duration_s),
        "thresholds": {k: v for k, v in agg.thresholds.items()},
    }
    if stream is not None:
        report["stream"] = dict(stream, lost=drops["ringbuf"])
    return report


def to_markdown(report: dict, frames_section: str | None = None) -> str:
    """The audit report in markdown; `frames_section` (the frames' journey
    in markdown, when it was followed) goes after the drops."""
    k = report["kernel"]
    lines = [f"# sits probe audit: {report['duration_s']} s on Linux {k['release']} ({k['machine']})", ""]
    if report["command"]:
        lines += [f"Command: `{' '.join(report['command'])}` (exit code {report['exit_code']})", ""]
    lines += ["## Probes", "", "| probe | group | status | reason |", "|---|---|---|---|"]
    for p in report["probes"]:
        lines.append(f"| {p['name']} | {p['group']} | {p['status']} | {p['reason'] or ''} |")
    lines += ["", "## Rows", "",
              "| pid | comm | probe | key | count | p50 µs | p95 µs | p99 µs | max µs | total ms | hot |",
              "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in report["rows"]:
        lines.append(f"| {r['pid']} | {r['comm']} | {r['probe']} | {r['key']} | {r['count']} | "
                     f"{r['p50_us']:.1f} | {r['p95_us']:.1f} | {r['p99_us']:.1f} | {r['max_us']:.1f} | "
                     f"{r['total_ms']:.2f} | {'**HOT**' if r['hot'] else ''} |")
    hs = report["hot_spots"]
    lines += ["", "## Hot spots", ""]
    if hs["flagged"]:
        for f in hs["flagged"]:
            lines.append(f"- **{f['probe']} {f['key']}** in {f['comm']} ({f['pid']}): {f['reason']}")
    else:
        lines.append("- none over thresholds " + ", ".join(
            f"{k} {v:g} ms" for k, v in report["thresholds"].items()))
    for field, title in (("by_p95", "p95_us"), ("by_p99", "p99_us"), ("by_total", "total_ms")):
        top = ", ".join(f"{t['probe']} {t['key']} ({t['pid']}) {t[title]}" for t in hs[field])
        lines.append(f"- top by {title}: {top or '-'}")
    d = report["drops"]
    lines += ["", "## Drops", "", ", ".join(f"{k}: {v}" for k, v in d.items()), ""]
    if frames_section is not None:
        lines.append(frames_section)
    if report.get("stream"):
        st = report["stream"]
        lines += [f"Streamed {st['events']} samples to `{st['path']}` ({st['lost']} lost: ring buffer full)", ""]
    o = report["overhead"]
    if o["programs"]:
        lines += ["## Probe overhead", "",
                  f"BPF CPU {o['bpf_cpu_ms']} ms ({o['bpf_cpu_percent']}% of all CPUs), "
                  f"{o['bpf_ns_per_run']} ns per program run", ""]
    return "\n".join(lines)
