"""The kernel's side of the journey (journey.bpf.c): the statistics the
programs keep of the frames that finished, one interval at a time; the
frames' records from its ring, when asked for; the frames still in flight
at the end; and which stages this kernel can time.

Which outputs need records: `--stream FILE` (every record) and the live
view's waterfall (the last few). Everything in the reports -- each stage's
histogram, drops by cause, glass to glass, fps, the vblank period -- comes
from the in-kernel statistics, so without those two the follower does no
work per frame: it reads two map elements an interval, and the frames in
flight once, at the end.

The programs load in a ProbeSession as the "frames" group, so the pid,
comm, cgroup and command filters are the probes' own; configure() gives
the session what the journey object needs before it loads.
"""
from __future__ import annotations

import numpy as np

from sits.ebpf import maps
from sits.ebpf.header import FRAME_FLAGS, FRAME_HISTS, FRAME_STAGES, PROBE_IDS
from sits.ebpf.histogram import Histogram
from sits.ebpf.points import PROGRAMS
from sits.ebpf.ringbuf import FRAME_DTYPE, RingConsumer, dtype_of
from sits.journey import record
from sits.journey.report import frames_report
from sits.journey.stats import Journey

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

#: struct sits_frame_epoch, one interval's statistics on one CPU
EPOCH_DTYPE = dtype_of("struct sits_frame_epoch")


def configure(journey: Journey, *, records: bool, rows: bool = False) -> dict:
    """A ProbeSession's `configure` for the journey object: its display
    latency from `journey`, records streamed only with `records`, and the
    frame_scanout probe point's rows (`sits probe top`'s) only with `rows`."""
    def apply(obj):
        c = obj.section(".rodata.journey", "struct sits_journey_config *")
        c.display_latency_ns = journey.display_latency_ns
        c.records = records
        if not rows:
            obj.section(".rodata.cfg", "struct sits_config *").probe_mask &= ~(1 << PROBE_IDS["frame_scanout"])
    return {OBJECT: apply}


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


def to_rows(frames: np.ndarray) -> list[tuple]:
    """struct sits_frame rows as record.py's rows (values in FIELDS'
    order), in capture order. Frames the application never dequeued
    (buffers STREAMOFF handed back, frames still with it at the end) are
    not part of its journey (nor of the kernel's statistics:
    journey.bpf.c count_frame())."""
    frames = frames[frames["dequeued_ns"] != 0]
    return record.rows_of(frames[np.argsort(frames["id"], kind="stable")])


def to_records(frames: np.ndarray) -> list[dict]:
    """to_rows() as records."""
    return [record.from_values(r) for r in to_rows(frames)]


def from_epoch(values: np.ndarray, display_latency_ms: float = 0.0) -> Journey:
    """A Journey of one interval's in-kernel statistics: `values` are its
    struct sits_frame_epoch, one per CPU (EPOCH_DTYPE)."""
    j = Journey(display_latency_ms=display_latency_ms, recent=0)
    st = values["stats"]
    j.count = int(st["count"].sum())
    reached = st["reached"].sum(axis=0)
    for i, s in enumerate(FRAME_STAGES):
        j.reached[s] = int(reached[i])
    drops = st["drops"].sum(axis=0)
    for i, cause in enumerate(record.DROP_CAUSES):
        j.drops[cause] = int(drops[i])
    hists = _histograms(values["hists"])
    for i, s in enumerate(FRAME_STAGES):
        if s in j.stages:
            j.stages[s] = hists[i]
    j.glass = hists[FRAME_HISTS["glass"]]
    j.late = hists[FRAME_HISTS["late"]]
    j.scanout_gaps = hists[FRAME_HISTS["gaps"]]
    for times, name in ((j.captured_times, "captured"), (j.scanout_times, "scanout")):
        n, lo, hi = st[f"{name}_n"], st[f"{name}_lo"], st[f"{name}_hi"]
        times.n = int(n.sum())
        if times.n:
            times.lo, times.hi = int(lo[n != 0].min()), int(hi[n != 0].max())
    j.shown_ns = int(st["shown_ns"].sum())
    j.shown_vblanks = int(st["shown_vblanks"].sum())
    return j


def _histograms(per_cpu: np.ndarray) -> list[Histogram]:
    """The per-CPU copies of an array of struct sits_hist (CPU, index),
    added up: a Histogram per index."""
    counts = per_cpu["count"].sum(axis=0).tolist()
    sums = per_cpu["sum_ns"].sum(axis=0).tolist()
    maxes = per_cpu["max_ns"].max(axis=0).tolist()
    slots = per_cpu["slots"].sum(axis=0, dtype=np.uint64)
    out = []
    for i, n in enumerate(counts):
        if not n:
            out.append(Histogram())
            continue
        nz = np.flatnonzero(slots[i])
        out.append(Histogram(n, sums[i], maxes[i], dict(zip(nz.tolist(), slots[i][nz].tolist()))))
    return out


