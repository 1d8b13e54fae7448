"""`sits probe frames` at the command line: bad input, and a kernel that
cannot time a frame's journey (this host: no V4L2, no DRM)."""
import os
import subprocess
import sys

import pytest

SITS = [sys.executable, "-m", "sits.cli.app", "probe", "frames"]


def run(*args):
    return subprocess.run([*SITS, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args,needle", [
    (["--json", "--markdown", "-d", "1"], "--json and --markdown exclude each other"),
    (["-p", "1", "--", "true"], "not both"),
    (["-d", "0"], "--duration must be positive"),
    (["-d", "1", "--stream", "/no/such/dir/f.ndjson"], "--stream /no/such/dir/f.ndjson: no such directory"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    r = run(*args)
    assert r.returncode == 2, r
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.skipif(os.path.exists("/sys/kernel/tracing/events/vb2") or os.geteuid() != 0,
                    reason="this kernel has V4L2 tracepoints (or no root): the journey can run")
def test_a_kernel_without_the_journeys_tracepoints_says_so():
    r = run("--json", "-d", "1")
    assert r.returncode == 1, r
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert "no stage of a frame's journey can be timed on this kernel" in line
    assert "tracepoint on this kernel" in line   # which one is missing
