"""An option declared once: its command-line flags, the keyword it fills,
its kind, default, help, bounds and choices. The CLI's fast parser and its
typer command (sits/cli/fastargs.py), the library's option records
(sits.pipeline.capture.CaptureOptions) and front door (sits.open_chain) are
all made from such declarations, so a default or a bound is written once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from sits.errors import UsageError

FLAG, STR, INT, FLOAT, INTS, STRS = "flag", "str", "int", "float", "ints", "strs"


@dataclass(frozen=True)
class Option:
    flags: tuple              # ("--output", "-o")
    dest: str                 # the keyword it fills
    kind: str                 # FLAG ... STRS: how the command line spells it
    default: object = None
    help: str = ""
    min: float | None = None
    max: float | None = None
    choices: tuple | None = None
    hidden: bool = False
    #: the value from its command-line text (e.g. "1280x720" -> (1280, 720));
    #: the library takes either
    convert: Callable | None = None

    @property
    def flag(self) -> str:
        return self.flags[0]

    def within(self, v) -> bool:
        """`v` keeps this option's bounds."""
        return not ((self.min is not None and v < self.min) or (self.max is not None and v > self.max))

    def value(self, v, name: str | None = None):
        """`v` as this option's value, checked; UsageError names it as
        `name` (default: its flag; a library caller's keyword)."""
        if v is None or v is self.default:
            return v
        name = name or self.flag
        if self.convert is not None and isinstance(v, str):
            v = self.convert(v, name)
        if self.choices is not None and v not in self.choices:
            one_of = ", ".join(self.choices[:-1]) + " or " + self.choices[-1]
            raise UsageError(f"{name} must be {one_of}, not {v!r}")
        if not self.within(v):
            bounds = f"at least {self.min}" if self.max is None else f"{self.min} to {self.max}"
            raise UsageError(f"{name} must be {bounds}, not {v}")
        return v


def size(text: str, flag: str = "--size") -> tuple[int, int]:
    """WxH -> (W, H)."""
    import re
    m = re.fullmatch(r"(\d+)x(\d+)", text)
    if not m or 0 in (int(m.group(1)), int(m.group(2))):
        raise UsageError(f"{flag} must look like 1280x720, not {text!r}")
    return int(m.group(1)), int(m.group(2))


def fourcc(text: str, flag: str = "--format") -> str:
    """A four-character code."""
    if len(text) != 4:
        raise UsageError(f"{flag} takes a fourcc such as XR24, not {text!r}")
    return text
