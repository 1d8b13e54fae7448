"""Run the `vm` tier inside the test VM, once per session, and report each
test's outcome in the host run.

On the host, every `vm` item is replaced by a VmReplayItem: the first one to
run boots the VM (tools/vm) with `pytest <all vm node ids>` inside, which
writes one JSON record per test to a directory shared with the host. Each
replay item then passes, fails (with the guest's report) or skips (with the
guest's reason), so the tier counts in the host run's totals. Inside the VM
(SITS_IN_VM=1) the tests run normally and `--sits-vm-results` records them.

SITS_VM_ARCH=arm64 runs the tier in the arm64 VM instead (tools/vm/setup
--arch arm64, by hand: slow under TCG); without that setup its tests skip,
saying so. CI leaves it unset.
"""
import faulthandler
import json
import os
import sys
import tempfile
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IN_VM = os.environ.get("SITS_IN_VM") == "1"
VM_ARCH = os.environ.get("SITS_VM_ARCH", "x86_64")  # sitsvm.ARCHES
HANG_FILE = "hang.txt"   # beside the results: where each task of a hung test was
STARTED_FILE = "started.txt"   # beside the results: each test's node id as it begins
# VMs one host run may boot: a VM lost while a test ran costs that test, and
# the tests after it get a fresh VM, up to this many times
VM_BOOTS = 4


def pytest_addoption(parser):
    parser.addoption("--sits-vm-results", default=None,
                     help="(inside the VM) write per-test outcomes as JSON lines here")
    parser.addoption("--no-vm", action="store_true",
                     help="skip the vm tier instead of booting the test VM")


# --------------------------------------------------------------- inside the VM
class _Recorder:
    def __init__(self, path, timeout):
        self.path = path
        self.outcomes = {}
        # pytest-timeout's SIGALRM cannot interrupt a test blocked in the
        # kernel: past its bound, say where every task is (before the host,
        # hearing nothing, kills the VM and all it knew)
        self.hang_after = timeout + 60 if timeout else None
        self.watch = None

    def _dump_hang(self, nodeid):
        from tests.vm.procfs import stuck_view
        dump = os.path.join(os.path.dirname(self.path), HANG_FILE)
        with open(dump, "a") as f:
            f.write(f"{nodeid}: still running {self.hang_after} s after it began\n")
            faulthandler.dump_traceback(file=f, all_threads=True)
            f.write(stuck_view(os.getpid()) + "\n")
        try:
            with open("/proc/sysrq-trigger", "w") as f:
                f.write("w")   # the kernel's own list of blocked tasks, on the console
        except OSError:
            pass

    def pytest_runtest_logstart(self, nodeid, location):
        with open(os.path.join(os.path.dirname(self.path), STARTED_FILE), "a") as f:
            f.write(nodeid + "\n")
        if self.hang_after:
            self.watch = threading.Timer(self.hang_after, self._dump_hang, (nodeid,))
            self.watch.daemon = True
            self.watch.start()

    def pytest_runtest_logfinish(self, nodeid, location):
        if self.watch is not None:
            self.watch.cancel()
            self.watch = None

    def pytest_runtest_logreport(self, report):
        rec = self.outcomes.setdefault(report.nodeid, {"outcome": "passed", "longrepr": ""})
        if report.failed:
            rec["outcome"] = "failed"
            rec["longrepr"] += f"[{report.when}] {report.longreprtext}\n"
        elif report.skipped and rec["outcome"] == "passed":
            rec["outcome"] = "skipped"
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            rec["longrepr"] = reason.removeprefix("Skipped: ")
        if report.when == "teardown":
            with open(self.path, "a") as f:
                f.write(json.dumps({"nodeid": report.nodeid, **rec}) + "\n")


def pytest_configure(config):
    path = config.getoption("--sits-vm-results")
    if IN_VM and path:
        timeout = config.getoption("timeout", None)
        config.pluginmanager.register(_Recorder(path, float(timeout) if timeout else None), "sits-vm-recorder")


