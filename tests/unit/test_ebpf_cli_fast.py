"""`sits probe` declares each option once (sits.cli.probe.COMMANDS), read by
the fast parser (sits.cli.fastargs) and by typer. These tests check that
typer declares exactly the table, that the run_* functions take exactly its
keywords, and that the two parsers read the same command lines alike;
anything unusual goes to typer."""
import inspect

import pytest
import typer.main
import typer.testing

from sits.cli import fastargs, probe


def _click(name):
    return typer.main.get_command(probe.typer_app()).commands[name]


def typer_keywords(name, args) -> dict:
    """The keywords typer calls run_<name> with for `args`."""
    cmd, got = probe.COMMANDS[name], {}
    app = typer.Typer()
    app.command(context_settings={"allow_extra_args": bool(cmd.rest)})(
        fastargs.typer_command(got.update, cmd.options, name=name, doc="", rest=cmd.rest))
    result = typer.testing.CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return got


@pytest.mark.parametrize("name", sorted(probe.COMMANDS))
def test_typer_declares_the_table(name):
    cmd = probe.COMMANDS[name]
    params = {p.name: p for p in _click(name).params if p.name not in ("help", "ctx")}
    assert list(params) == [o.dest for o in cmd.options]
    for o in cmd.options:
        p = params[o.dest]
        assert tuple(p.opts + p.secondary_opts) == o.flags, o.dest
        assert p.is_flag == (o.kind == "flag"), o.dest
        assert p.multiple == (o.kind in ("ints", "strs")), o.dest
        assert (p.default if not p.multiple else p.default or None) == o.default, o.dest
        assert p.help == o.help, o.dest
        if o.kind != "flag":
            want = {"int": int, "ints": int, "float": float, "str": str, "strs": str}[o.kind]
            parsed = _click(name).make_context(name, [o.flags[0], "5"]).params[o.dest]
            assert type(parsed[0] if p.multiple else parsed) is want, o.dest


@pytest.mark.parametrize("name", sorted(probe.COMMANDS))
def test_run_functions_take_the_declared_keywords(name):
    cmd = probe.COMMANDS[name]
    params = inspect.signature(probe.run_function(name)).parameters
    assert set(params) == {o.dest for o in cmd.options} | ({cmd.rest} if cmd.rest else set())
    assert all(p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in params.values())  # defaults: the table's


@pytest.mark.parametrize("argv", [
    ["audit", "--json", "--probes", "syscalls", "--", "sh", "-c", "echo ready"],
    ["audit", "-d", "2.5", "-o", "r.md", "--markdown", "--pid", "1", "--pid=2", "--threshold", "decode=20",
     "--threshold", "sys_read=5", "--interval", "0.5", "--top", "3", "--per-thread", "--stream", "x.csv"],
    ["audit", "--duration=1", "--comm", "ffmpeg", "--cgroup", "a/b", "--lib", "/x.so", "--", "ls", "--all"],
    ["top", "--sort", "p95", "--rows", "10", "--cumulative", "--interval", "2"],
    ["export", "--listen", "0.0.0.0:1", "--duration", "3", "--probes", "drm"],
    ["export"],
])
def test_fast_parse_matches_click(argv):
    name, args = argv[0], argv[1:]
    fast = probe.parse_fast(name, args)
    assert fast is not None
    assert fast == typer_keywords(name, args)


@pytest.mark.parametrize("argv", [
    ["audit", "--help"], ["audit", "--duration"], ["audit", "--top", "x"], ["audit", "-d5"],
    ["audit", "--json=1"], ["audit", "ls"], ["audit", "--comm", "--json"], ["audit", "--"],
    ["top", "--", "ls"], ["export", "--nosuch"], ["list"], ["audit", "--pid", "-1"], [],
])
def test_unusual_command_lines_go_to_typer(argv):
    assert probe.fast_command(argv) is None
