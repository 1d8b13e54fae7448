"""How a ProbeSession hooks the journey's kernel functions: by BPF
trampolines, and where the kernel refuses one, by every kprobe twin
instead (the object loaded again), so that the hooks stay one kind. The
kernel's side is tests/vm/test_journey_kernel_vm.py; here the session's
choice, with the loads and attaches stood in for."""
import pytest

from sits.ebpf.points import PROGRAMS
from sits.ebpf.probes import ProbeSession, _hooks
from sits.errors import KernelCallError
from sits.journey import kernel as kj

JOURNEY = [p for p in PROGRAMS if p.obj == "journey"]
TWINNED = [p for p in JOURNEY if p.kprobes]


class _Obj:
    def __init__(self, log):
        self.log = log

    def close(self):
        self.log.append("close")

    def attach(self, name):
        self.log.append(name)


class _Session(ProbeSession):
    """Loads nothing: records what it would load and attach; refuses the
    programs in `refuse` when they come as trampolines."""

    def __init__(self, refuse=(), refuse_load=False, **kw):
        super().__init__(("frames",), **kw)
        self.refuse, self.refuse_load, self.log = set(refuse), refuse_load, []

    def _load_object(self, objname, progs, *, kprobes=False, **kw):
        self.log.append(("load", kprobes))
        if self.refuse_load and not kprobes:
            for p in progs:
                self.skipped[p.name] = "load failed: no BTF for it"
            return None
        obj = self.objects[objname] = _Obj(self.log)
        obj.attach = lambda name: self._attach_one(name, kprobes)
        return obj

    def _attach_one(self, name, kprobes):
        if name in self.refuse and not kprobes:
            raise KernelCallError(95, "bpf_program__attach", name)
        self.log.append(name)


def test_trampolines_when_the_kernel_takes_them():
    s = _Session()
    s._load_and_attach("journey", JOURNEY)
    assert s.log[0] == ("load", False) and len(s.log) == 1 + len(JOURNEY)
    assert set(s.attached) == {p.name for p in JOURNEY} and s.kprobed == {} and s.skipped == {}
    assert kj.hooks(s) == {"kind": "trampoline", "why": None}


@pytest.mark.parametrize("how", ["attach", "load"])
def test_a_refused_trampoline_brings_in_every_kprobe_twin(how):
    s = _Session(refuse={"sits_journey_set_fb"}) if how == "attach" else _Session(refuse_load=True)
    s._load_and_attach("journey", JOURNEY)
    loads = [x for x in s.log if isinstance(x, tuple)]
    assert loads == [("load", False), ("load", True)]
    after = s.log[len(s.log) - 1 - s.log[::-1].index(("load", True)) + 1:]
    assert after == [n for p in JOURNEY for n in _hooks(p, True)]   # twins only, every one
    assert sorted(s.attached) == sorted(p.name for p in JOURNEY)   # each program once, by its own name
    assert s.skipped == {}
    assert set(s.kprobed) == {p.name for p in TWINNED}
    h = kj.hooks(s)
    assert h["kind"] == "kprobe" and ("no BTF" if how == "load" else "attach failed") in h["why"]


def test_kprobes_when_asked_for():
    s = _Session(trampolines=False)
    s._load_and_attach("journey", JOURNEY)
    assert s.log[0] == ("load", True) and s.log[1:] == [n for p in JOURNEY for n in _hooks(p, True)]
    assert kj.hooks(s)["kind"] == "kprobe"


def test_every_trampoline_has_a_twin_of_its_own():
    twins = [k for p in TWINNED for k in p.kprobes]
    assert len(twins) == len(set(twins)) and not set(twins) & {p.name for p in JOURNEY}
    assert all(k.endswith("_kp") for k in twins)


def test_the_object_has_each_hook_both_ways():
    import os

    from sits.ebpf import libbpf
    from sits.ebpf.loader import BpfObject, program_path
    if not os.path.exists(program_path("journey")):
        pytest.skip("journey.bpf.o not built")
    ffi, lib = libbpf.load()
    with BpfObject(program_path("journey")) as obj:
        def section(name):
            return ffi.string(lib.bpf_program__section_name(obj.program(name))).decode()
        for p in TWINNED:
            assert section(p.name).startswith(("fentry/", "fexit/")), p.name
            assert {section(k).split("/")[0] for k in p.kprobes} <= {"kprobe", "kretprobe"}, p.kprobes
        assert {n for p in JOURNEY for n in (p.name, *p.kprobes)} == set(obj.program_names())
