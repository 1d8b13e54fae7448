"""tools/vm/sitsvm.py's --arch: the x86 guest's vng command is the one it
always was, the arm64 guest's boots its own root filesystem with the host's
at /host, and what guest-init.sh is told (job.sh, mounts) says where things
are. A stand-in for _supervise records the command; no VM boots."""
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "vm"))
try:
    import sitsvm
finally:
    sys.path.pop(0)


@pytest.fixture
def booted(monkeypatch, tmp_path):
    """run_in_vm(...) -> (vng argv, {job file: text}), with a fake setup."""
    kdir = tmp_path / "cache" / "6.12.1+deb12-x"
    monkeypatch.setattr(sitsvm, "check_setup", lambda arch: (kdir / "boot/vmlinuz", kdir / "vkms.ko", Path("/v/bin/vng")))
    monkeypatch.setattr(sitsvm, "kernel_version", lambda arch: kdir.name)
    monkeypatch.setattr(sitsvm, "rootfs_dir", lambda arch: tmp_path / "rootfs")
    monkeypatch.setattr(sitsvm, "kvm_usable", lambda: False)
    monkeypatch.delenv("SITS_VM_QEMU_OPTS", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", "/tmp")   # the job's monitor socket needs a short path
    seen = {}

    def supervise(argv, env, start, limits, echo, monitor):
        job = Path(env["TMPDIR"])
        seen["argv"], seen["files"] = argv, {p.name: p.read_text() for p in job.iterdir()}
        return sitsvm.Result(0, "", boot_s=1.0)

    monkeypatch.setattr(sitsvm, "_supervise", supervise)

    def run(**kw):
        r = sitsvm.run_in_vm(["true"], rwdirs=[tmp_path / "out"], cwd="/work/repo", **kw)
        assert r.returncode == 0, r.error
        return seen["argv"], seen["files"]
    return run


def test_the_x86_guest_shares_the_host_root_as_before(booted, tmp_path):
    argv, files = booted()
    kdir = tmp_path / "cache" / "6.12.1+deb12-x"
    assert argv[:4] == ["/v/bin/vng", "-r", str(kdir / "boot/vmlinuz"), "--disable-kvm"]
    assert argv[argv.index("--append") + 1] == f"modprobe.blacklist={sitsvm.BLACKLIST}"
    assert f"--rwdir={tmp_path / 'out'}" in argv
    assert not {"--arch", "--root"} & set(argv) and not any(a.startswith("--rodir") for a in argv)
    # the QEMU monitor only, where a stalled guest is asked for its stacks
    qemu = [a for a in argv if a.startswith("--qemu-opts")]
    assert len(qemu) == 1 and qemu[0].startswith("--qemu-opts=-monitor unix:") and qemu[0].endswith("monitor.sock,server,nowait")
    init = argv[argv.index("--exec") + 1]
    assert init.startswith(f"exec sh {sitsvm.HERE / 'guest-init.sh'} /") and init.endswith(str(kdir / "vkms.ko"))
    assert set(files) == {"job.sh"} and "cwd=/work/repo\n" in files["job.sh"]


def test_the_arm64_guest_boots_its_root_with_the_host_at_host(booted, tmp_path):
    argv, files = booted(arch="arm64")
    kdir = tmp_path / "cache" / "6.12.1+deb12-x"
    assert argv[argv.index("--arch") + 1] == "arm64"
    assert argv[argv.index("--root") + 1] == str(tmp_path / "rootfs")
    assert "--rodir=/host=/" in argv and "--qemu-opts=-cpu max,pauth-impdef=on" in argv
    assert f"--rwdir=/run/sits-rw0={tmp_path / 'out'}" in argv
    init = argv[argv.index("--exec") + 1]
    assert init.startswith(f"exec sh /host{sitsvm.HERE / 'guest-init.sh'} /host/") and init.endswith(f"/host{kdir}/vkms.ko")
    job = files["job.sh"]
    assert "cwd=/host/work/repo\n" in job and f"export PATH={sitsvm.ROOTFS_PATH}\n" in job
    assert f"export PYTHONPATH=/host{sitsvm.REPO}\n" in job
    mounts = files["mounts"].splitlines()
    assert mounts == [f"bind /run/sits-rw0 /host{tmp_path / 'out'}",
                      f"overlay /host{sitsvm.REPO}/build/vm-arm64/sits /host{sitsvm.REPO}/sits",
                      f"link /host{kdir}/lib/modules/{kdir.name} /lib/modules/{kdir.name}"]


def test_paths_python_and_setup_hint_per_arch(monkeypatch, tmp_path):
    assert sitsvm.guest_path("/a/b") == "/a/b" and sitsvm.guest_path("/a/b", "arm64") == "/host/a/b"
    assert sitsvm.guest_python() == sys.executable and sitsvm.guest_python("arm64") == "python3"
    monkeypatch.setenv("SITS_CACHE", str(tmp_path))
    monkeypatch.delenv("SITS_VM_KERNEL", raising=False)
    assert sitsvm.cache_dir("arm64") == tmp_path / "vm-arm64" and sitsvm.cache_dir() == tmp_path / "vm"
    with pytest.raises(sitsvm.SetupMissing, match=r"run tools/vm/setup --arch arm64 first"):
        sitsvm.check_setup("arm64")
    with pytest.raises(sitsvm.SetupMissing, match=r"run tools/vm/setup first"):
        sitsvm.check_setup()
    r = sitsvm.run_in_vm(["true"], arch="sparc")
    assert r.returncode == sitsvm.EXIT_VM and "unknown VM architecture 'sparc'" in r.error


def test_run_takes_arch_with_the_other_options(capsys):
    with pytest.raises(SystemExit) as e:
        sitsvm.main(["--arch", "sparc", "--", "true"])
    assert e.value.code == 2 and "invalid choice: 'sparc'" in capsys.readouterr().err


def test_sits_vm_qemu_opts_come_last_and_in_one_word(booted, monkeypatch):
    """vng's argparse would take a separate "-cpu ..." for an option of its
    own; the last -cpu wins in QEMU, so the caller's overrides the arch's."""
    monkeypatch.setenv("SITS_VM_QEMU_OPTS", "-cpu cortex-a72")
    argv, _ = booted(arch="arm64")
    opts = [a for a in argv if a.startswith("--qemu-opts") and "-monitor" not in a]
    assert opts == ["--qemu-opts=-cpu max,pauth-impdef=on", "--qemu-opts=-cpu cortex-a72"]


def test_no_monitor_where_its_socket_path_would_not_fit(booted, monkeypatch, tmp_path):
    deep = tmp_path / ("d" * 110)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    argv, _ = booted()
    assert not any("-monitor" in a for a in argv)
