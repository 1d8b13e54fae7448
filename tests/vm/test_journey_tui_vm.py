"""`sits probe frames -- sits capture ...` in a terminal (a pty): the live
view draws frames as they are followed, and Ctrl-C (SIGINT to the
terminal's foreground group, the follower and its command alike) ends
both cleanly: exit 0, no traceback, the command's summary, and the
terminal given back with its cursor shown."""
import json
import os
import pty
import re
import select
import signal
import sys
import time

import pytest

from tests.vm.conftest import EVENT_WAIT_S

pytestmark = pytest.mark.vm

HEADER = re.compile(rb"sits probe frames\s+(\d+) frames")


def read_until(fd, buf: bytearray, done, deadline) -> bool:
    while not done(buf):
        if time.monotonic() > deadline:
            return False
        if select.select([fd], [], [], 1.0)[0]:
            try:
                data = os.read(fd, 65536)
            except OSError:   # EIO: the terminal's other side is gone
                return done(buf)
            if not data:
                return done(buf)
            buf += data
    return True


def test_the_live_view_in_a_terminal_ends_cleanly_on_ctrl_c(vivid_path, vkms_path):
    argv = [sys.executable, "-m", "sits.cli.app", "probe", "frames", "--", sys.executable, "-m", "sits.cli.app",
            "capture", "--to-kms", "--device", vivid_path, "--card", vkms_path, "--size", "320x180",
            "--duration", "600", "--json"]
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(argv[0], argv)
    out = bytearray()
    try:
        drawn = read_until(fd, out, lambda b: any(int(n) > 0 for n in HEADER.findall(bytes(b))),
                           time.monotonic() + EVENT_WAIT_S * 5)
        assert drawn, out[-2000:].decode(errors="replace")
        os.killpg(pid, signal.SIGINT)   # as the terminal does for Ctrl-C
        read_until(fd, out, lambda b: False, time.monotonic() + EVENT_WAIT_S)
        _, status = os.waitpid(pid, 0)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)
    text = out.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text[-2000:]
    assert "Traceback" not in text, text[-4000:]
    # the command stopped by the same Ctrl-C, with its summary
    found = re.search(r'(\{"[^\r\n]*"stopped_by"[^\r\n]*\})', text)
    assert found, text[-4000:]
    summary = json.loads(found.group(1))
    assert summary["stopped_by"] == "signal", summary
    # the cursor, hidden while drawing, is shown again at the end
    assert text.rfind("\x1b[?25h") > text.rfind("\x1b[?25l") >= 0, text[-500:]
