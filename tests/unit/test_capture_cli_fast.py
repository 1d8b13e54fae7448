"""`sits capture` parses well-formed command lines without typer
(sits.cli.capture.fast_command); typer's command is made from the same
table (capture.OPTIONS). These tests check that both read it the same way:
same options, kinds, defaults and limits, same parsed values; anything
unusual goes to typer."""
from typing import List, Optional

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
    assert set(capture.FAST) == set(declared)
    for o in capture.OPTIONS:
        p = declared[o.flag]
        assert p.name == o.dest, o.flag
        assert p.is_flag == (o.kind == "flag"), o.flag
        assert p.default == o.default, o.flag
        assert (p.min, p.max) == (o.min, o.max), o.flag
        assert p.hidden == o.hidden, o.flag
        if o.kind != "flag":
            want = {"int": int, "float": float, "str": str, "strs": List[str]}[o.kind]
            assert p.type_descriptor.annotation in (want, Optional[want]), o.flag


@pytest.mark.parametrize("argv", [
    ["--to-kms", "--device", "/dev/video0", "--format", "XR24", "--size", "1280x720", "--fps", "10",
     "--memory", "mmap", "--frames", "320", "--json"],
    ["--to-kms", "--verify", "--frames=300", "--snapshot", "/tmp/x.png", "--buffers", "6", "--verify-every", "3"],
    ["--to-kms", "--duration", "2.5", "--card", "/dev/dri/card0", "--connector", "Virtual-1", "--reconnect"],
    ["--to-cuda", "224x224", "--cuda-dtype", "bfloat16", "--cuda-layout", "NHWC", "--cuda-batch", "8",
     "--latency-budget-ms", "4", "--cuda-matrix", "bt709", "--memory", "udmabuf", "--to-kms"],
    ["--to-kms", "--control", "brightness=10", "--control=power_line_frequency=50 Hz"],
])
def test_fast_parse_matches_click(argv):
    fast = capture.fast_command(argv)
    assert fast is not None
    ctx = _click().make_context("capture", list(argv))
    for o in capture.OPTIONS:
        # click gives an option that can repeat, when absent, as ()
        given = list(ctx.params[o.dest]) or None if o.kind == "strs" else ctx.params[o.dest]
        assert given == fast.keywords.get(o.dest, o.default), o.dest


@pytest.mark.parametrize("argv", [
    ["--help"], ["--to-kms", "--fps", "0"], ["--to-kms", "--buffers", "33"], ["--to-kms", "--buffers", "1"],
    ["--to-kms", "--duration", "0.05"], ["--to-kms", "--frames", "x"], ["--to-kms", "--nosuch"],
    ["--to-kms", "--json=1"], ["--to-kms", "--device"], ["--to-kms", "extra"], ["--to-cuda", "2x2", "--cuda-batch", "65"],
])
def test_unusual_command_lines_go_to_typer(argv):
    assert capture.fast_command(argv) is None
