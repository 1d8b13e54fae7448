"""tools/vm/sitsvm.py reads the guest's progress from console lines."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "vm"))
try:
    import sitsvm
finally:
    sys.path.pop(0)


def _state():
    return {"up": None, "run": None, "exit": None, "failed": None}


def test_markers_give_up_run_and_exit():
    st = _state()
    for line in ("sits-vm-guest: up", "sits-vm-guest: run", "[ 3.1] sits-vm-guest: exit 3"):
        sitsvm._scan(line, st, 0.0)
    assert st["up"] is not None and st["run"] is not None and st["exit"] == 3


def test_lost_exit_marker_falls_back_to_virtme_ng_line():
    st = _state()
    for line in ("sits-vm-guest: up", "sits-vm-guest: run",
                 "[ 2126.299620] virtme-ng-init: script exited with code 0"):
        sitsvm._scan(line, st, 0.0)
    assert st["exit"] == 0


def test_virtme_ng_line_before_the_command_ran_is_no_exit_code():
    st = _state()
    sitsvm._scan("sits-vm-guest: up", st, 0.0)
    sitsvm._scan("virtme-ng-init: script exited with code 125", st, 0.0)
    assert st["exit"] is None


def test_our_marker_wins_over_virtme_ng_line():
    st = _state()
    for line in ("sits-vm-guest: run", "sits-vm-guest: exit 4", "virtme-ng-init: script exited with code 0"):
        sitsvm._scan(line, st, 0.0)
    assert st["exit"] == 4
