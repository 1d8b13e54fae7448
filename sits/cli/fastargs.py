"""Option parsing without typer, for the commands whose start-up matters
(`sits probe audit|top|export`, `sits capture`): typer builds its parameter
adapters on first use, which costs ~80 ms natively and seconds in the test
VM. Only well-formed command lines are parsed here; anything unusual (help,
an unknown option, a missing or malformed value) returns None and typer
handles the command line exactly as before, with its usage messages. Each
caller's table is checked against its typer declaration by a unit test.

A caller can also declare its options once, as `Option`s that both read:
(sits.options.Option): `table()` gives parse() its table, `typer_command()`
gives typer the function to declare the command from, `in_bounds()` says
whether parsed values keep the bounds typer would check.
"""
from sits.options import FLAG, FLOAT, INT, INTS, STR, STRS, Option  # noqa: F401 (the callers' names)

CONVERT = {STR: str, INT: int, FLOAT: float, INTS: int, STRS: str}


def table(options) -> dict:
    """parse()'s table for `options`: each flag -> (keyword, kind)."""
    return {flag: (o.dest, o.kind) for o in options for flag in o.flags}


def defaults(options) -> dict:
    """{keyword: default} of `options`."""
    return {o.dest: o.default for o in options}


def typer_command(run, options, *, name: str, doc: str, rest: str | None = None):
    """A function for typer to declare a command from: one typer.Option
    per entry of `options`, each with its kind's type; it calls
    run(**keywords), and with `rest` passes the arguments after `--` as
    keyword `rest` (the command must allow extra arguments)."""
    import inspect
    from typing import List, Optional

    import typer
    types = {FLAG: bool, STR: str, INT: int, FLOAT: float, INTS: List[int], STRS: List[str]}
    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)] \
        if rest else []
    for o in options:
        t = types[o.kind]
        bounds = dict(min=o.min, max=o.max) if o.kind in (INT, FLOAT) else {}
        params.append(inspect.Parameter(o.dest, inspect.Parameter.KEYWORD_ONLY, annotation=t if o.default is not None
                                        else Optional[t], default=typer.Option(o.default, *o.flags, help=o.help,
                                                                               hidden=o.hidden, **bounds)))

    def command(**kw):
        if rest:
            kw[rest] = list(kw.pop("ctx").args)
        run(**kw)
    command.__name__ = command.__qualname__ = name
    command.__doc__ = doc
    command.__signature__ = inspect.Signature(params)
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


def in_bounds(options, kw: dict) -> bool:
    """Whether the parsed keywords `kw` keep `options`' bounds (else typer
    parses the command line, with its usage message)."""
    return all(o.within(kw[o.dest]) for o in options if o.kind in (INT, FLOAT) and kw.get(o.dest) is not None)


def parse(table: dict, argv: list[str], *, command: bool = False) -> dict | None:
    """Keywords from `argv` by `table` (option -> (keyword, kind)), or None.
    With `command`, `-- ARGS...` ends the options and gives kw["command"]."""
    kw: dict = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            if not command or i == len(argv):
                return None
            kw["command"] = argv[i:]
            break
        opt, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", None)
        spec = table.get(opt)
        if spec is None:
            return None
        dest, kind = spec
        if kind == FLAG:
            if eq:
                return None
            kw[dest] = True
            continue
        if not eq:
            if i == len(argv):
                return None
            value = argv[i]
            i += 1
            if value.startswith("-"):
                return None  # a value or a forgotten one: click decides
        try:
            value = CONVERT[kind](value)
        except ValueError:
            return None
        if kind in (INTS, STRS):
            kw.setdefault(dest, []).append(value)
        else:
            kw[dest] = value
    return kw
