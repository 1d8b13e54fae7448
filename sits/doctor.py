"""What this machine can do for sits: one probe per kernel interface.

`collect()` returns a JSON-ready dict with the top-level keys kernel, bpf,
v4l2, drm, dmabuf, cuda, decode, overlay. Every item has `ok` and, when not ok, a one-line
`hint`. Probing never raises: a failure is an item that is not ok.
"""
import os
import platform

KEYS = ("kernel", "bpf", "v4l2", "drm", "dmabuf", "cuda", "decode", "overlay")


def _item(ok: bool, hint: str | None = None, **detail) -> dict:
    d = {"ok": bool(ok), **detail}
    if not ok and hint:
        d["hint"] = hint
    return d


def _err(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def kernel() -> dict:
    from sits.ebpf.tracefs import ensure_tracefs
    btf = "/sys/kernel/btf/vmlinux"
    tracing = ensure_tracefs()
    uprobe_pmu = "/sys/bus/event_source/devices/uprobe"
    kprobe_pmu = "/sys/bus/event_source/devices/kprobe"
    return {
        "release": platform.release(),
        "machine": platform.machine(),
        "btf": _item(os.path.exists(btf), "kernel built without CONFIG_DEBUG_INFO_BTF: CO-RE probes cannot load",
                     path=btf),
        "tracefs": _item(tracing is not None, "mount -t tracefs tracefs /sys/kernel/tracing (as root)",
                         path=tracing),
        "uprobes": _item(os.path.isdir(uprobe_pmu), "kernel built without CONFIG_UPROBE_EVENTS: no libavcodec probes"),
        "kprobes": _item(os.path.isdir(kprobe_pmu), "no kprobes (sits uses tracepoints and uprobes only)"),
    }


def bpf() -> dict:
    out = {}
    try:
        from sits.ebpf import libbpf
        _, lib = libbpf.load()
        out["libbpf"] = _item(True, version=f"{lib.libbpf_major_version()}.{lib.libbpf_minor_version()}")
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        out["libbpf"] = _item(False, "apt-get install libbpf1", error=_err(exc))
        out["load_attach"] = _item(False, "libbpf missing")
        return out
    if os.geteuid() != 0:
        out["load_attach"] = _item(False, "needs root or CAP_BPF + CAP_PERFMON", error="not root")
        return out
    try:
        from sits.ebpf.loader import BpfObject, program_path
        with BpfObject(program_path("doctor")) as obj:
            obj.section(".rodata", "int *")[0] = os.getpid()
            obj.load()
            obj.attach("doctor_getppid")
            for _ in range(3):
                os.getppid()
            from sits.ebpf.maps import lookup_u64
            hits = lookup_u64(obj.map_fd(".bss"), 0)
        out["load_attach"] = _item(hits == 3, "program attached but saw no events",
                                   program="tracepoint/syscalls/sys_enter_getppid", events=hits)
    except Exception as exc:  # noqa: BLE001
        out["load_attach"] = _item(False, "BPF program failed to load/attach", error=_err(exc))
    return out


def video_device(path: str) -> dict:
    """One video node as `sits doctor` and `sits cameras` list it: who it
    is, its stable paths (udev's /dev/v4l/by-id, by-path links) and, for a
    capture node, its formats with their sizes and frame rates and its
    controls (name as `v4l2-ctl -l` prints it, type, range or menu,
    default, current value). Never raises: a failure is an `error`."""
    from sits.v4l2.capture import stable_paths
    from sits.v4l2.controls import Controls
    from sits.v4l2.device import VideoDevice
    try:
        with VideoDevice.open(path) as dev:
            c = dev.cap
            d = {"path": path, "stable_paths": stable_paths(path), "driver": c.driver, "card": c.card,
                 "bus_info": c.bus_info, "capabilities": c.cap_names, "capture": c.is_capture, "formats": []}
            if c.is_capture:
                for f in dev.formats():
                    sizes = dev.frame_sizes(f.fourcc)
                    d["formats"].append({"fourcc": f.fourcc, "description": f.description,
                                         "sizes": sizes.describe(), "rates": _rates(dev, f.fourcc, sizes)})
                d["controls"] = [ctl.as_dict() for ctl in Controls.read(dev.fileno(), path)]
    except Exception as exc:  # noqa: BLE001
        d = {"path": path, "error": _err(exc)}
    return d


def _rates(dev, code: str, sizes) -> list[dict]:
    """{size, fps} for each discrete size (for a stepwise range: at its
    largest size); fps a list, or {min, max} for a continuous range."""
    from sits.formats import fourcc
    from sits.v4l2 import raw
    if sizes.stepwise:
        pairs = [(sizes.stepwise[1], sizes.stepwise[4])]
    else:
        pairs = sizes.discrete
    out = []
    for w, h in pairs:
        rates = raw.enum_frame_rates(dev.fileno(), fourcc(code), w, h)
        fps = {"min": round(rates[0], 3), "max": round(rates[1], 3)} if isinstance(rates, tuple) \
            else [round(r, 3) for r in rates]
        out.append({"size": f"{w}x{h}", "fps": fps})
    return out


def v4l2() -> dict:
    from sits.v4l2.device import video_paths
    devices = [video_device(path) for path in video_paths()]
    capture = [d for d in devices if d.get("capture")]
    return {"devices": devices,
            "capture": _item(bool(capture), "no V4L2 capture device (modprobe vivid, or plug a camera)",
                             count=len(capture))}


def _card(path: str) -> dict:
    from sits._kernel import lib
    from sits.drm import raw
    from sits.drm.card import Card
    with Card.open(path) as card:
        fd = card.fileno()
        conns = []
        for c in card.connectors():
            entry = {"id": c.id, "name": c.name, "status": c.connection, "writeback": c.is_writeback,
                     "modes": [str(m) for m in c.modes[:8]]}
            if c.is_writeback:
                props = card.properties(c.id, lib.DRM_MODE_OBJECT_CONNECTOR)
                blob = props.get("WRITEBACK_PIXEL_FORMATS")
                if blob and blob.value:
                    entry["writeback_formats"] = raw.blob_formats(raw.get_blob(fd, blob.value))
            conns.append(entry)
        planes = [{"id": p.id, "type": card.plane_type(p.id), "formats": p.formats,
                   "possible_crtcs": p.possible_crtcs} for p in card.planes()]
        prime = card.cap(lib.DRM_CAP_PRIME) or 0
        return {"path": path, "driver": card.driver, "atomic": card.atomic,
                "writeback_cap": card.writeback,
                "prime_import": bool(prime & lib.DRM_PRIME_CAP_IMPORT),
                "connectors": conns, "crtcs": card.resources().crtcs, "planes": planes,
                "writeback_connectors": [c["name"] for c in conns if c["writeback"]]}


def drm() -> dict:
    from sits.drm.card import card_paths
    cards = []
    for path in card_paths():
        try:
            cards.append(_card(path))
        except Exception as exc:  # noqa: BLE001
            cards.append({"path": path, "error": _err(exc)})
    kms = [c for c in cards if c.get("atomic")]
    connected = [c for c in kms if any(x["status"] == "connected" and not x["writeback"]
                                       for x in c["connectors"])]
    return {"cards": cards,
            "atomic": _item(bool(kms), "no DRM card with atomic KMS (load a display driver, or vkms)",
                            count=len(kms)),
            "connected_display": _item(bool(connected), "no connected display connector"),
            "writeback": _item(any(c["writeback_connectors"] for c in kms),
                               "no writeback connector (vkms enable_writeback=1 has one)")}


def dmabuf() -> dict:
    from sits.dmabuf.heap import DmaHeap, heap_names
    from sits.dmabuf.udmabuf import DEVICE, Udmabuf
    out = {"heaps": _item(bool(heap_names()), "no /dev/dma_heap/* (CONFIG_DMABUF_HEAPS_SYSTEM)",
                          names=heap_names())}
    buf = None
    try:
        with Udmabuf.open() as u:
            buf = u.alloc(4096)
        out["udmabuf"] = _item(True, path=DEVICE)
    except Exception as exc:  # noqa: BLE001
        out["udmabuf"] = _item(False, "no usable /dev/udmabuf (CONFIG_UDMABUF, modprobe udmabuf)",
                               error=_err(exc))
    if buf is None and "system" in heap_names():
        try:
            with DmaHeap.open("system") as heap:
                buf = heap.alloc(4096)
        except Exception:  # noqa: BLE001
            buf = None
    if buf is None:
        out["sync_file_export"] = _item(False, "no dma-buf to test with (needs a heap or udmabuf)")
        return out
    try:
        with buf, buf.export_fence() as fence:
            out["sync_file_export"] = _item(True, signalled=fence.signalled())
    except Exception as exc:  # noqa: BLE001
        out["sync_file_export"] = _item(False, "kernel lacks DMA_BUF_IOCTL_EXPORT_SYNC_FILE (needs >= 6.0)",
                                        error=_err(exc))
    return out


def cuda() -> dict:
    try:
        from sits.cuda.probe import probe
    except Exception as exc:  # noqa: BLE001
        return {"available": False, "reason": f"sits.cuda unavailable: {_err(exc)}"}
    return probe()


def decode(gpu: bool) -> dict:
    """The decode paths this machine has for cameras that do not send
    pixels: MJPEG on the CPU (libjpeg-turbo) and on the GPU (nvImageCodec:
    its hardware engine or CUDA; asked only where `gpu`), raw Bayer on the
    CPU (OpenCV; the CUDA stage demosaics in its own kernel)."""
    out = {}
    try:
        import simplejpeg
        out["jpeg_cpu"] = _item(True, library=f"libjpeg-turbo (simplejpeg {simplejpeg.__version__})")
    except ImportError as exc:
        out["jpeg_cpu"] = _item(False, "pip install simplejpeg (MJPEG cameras on the display)", error=_err(exc))
    if not gpu:
        out["jpeg_gpu"] = _item(False, "no CUDA GPU (see cuda)")
    else:
        from sits.cuda.jpeg import engine
        where = engine()
        out["jpeg_gpu"] = _item(where is not None, "pip install nvidia-nvimgcodec-cu13 (or -cu12): MJPEG "
                                "decoded on the GPU", on=where)
    try:
        import cv2
        out["bayer_cpu"] = _item(True, library=f"OpenCV {cv2.__version__}")
    except ImportError as exc:
        out["bayer_cpu"] = _item(False, "pip install 'sits[raw]' (raw Bayer cameras on the display)",
                                 error=_err(exc))
    return out


def overlay(cards: list, gpu: bool, udmabuf: bool) -> dict:
    """What the display's overlay layer (--overlay) has here: cairo to draw
    with, a plane with alpha beside the video's on a card (`cards`:
    drm()'s), and the GPU's drawing (a CUDA GPU where `gpu`, and udmabuf for
    buffers both the display and the GPU reach)."""
    from sits.pipeline.overlay_buffers import FORMAT
    out = {}
    try:
        import cairocffi
        out["cairo"] = _item(True, library=f"cairo {cairocffi.cairo_version_string()} (cairocffi {cairocffi.VERSION})")
    except (ImportError, OSError) as exc:   # OSError: cairocffi found no libcairo
        out["cairo"] = _item(False, "pip install 'sits[overlay]' and the system's libcairo2 (--overlay draws with it)",
                             error=_err(exc).splitlines()[0])
    planes = [f"{c['path']} plane {p['id']} ({p['type']})" for c in cards if c.get("atomic")
              for p in c.get("planes", []) if p["type"] == "overlay" and FORMAT in p["formats"]]
    out["plane_with_alpha"] = _item(bool(planes), f"no overlay plane with {FORMAT} on any card: --overlay needs "
                                    "one above the video's", planes=planes)
    why = None if gpu and udmabuf else ("no CUDA GPU (see cuda)" if not gpu else "no udmabuf (see dmabuf)")
    out["gpu_draw"] = _item(why is None, why)
    return out


def collect() -> dict:
    result = {}
    for key, fn in (("kernel", kernel), ("bpf", bpf), ("v4l2", v4l2), ("drm", drm),
                    ("dmabuf", dmabuf), ("cuda", cuda),
                    ("decode", lambda: decode(bool(result.get("cuda", {}).get("available")))),
                    ("overlay", lambda: overlay(result.get("drm", {}).get("cards", []),
                                                bool(result.get("cuda", {}).get("available")),
                                                bool(result.get("dmabuf", {}).get("udmabuf", {}).get("ok"))))):
        try:
            result[key] = fn()
        except Exception as exc:  # noqa: BLE001 - doctor reports, never crashes
            result[key] = {"error": _err(exc)}
    return result
