"""The arm64 build (tools/cross/check_arm64.py, fixture arm64_build): sits'
kernel binding, its libbpf declarations and every BPF program compile for
arm64 on this machine, with _Static_asserts that what the Python side
assumes (layouts, constants, ioctl numbers) is what the arm64 compilers
compute."""
import re
import subprocess
import sys
from pathlib import Path

from sits.ebpf.loader import program_path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "csrc"))
from build_kernel import ioctl_names  # noqa: E402  (csrc is no package)

EM_AARCH64, EM_BPF = 183, 247


def elf_machine(path) -> int:
    head = Path(path).read_bytes()[:20]
    assert head[:4] == b"\x7fELF", path
    return int.from_bytes(head[18:20], "little")


def test_binding_and_bpf_objects_build_for_arm64(arm64_build):
    out = arm64_build["out"]
    assert elf_machine(out / "_kernel_ffi.o") == EM_AARCH64
    assert elf_machine(out / "libbpf_cdef.o") == EM_AARCH64
    programs = sorted(p.name for p in Path(program_path("syscalls")).parent.glob("*.bpf.c"))
    assert [Path(o).name[:-1] + "c" for o in arm64_build["objects"]] == programs
    assert {elf_machine(o) for o in arm64_build["objects"]} == {EM_BPF}


def test_the_checks_cover_every_ioctl_and_the_shared_structs(arm64_build):
    out = arm64_build["out"]
    kernel = (out / "_kernel_ffi.c").read_text()
    for name in ioctl_names():
        uapi = name[len("SITS_"):]
        assert f"_Static_assert(({uapi}) == " in kernel, uapi
    for struct in ("v4l2_buffer", "v4l2_format", "drm_event_vblank", "sits_q_frame", "sits_queue"):
        assert f"_Static_assert((sizeof(struct {struct})) == " in kernel, struct
    for name, structs in (("libbpf_cdef.c", ("bpf_uprobe_opts", "bpf_map_batch_opts", "sits_hist")),
                          ("sits_probe.bpf.c", ("sits_hist_key", "sits_hist", "sits_event", "sits_config"))):
        text = (out / name).read_text()
        for struct in structs:
            assert f"_Static_assert((sizeof(struct {struct})) == " in text, (name, struct)


def test_a_wrong_number_or_size_fails_the_arm64_build(arm64_build, tmp_path):
    """Each kind of check bites: one value changed, and the arm64 compiler
    refuses the source, naming it."""
    out = arm64_build["out"]
    for what, name, expr in (("kernel binding", "_kernel_ffi.c", "(VIDIOC_DQBUF)"),
                             ("libbpf.cdef", "libbpf_cdef.c", "(sizeof(struct bpf_uprobe_opts))"),
                             ("sits_probe.h for BPF", "sits_probe.bpf.c", "(sizeof(struct sits_hist_key))")):
        text = (out / name).read_text()
        pattern = re.escape(f"_Static_assert({expr} == ") + r"(\d+)"
        broken = re.sub(pattern, lambda m: m.group(0)[:-len(m.group(1))] + str(int(m.group(1)) + 8), text)
        assert broken != text, expr
        (tmp_path / name).write_text(broken)
        argv, compiled = [], arm64_build["commands"][what]
        for i, arg in enumerate(compiled):  # the same command on the broken copy, no object
            if arg in ("-c", "-o") or compiled[i - 1] == "-o":
                continue
            argv.append(str(tmp_path / name) if arg == str(out / name) else arg)
        r = subprocess.run(argv + ["-fsyntax-only"], capture_output=True, text=True)
        assert r.returncode != 0 and re.search("static.assert", r.stderr) and expr[1:-1] in r.stderr, (what, r.stderr[-2000:])
