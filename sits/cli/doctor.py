"""`sits doctor [--json]`: print what sits.doctor.collect() found."""
import json

import typer
from rich.console import Console
from rich.table import Table

from sits import doctor as probe


def _mark(ok: bool) -> str:
    return "[green]OK[/]" if ok else "[red]missing[/]"


def _rows(data: dict):
    k = data["kernel"]
    if "error" not in k:
        yield "kernel", "version", True, f"{k['release']} ({k['machine']})"
        for name in ("btf", "tracefs", "uprobes", "kprobes"):
            yield "kernel", name, k[name]["ok"], k[name].get("hint", k[name].get("path", ""))
    b = data["bpf"]
    for name, item in b.items():
        if isinstance(item, dict) and "ok" in item:
            detail = item.get("hint") or item.get("version") or f"{item.get('program', '')} events={item.get('events', '')}"
            if item.get("error"):
                detail = f"{detail}: {item['error']}"
            yield "bpf", name, item["ok"], detail
    v = data["v4l2"]
    if "error" in v:
        yield "v4l2", "devices", False, v["error"]
    else:
        for d in v["devices"]:
            if "error" in d:
                yield "v4l2", d["path"], False, d["error"]
                continue
            fmts = ", ".join(f"{f['fourcc']} {f['sizes']}" for f in d["formats"][:6])
            more = f" (+{len(d['formats']) - 6} more)" if len(d["formats"]) > 6 else ""
            stable = "".join(f"\n{p}" for p in d["stable_paths"])
            ctrls = f"\n{len(d['controls'])} controls (sits cameras lists them)" if d.get("controls") else ""
            yield "v4l2", d["path"], True, f"{d['driver']} '{d['card']}' {','.join(d['capabilities'])}" + stable + (
                f"\n{fmts}{more}" if fmts else "") + ctrls
        yield "v4l2", "capture", v["capture"]["ok"], v["capture"].get("hint", f"{v['capture']['count']} device(s)")
    d = data["drm"]
    if "error" in d:
        yield "drm", "cards", False, d["error"]
    else:
        for c in d["cards"]:
            if "error" in c:
                yield "drm", c["path"], False, c["error"]
                continue
            conns = ", ".join(f"{x['name']} {x['status']}" + (" (writeback " + " ".join(x.get("writeback_formats", [])) + ")"
                                                               if x["writeback"] else "") for x in c["connectors"])
            planes = ", ".join(f"{p['id']} {p['type']} {len(p['formats'])} formats" for p in c["planes"])
            yield "drm", c["path"], c["atomic"], (f"{c['driver']} atomic={c['atomic']} crtcs={c['crtcs']}\n"
                                                  f"connectors: {conns}\nplanes: {planes}")
        for name in ("atomic", "connected_display", "writeback"):
            yield "drm", name, d[name]["ok"], d[name].get("hint", "")
    m = data["dmabuf"]
    if "error" in m:
        yield "dmabuf", "probe", False, m["error"]
    else:
        yield "dmabuf", "heaps", m["heaps"]["ok"], " ".join(m["heaps"]["names"]) or m["heaps"].get("hint", "")
        for name in ("udmabuf", "sync_file_export"):
            item = m[name]
            yield "dmabuf", name, item["ok"], item.get("hint", "") + (f": {item['error']}" if item.get("error") else "")
    cu = data["cuda"]
    if not cu.get("available"):
        yield "cuda", "device", False, cu.get("reason") or cu.get("error", "")
    else:
        yield "cuda", "device", True, f"{cu.get('device')} (driver {cu.get('driver_version')})"
        for name in ("dmabuf_import", "host_register"):
            item = cu.get(name) or {}
            yield "cuda", name, bool(item.get("supported")), item.get("error") or item.get("detail") or ""
    dec = data["decode"]
    if "error" in dec:
        yield "decode", "probe", False, dec["error"]
    else:
        for name, item in dec.items():
            yield "decode", name, item["ok"], item.get("library") or item.get("on") or item.get("hint", "")


def doctor(as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Show what this machine can do: kernel, eBPF, V4L2, DRM/KMS, dma-buf, CUDA, decoders."""
    data = probe.collect()
    if as_json:
        print(json.dumps(data, indent=2))
        return
    table = Table(title="sits doctor", show_lines=False)
    for col in ("area", "item", "status", "detail"):
        table.add_column(col)
    for area, item, ok, detail in _rows(data):
        table.add_row(area, item, _mark(ok), str(detail))
    Console().print(table)
