"""A stand-in for tools/vm's sitsvm module, for tests of tests/vm_plugin.py
on the host: its VM "runs" the tests it is given and records each as
passed."""
import json
import os
import types

from tests import vm_plugin


def fake_sitsvm(tmp_path, hang_on=(), guest_says: str | None = None):
    """(the module, the node ids of each boot). The VM stops as a hung one
    does when it reaches a test in `hang_on` (each hangs once);
    `guest_says` is written to the run's echo, when it has one."""
    boots = []
    hang_on = set(hang_on)   # each hangs once

    def run_in_vm(cmd, echo=None, **kw):
        out = next(a for a in cmd if a.startswith("--sits-vm-results=")).split("=", 1)[1]
        nodeids = [a for a in cmd if "::" in a]
        boots.append(nodeids)
        if echo is not None and guest_says:
            echo.write(guest_says)
            echo.flush()
        d = os.path.dirname(out)
        for n in nodeids:
            with open(os.path.join(d, vm_plugin.STARTED_FILE), "a") as f:
                f.write(n + "\n")
            if n in hang_on:
                hang_on.discard(n)
                return types.SimpleNamespace(returncode=124, output="..", console="[  60.1] rcu: INFO: stall\n",
                                             error="the command wrote nothing for 1200 s; VM killed",
                                             boot_retry=None)
            with open(out, "a") as f:
                f.write(json.dumps({"nodeid": n, "outcome": "passed", "longrepr": ""}) + "\n")
        return types.SimpleNamespace(returncode=0, output="", console="", error=None, boot_retry=None)

    mod = types.SimpleNamespace(
        run_in_vm=run_in_vm, check_setup=lambda arch: None, SetupMissing=Exception, DEFAULT_ARCH="x86_64",
        cache_dir=lambda arch="x86_64": tmp_path, guest_python=lambda arch: "python3",
        guest_path=lambda p, arch: p)
    return mod, boots
