"""A camera's controls by the names `v4l2-ctl -l` prints (brightness,
white_balance_automatic, power_line_frequency), each with its range, its
menu and its value; requested values checked against the range before
anything is set, then set in the order given.

Nothing here owns the fd: the device objects lend theirs (sits/v4l2/raw.py
holds the ioctls).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sits._kernel import lib
from sits.errors import DeviceError, IoctlError, UsageError
from sits.v4l2 import raw

#: v4l2-ctl's names for the control types
TYPE_NAMES = {
    lib.V4L2_CTRL_TYPE_INTEGER: "int",
    lib.V4L2_CTRL_TYPE_BOOLEAN: "bool",
    lib.V4L2_CTRL_TYPE_MENU: "menu",
    lib.V4L2_CTRL_TYPE_BUTTON: "button",
    lib.V4L2_CTRL_TYPE_INTEGER64: "int64",
    lib.V4L2_CTRL_TYPE_STRING: "str",
    lib.V4L2_CTRL_TYPE_BITMASK: "bitmask",
    lib.V4L2_CTRL_TYPE_INTEGER_MENU: "intmenu",
    lib.V4L2_CTRL_TYPE_U8: "u8",
    lib.V4L2_CTRL_TYPE_U16: "u16",
    lib.V4L2_CTRL_TYPE_U32: "u32",
    lib.V4L2_CTRL_TYPE_AREA: "area",
}
#: v4l2-ctl's names for the flags worth showing
FLAG_NAMES = {
    lib.V4L2_CTRL_FLAG_GRABBED: "grabbed",
    lib.V4L2_CTRL_FLAG_READ_ONLY: "read-only",
    lib.V4L2_CTRL_FLAG_UPDATE: "update",
    lib.V4L2_CTRL_FLAG_INACTIVE: "inactive",
    lib.V4L2_CTRL_FLAG_SLIDER: "slider",
    lib.V4L2_CTRL_FLAG_WRITE_ONLY: "write-only",
    lib.V4L2_CTRL_FLAG_VOLATILE: "volatile",
    lib.V4L2_CTRL_FLAG_HAS_PAYLOAD: "has-payload",
    lib.V4L2_CTRL_FLAG_EXECUTE_ON_WRITE: "execute-on-write",
}
_INTEGERS = (lib.V4L2_CTRL_TYPE_INTEGER, lib.V4L2_CTRL_TYPE_INTEGER64)
_MENUS = (lib.V4L2_CTRL_TYPE_MENU, lib.V4L2_CTRL_TYPE_INTEGER_MENU)
_BOOLS = {"0": 0, "1": 1, "false": 0, "true": 1}


def control_name(text: str) -> str:
    """The name `v4l2-ctl -l` prints for a control (or a menu item) the
    driver calls `text`: lower case, every run of other characters between
    letters and digits one underscore ("White Balance, Automatic" ->
    "white_balance_automatic")."""
    out, gap = [], False
    for ch in text:
        if ch.isascii() and ch.isalnum():
            if gap:
                out.append("_")
            gap = False
            out.append(ch.lower())
        elif out:
            gap = True
    return "".join(out)


def requests(given, flag: str = "--control") -> list[tuple[str, object]]:
    """(name, value) pairs, in order, from NAME=VALUE strings (the command
    line's), (name, value) pairs or a mapping (a library caller's); names
    as control_name() makes them, each once."""
    if not given:
        return []
    items = given.items() if isinstance(given, dict) else given
    if isinstance(items, str):
        items = [items]
    out, seen = [], set()
    for item in items:
        if isinstance(item, str):
            name, eq, value = item.partition("=")
            if not eq or not name.strip() or not value.strip():
                raise UsageError(f"{flag} takes NAME=VALUE, e.g. brightness=128, not {item!r}")
        else:
            name, value = item
        key = control_name(name)
        if key in seen:
            raise UsageError(f"{flag} {key} is given twice")
        seen.add(key)
        out.append((key, value.strip() if isinstance(value, str) else value))
    return out


@dataclass
class CameraControl:
    """One control of a camera: its description, menu and current value
    (None where it has none to read: buttons, write-only and compound
    controls)."""
    desc: raw.Control
    menu: list[tuple[int, str | int]] = field(default_factory=list)
    value: int | str | None = None

    @property
    def name(self) -> str:
        return control_name(self.desc.name)

    @property
    def type_name(self) -> str:
        return TYPE_NAMES.get(self.desc.type, f"type {self.desc.type:#x}")

    @property
    def flag_names(self) -> list[str]:
        return [n for bit, n in FLAG_NAMES.items() if self.desc.flags & bit]

    @property
    def compound(self) -> bool:
        return self.desc.type >= lib.V4L2_CTRL_COMPOUND_TYPES or self.desc.elems > 1 or bool(self.desc.dims)

    def refusal(self) -> str | None:
        """Why no value can be set on it, or None."""
        if self.desc.flags & lib.V4L2_CTRL_FLAG_READ_ONLY:
            return "is read-only"
        if self.desc.type == lib.V4L2_CTRL_TYPE_BUTTON:
            return "is a button (pressed, not set)"
        if self.compound:
            dims = "".join(f"[{d}]" for d in self.desc.dims)
            return f"is a {self.type_name}{dims} payload, not one value"
        return None

    def valid(self) -> str:
        """The values it takes, in words."""
        d = self.desc
        if d.type in _INTEGERS:
            return f"{d.minimum} to {d.maximum}" + (f" in steps of {d.step}" if d.step > 1 else "")
        if d.type == lib.V4L2_CTRL_TYPE_BOOLEAN:
            return "0 or 1 (false or true)"
        if d.type in _MENUS:
            return "one of " + ", ".join(f"{i} ({item})" for i, item in self.menu)
        if d.type == lib.V4L2_CTRL_TYPE_BITMASK:
            return f"a bitmask of {d.maximum:#x}"
        if d.type == lib.V4L2_CTRL_TYPE_STRING:
            return f"{d.minimum} to {d.maximum} characters" + (f" in steps of {d.step}" if d.step > 1 else "")
        return "nothing"

    def parse(self, value) -> int | str:
        """`value` (text, int or bool) as the value to set, or a UsageError
        naming what it takes. Menus take an item's index or its name."""
        d = self.desc
        why = self.refusal()
        if why is not None:
            raise UsageError(f"control {self.name} {why}")
        bad = UsageError(f"control {self.name}={value} is not valid: {self.name} ({self.type_name}) "
                         f"takes {self.valid()}")
        if d.type == lib.V4L2_CTRL_TYPE_STRING:
            v = str(value)
            if not d.minimum <= len(v) <= d.maximum or (len(v) - d.minimum) % max(d.step, 1):
                raise bad
            return v
        if d.type == lib.V4L2_CTRL_TYPE_BOOLEAN:
            v = _BOOLS.get(str(value).strip().lower()) if not isinstance(value, bool) else int(value)
            if v is None:
                raise bad
            return v
        if d.type == lib.V4L2_CTRL_TYPE_MENU and isinstance(value, str) and not _is_int(value):
            by_name = {control_name(item): i for i, item in self.menu}
            if control_name(value) not in by_name:
                raise bad
            return by_name[control_name(value)]
        v = _integer(value)
        if v is None:
            raise bad
        if d.type in _MENUS:
            if v not in {i for i, _ in self.menu}:
                raise bad
        elif d.type == lib.V4L2_CTRL_TYPE_BITMASK:
            if v < 0 or v & ~d.maximum:
                raise bad
        elif not d.minimum <= v <= d.maximum or (v - d.minimum) % max(d.step, 1):
            raise bad
        return v

    def as_dict(self) -> dict:
        d = self.desc
        out = {"name": self.name, "type": self.type_name, "id": d.id, "flags": self.flag_names}
        if d.type in _INTEGERS + _MENUS + (lib.V4L2_CTRL_TYPE_STRING,) or self.compound:
            out.update(min=d.minimum, max=d.maximum, step=d.step)
        elif d.type == lib.V4L2_CTRL_TYPE_BITMASK:
            out["max"] = d.maximum
        if self.compound:
            out["dims"] = list(d.dims)
        elif d.type not in (lib.V4L2_CTRL_TYPE_BUTTON, lib.V4L2_CTRL_TYPE_STRING):
            out["default"] = d.default
        if d.type in _MENUS:
            out["menu"] = [{"index": i, "name": item} for i, item in self.menu]
        out["value"] = self.value
        return out


