"""`sits cameras [--device PATH] [--json]`: each capture device as
sits.doctor.video_device() lists it (`sits doctor` has the same entries
under v4l2.devices): stable paths, formats with sizes and frame rates,
controls with their ranges, menus and values."""
import json

import typer


def _fps(fps) -> str:
    if isinstance(fps, dict):
        return f"{fps['min']:g}-{fps['max']:g} fps"
    return ",".join(f"{r:g}" for r in fps) + " fps" if fps else "-"


def control_line(c: dict) -> str:
    """One control as a line: name (type) what it takes, default, value, flags."""
    if "dims" in c:
        takes = f"{c['min']}..{c['max']} " + "".join(f"[{d}]" for d in c["dims"])
    elif "menu" in c:
        takes = ", ".join(f"{m['index']}: {m['name']}" for m in c["menu"])
    elif c["type"] == "bitmask":
        takes = f"mask {c['max']:#x}"
    elif c["type"] == "str":
        takes = f"{c['min']}..{c['max']} chars"
    elif "min" in c:
        takes = f"{c['min']}..{c['max']}" + (f" step {c['step']}" if c["step"] != 1 else "")
    else:
        takes = ""
    parts = [f"{c['name']} ({c['type']})", takes]
    if "default" in c:
        parts.append(f"default {c['default']}")
    if c["value"] is not None:
        parts.append(f"= {c['value']!r}" if isinstance(c["value"], str) else f"= {c['value']}")
    if c["flags"]:
        parts.append(f"[{', '.join(c['flags'])}]")
    return " ".join(p for p in parts if p)


def camera_lines(d: dict) -> list[str]:
    if "error" in d:
        return [f"{d['path']}: {d['error']}"]
    out = [f"{d['path']}  {d['driver']} '{d['card']}' ({d['bus_info']})"]
    out += [f"  stable path: {p}" for p in d["stable_paths"]] or ["  stable path: none (no udev link)"]
    out.append("  formats:")
    for f in d["formats"]:
        rates = "; ".join(f"{r['size']} @ {_fps(r['fps'])}" for r in f["rates"]) or f["sizes"]
        out.append(f"    {f['fourcc']} '{f['description']}': {rates}")
    out.append(f"  controls ({len(d.get('controls', []))}):")
    out += [f"    {control_line(c)}" for c in d.get("controls", [])]
    return out


def cameras(device: str = typer.Option(None, "--device", help="Only this device (/dev/videoN or a stable path)."),
            as_json: bool = typer.Option(False, "--json", help="Print one JSON list.")) -> None:
    """List each camera: stable paths, formats, sizes, rates, controls (names as --control takes them)."""
    from sits import doctor
    from sits.errors import DeviceError
    if device is not None:
        found = [doctor.video_device(device)]
        if "error" in found[0]:
            raise DeviceError(found[0]["error"])
        if not found[0]["capture"]:
            raise DeviceError(f"{device}: not a video capture device")
    else:
        found = [d for d in doctor.v4l2()["devices"] if d.get("capture") or "error" in d]
    if as_json:
        print(json.dumps(found, indent=2))
        return
    if not found:
        print("no V4L2 capture device (modprobe vivid, or plug a camera)")
    for i, d in enumerate(found):
        if i:
            print()
        print("\n".join(camera_lines(d)))
