"""Option parsing without typer, for the commands whose start-up matters
(`sits probe audit|top|export`, `sits capture`): typer builds its parameter
adapters on first use, which costs ~80 ms natively and seconds in the test
VM. Only well-formed command lines are parsed here; anything unusual (help,
an unknown option, a missing or malformed value) returns None and typer
handles the command line exactly as before, with its usage messages. Each
caller's table is checked against its typer declaration by a unit test.
"""
FLAG, STR, INT, FLOAT, INTS, STRS = "flag", "str", "int", "float", "ints", "strs"
CONVERT = {STR: str, INT: int, FLOAT: float, INTS: int, STRS: str}


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
