import json

from sits.cli.app import main


def test_unknown_command_is_a_usage_error(capsys):
    assert main(["nosuch"]) == 2


def test_unknown_option_is_a_usage_error():
    assert main(["doctor", "--bad"]) == 2


def test_doctor_json_has_the_documented_keys(capsys):
    assert main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data) == ["kernel", "bpf", "v4l2", "drm", "dmabuf", "cuda"]
    assert data["kernel"]["release"]
    for area in ("kernel", "dmabuf"):
        for item in data[area].values():
            if isinstance(item, dict) and "ok" in item and not item["ok"]:
                assert item.get("hint"), item


def test_snapshot_path_is_checked_before_any_device(capsys, tmp_path):
    # no camera or display on this machine: the path is refused first, as a usage error
    assert main(["capture", "--to-kms", "--snapshot", "/no/such/dir/x.png"]) == 2
    assert "no such directory /no/such/dir" in capsys.readouterr().err
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    import os
    if os.geteuid() != 0:   # root writes anywhere
        assert main(["capture", "--to-kms", "--snapshot", str(ro / "x.png")]) == 2
        assert "not writable" in capsys.readouterr().err


def test_an_interrupt_as_the_handler_is_set_is_one_line(capsys, monkeypatch):
    # a SIGTERM (or Ctrl-C) that lands right after main() made SIGTERM an
    # interrupt, before any command runs: one line and exit 1, SIGTERM as
    # it was -- not a traceback (the VM's signal matrix hit this at start+0)
    import signal

    from sits.cli import app
    real = signal.signal

    def set_then_interrupted(sig, handler):
        previous = real(sig, handler)
        if sig == signal.SIGTERM and handler is signal.default_int_handler:
            raise KeyboardInterrupt
        return previous
    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(app.signal, "signal", set_then_interrupted)
    try:
        code = main(["doctor", "--json"])
    except KeyboardInterrupt:
        code = "the interrupt escaped main()"
    assert code == 1
    assert capsys.readouterr() == ("", "sits: interrupted\n")
    assert signal.getsignal(signal.SIGTERM) is before