def _is_int(text: str) -> bool:
    return _integer(text) is not None


def _integer(value) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip(), 0)
    except ValueError:
        return None


class Controls:
    """The controls of one open camera, read once (descriptions, menus and
    values), by name."""

    def __init__(self, controls: list[CameraControl], where: str = "camera"):
        self.controls = controls
        self.where = where
        self.by_name = {c.name: c for c in controls}

    @classmethod
    def read(cls, fd: int, where: str = "camera") -> "Controls":
        out = []
        for desc in raw.controls(fd):
            c = CameraControl(desc)
            if desc.type in _MENUS:
                c.menu = raw.menu_items(fd, desc)
            if not (c.compound or desc.type == lib.V4L2_CTRL_TYPE_BUTTON
                    or desc.flags & lib.V4L2_CTRL_FLAG_WRITE_ONLY):
                try:
                    c.value = raw.g_ext_ctrl(fd, desc)
                except IoctlError:
                    c.value = None   # a driver may fail to read one (vivid's own test arrays): shown empty
            out.append(c)
        return cls(out, where)

    def __iter__(self):
        return iter(self.controls)

    def resolve(self, wanted: list[tuple[str, object]]) -> list[tuple[CameraControl, int | str]]:
        """Each (name, value) of requests() checked against this camera:
        (control, value to set), or the UsageError of the first that cannot
        be set, naming what it takes."""
        out = []
        for name, value in wanted:
            c = self.by_name.get(name)
            if c is None:
                settable = ", ".join(c.name for c in self.controls if c.refusal() is None)
                raise UsageError(f"{self.where}: no control named {name!r}; its controls: {settable}")
            try:
                out.append((c, c.parse(value)))
            except UsageError as exc:
                raise UsageError(f"{self.where}: {exc}") from None
        return out

    def apply(self, fd: int, resolved: list[tuple[CameraControl, int | str]]) -> None:
        """Set each control, in order (an automatic mode before the manual
        value it governs, as the caller gave them)."""
        for c, value in resolved:
            try:
                raw.s_ext_ctrl(fd, c.desc, value)
            except IoctlError as exc:
                raise DeviceError(f"{self.where}: control {c.name}={value} refused by the driver: {exc}") from exc
