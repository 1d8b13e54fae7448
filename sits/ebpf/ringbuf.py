"""Per-event streaming: the BPF ring buffer read through mmap, parsed with numpy.

The programs submit with BPF_RB_NO_WAKEUP (no wakeup per event); user space
drains on its own clock. A libbpf callback per event tops out at ~0.5 M
events/s in Python; here a drain is one numpy view over the committed bytes
(the data pages are mapped twice by the kernel, so a wrapped run is still
contiguous), then one store to the consumer position.

Ring layout (kernel/bpf/ringbuf.c): page 0 is the consumer position (ours to
write), page 1 the producer position, then the data; each record is an 8-byte
header (u32 length with BUSY/DISCARD bits, u32 page offset) and the sample,
rounded up to 8 bytes. A ring holds one struct: `struct sits_event` (the
samples), or `struct sits_frame` (journey.bpf.c's frame records).
"""
from __future__ import annotations

import mmap

import numpy as np

from sits._kernel import ffi, lib
from sits.ebpf.histogram import Histogram, RowKey

BUSY = 1 << 31
DISCARD = 1 << 30
HDR = 8


def dtype_of(ctype) -> np.dtype:
    """The numpy dtype of a C type of sits_probe.h as csrc/libbpf.cdef
    declares it (a name, or cffi's type): integers signed where C's are,
    arrays, and structs of those at their C offsets
    (tests/unit/test_ebpf_layout.py holds the layouts to the BPF side's BTF)."""
    from sits.ebpf._libbpf_ffi import ffi
    t = ffi.typeof(ctype) if isinstance(ctype, str) else ctype
    if t.kind == "array":
        return np.dtype((dtype_of(t.item), (t.length,)))
    if t.kind == "struct":
        return np.dtype({"names": [name for name, _ in t.fields],
                         "formats": [dtype_of(f.type) for _, f in t.fields],
                         "offsets": [f.offset for _, f in t.fields], "itemsize": ffi.sizeof(t)})
    signed = int(ffi.cast(t, -1)) < 0
    return np.dtype(f"={'i' if signed else 'u'}{ffi.sizeof(t)}")


EVENT_DTYPE = dtype_of("struct sits_event")
FRAME_DTYPE = dtype_of("struct sits_frame")


def _record_dtype(sample: np.dtype) -> np.dtype:
    """A ring record: the kernel's 8-byte header, the sample, 8-aligned."""
    size = (HDR + sample.itemsize + 7) & ~7
    return np.dtype({"names": ["len", "pg_off", "ev"], "formats": ["=u4", "=u4", sample],
                     "offsets": [0, 4, HDR], "itemsize": size})


