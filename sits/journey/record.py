"""The per-frame record: its fields, and the NDJSON / CSV files that hold
them. Both producers -- the kernel's journey (sits/ebpf/programs/
journey.bpf.c, joined by buffer identity) and sits' own pipeline
(`sits capture --timeline`) -- write this schema, so a test can hold one
against the other frame by frame.

Times are CLOCK_MONOTONIC nanoseconds; a stage the frame never reached is
None (NDJSON null, an empty CSV cell).
"""
from __future__ import annotations

import csv
import json

from sits.ebpf.header import FRAME_DROPS, FRAME_FLAGS, FRAME_STAGES

#: a frame's stages, in the order it reaches them: the kernel's
#: (sits_probe.h enum sits_frame_stage, which journey.bpf.c counts by):
#:   captured   vb2 buffer done: the V4L2 timestamp
#:   dequeued   VIDIOC_DQBUF handed it to the application
#:   committed  the commit that put it (or its copy) on a plane
#:   scanout    the vblank at which it went on screen
#:   replaced   the vblank at which the next frame took its place
#:   requeued   VIDIOC_QBUF gave the buffer back
#: then sits' own pipeline's:
STAGES = (*FRAME_STAGES,
          "made",            # a stage (the display's CPU conversion) made it into a buffer of its own
          "cuda_submitted",  # its conversion was launched
          "cuda_done")       # ... and completed on the GPU

FIELDS = ("pid",             # the process that dequeued it
          "source",          # the source it came from (sits' pipeline: its place in the sources; else 0)
          "buffer",          # capture buffer index (in its source's own numbering)
          "made_buffer",     # the buffer a stage made it into (its own numbering; None: none)
          "sequence",        # V4L2 sequence number
          *(f"{s}_ns" for s in STAGES),
          "skipped_before",  # sequence numbers the driver skipped just before this one
          "copied",          # the application copied its pixels: the commit is of the copy
          "vblanks",         # vblanks it was on screen (replaced - scanout), None when unknown
          "late_ns")         # committed this long after a vblank it could have made (None: not late)

#: drop causes, each counted from the records (stats.py) or in the kernel
#: (sits_probe.h enum sits_frame_drop):
#:   sequence_gap  sequence numbers the driver skipped
#:   not_shown     dequeued, never committed
#:   late          committed after a vblank it could have made
#:   repeated      on screen for more than one vblank
DROP_CAUSES = FRAME_DROPS


_EMPTY = {**dict.fromkeys(FIELDS), "source": 0, "skipped_before": 0, "copied": False}


def new(**values) -> dict:
    """A record with every field, in FIELDS' order, None where `values`
    says nothing. (Once a frame for `sits capture --timeline`: a copy
    and a length check, not a set a record.)"""
    rec = _EMPTY.copy()
    rec.update(values)
    if len(rec) != len(FIELDS):
        unknown = set(values) - set(FIELDS)
        raise KeyError(f"not a frame record field: {', '.join(sorted(unknown))}")
    return rec


def rows_of(frames) -> list[tuple]:
    """struct sits_frame (sits/include/sits_frame.h) records, as a numpy
    array of sits.ebpf.ringbuf.FRAME_DTYPE, as rows of values in FIELDS'
    order: the one reading of the kernel journey's and the frame queue's
    records alike (0: a stage it never reached, None here)."""
    import numpy as np

    def reached(a) -> list:
        out = a.astype(object)
        out[a == 0] = None
        return out.tolist()
    shown = (frames["scanout_ns"] != 0) & (frames["replaced_ns"] != 0)
    # the flip events' vblank counter is 32 bits: a difference modulo 2^32
    vblanks = (frames["replaced_seq"] - frames["scanout_seq"]).astype(np.uint32).astype(object)
    vblanks[~shown] = None
    made = frames["made_buffer"].astype(np.int64) - 1
    made_buffer = made.astype(object)
    made_buffer[made < 0] = None
    columns = {"pid": frames["pid"].tolist(), "source": frames["source"].tolist(),
               "buffer": frames["buffer"].tolist(), "made_buffer": made_buffer.tolist(),
               "sequence": frames["sequence"].tolist(), "skipped_before": frames["skipped_before"].tolist(),
               "copied": ((frames["flags"] & FRAME_FLAGS["copied"]) != 0).tolist(), "vblanks": vblanks.tolist(),
               "late_ns": reached(frames["late_ns"])}
    for stage in STAGES:
        columns[f"{stage}_ns"] = reached(frames[f"{stage}_ns"])
    return list(zip(*(columns[k] for k in FIELDS)))


def from_values(values: tuple) -> dict:
    """The record of a row of values in FIELDS' order (Writer.write_rows')."""
    return dict(zip(FIELDS, values))


# NDJSON from a row of values in FIELDS' order: every value is an int, a
# bool or None, whose %s spelling is JSON's but for the three names. (A
# row a record: no dict, and no JSON encoder walking one, for each frame
# `sits probe frames --stream` writes.)
_LINE = "{" + ",".join(f'"{k}":%s' for k in FIELDS) + "}\n"
_COPIED = FIELDS.index("copied")


def _ndjson(values: tuple) -> str:
    return (_LINE % values).replace("None", "null").replace("True", "true").replace("False", "false")


class Writer:
    """Frame records to a file: CSV when its name ends in .csv, NDJSON
    otherwise. Owns the file."""

    def __init__(self, path: str):
        self.path = path
        self.csv = path.endswith(".csv")
        self._f = open(path, "w", newline="" if self.csv else None)
        self.written = 0
        if self.csv:
            self._csv = csv.writer(self._f)
            self._csv.writerow(FIELDS)

    def write(self, rec: dict) -> None:
        self.write_rows([tuple(rec.values()) if tuple(rec) == FIELDS else tuple(rec[k] for k in FIELDS)])

    def write_rows(self, rows: list[tuple]) -> None:
        """Records given as rows of values in FIELDS' order, in one write."""
        if self.csv:  # csv writes None as an empty cell
            self._csv.writerows(r[:_COPIED] + (int(r[_COPIED]),) + r[_COPIED + 1:] for r in rows)
        else:
            self._f.write("".join(map(_ndjson, rows)))
        self.written += len(rows)

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read(path: str) -> list[dict]:
    """The records of a file Writer wrote (either format)."""
    with open(path, newline="") as f:
        if not path.endswith(".csv"):
            return [json.loads(line) for line in f if line.strip()]
        out = []
        for row in csv.DictReader(f):
            rec = {}
            for k in FIELDS:
                v = row[k]
                rec[k] = None if v == "" else (v == "1") if k == "copied" else int(v)
            out.append(rec)
        return out