# ------------------------------------------------------------------ on the host
class _VmSession:
    """Boots the VM lazily for all vm items of this host session; when a VM
    is lost (hung or died) while a test runs, that test fails with what the
    guest and its kernel said, and the tests after it run in a fresh VM."""

    def __init__(self, config, nodeids):
        self.config = config
        self.nodeids = nodeids
        self.results = None
        self.error = None
        self.lost = {}      # nodeid -> why the VM stopped while it ran
        self.vm_error = None

    def run(self):
        if self.results is not None or self.error is not None:
            return
        sys.path.insert(0, os.path.join(ROOT, "tools", "vm"))
        try:
            import sitsvm
        finally:
            sys.path.pop(0)
        try:
            sitsvm.check_setup(VM_ARCH)
        except (sitsvm.SetupMissing, ValueError) as exc:
            which = "" if VM_ARCH == sitsvm.DEFAULT_ARCH else f" ({VM_ARCH})"
            self.error = ("skip", f"test VM{which} not available: {exc}")
            return
        self.results = {}
        todo = list(self.nodeids)
        for boot in range(VM_BOOTS):
            result, started, hang = self._boot(sitsvm, todo, boot)
            if not result.error:
                break
            self.vm_error = result.error   # why the VM itself stopped
            running = next((n for n in reversed(started) if n not in self.results), None)
            if running is None:
                if boot == 0 and not self.results:
                    self.error = ("fail", f"the VM run produced no results (exit {result.returncode}: "
                                          f"{result.error}); last output:\n{_tail(result.output, 30)}"
                                          f"\nlast console lines:\n{_tail(result.console, 20)}")
                break
            where = f"\nwhere its tasks were:\n{hang}" if running in hang else ""
            self.lost[running] = (f"the VM stopped while this test ran ({result.error}){where}"
                                  f"\nlast console lines:\n{_tail(result.console, 40)}")
            todo = [n for n in todo if n not in self.results and n != running]
            if not todo:
                break

    def _boot(self, sitsvm, nodeids, boot):
        """One VM for `nodeids`: its result, the tests it started (in order)
        and the hang dump; each finished test's record lands in self.results."""
        runs = sitsvm.cache_dir() / "vm-runs"
        runs.mkdir(parents=True, exist_ok=True)
        outdir = tempfile.mkdtemp(prefix="results-", dir=runs)
        out = os.path.join(outdir, "results.jsonl")
        # No bound on the whole run (a slow or busy host makes it longer, not
        # failed), only on a stall: a hung test is stopped by pytest-timeout
        # (the run goes on with the next), a hung guest by the host when the
        # guest's pytest -- which writes as each test ends -- has said nothing
        # for longer than any one test may take.
        per_test = int(os.environ.get("SITS_VM_TEST_TIMEOUT", "900"))
        idle = int(os.environ.get("SITS_VM_IDLE_TIMEOUT", str(per_test + 300)))
        cmd = [sitsvm.guest_python(VM_ARCH), "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs",
               "--durations=15", f"--timeout={per_test}",
               f"--sits-vm-results={sitsvm.guest_path(out, VM_ARCH)}", *nodeids]
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr:
            again = "" if boot == 0 else "again, after a lost VM, for the other "
            tr.write_line(f"booting the test VM {again}for {len(nodeids)} vm-tier tests "
                          f"(stopped after {idle} s without progress)...")
        result = sitsvm.run_in_vm(cmd, timeout=None, idle_timeout=idle, rwdirs=[outdir], cwd=ROOT,
                                  env={"SITS_IN_VM": "1", "PYTHONDONTWRITEBYTECODE": "1",
                                       "PYTHONUNBUFFERED": "1",  # each test's mark as it ends: progress
                                       **{k: os.environ[k] for k in ("SITS_SOAK",) if k in os.environ}},
                                  # the terminal's writer, not sys.stdout: the VM runs in
                                  # a test's call, whose output pytest captures
                                  echo=tr if tr and self.config.getoption("verbose") > 1 else None,
                                  arch=VM_ARCH)
        if tr and result.boot_retry:
            tr.write_line(f"a VM boot died before the guest started ({result.boot_retry}); booted again")
        with open(os.path.join(outdir, "vm.log"), "w") as f:
            f.write(result.output)
        with open(os.path.join(outdir, "console.log"), "w") as f:
            f.write(result.console or "")
        if os.path.exists(out):
            with open(out) as f:
                for line in f:
                    rec = json.loads(line)
                    self.results[rec["nodeid"]] = rec
        return result, _lines(os.path.join(outdir, STARTED_FILE)), _read(os.path.join(outdir, HANG_FILE))


def _tail(text, n):
    return "\n".join((text or "").splitlines()[-n:])


def _read(path):
    return open(path).read() if os.path.exists(path) else ""


def _lines(path):
    return _read(path).splitlines()


class VmReplayItem(pytest.Item):
    """Stands in on the host for a vm-tier test that ran inside the VM."""

    def __init__(self, *, vm_session, line, **kwargs):
        super().__init__(**kwargs)
        self.vm_session = vm_session
        self.line = line    # the test function's, where pytest reports a marker's skip

    def runtest(self):
        vs = self.vm_session
        vs.run()
        if vs.error:
            kind, msg = vs.error
            (pytest.skip if kind == "skip" else pytest.fail)(msg, **({} if kind == "skip" else {"pytrace": False}))
        rec = vs.results.get(self.nodeid)
        if rec is None:
            if self.nodeid in vs.lost:
                pytest.fail(vs.lost[self.nodeid], pytrace=False)
            why = f" ({vs.vm_error})" if vs.vm_error else " (crashed or timed out before it ran)"
            pytest.fail(f"no result from the VM for this test{why}; "
                        f"see the vm.log under ~/.cache/sits/vm-runs", pytrace=False)
        if rec["outcome"] == "skipped":
            pytest.skip(f"[in VM] {rec['longrepr']}")
        if rec["outcome"] == "failed":
            pytest.fail(f"[in VM]\n{rec['longrepr']}", pytrace=False)

    def reportinfo(self):
        return self.path, self.line, f"[vm] {self.name}"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    if IN_VM:
        return
    vm_items = [it for it in items if "vm" in it.keywords]
    if not vm_items:
        return
    if config.getoption("--no-vm"):
        for it in vm_items:
            it.add_marker(pytest.mark.skip(reason="vm tier skipped (--no-vm)"))
        return
    vs = _VmSession(config, [it.nodeid for it in vm_items])
    for i, it in enumerate(items):
        if "vm" in it.keywords:
            replay = VmReplayItem.from_parent(it.parent, name=it.name, vm_session=vs, line=it.location[1])
            replay.own_markers.extend(it.own_markers)
            items[i] = replay
