"""tests/vm_plugin.py: a VM lost while a test runs costs that test only --
it fails with what the guest's kernel last said -- and the tests after it
run in a fresh VM (a stand-in for tools/vm's run_in_vm)."""
import sys

from tests import vm_plugin
from tests.unit.vm_standin import fake_sitsvm

NODES = [f"tests/vm/test_x_vm.py::test_{i}" for i in range(5)]


class Config:
    class pluginmanager:
        @staticmethod
        def get_plugin(name):
            return None

    @staticmethod
    def getoption(name):
        return 0


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
