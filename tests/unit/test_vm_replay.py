"""tests/vm_plugin.py on the host: a vm-tier test that its own marker skips
there (a peer program missing on this machine) is reported as skipped,
with the rest of the run going on -- not an internal error of pytest's
that ends the whole run (a fresh machine without GStreamer did so); -vv
shows what the guest says as it says it."""
import sys

import pytest

from tests.unit.vm_standin import fake_sitsvm

pytest_plugins = ["pytester"]


def test_a_vm_test_its_marker_skips_on_the_host_is_reported_skipped(pytester, monkeypatch):
    monkeypatch.delenv("SITS_IN_VM", raising=False)
    pytester.makeconftest('pytest_plugins = ["tests.vm_plugin"]\n')
    pytester.makeini("[pytest]\nmarkers =\n    vm: in the test VM\n")
    pytester.makepyfile(test_peer_vm="""
        import pytest

        pytestmark = pytest.mark.vm

        @pytest.mark.skipif(True, reason="no gst-launch-1.0")
        def test_follows_a_peer():
            pass

        def test_after_it():
            pass
        """)
    # the VM stood in for: every test it is asked for passes there
    import tests.vm_plugin as plugin
    monkeypatch.setattr(plugin._VmSession, "run", _every_test_passes)
    result = pytester.runpytest("-rs", "-p", "no:cacheprovider")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*test_peer_vm.py:*no gst-launch-1.0*"])


def _every_test_passes(self):
    if self.results is None:
        self.results = {n: {"outcome": "passed", "longrepr": ""} for n in self.nodeids}


def test_vv_shows_the_guest_on_the_terminal(pytester, monkeypatch, tmp_path):
    # the long soak's figures come this way (tests/vm/test_soak_vm.py); the
    # VM runs inside a test's call, whose stdout pytest captures
    monkeypatch.delenv("SITS_IN_VM", raising=False)
    pytester.makeconftest('pytest_plugins = ["tests.vm_plugin"]\n')
    pytester.makeini("[pytest]\nmarkers =\n    vm: in the test VM\n")
    pytester.makepyfile(test_soak_vm="""
        import pytest

        pytestmark = pytest.mark.vm

        def test_long_run():
            pass
        """)

    mod, _ = fake_sitsvm(tmp_path, guest_says="soak: frame 1000: fds 29, dma-bufs 4, RSS 46600 kB\n")
    monkeypatch.setitem(sys.modules, "sitsvm", mod)
    result = pytester.runpytest("-vv", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*soak: frame 1000: fds 29, dma-bufs 4, RSS 46600 kB*"])
