"""The kernel's side of the journey: journey.bpf.c's frame records, read
from its ring (and, at the end, from the frames still in flight), as
record.py's records; and which stages this kernel can time.

The programs load in a ProbeSession as the "frames" group, so the pid,
comm, cgroup and command filters are the probes' own.
"""
from __future__ import annotations

import numpy as np

from sits.ebpf import maps
from sits.ebpf.header import FRAME_FLAGS
from sits.ebpf.ringbuf import FRAME_DTYPE, RingConsumer
from sits.journey import record

COPIED, ERROR = FRAME_FLAGS["copied"], FRAME_FLAGS["error"]

#: a stage -> the journey programs without which it is not timed
STAGE_PROGRAMS = {
    "captured": ("sits_journey_buf_done", "sits_journey_qbuf"),
    "dequeued": ("sits_journey_dqbuf",),
    "committed": ("sits_journey_set_fb", "sits_journey_atomic", "sits_journey_atomic_exit"),
    "scanout": ("sits_journey_delivered", "sits_journey_vblank"),
    "replaced": ("sits_journey_delivered", "sits_journey_vblank"),
    "requeued": ("sits_journey_qbuf",),
}
#: what joins a commit to a V4L2_MEMORY_MMAP buffer (VIDIOC_EXPBUF)
EXPORT_PROGRAMS = ("sits_journey_export",)
RING_BYTES = 1 << 20  # journey.bpf.c's frames_out
OBJECT = "journey"


def untimed_stages(session) -> dict[str, str]:
    """stage -> why it is not timed in this session (a program's reason)."""
    out = {}
    for stage, progs in STAGE_PROGRAMS.items():
        for p in progs:
            if p not in session.attached:
                out[stage] = session.skipped.get(p, "not attached")
                break
    missing = [p for p in EXPORT_PROGRAMS if p not in session.attached]
    if missing and "committed" not in out:
        out["joined"] = ("exported (VIDIOC_EXPBUF) buffers cannot be followed to the display: "
                         + session.skipped.get(missing[0], "not attached"))
    return out


def to_records(frames: np.ndarray) -> list[dict]:
    """record.py records of struct sits_frame rows, in capture order.
    Frames the application never dequeued (buffers STREAMOFF handed back,
    frames still with it at the end) are not part of its journey."""
    frames = frames[frames["dequeued_ns"] != 0]
    frames = frames[np.argsort(frames["id"], kind="stable")]
    out = []
    for f in frames.tolist():
        (fid, _vb, captured, dequeued, committed, scanout, replaced, requeued, late,
         pid, buffer, sequence, skipped, scanout_seq, replaced_seq, flags, _crtc) = f
        rec = record.new(pid=pid, buffer=buffer, sequence=sequence,
                         captured_ns=captured or None, dequeued_ns=dequeued,
                         committed_ns=committed or None, scanout_ns=scanout or None,
                         replaced_ns=replaced or None, requeued_ns=requeued or None,
                         skipped_before=skipped, copied=bool(flags & COPIED),
                         vblanks=(replaced_seq - scanout_seq) if scanout and replaced else None,
                         late_ns=late or None)
        out.append(rec)
    return out


class KernelJourney:
    """Reads a started ProbeSession's journey (group "frames")."""

    def __init__(self, session):
        obj = session.objects.get(OBJECT)
        if obj is None:
            raise KeyError(OBJECT)
        self._frames_fd = obj.map_fd("frames")
        self._ring = RingConsumer(obj.map_fd("frames_out"), RING_BYTES, FRAME_DTYPE)
        self.errors = 0     # frames the driver marked as errors (not in the records)

    def drain(self) -> list[dict]:
        """The records of the frames whose journey ended since the last call."""
        return self._records(self._ring.drain())

    def flush(self) -> list[dict]:
        """The frames still in flight (call once, at the end, after drain())."""
        rows = np.frombuffer(maps.values_bytes(self._frames_fd, "struct sits_frame"), FRAME_DTYPE)
        return self._records(rows)

    def _records(self, rows: np.ndarray) -> list[dict]:
        err = (rows["flags"] & ERROR) != 0
        self.errors += int(np.count_nonzero(err & (rows["dequeued_ns"] != 0)))
        return to_records(rows[~err])

    def close(self) -> None:
        self._ring.close()


def kernel_report(reader: KernelJourney, journey, session, also=None) -> dict:
    """frames_report() of `journey`, fed from `reader` until now (the
    frames in flight at the end too; `also(record)` sees each of them as
    well) and then closed, with what only the kernel's side knows: records
    lost, frames the driver marked as errors, the stages not timed, and how
    the kernel's functions are hooked."""
    from sits.journey.report import frames_report
    for rec in reader.drain() + reader.flush():
        journey.add(rec)
        if also is not None:
            also(rec)
    reader.close()
    report = frames_report(journey)
    drops = session.drops()
    report["frames"]["lost"] = {"ring_full": drops["frame_ring"], "map_full": drops["frame_map_full"]}
    report["frames"]["driver_errors"] = reader.errors
    report["untimed"] = untimed_stages(session)
    report["hooks"] = hooks(session)
    return report


def hooks(session) -> dict:
    """How the journey's kernel functions are hooked: {"kind": "trampoline"
    (fentry/fexit) or "kprobe", "why": why kprobes stand in, or None}."""
    from sits.ebpf.points import PROGRAMS
    twinned = [p.name for p in PROGRAMS if p.obj == OBJECT and p.kprobes and p.name in session.attached]
    why = sorted({session.kprobed[n] for n in twinned if n in session.kprobed})
    return {"kind": "kprobe" if why else "trampoline", "why": why[0] if why else None}
