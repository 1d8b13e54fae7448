"""tests/vm_plugin.py: a VM lost while a test runs costs that test only --
it fails with what the guest's kernel last said -- and the tests after it
run in a fresh VM (a stand-in for tools/vm's run_in_vm)."""
import json
import os
import sys
import types

from tests import vm_plugin

NODES = [f"tests/vm/test_x_vm.py::test_{i}" for i in range(5)]


class Config:
    class pluginmanager:
        @staticmethod
        def get_plugin(name):
            return None

    @staticmethod
    def getoption(name):
        return 0


def fake_sitsvm(tmp_path, hang_on):
    """A sitsvm whose VM runs the tests it is given, recording each, until
    the one in `hang_on`, where it stops as a hung VM does."""
    boots = []

    def run_in_vm(cmd, **kw):
        out = next(a for a in cmd if a.startswith("--sits-vm-results=")).split("=", 1)[1]
        nodeids = [a for a in cmd if a.startswith("tests/")]
        boots.append(nodeids)
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


def test_a_vm_lost_in_one_test_fails_that_test_and_runs_the_rest_in_a_new_vm(tmp_path, monkeypatch):
    mod, boots = fake_sitsvm(tmp_path, {NODES[2]})
    monkeypatch.setitem(sys.modules, "sitsvm", mod)
    vs = vm_plugin._VmSession(Config, NODES)
    vs.run()
    assert boots == [NODES, NODES[3:]]
    assert set(vs.results) == set(NODES) - {NODES[2]}
    assert list(vs.lost) == [NODES[2]]
    assert "wrote nothing for 1200 s" in vs.lost[NODES[2]] and "rcu: INFO: stall" in vs.lost[NODES[2]]


def test_a_vm_lost_again_and_again_stops_after_the_bound(tmp_path, monkeypatch):
    mod, boots = fake_sitsvm(tmp_path, set(NODES))
    monkeypatch.setitem(sys.modules, "sitsvm", mod)
    vs = vm_plugin._VmSession(Config, NODES)
    vs.run()
    assert len(boots) == vm_plugin.VM_BOOTS
    assert list(vs.lost) == NODES[:vm_plugin.VM_BOOTS] and not vs.results
