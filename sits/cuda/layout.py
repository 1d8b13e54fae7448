"""What the conversion kernel (kernels/convert.cu) declares for the host: its
parameter block (struct Params), its span entry (struct Span), its pixel
format codes (FMT_) and output type codes (OUT_). Read from the kernel's
text at import (a few kB), as sits/ebpf/header.py reads sits_probe.h, so
that the host packs what the kernel reads and names what it takes, with no
copy of either. Only what the kernel is written with is understood: plain
structs of int, unsigned int and float fields (alone or arrays, several to
a line), `alignas(N)`, and enums of NAME = NUMBER; anything else raises.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

SOURCE_PATH = Path(__file__).with_name("kernels") / "convert.cu"
_TYPES = {"int": "i", "unsigned int": "u", "float": "f"}


def _without_comments(text: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)


def struct_fields(text: str, name: str) -> tuple[list[tuple[str, int, str]], int]:
    """([(field, count, kind "i"/"u"/"f")], alignment) of `struct name`."""
    m = re.search(r"struct\s+(?:alignas\((\d+)\)\s+)?" + name + r"\s*\{(.*?)\}\s*;", text, re.S)
    if m is None:
        raise ValueError(f"{SOURCE_PATH}: no struct {name}")
    fields = []
    for decl in m.group(2).split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        kind = next((t for t in sorted(_TYPES, key=len, reverse=True) if decl.startswith(t + " ")), None)
        if kind is None:
            raise ValueError(f"{SOURCE_PATH}: struct {name}: cannot read {decl!r}")
        for item in decl[len(kind):].split(","):
            f = re.fullmatch(r"\s*(\w+)\s*(?:\[(\d+)\])?\s*", item)
            if f is None:
                raise ValueError(f"{SOURCE_PATH}: struct {name}: cannot read {item!r}")
            fields.append((f.group(1), int(f.group(2) or 1), _TYPES[kind]))
    return fields, int(m.group(1) or 4)


def enum_members(text: str, prefix: str) -> dict[str, int]:
    """The members NAME = NUMBER of the enum whose names start with `prefix`,
    without it: {"YUYV": 0, ...}."""
    for body in re.findall(r"enum\s*\{(.*?)\}\s*;", text, re.S):
        items = [i.strip() for i in body.split(",") if i.strip()]
        if items and items[0].startswith(prefix):
            out = {}
            for item in items:
                m = re.fullmatch(r"(\w+)\s*=\s*(\d+)", item)
                if m is None or not m.group(1).startswith(prefix):
                    raise ValueError(f"{SOURCE_PATH}: enum {prefix}: cannot read {item!r}")
                out[m.group(1)[len(prefix):]] = int(m.group(2))
            return out
    raise ValueError(f"{SOURCE_PATH}: no enum of {prefix} names")


def _dtype(fields, align: int) -> np.dtype:
    dt = np.dtype([(n, f"<{k}4", (c,)) if c > 1 else (n, f"<{k}4") for n, c, k in fields])
    size = -(-dt.itemsize // align) * align
    return np.dtype({"names": dt.names, "formats": [dt.fields[n][0] for n in dt.names],
                     "offsets": [dt.fields[n][1] for n in dt.names], "itemsize": size})


_TEXT = _without_comments(SOURCE_PATH.read_text())
#: struct Params, in order: (name, count, kind); every field is 4 bytes
PARAM_FIELDS, _ = struct_fields(_TEXT, "Params")
PARAM_WORDS = sum(count for _, count, _ in PARAM_FIELDS)
#: struct Span: one row or column of an area resampling
SPAN_DTYPE = _dtype(*struct_fields(_TEXT, "Span"))
#: the kernel's code of each pixel format it reads, by sits/formats.py's name
FORMAT_CODES = enum_members(_TEXT, "FMT_")
#: the kernel's code of each output dtype, by its name ("uint8", "float16", ...)
OUT_CODES = {k.lower(): v for k, v in enum_members(_TEXT, "OUT_").items()}
