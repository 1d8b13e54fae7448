"""The probe points, the BPF programs that make them, and which of them this
machine can run (`sits probe list`, and what a ProbeSession skips).

A point's id is its enum sits_probe_id member in sits_probe.h, found by
name (sits.ebpf.header): the point "sys_read" is SITS_P_SYS_READ.
"""
from __future__ import annotations

import collections
import os

from sits.ebpf.header import PROBE_IDS
from sits.ebpf.system import BTF_PATH, find_avcodec
from sits.ebpf.tracefs import ensure_tracefs, has_tracepoint

# (plain namedtuples: dataclasses/typing cost ~15 ms of import, and startup counts)
#: id: enum sits_probe_id; name: stable, used in reports and metrics; group:
#: what --probes selects; key: what a row's key is (report.key_label names
#: it); what: one line for `probe list`; kind: threshold class, "decode",
#: "buffer_wait" or ""
ProbePoint = collections.namedtuple("ProbePoint", "id name group key what kind", defaults=("",))


def _point(name: str, group: str, key: str, what: str, kind: str = "") -> ProbePoint:
    return ProbePoint(PROBE_IDS[name], name, group, key, what, kind)


POINTS: tuple[ProbePoint, ...] = (
    _point("sys_read", "syscalls", "fd", "read() latency"),
    _point("sys_write", "syscalls", "fd", "write() latency"),
    _point("sys_ioctl", "ioctl", "cmd", "ioctl() latency by command"),
    _point("sys_poll", "syscalls", "", "poll()/ppoll() latency"),
    _point("sys_epoll_wait", "syscalls", "epfd", "epoll_wait()/epoll_pwait() latency"),
    _point("sys_select", "syscalls", "", "select()/pselect6() latency"),
    _point("fence_signal", "fence", "context", "dma_fence emit (or init) -> signaled"),
    _point("fence_wait", "fence", "context", "dma_fence_wait start -> end", "buffer_wait"),
    _point("v4l2_qbuf_done", "v4l2", "buf_type", "vb2 QBUF -> buffer done (capture/output)"),
    _point("v4l2_done_dqbuf", "v4l2", "buf_type", "vb2 buffer done -> DQBUF", "buffer_wait"),
    _point("drm_vblank_deliver", "drm", "crtc", "drm vblank -> its event delivered (page flip, WAIT_VBLANK)"),
    _point("drm_event_wait", "drm", "crtc", "drm WAIT_VBLANK event queued -> delivered"),
    _point("drm_event_read", "drm", "crtc", "drm event delivered -> read() by the client"),
    # the avcodec points are named after the functions they time (uprobes)
    _point("avcodec_send_packet", "avcodec", "ret", "avcodec_send_packet() (decode)", "decode"),
    _point("avcodec_receive_frame", "avcodec", "ret", "avcodec_receive_frame() (decode)", "decode"),
    _point("avcodec_send_frame", "avcodec", "ret", "avcodec_send_frame() (encode)", "decode"),
    _point("avcodec_receive_packet", "avcodec", "ret", "avcodec_receive_packet() (encode)", "decode"),
    _point("frame_scanout", "frames", "crtc", "a frame's V4L2 timestamp -> the vblank it went on screen at "
           "(sits probe frames: every stage of every frame)"),
)
POINT_BY_ID = {p.id: p for p in POINTS}
POINT_BY_NAME = {p.name: p for p in POINTS}
GROUPS = ("syscalls", "ioctl", "fence", "v4l2", "drm", "avcodec", "frames")
#: what a session probes when no group is named: all but the frame journey,
#: which `sits probe frames` runs (its records, not only its histogram)
DEFAULT_GROUPS = tuple(g for g in GROUPS if g != "frames")

#: one BPF program of an object, the names of its points, the (category,
#: event) tracepoint that must exist, whether it needs kernel BTF, whether
#: it is a uprobe, and for a BPF trampoline (fentry/fexit) the kprobe
#: programs loaded instead of it where the kernel cannot attach it
#: (ProbeSession(trampolines=False) loads those always)
Program = collections.namedtuple("Program", "obj name points tracepoint needs_btf uprobe kprobes",
                                 defaults=(None, False, False, ()))

_SYSCALLS = ("sys_read", "sys_write", "sys_ioctl", "sys_poll", "sys_epoll_wait", "sys_select")
_AVCODEC = tuple(p.name for p in POINTS if p.group == "avcodec")
_DRM_IS_THERE = ("drm", "drm_vblank_event_delivered")

_VB2_IS_THERE = ("vb2", "vb2_buf_done")
#: journey.bpf.c's programs, the tracepoint that says their subsystem is
#: there, and the kprobe programs that stand in for a BPF trampoline
#: (fentry/fexit) where the kernel cannot attach it; the stages each one
#: times are sits.journey.kernel's STAGE_PROGRAMS
JOURNEY_PROGRAMS = (
    ("sits_journey_buf_done", _VB2_IS_THERE, ()),
    ("sits_journey_qbuf", ("vb2", "vb2_qbuf"), ()),
    ("sits_journey_dqbuf", ("vb2", "vb2_dqbuf"), ()),
    ("sits_journey_export", _VB2_IS_THERE,
     ("sits_journey_expbuf_kp", "sits_journey_expbuf_exit_kp", "sits_journey_dma_buf_fd_kp")),
    *((f"sits_journey_{hook}{end}", _DRM_IS_THERE, (f"sits_journey_{hook}{end}_kp",))
      for hook in ("atomic", "setplane", "page_flip", "setcrtc") for end in ("", "_exit")),
    ("sits_journey_set_fb", _DRM_IS_THERE, ("sits_journey_set_fb_kp",)),
    ("sits_journey_reqbufs", _VB2_IS_THERE, ("sits_journey_reqbufs_kp",)),
    ("sits_journey_queue_release", _VB2_IS_THERE, ("sits_journey_queue_release_kp",)),
    ("sits_journey_delivered", _DRM_IS_THERE, ()),
    ("sits_journey_vblank", ("drm", "drm_vblank_event"), ()),
)