class KernelJourney:
    """Reads a started ProbeSession's journey (group "frames")."""

    def __init__(self, session):
        obj = session.objects.get(OBJECT)
        if obj is None:
            raise KeyError(OBJECT)
        self._session, self._obj = session, obj
        self._frames_fd = obj.map_fd("frames")
        self._stats_fd = obj.map_fd("frame_stats")
        self._epoch_fd = obj.map_fd("frame_epoch")
        self._last_fd = obj.map_fd("last_scanout")
        self._freed_fd = obj.map_fd("queues_freed")
        self._epoch = 0
        cfg = obj.section(".rodata.journey", "struct sits_journey_config *")
        self.display_latency_ms = cfg.display_latency_ns / 1e6
        #: whether the programs stream records (configure(records=True))
        self.records = bool(cfg.records)
        self._ring = RingConsumer(obj.map_fd("frames_out"), RING_BYTES, FRAME_DTYPE) if self.records else None
        self.errors = 0     # frames the driver marked as errors (not in the records)

    def collect(self) -> Journey:
        """The statistics of the frames that finished since the last call:
        the programs are pointed at the other interval's element, and once
        none can still be counting into this one it is read and zeroed."""
        ended = self._epoch
        self._epoch ^= 1
        maps.update_u32(self._epoch_fd, 0, self._epoch, "frame_epoch")
        self._session.wait_for_programs()
        values = np.frombuffer(maps.percpu_value_bytes(self._stats_fd, ended, "struct sits_frame_epoch",
                                                       "frame_stats"), EPOCH_DTYPE)
        maps.percpu_zero(self._stats_fd, ended, "struct sits_frame_epoch", "frame_stats")
        self.errors += int(values["stats"]["driver_errors"].sum())
        part = from_epoch(values, self.display_latency_ms)
        last = maps.lookup_u64(self._last_fd, 0)
        part.last_scanout = last or None
        return part

    def drain(self, last: int | None = None) -> list[dict]:
        """The records of the frames whose journey ended since the last call
        (only the `last` few when given); none unless the programs stream
        them. They are in collect()'s statistics already."""
        frames = self._drain_frames()
        if last is not None:
            frames = frames[frames["dequeued_ns"] != 0][-last:] if last else frames[:0]
        return to_records(frames)

    def drain_rows(self) -> list[tuple]:
        """drain() as record.py's rows, for Writer.write_rows."""
        return to_rows(self._drain_frames())

    def _drain_frames(self) -> np.ndarray:
        if self._ring is None:
            return np.empty(0, FRAME_DTYPE)
        frames = self._ring.drain()
        return frames[(frames["flags"] & ERROR) == 0]

    def detach(self) -> None:
        """Stop the journey's programs: after this, collect(), drain() and
        flush() see everything, once."""
        for link in self._obj.links:
            link.destroy()
        self._session.wait_for_programs()

    def flush(self) -> list[dict]:
        """The frames still in flight (call once, at the end, after
        detach(), collect() and drain()): in no statistics yet."""
        rows = np.frombuffer(maps.values_bytes(self._frames_fd, "struct sits_frame"), FRAME_DTYPE)
        err = (rows["flags"] & ERROR) != 0
        self.errors += int(np.count_nonzero(err & (rows["dequeued_ns"] != 0)))
        return to_records(rows[~err])

    def queues_freed(self) -> int:
        """How many times a queue freed buffers the journey knew (REQBUFS
        again, its owner's close): their identities were forgotten, so
        the buffers allocated next are joined as new ones."""
        return maps.lookup_u64(self._freed_fd, 0)

    def close(self) -> None:
        if self._ring is not None:
            self._ring.close()


def kernel_report(reader: KernelJourney, journey: Journey, session, also=None) -> dict:
    """frames_report() of `journey`, fed from `reader` until now: its
    programs are stopped, their last statistics added, the records still
    in the ring handed to `also(record)`, and the frames in flight at the
    end added (and handed to `also` too); then the reader is closed. With
    what only the kernel's side knows: records lost, frames the driver
    marked as errors, the stages not timed, and how the kernel's functions
    are hooked."""
    reader.detach()
    journey.merge(reader.collect())
    for rec in reader.drain():
        if also is not None:
            also(rec)
    for rec in reader.flush():
        journey.add(rec)
        if also is not None:
            also(rec)
    reader.close()
    report = frames_report(journey)
    drops = session.drops()
    report["frames"]["lost"] = {"ring_full": drops["frame_ring"], "map_full": drops["frame_map_full"]}
    report["frames"]["driver_errors"] = reader.errors
    report["frames"]["queues_freed"] = reader.queues_freed()
    report["untimed"] = untimed_stages(session)
    report["hooks"] = hooks(session)
    return report


def hooks(session) -> dict:
    """How the journey's kernel functions are hooked: {"kind": "trampoline"
    (fentry/fexit) or "kprobe", "why": why kprobes stand in, or None}."""
    twinned = [p.name for p in PROGRAMS if p.obj == OBJECT and p.kprobes and p.name in session.attached]
    why = sorted({session.kprobed[n] for n in twinned if n in session.kprobed})
    return {"kind": "kprobe" if why else "trampoline", "why": why[0] if why else None}
