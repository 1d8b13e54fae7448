import json

from sits.cli.app import main


def test_unknown_command_is_a_usage_error(capsys):
    assert main(["nosuch"]) == 2


def test_unknown_option_is_a_usage_error():
    assert main(["doctor", "--bad"]) == 2


def test_doctor_json_has_the_documented_keys(capsys):
    assert main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data) == ["kernel", "bpf", "v4l2", "drm", "dmabuf", "cuda", "decode", "overlay"]
    assert data["kernel"]["release"]
    for area in ("kernel", "dmabuf", "decode", "overlay"):
        for item in data[area].values():
            if isinstance(item, dict) and "ok" in item and not item["ok"]:
                assert item.get("hint"), item


def test_doctor_lists_the_decode_paths(capsys):
    # libjpeg-turbo and OpenCV installed (the bootstrap's); the GPU's decoder
    # where there is a GPU (tests/cuda/test_cuda_jpeg.py checks it there)
    assert main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    dec = data["decode"]
    assert dec["jpeg_cpu"]["ok"] and "libjpeg-turbo" in dec["jpeg_cpu"]["library"]
    assert dec["bayer_cpu"]["ok"] and "OpenCV" in dec["bayer_cpu"]["library"]
    if not data["cuda"].get("available"):
        assert not dec["jpeg_gpu"]["ok"] and dec["jpeg_gpu"]["hint"] == "no CUDA GPU (see cuda)"


def test_doctor_says_what_the_overlay_has(capsys):
    # cairo installed (the bootstrap's); no display or GPU on this machine
    assert main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    ov = data["overlay"]
    assert ov["cairo"]["ok"] and ov["cairo"]["library"].startswith("cairo 1.")
    assert not ov["plane_with_alpha"]["ok"] and ov["plane_with_alpha"]["planes"] == []
    if not data["cuda"].get("available"):
        assert not ov["gpu_draw"]["ok"] and ov["gpu_draw"]["hint"] == "no CUDA GPU (see cuda)"


def test_snapshot_path_is_checked_before_any_device(capsys):
    # no camera or display on this machine: the path is refused first, as a usage error
    assert main(["capture", "--to-kms", "--snapshot", "/no/such/dir/x.png"]) == 2
    assert "no such directory /no/such/dir" in capsys.readouterr().err
    # a folder no one may create files in, root included (CI runs as root)
    assert main(["capture", "--to-kms", "--snapshot", "/proc/self/x.png"]) == 2
    assert "/proc/self/x.png: not writable" in capsys.readouterr().err


def test_an_interrupt_as_the_handler_is_set_is_one_line(capsys, monkeypatch):
    # a SIGTERM (or Ctrl-C) that lands right after main() made SIGTERM an
    # interrupt, before any command runs: one line and exit 1, both signals
    # as they were -- not a traceback (the VM's signal matrix hit this at start+0)
    import signal

    from sits.cli import app
    real = signal.signal

    def set_then_signalled(sig, handler):
        previous = real(sig, handler)
        if sig == signal.SIGTERM and callable(handler) and handler is not before[sig]:
            handler(sig, None)   # the signal lands here
        return previous
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(app.signal, "signal", set_then_signalled)
    try:
        code = main(["doctor", "--json"])
    except BaseException as exc:  # noqa: BLE001 - what escaped is the failure
        code = f"{type(exc).__name__} escaped main()"
    assert code == 1
    assert capsys.readouterr() == ("", "sits: interrupted\n")
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_an_interrupt_inside_exec_of_a_string_still_exits_1(tmp_path):
    # CPython ends a process by SIGINT, after main() returned, when a
    # KeyboardInterrupt once passed out of exec() of a string -- as one does
    # when Ctrl-C lands while dataclasses builds a class's methods on
    # import (the signal matrix: exec+300ms-SIGINT exited -2 after
    # 'sits: interrupted'). main()'s interrupt is another type.
    import os
    import subprocess
    import sys
    from pathlib import Path

    import sits
    script = tmp_path / "signalled_sits.py"   # run as sits is: python -m
    script.write_text(
        "import sys\n"
        "from sits.cli import app\n"
        "def signalled_in_exec(argv):\n"
        "    exec('import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nwhile True: pass')\n"
        "app._main = signalled_in_exec\n"
        "sys.exit(app.main([]))\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{Path(sits.__file__).parents[1]}"}
    done = subprocess.run([sys.executable, "-m", script.stem], capture_output=True, text=True, timeout=60, env=env)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "sits: interrupted\n")
