"""`sits capture` parses well-formed command lines without typer
(sits.cli.capture.fast_command); typer still declares the command. These
tests keep the two in step: same options, kinds, defaults and limits, same
parsed values; anything unusual goes to typer."""
import inspect

import pytest
import typer.main

from sits.cli import capture


def _click():
    import typer
    app = typer.Typer(add_completion=False)
    app.command()(capture.typer_command())
    return typer.main.get_command(app)


def test_fast_options_are_typers():
    params = [p for p in _click().params if p.opts and p.opts[0].startswith("-") and p.name != "help"]
    declared = {o: p for p in params for o in p.opts + p.secondary_opts}
    assert set(capture.OPTIONS) == set(declared)
    defaults = {k: v.default for k, v in inspect.signature(capture.run_capture).parameters.items()}
    assert set(defaults) == {dest for dest, _ in capture.OPTIONS.values()}
    for opt, (dest, kind) in capture.OPTIONS.items():
        p = declared[opt]
        assert p.name == dest, opt
        assert p.is_flag == (kind == "flag"), opt
        assert p.default == defaults[dest], opt
        lo, hi = capture.LIMITS.get(dest, (None, None))
        assert (p.min, p.max) == (lo, hi), opt
        if kind != "flag":
            want = {"int": int, "float": float, "str": str}[kind]
            assert p.type_descriptor.annotation is want, opt


@pytest.mark.parametrize("argv", [
    ["--to-kms", "--device", "/dev/video0", "--format", "XR24", "--size", "1280x720", "--fps", "10",
     "--memory", "mmap", "--frames", "320", "--json"],
    ["--to-kms", "--verify", "--frames=300", "--snapshot", "/tmp/x.png", "--buffers", "6", "--verify-every", "3"],
    ["--to-kms", "--duration", "2.5", "--card", "/dev/dri/card0", "--connector", "Virtual-1", "--reconnect",
     "--python-loop"],
])
def test_fast_parse_matches_click(argv):
    fast = capture.fast_command(argv)
    assert fast is not None
    ctx = _click().make_context("capture", list(argv))
    for name, p in inspect.signature(capture.run_capture).parameters.items():
        assert ctx.params[name] == fast.keywords.get(name, p.default), name


@pytest.mark.parametrize("argv", [
    ["--help"], ["--to-kms", "--fps", "0"], ["--to-kms", "--buffers", "33"], ["--to-kms", "--buffers", "1"],
    ["--to-kms", "--duration", "0.05"], ["--to-kms", "--frames", "x"], ["--to-kms", "--nosuch"],
    ["--to-kms", "--json=1"], ["--to-kms", "--device"], ["--to-kms", "extra"],
])
def test_unusual_command_lines_go_to_typer(argv):
    assert capture.fast_command(argv) is None