class RingConsumer:
    """Reads a BPF_MAP_TYPE_RINGBUF map of one struct's samples (`dtype`)
    by mmap."""

    def __init__(self, map_fd: int, size: int, dtype: np.dtype = EVENT_DTYPE):
        page = mmap.PAGESIZE
        self.dtype = dtype
        self.record = _record_dtype(dtype)
        self.size = size
        self.mask = size - 1
        self._cons = mmap.mmap(map_fd, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
        self._prod = mmap.mmap(map_fd, page + 2 * size, mmap.MAP_SHARED, mmap.PROT_READ, offset=page)
        self._cons_pos = np.frombuffer(self._cons, dtype="<u8", count=1)
        self._prod_pos = np.frombuffer(self._prod, dtype="<u8", count=1)
        self._data = np.frombuffer(self._prod, dtype=np.uint8, offset=page)
        self.consumed = 0

    def drain(self, copy: bool = True) -> np.ndarray:
        """The samples committed since the last drain (a `dtype` array)."""
        cons = int(self._cons_pos[0])
        prod = int(self._prod_pos[0])
        size = self.record.itemsize
        n = (prod - cons) // size
        if n <= 0:
            return np.empty(0, self.dtype)
        start = cons & self.mask
        recs = self._data[start:start + n * size].view(self.record)
        lens = recs["len"]
        busy = np.flatnonzero(lens & BUSY)
        if busy.size:  # stop at the first record still being written
            n = int(busy[0])
            recs, lens = recs[:n], lens[:n]
        if n and np.any((lens & ~np.uint32(BUSY | DISCARD)) != self.dtype.itemsize):
            raise ValueError("ring holds a record of another size than its struct")
        events = recs["ev"][(lens & DISCARD) == 0]
        if copy:
            events = events.copy()
        self._cons_pos[0] = cons + n * size  # frees the space for the producers
        self.consumed += n
        return events

    def close(self) -> None:
        del self._cons_pos, self._prod_pos, self._data
        self._cons.close()
        self._prod.close()


def slots_of(values: np.ndarray) -> np.ndarray:
    """slot_of() for an array of ns values (sits_hist_slot() in C)."""
    v = np.ascontiguousarray(values, dtype=np.uint64)
    slots = np.empty(len(v), np.uint32)
    lib.sits_hist_slots(ffi.from_buffer("__u64[]", v), ffi.from_buffer("__u32[]", slots), len(v))
    return slots


def aggregate(events: np.ndarray, into: dict[RowKey, Histogram] | None = None,
              per_thread: bool = False) -> dict[RowKey, Histogram]:
    """Fold streamed events into per-row histograms (the kernel's own layout)."""
    rows = into if into is not None else {}
    if not len(events):
        return rows
    tid = events["tid"] if per_thread else np.zeros(len(events), np.uint32)
    keys = np.rec.fromarrays([events["pid"], tid, events["probe"], events["key"]])
    uniq, inverse = np.unique(keys, return_inverse=True)
    slots = slots_of(events["delta_ns"])
    for i, u in enumerate(uniq):
        sel = inverse == i
        d = events["delta_ns"][sel]
        rk = RowKey(int(u[0]), int(u[1]), int(u[2]), int(u[3]))
        h = rows.get(rk)
        if h is None:
            h = rows[rk] = Histogram()
        h.count += int(d.size)
        h.sum_ns += int(d.sum())
        h.max_ns = max(h.max_ns, int(d.max()))
        s, c = np.unique(slots[sel], return_counts=True)
        for si, ci in zip(s.tolist(), c.tolist()):
            h.slots[si] = h.slots.get(si, 0) + ci
    return rows


def ring_consumer(session) -> RingConsumer:
    """The consumer of a ProbeSession started with stream=True."""
    if not session.stream:
        raise ValueError("session was not started with stream=True")
    return RingConsumer(session.map_fd("events"), session.ring_bytes)



class EventWriter:
    """Writes streamed events as CSV (one line per sample, with a header):
    ts_ns (CLOCK_MONOTONIC at the sample's end), pid, tid, probe, key (the
    row key, labelled as in reports), latency_ns."""

    HEADER = ("ts_ns", "pid", "tid", "probe", "key", "latency_ns")

    def __init__(self, f, fence_names=None):
        import csv
        self._csv = csv.writer(f, lineterminator="\n")
        self._csv.writerow(self.HEADER)
        self._labels: dict = {}
        self._fd_paths: dict = {}
        self._fence_names = fence_names
        self.events = 0

    def write(self, events: np.ndarray) -> None:
        from sits.ebpf.points import POINT_BY_ID
        from sits.ebpf.report import key_kind, key_label
        labels = self._labels
        rows = []
        for ts, delta, key, pid, tid, probe in zip(
                events["ts_ns"].tolist(), events["delta_ns"].tolist(), events["key"].tolist(),
                events["pid"].tolist(), events["tid"].tolist(), events["probe"].tolist()):
            label = labels.get((probe, key, pid))
            if label is None:
                point = POINT_BY_ID.get(probe)
                fences = self._fence_names() if self._fence_names and key_kind(probe) == "context" else None
                label = labels[(probe, key, pid)] = (
                    point.name if point else str(probe),
                    key_label(probe, key, pid, fence_names=fences, fd_paths=self._fd_paths))
            rows.append((ts, pid, tid, label[0], label[1], delta))
        self._csv.writerows(rows)
        self.events += len(rows)