PROGRAMS: tuple[Program, ...] = (
    Program("syscalls", "sits_sys_enter", _SYSCALLS, needs_btf=True),
    Program("syscalls", "sits_sys_exit", _SYSCALLS, needs_btf=True),
    Program("fence", "sits_fence_init", ("fence_signal",), ("dma_fence", "dma_fence_init")),
    Program("fence", "sits_fence_emit", ("fence_signal",), ("dma_fence", "dma_fence_emit")),
    Program("fence", "sits_fence_signaled", ("fence_signal",), ("dma_fence", "dma_fence_signaled")),
    Program("fence", "sits_fence_destroy", ("fence_signal",), ("dma_fence", "dma_fence_destroy")),
    Program("fence", "sits_fence_wait_start", ("fence_wait",), ("dma_fence", "dma_fence_wait_start")),
    Program("fence", "sits_fence_wait_end", ("fence_wait",), ("dma_fence", "dma_fence_wait_end")),
    Program("media", "sits_vb2_qbuf", ("v4l2_qbuf_done",), ("vb2", "vb2_qbuf")),
    Program("media", "sits_vb2_buf_done", ("v4l2_qbuf_done", "v4l2_done_dqbuf"), ("vb2", "vb2_buf_done")),
    Program("media", "sits_vb2_dqbuf", ("v4l2_done_dqbuf",), ("vb2", "vb2_dqbuf")),
    Program("media", "sits_drm_vblank", ("drm_vblank_deliver",), ("drm", "drm_vblank_event")),
    Program("media", "sits_drm_event_queued", ("drm_event_wait",), ("drm", "drm_vblank_event_queued")),
    Program("media", "sits_drm_event_delivered", ("drm_vblank_deliver", "drm_event_wait", "drm_event_read"),
            _DRM_IS_THERE),
    # kprobes on drm functions: the drm tracepoints stand for "drm is there"
    Program("media", "sits_drm_atomic", ("drm_vblank_deliver", "drm_event_read"), _DRM_IS_THERE),
    Program("media", "sits_drm_page_flip", ("drm_vblank_deliver", "drm_event_read"), _DRM_IS_THERE),
    Program("media", "sits_drm_read_enter", ("drm_event_read",), _DRM_IS_THERE),
    Program("media", "sits_drm_read_exit", ("drm_event_read",), _DRM_IS_THERE),
    *(Program("journey", name, ("frame_scanout",), tp, kprobes=kp) for name, tp, kp in JOURNEY_PROGRAMS),
    Program("avcodec", "sits_av_enter", _AVCODEC, uprobe=True),
    Program("avcodec", "sits_av_exit", _AVCODEC, uprobe=True),
)
#: a point is live only when every program it is listed in is attached,
#: but for these:
POINT_PROGRAMS = {p.name: [g for g in PROGRAMS if p.name in g.points] for p in POINTS}
# fence init/emit are alternatives (one of them is needed)
ALTERNATIVES = {"sits_fence_init", "sits_fence_emit"}
# the fence destroy program only cleans up
OPTIONAL = {"sits_fence_destroy"} | ALTERNATIVES


def programs_for(groups) -> list[Program]:
    """The programs that some point of `groups` needs."""
    return [prog for prog in PROGRAMS if any(POINT_BY_NAME[n].group in groups for n in prog.points)]


def program_unavailable(prog: Program, *, avcodec_lib: str | None = None) -> str | None:
    """Why `prog` cannot run on this machine, or None."""
    if prog.needs_btf and not os.path.exists(BTF_PATH):
        return f"no kernel BTF ({BTF_PATH}; needs CONFIG_DEBUG_INFO_BTF=y)"
    if prog.tracepoint:
        if ensure_tracefs() is None:
            return "tracefs is not mounted (mount -t tracefs tracefs /sys/kernel/tracing)"
        cat, name = prog.tracepoint
        if not has_tracepoint(cat, name):
            return f"no {cat}:{name} tracepoint on this kernel"
    if prog.uprobe:
        if avcodec_lib is None:
            return "libavcodec not found (install ffmpeg's libavcodec or pass --lib PATH)"
        if not os.path.exists(avcodec_lib):
            return f"{avcodec_lib}: no such library"
    return None


def point_reason(p: ProbePoint, live: set[str], why: dict[str, str]) -> str | None:
    """None when `p` is live given the `live` program names, else why not
    (a program's reason from `why`, or "not attached")."""
    progs = POINT_PROGRAMS[p.name]
    for g in progs:
        if g.name not in OPTIONAL and g.name not in live:
            return why.get(g.name, "not attached")
    either = [g for g in progs if g.name in ALTERNATIVES]
    if either and not any(g.name in live for g in either):
        return why.get(either[0].name, "not attached")
    return None


def point_availability(groups=GROUPS, *, avcodec_lib: str | None = None) -> list[tuple[ProbePoint, str | None]]:
    """(point, reason it is unavailable or None) for `probe list`."""
    if avcodec_lib is None:
        avcodec_lib = find_avcodec()
    why = {}
    for prog in programs_for(groups):
        reason = program_unavailable(prog, avcodec_lib=avcodec_lib)
        if reason:
            why[prog.name] = reason
    live = {prog.name for prog in PROGRAMS if prog.name not in why}
    return [(p, point_reason(p, live, why)) for p in POINTS if p.group in groups]
