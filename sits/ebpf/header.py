"""What sits_probe.h (and sits_hist.h and sits_frame.h, which it includes) says, read by user space: the one source of the probe
point ids, the drop counters and the histogram's constants.

The BPF programs include the header; Python parses it here at import (a
few kB, well under a millisecond) instead of restating its numbers, so the
two cannot drift. Only what the header is written with is understood:
`#define NAME NUMBER` and enums whose members are NAME or NAME = NUMBER;
anything else raises, and tests/unit/test_ebpf_header.py checks the result
against the compiler's own reading of the header.
"""
import os

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs", "sits_probe.h")
#: the folder of the headers it includes: rules the frame queue's C follows too
INCLUDE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "include")
HIST_PATH = os.path.join(INCLUDE, "sits_hist.h")   # the histogram's slots
FRAME_PATH = os.path.join(INCLUDE, "sits_frame.h")  # a frame's record, its stages and flags


def _number(text: str) -> int | None:
    try:
        return int(text, 0)
    except ValueError:
        return None


def _without_comments(text: str) -> str:
    out, i = [], 0
    while True:
        block, line = text.find("/*", i), text.find("//", i)
        starts = [p for p in (block, line) if p >= 0]
        if not starts:
            return "".join(out) + text[i:]
        j = min(starts)
        out.append(text[i:j] + " ")
        end = text.find("*/", j + 2) + 2 if j == block else text.find("\n", j)
        if end < j:  # an unclosed comment runs to the end
            return "".join(out)
        i = end


def parse(text: str) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """({define: value} for numeric defines, {enum: {member: value}}).
    (str methods, not re: the probe commands do not otherwise import re,
    and their start-up counts.)"""
    text = _without_comments(text)
    defines = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "#define" and (n := _number(words[2])) is not None:
            defines[words[1]] = n
    enums = {}
    for chunk in text.split("enum ")[1:]:
        name, brace, rest = chunk.partition("{")
        body, close, _ = rest.partition("}")
        if not brace or not close or not name.strip().isidentifier():
            continue  # `enum x` used as a type, not defined
        members, nxt = {}, 0
        for item in filter(None, (i.strip() for i in body.split(","))):
            member, eq, value = (p.strip() for p in item.partition("="))
            n = _number(value) if eq else nxt
            if not member.isidentifier() or n is None:
                raise ValueError(f"{PATH}: enum {name.strip()}: cannot read {item!r}")
            members[member] = nxt = n
            nxt += 1
        enums[name.strip()] = members
    return defines, enums


def _members(enum: str, prefix: str, *, skip=()) -> dict[str, int]:
    """An enum's members without their prefix, lower case: SITS_P_SYS_READ
    -> "sys_read"; `skip` leaves out markers such as SITS_P_MAX."""
    return {k[len(prefix):].lower(): v for k, v in ENUMS[enum].items()
            if k.startswith(prefix) and k[len(prefix):] not in skip}


DEFINES: dict[str, int] = {}
ENUMS: dict[str, dict[str, int]] = {}
for _path in (HIST_PATH, FRAME_PATH, PATH):
    with open(_path) as _f:
        _defines, _enums = parse(_f.read())
    DEFINES.update(_defines)
    ENUMS.update(_enums)

#: enum sits_probe_id, by probe point name (SITS_P_SYS_READ -> "sys_read")
PROBE_IDS = _members("sits_probe_id", "SITS_P_", skip=("NONE", "MAX"))
PROBE_ID_LIMIT = ENUMS["sits_probe_id"]["SITS_P_MAX"]  # ids are bits of a 64-bit mask
#: enum sits_drop, by the name reports use (SITS_DROP_RINGBUF -> "ringbuf")
DROP_IDS = _members("sits_drop", "SITS_DROP_", skip=("MAX",))
HIST_SLOTS = DEFINES["SITS_HIST_SLOTS"]
SUB_BITS = DEFINES["SITS_SUB_BITS"]
COMM_LEN = DEFINES["SITS_COMM_LEN"]
#: enum sits_frame_flags (journey.bpf.c's records): COPIED, ERROR, ...
FRAME_FLAGS = _members("sits_frame_flags", "SITS_FRAME_")


def _in_order(members: dict[str, int]) -> tuple[str, ...]:
    """An enum's names by value, which must run 0, 1, 2, ... (array indices)."""
    names = tuple(sorted(members, key=members.get))
    if [members[n] for n in names] != list(range(len(names))):
        raise ValueError(f"{PATH}: {names} are not numbered 0, 1, 2, ...")
    return names


#: enum sits_frame_stage: the stages the kernel times, in order (record.py's STAGES begin with them)
FRAME_STAGES = _in_order(_members("sits_frame_stage", "SITS_STAGE_", skip=("MAX",)))
#: enum sits_frame_drop: the journey's drop causes (record.py's DROP_CAUSES)
FRAME_DROPS = _in_order(_members("sits_frame_drop", "SITS_FRAME_DROP_", skip=("MAX",)))
#: enum sits_frame_hist: the journey's histograms after the stages': glass, late, gaps
FRAME_HISTS = _members("sits_frame_hist", "SITS_FRAME_HIST_")
FRAME_HIST_COUNT = ENUMS["sits_frame_hist"]["SITS_FRAME_HISTS"]
