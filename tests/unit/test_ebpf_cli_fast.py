"""`sits probe audit|top|export` parse their options without typer
(sits.cli.probe.parse_fast) so that the probes attach sooner; typer still
declares them. These tests keep the two in step: same options, same kinds,
same defaults, same parsed values; anything unusual goes to typer."""
import inspect

import pytest
import typer.main

from sits.cli import probe

COMMANDS = {"audit": probe.run_audit, "top": probe.run_top, "export": probe.run_export}


def _click(name):
    return typer.main.get_command(probe.typer_app()).commands[name]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_fast_options_are_typers(name):
    table = probe.OPTIONS[name]
    params = [p for p in _click(name).params if p.opts and p.opts[0].startswith("-") and p.name != "help"]
    declared = {o: p for p in params for o in p.opts + p.secondary_opts}
    assert set(table) == set(declared)
    defaults = {k: v.default for k, v in inspect.signature(COMMANDS[name]).parameters.items()}
    for opt, (dest, kind) in table.items():
        p = declared[opt]
        assert dest in defaults, opt
        assert p.is_flag == (kind == "flag"), opt
        assert p.multiple == (kind in ("ints", "strs")), opt
        if kind != "flag":
            want = {"int": int, "ints": int, "float": float, "str": str, "strs": str}[kind]
            parsed = _click(name).make_context(name, [opt, "5"]).params[dest]
            assert type(parsed[0] if p.multiple else parsed) is want, opt
        assert (p.default if not p.multiple else p.default or None) == defaults[dest], opt


@pytest.mark.parametrize("argv", [
    ["audit", "--json", "--probes", "syscalls", "--", "sh", "-c", "echo ready"],
    ["audit", "-d", "2.5", "-o", "r.md", "--markdown", "--pid", "1", "--pid=2", "--threshold", "decode=20",
     "--threshold", "sys_read=5", "--interval", "0.5", "--top", "3", "--per-thread", "--stream", "x.csv"],
    ["audit", "--duration=1", "--comm", "ffmpeg", "--cgroup", "a/b", "--lib", "/x.so", "--", "ls", "--all"],
    ["top", "--sort", "p95", "--rows", "10", "--cumulative", "--interval", "2"],
    ["export", "--listen", "0.0.0.0:1", "--duration", "3", "--probes", "drm"],
])
def test_fast_parse_matches_click(argv):
    name, args = argv[0], argv[1:]
    fast = probe.parse_fast(name, args)
    assert fast is not None
    ctx = _click(name).make_context(name, list(args))
    for dest, value in fast.items():
        if dest == "command":
            assert value == ctx.args
        else:
            assert ctx.params[dest] == value, dest


@pytest.mark.parametrize("argv", [
    ["audit", "--help"], ["audit", "--duration"], ["audit", "--top", "x"], ["audit", "-d5"],
    ["audit", "--json=1"], ["audit", "ls"], ["audit", "--comm", "--json"], ["audit", "--"],
    ["top", "--", "ls"], ["export", "--nosuch"], ["list"], ["audit", "--pid", "-1"],
])
def test_unusual_command_lines_go_to_typer(argv):
    assert probe.fast_command(argv) is None
