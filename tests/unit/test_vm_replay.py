"""tests/vm_plugin.py on the host: a vm-tier test that its own marker skips
there (a peer program missing on this machine) is reported as skipped,
with the rest of the run going on -- not an internal error of pytest's
that ends the whole run (a fresh machine without GStreamer did so); -vv
shows what the guest says as it says it."""
import json
import sys
import types

import pytest

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

    def run_in_vm(cmd, echo=None, **kw):
        out = next(a for a in cmd if a.startswith("--sits-vm-results=")).split("=", 1)[1]
        if echo is not None:
            echo.write("soak: frame 1000: fds 29, dma-bufs 4, RSS 46600 kB\n")
            echo.flush()
        with open(out, "a") as f:
            for n in (a for a in cmd if "::" in a):
                f.write(json.dumps({"nodeid": n, "outcome": "passed", "longrepr": ""}) + "\n")
        return types.SimpleNamespace(returncode=0, output="", console="", error=None, boot_retry=None)
    monkeypatch.setitem(sys.modules, "sitsvm", types.SimpleNamespace(
        run_in_vm=run_in_vm, check_setup=lambda arch: None, SetupMissing=Exception, DEFAULT_ARCH="x86_64",
        cache_dir=lambda arch="x86_64": tmp_path, guest_python=lambda arch: "python3",
        guest_path=lambda p, arch: p))
    result = pytester.runpytest("-vv", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*soak: frame 1000: fds 29, dma-bufs 4, RSS 46600 kB*"])
