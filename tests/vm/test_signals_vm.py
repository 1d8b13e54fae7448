"""SIGINT and SIGTERM at 50 moments of a `sits capture --to-kms` run: from
the process's start, through set-up, mid-commit and the C loop's steady
state, to a wait for a lost camera (--reconnect). Each moment is a phase
the process is seen to reach (from /proc and the display's own state, no
tracing) plus a delay, so that the moments spread in time as well.

Every one must end with exit 0 and the summary, or -- when the signal came
before sits could turn it into a stop, so before anything was shown -- exit
1 and one line; the display as a second client sees it is as before, and
no dma-buf is left (no_leaks).

Most runs are forked from this process, which has sits imported (a Python
start costs seconds under TCG): their "start" is main()'s first line. The
"exec" moments start a new interpreter."""
import json
import os
import signal
import time

import pytest

# what `sits capture` imports on its way: loaded here once, so that each
# forked run starts where the CLI is after its imports
import sits.cli.capture  # noqa: F401
import sits.pipeline.capture  # noqa: F401
import sits.pipeline.hotplug  # noqa: F401
from tests.vm import vivid
from tests.vm.kms_observer import display_state, observer
from tests.vm.procfs import catches, fd_targets, wait_for
from tests.vm.sits_child import Child, holds

pytestmark = pytest.mark.vm

# phase -> delays (s) after the process is seen to reach it
PHASES = {
    "exec": (0, 0.05, 0.3),                       # a new interpreter: from sits' first handler on
    "start": (0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3),          # main() has begun
    "setup": (0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8),   # the camera is open
    "commit": (0, 0.001, 0.002, 0.004, 0.008, 0.016, 0.03, 0.06, 0.12, 0.25),  # the first commit's out-fence: in flight
    "c-loop": (0, 0.01, 0.03, 0.06, 0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 4, 6, 8),  # a second frame shown
    "reconnect": (0, 0.2, 0.5, 1.0),              # the camera pulled and let go: waiting for it
}
# before sits' handlers are in place nothing is on screen yet: there an
# interrupt may be one line and exit 1
EARLY = {"exec", "start", "setup"}
#: how long a run would last unsignalled: long past every phase's moment
#: under TCG, and short enough that a signal sits loses fails the test (it
#: stops by "duration") instead of holding the tier for 600 s
RUN_S = 120
MOMENTS = [(phase, delay, (signal.SIGINT, signal.SIGTERM)[i % 2])
           for i, (phase, delay) in enumerate((p, d) for p, ds in PHASES.items() for d in ds)]
assert len(MOMENTS) == 50


def reach(phase, child, obs, before, vivid_path) -> None:
    pid, alive = child.pid, child.alive
    if phase in ("exec", "start"):
        wait_for(alive, lambda: catches(pid, signal.SIGTERM), "sits' SIGTERM handler")
    elif phase == "setup":
        wait_for(alive, lambda: holds(pid, vivid_path), "the camera open")
    elif phase == "commit":
        wait_for(alive, lambda: "anon_inode:sync_file" in fd_targets(pid), "an out-fence")
    else:
        shown = []

        def showing():
            planes = display_state(obs)[0]
            if planes != before[0] and planes not in shown:
                shown.append(planes)
            return len(shown) >= (2 if phase == "c-loop" else 1)
        wait_for(alive, showing, "a frame shown" if phase == "reconnect" else "a second frame shown")
        if phase == "reconnect":
            vivid.pull_cable(vivid_path)
            wait_for(alive, lambda: not holds(pid, vivid_path), "the lost camera let go")


@pytest.mark.parametrize("phase,delay,sig", MOMENTS,
                         ids=[f"{p}+{d * 1000:g}ms-{s.name}" for p, d, s in MOMENTS])
def test_a_signal_at_any_moment_stops_cleanly(phase, delay, sig, vivid_path, vkms_path, no_leaks):
    argv = ["capture", "--to-kms", "--device", vivid_path, "--card", vkms_path, "--format", "XR24",
            "--size", "640x480", "--duration", str(RUN_S), "--json", *(["--reconnect"] if phase == "reconnect" else [])]
    with observer(vkms_path) as obs:
        before = display_state(obs)
        child = Child(argv, new_interpreter=phase == "exec")
        try:
            reach(phase, child, obs, before, vivid_path)
            time.sleep(delay)
            os.kill(child.pid, sig)
            code, out, err = child.finish()
        finally:
            child.close()
            if phase == "reconnect":
                vivid.reload()
        after = display_state(obs)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if code == 1 and phase in EARLY:
        assert lines == ["sits: interrupted"] and not out.strip(), (out, err)
    else:
        assert code == 0, (code, out, err)
        s = json.loads(out)
        assert s["stopped_by"] == "signal", s
        assert "Traceback" not in err, err
        if phase == "c-loop":
            assert s["c_loop_commits"] > 0, s
        if phase == "reconnect":
            assert s["disconnects"] == 1, s
    assert after == before, "the display was not given back as it was"
