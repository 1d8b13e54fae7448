"""The overlay's options are refused before any device opens: one line,
exit 2 (this machine has no camera or display, so a check that let them
through would end otherwise)."""
import pytest

from sits.cli.app import main


@pytest.mark.parametrize("args, says", [
    (["--overlay", "nosuch_module_x:fn", "--to-kms"], "--overlay nosuch_module_x:fn: cannot import nosuch_module_x"),
    (["--overlay", "os:path", "--to-kms"], "path is not callable"),
    (["--overlay", "os:nothing_here", "--to-kms"], "os has no nothing_here"),
    (["--overlay", "justamodule", "--to-kms"], "--overlay takes MODULE:FUNCTION"),
    (["--overlay", "os:getcwd", "--to-cuda", "224x224"], "--overlay draws on the display: add --to-kms"),
    (["--overlay", "os:getcwd", "--overlay-demo", "--to-kms"], "--overlay and --overlay-demo: give one"),
    (["--overlay-demo", "--to-kms", "--overlay-policy", "newest"], "--overlay-policy must be sync or latest"),
])
def test_a_bad_overlay_option_is_one_line_and_exit_2(capsys, args, says):
    code = main(["capture", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and says in err[0], err


def test_open_chain_refuses_an_overlay_without_a_display():
    from sits.errors import UsageError
    from sits.pipeline.capture import options
    with pytest.raises(UsageError, match="add --to-kms"):
        options("open_chain", overlay=lambda frame: None)
