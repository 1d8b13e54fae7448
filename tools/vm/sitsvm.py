"""Run a command inside the sits test VM (see tools/vm/README.md).

Standard library only, so pytest can import it with tools/vm on sys.path:

    from sitsvm import run_in_vm
    r = run_in_vm(["pytest", "-p", "no:cacheprovider", "tests/kernel"],
                  rwdirs=["build/vm-results"], timeout=900)
    assert r.returncode == 0, r.error or r.output

The VM is the cached Debian kernel booted by virtme-ng with the host root
shared read-only; tools/vm/guest-init.sh loads vkms and vivid, then runs the
command. The command's stdout+stderr come back as `output`; the kernel console
is kept apart in `console`.

`arch="arm64"` boots Debian's arm64 kernel under qemu-system-aarch64 instead,
on an arm64 root filesystem of its own (tools/vm/setup --arch arm64), with
the host's root read-only at /host (see ARCHES).
"""

from __future__ import annotations

import codecs
import collections
import dataclasses
import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Iterable, Mapping, Sequence

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

EXIT_TIMEOUT = 124  # the command outlived `timeout`, or was silent for `idle_timeout`
EXIT_VM = 125  # setup missing, VM did not boot, guest setup failed, VM died

DEFAULT_TIMEOUT = 600.0
# A boot is stalled when its console says nothing for this long (~16 s is
# a whole boot under TCG on 2 cores); a busy host makes it longer, not
# failed: three VMs and a CPU hog on 2 cores took over 180 s, printing
# all the way (RCU stall reports included).
DEFAULT_BOOT_TIMEOUT = 180.0
BOOT_CAP_S = 1800.0  # a boot that keeps printing but never comes up
VNG_EXIT_S = 60.0  # from vng closing its output to its exit
BOOT_RETRIES = 2  # boots that die before the guest starts (a TCG race, see README)
DIED_BEFORE_BOOT = "VM exited before booting"  # Result.error of such a boot
CONSOLE_TAIL = 20
# A guest that stalls is asked for its kernel's stacks before it is killed,
# through the QEMU monitor: sysrq l and w (CPUs' backtraces, blocked tasks)
# where its interrupts still run, then an NMI, which guest-init.sh makes a
# panic with the stack of what each CPU was doing (a lock spun on with
# interrupts off, which no lockup detector sees under TCG). The console is
# read this long after each.
STALL_DUMP_S = 10.0

# Modules that udev would load for QEMU's q35 devices (SATA CD-ROM, watchdog,
# SMBus, nested KVM, crypto accelerators). None is needed and together they
# cost ~10 s of a ~26 s TCG boot. A blacklist stops only udev's alias loading;
# an explicit `modprobe NAME` in a test still works.
BLACKLIST = (
    "ahci,libahci,libata,sr_mod,cdrom,sg,kvm_amd,kvm_intel,kvm,iTCO_wdt,"
    "iTCO_vendor_support,lpc_ich,i2c_i801,intel_pmc_bxt,pcspkr,psmouse,serio_raw,"
    "aesni_intel,ghash_clmulni_intel,sha1_ssse3,sha256_ssse3,sha512_ssse3,"
    "crc32_pclmul,crct10dif_pclmul,ccp,powernow_k8"
)


@dataclasses.dataclass(frozen=True)
class Arch:
    """What differs between the VM's architectures; kernel version rule,
    modules, guest-init.sh and the job protocol are shared."""

    name: str  # --arch, and vng's
    debian: str  # Debian's architecture: the kernel flavour and the packages'
    machine: str  # uname -m: qemu-user's and the Python wheels' name
    cache: str  # folder under SITS_CACHE
    # None: the guest's / is the host's (read-only). Otherwise the guest boots
    # on a root filesystem of its own (cache/rootfs) and sees the host's / here;
    # the caller's cwd, --rwdir and the repo are found below it.
    host_root: str | None
    blacklist: str  # modules udev need not load (see BLACKLIST)
    qemu_opts: tuple[str, ...] = ()


ARCHES = {
    "x86_64": Arch("x86_64", "amd64", "x86_64", "vm", None, BLACKLIST),
    # vng asks for cortex-a57 under TCG; the last -cpu wins. pauth-impdef:
    # QEMU's own pointer-authentication hash, not the architected QARMA5
    # that costs TCG dearly in every kernel function (PAC is on in Debian's).
    "arm64": Arch("arm64", "arm64", "aarch64", "vm-arm64", "/host", "", ("-cpu", "max,pauth-impdef=on")),
}
DEFAULT_ARCH = "x86_64"
# A foreign root filesystem's PATH: the host's names x86 programs.
ROOTFS_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Host variables worth having in the guest besides PATH; the guest otherwise
# starts from virtme-ng-init's minimal environment.
PASS_ENV = ("PYTHONPATH", "CI", "TERM", "LANG", "LC_ALL", "VIRTUAL_ENV")

_MARK = re.compile(r"sits-vm-guest: (up|run|exit (\d+)|setup failed: .*)")
# virtme-ng's own line once guest-init.sh has ended: the exit code when our
# "exit N" line was lost on the console (seen once under -icount)
_VNG_EXIT = re.compile(r"virtme-ng-init: script exited with code (\d+)")


@dataclasses.dataclass
class Result:
    returncode: int
    output: str  # the command's stdout+stderr
    console: str = ""  # kernel console, vng and guest-init messages
    error: str | None = None  # one line when the VM, not the command, failed
    boot_s: float | None = None  # seconds from start until the command started
    elapsed_s: float = 0.0
    boot_retry: str | None = None  # why the first boot failed, when it was retried

    def console_tail(self, n: int = CONSOLE_TAIL) -> str:
        return "\n".join(self.console.splitlines()[-n:])


class SetupMissing(Exception):
    """tools/vm/setup has not been run on this machine."""


def arch_of(name: str) -> Arch:
    try:
        return ARCHES[name]
    except KeyError:
        raise ValueError(f"unknown VM architecture {name!r} (one of {', '.join(ARCHES)})") from None


def setup_command(arch: str = DEFAULT_ARCH) -> str:
    return "tools/vm/setup" + ("" if arch == DEFAULT_ARCH else f" --arch {arch}")


def cache_dir(arch: str = DEFAULT_ARCH) -> Path:
    return Path(os.environ.get("SITS_CACHE") or Path.home() / ".cache/sits") / arch_of(arch).cache


def kernel_version(arch: str = DEFAULT_ARCH) -> str:
    ver = os.environ.get("SITS_VM_KERNEL")
    if ver:
        return ver
    try:
        return (cache_dir(arch) / "current").read_text().strip()
    except OSError:
        raise SetupMissing(f"no kernel prepared: run {setup_command(arch)} first") from None


def guest_path(path: str | os.PathLike, arch: str = DEFAULT_ARCH) -> str:
    """Where the guest of `arch` sees the host's `path`."""
    path = os.path.abspath(path)
    prefix = arch_of(arch).host_root
    return prefix + path if prefix else path


def guest_python(arch: str = DEFAULT_ARCH) -> str:
    """The Python that runs sits in the guest: the caller's on the host's
    root, the root filesystem's (with sits' dependencies) on a foreign one."""
    return "python3" if arch_of(arch).host_root else sys.executable


def sits_build_dir(arch: str) -> Path:
    """sits' compiled parts for a foreign `arch` (setup builds them from this
    checkout), laid over the repo's sits/ in the guest."""
    return REPO / "build" / f"vm-{arch}"


def build_digest() -> str:
    return subprocess.run([str(REPO / "tools" / "build-digest")], capture_output=True,
                          text=True, check=True).stdout.strip()


def shell_vars(arch: str) -> str:
    """tools/vm/setup's view of `arch`, as shell assignments."""
    a = arch_of(arch)
    values = {"cache_root": cache_dir(arch), "debian_arch": a.debian, "machine": a.machine,
              "foreign": "1" if a.host_root else "",
              "sits_build": sits_build_dir(arch)}
    return "".join(f"{k}={shlex.quote(str(v))}\n" for k, v in values.items())


def venv_dir() -> Path:
    return Path(os.environ.get("SITS_VENV") or REPO / ".venv")


def kvm_usable() -> bool:
    """KVM only when asked for (SITS_VM_KVM=1) and /dev/kvm is usable.

    TCG is the default: our sandboxes expose /dev/kvm for PVM guests only
    (kvm_pvm), which cannot run a stock kernel, and TCG boots in ~20 s on
    every machine we tried.
    """
    if os.environ.get("SITS_VM_KVM") != "1":
        return False
    if not os.access("/dev/kvm", os.R_OK | os.W_OK) or Path("/sys/module/kvm_pvm").exists():
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return bool(re.search(r"^flags\s*:.*\b(vmx|svm)\b", flags, re.M))


def check_setup(arch: str = DEFAULT_ARCH) -> tuple[Path, Path, Path]:
    """Return (vmlinuz, vkms.ko, vng) or raise SetupMissing."""
    ver = kernel_version(arch)
    kdir = cache_dir(arch) / ver
    vmlinuz = kdir / "boot" / f"vmlinuz-{ver}"
    vkms = kdir / "vkms.ko"
    vng = venv_dir() / "bin" / "vng"
    mods = kdir / "lib" / "modules" / ver / "modules.dep"  # what vng gives the guest
    needed = [vmlinuz, vkms, mods, vng]
    if arch_of(arch).host_root:
        needed += [rootfs_dir(arch) / "usr" / "bin" / "python3", sits_build_dir(arch) / "digest"]
    for path in needed:
        if not path.exists():
            raise SetupMissing(f"{path} missing: run {setup_command(arch)} first")
    if arch_of(arch).host_root and (sits_build_dir(arch) / "digest").read_text().strip() != build_digest():
        raise SetupMissing(f"sits' {arch} build in {sits_build_dir(arch)} is older than the sources: "
                           f"run {setup_command(arch)}")
    return vmlinuz, vkms, vng


def rootfs_dir(arch: str) -> Path:
    return cache_dir(arch) / "rootfs"  # setup's link to the current recipe's folder


def _mounts(arch: str, rw: Sequence[tuple[str, str]], modules: Path) -> str:
    """guest-init.sh's mounts for a foreign root: each --rwdir (vng mounts
    them apart, as the host root's mount would hide them) bound where the
    host root shows it, sits' build for `arch` over the repo's sits/, and
    the kernel's modules (vng links /lib/modules/VER to a path inside the
    root filesystem, where they are not)."""
    lines = [f"bind {tag} {guest_path(path, arch)}" for tag, path in rw]
    lines.append(f"overlay {guest_path(sits_build_dir(arch) / 'sits', arch)} {guest_path(REPO / 'sits', arch)}")
    lines.append(f"link {guest_path(modules, arch)} /lib/modules/{modules.name}")
    return "\n".join(lines) + "\n"


def _job_script(argv: Sequence[str], cwd: str, env: Mapping[str, str]) -> str:
    lines = [f"cwd={shlex.quote(cwd)}"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    lines.append("set -- " + " ".join(shlex.quote(a) for a in argv))
    return "\n".join(lines) + "\n"


def run_in_vm(
    command: Sequence[str] | str,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    idle_timeout: float | None = None,
    boot_timeout: float = DEFAULT_BOOT_TIMEOUT,
    rwdirs: Iterable[str | os.PathLike] = (),
    cwd: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    memory: str = "2G",
    cpus: int = 2,
    echo: IO[str] | None = None,
    arch: str = DEFAULT_ARCH,
) -> Result:
    """Boot the VM, run `command` (argv list, or a string for `sh -c`) in it.

    `echo`, when given, receives the command's output as it arrives (the CLI
    passes sys.stdout). `timeout` bounds the whole run (None: no bound);
    `idle_timeout` bounds the time the running command may go without
    writing anything -- a bound on a stall rather than on the work, so that
    a slow or busy host only makes the run longer. Never raises for VM trouble: returncode is then
    EXIT_TIMEOUT or EXIT_VM and `error` says what happened in one line.
    `arch` (ARCHES) picks the guest; on a foreign one `cwd` and `rwdirs` are
    host paths, seen by the command below Arch.host_root.
    """
    start = time.monotonic()
    argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
    if not argv:
        raise ValueError("empty command")
    try:
        a = arch_of(arch)
        vmlinuz, vkms, vng = check_setup(arch)
    except (SetupMissing, ValueError) as e:
        return Result(EXIT_VM, "", error=str(e))

    def g(path) -> str:  # a host path, as the guest's shell sees it
        return shlex.quote(guest_path(path, arch))

    if a.host_root:
        guest_env = {"PATH": ROOTFS_PATH, "PYTHONPATH": guest_path(REPO, arch)}
        guest_env.update({k: os.environ[k] for k in PASS_ENV if k in os.environ
                          and k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    else:
        guest_env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
        guest_env.update({k: os.environ[k] for k in PASS_ENV if k in os.environ})
    # The repo is read-only in the guest: no __pycache__ writes.
    guest_env["PYTHONDONTWRITEBYTECODE"] = "1"
    guest_env.update(env or {})

    rw, rw_paths = [], []
    for i, d in enumerate(rwdirs):
        path = os.path.abspath(d)
        os.makedirs(path, exist_ok=True)  # vng refuses a missing directory
        if a.host_root:  # a mount point vng can make (/run is a tmpfs)
            rw_paths.append((f"/run/sits-rw{i}", path))
            rw.append(f"--rwdir=/run/sits-rw{i}={path}")
        else:
            rw.append(f"--rwdir={path}")
    root = [] if not a.host_root else [
        "--arch", a.name, "--root", str(rootfs_dir(arch).resolve()), f"--rodir={a.host_root}=/"]

    job = tempfile.mkdtemp(prefix="sits-vm-")
    try:
        Path(job, "job.sh").write_text(_job_script(argv, guest_path(cwd or os.getcwd(), arch), guest_env))
        if a.host_root:
            modules = vkms.parent / "lib" / "modules" / kernel_version(arch)
            Path(job, "mounts").write_text(_mounts(arch, rw_paths, modules))
        init = f"exec sh {g(HERE / 'guest-init.sh')} {g(job)} {g(vkms)}"
        monitor = os.path.join(job, "monitor.sock")   # STALL_DUMP_S
        # a Unix socket's path holds 107 bytes; QEMU's option syntax, no comma or space
        if len(monitor) > 100 or re.search(r"[\s,]", monitor):
            monitor = None
        vng_argv = [
            str(vng), "-r", str(vmlinuz), "--force-9p", "--verbose",
            "--memory", memory, "--cpus", str(cpus),
            *([f"--qemu-opts=-monitor unix:{monitor},server,nowait"] if monitor else []),
            *(["--append", f"modprobe.blacklist={a.blacklist}"] if a.blacklist else []),
            *root, *rw, "--exec", init,
        ]  # fmt: skip
        kvm = kvm_usable() and not a.host_root
        if not kvm:
            vng_argv.insert(3, "--disable-kvm")
        # e.g. "-icount shift=5,sleep=off" for the benchmarks: guest time then
        # counts guest instructions, so CPU figures do not move with the host's load
        qemu_opts = os.environ.get("SITS_VM_QEMU_OPTS")
        if qemu_opts:  # one word: vng's argparse takes "-cpu ..." apart for an option of its own
            vng_argv[3:3] = [f"--qemu-opts={qemu_opts}"]
        if a.qemu_opts:  # before SITS_VM_QEMU_OPTS, which may override them (the last -cpu wins)
            vng_argv[3:3] = ["--qemu-opts=" + " ".join(a.qemu_opts)]
        host_env = dict(os.environ)
        # vng runs virtme-run from its own venv; its temp files go to `job`.
        host_env["PATH"] = f"{vng.parent}:{host_env.get('PATH', '')}"
        host_env["TMPDIR"] = job
        limits = (timeout, idle_timeout, boot_timeout)
        result = _supervise(vng_argv, host_env, start, limits, echo, monitor)
        for _ in range(BOOT_RETRIES):
            if not (result.returncode == EXIT_VM and result.error
                    and result.error.startswith(DIED_BEFORE_BOOT)):
                break
            # A kernel that died while booting ran none of the command: one
            # more boot, reported. (An early `Oops: int3` in a function being
            # text-patched shows up in about one boot in ten under TCG.)
            first = result
            oops = _first_oops(first.console)
            if echo is not None:
                echo.write(f"sits-vm: boot failed ({oops or first.error}); booting once more\n")
            result = _supervise(vng_argv, host_env, time.monotonic(), limits, echo, monitor)
            result.console = first.console + result.console
            result.boot_retry = oops or first.error
        if result.error and result.boot_s is None:
            oops = _first_oops(result.console)
            accel = "KVM" if kvm else "TCG"
            result.error = f"{result.error} under {accel}" + (f"; first oops: {oops}" if oops else "")
        return result
    finally:
        shutil.rmtree(job, ignore_errors=True)


def _supervise(argv, env, start, limits, echo, monitor=None) -> Result:
    timeout, idle_timeout, boot_timeout = limits
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,  # a tty stdin would be put in raw mode by QEMU
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,  # one process group: vng, virtme-run, qemu
    )
    out: list[str] = []
    console: list[str] = []
    pending = ""  # console text after the last newline
    # Guest progress, from the sits-vm-guest lines; up/run hold seconds.
    state = {"up": None, "run": None, "exit": None, "failed": None}
    decoders = {
        proc.stdout: codecs.getincrementaldecoder("utf-8")("replace"),
        proc.stderr: codecs.getincrementaldecoder("utf-8")("replace"),
    }
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    sel.register(proc.stderr, selectors.EVENT_READ)
    error = None
    code = None
    last_output = start  # the command's latest output (or its start)
    last_console = start  # the guest's latest console output: boot progress
    asks = []   # (when, monitor command) still to send to a stalled guest, then the kill
    try:
        while sel.get_map():
            now = time.monotonic()
            if asks:
                if now >= asks[0][0]:
                    _, cmd = asks.pop(0)
                    if cmd is None:
                        break
                    _monitor(monitor, cmd)
            elif code is not None:
                break
            if state["run"] is None and now - last_console > boot_timeout:
                error, code = f"VM boot stalled: no console output for {boot_timeout:.0f} s", EXIT_VM
                break
            if state["run"] is None and now - start > BOOT_CAP_S:
                error, code = f"VM did not boot within {BOOT_CAP_S:.0f} s", EXIT_VM
                break
            quiet_since = max(last_output, start + (state["run"] or 0.0))
            if code is None and state["run"] is not None and idle_timeout and now - quiet_since > idle_timeout:
                error = f"the command wrote nothing for {idle_timeout:.0f} s; VM killed"
                code = EXIT_TIMEOUT
                if monitor:
                    asks = [(now, "sendkey alt-sysrq-l"), (now + 1, "sendkey alt-sysrq-w"),
                            (now + 1 + STALL_DUMP_S, "nmi"), (now + 1 + 2 * STALL_DUMP_S, None)]
                    continue
                break
            if code is None and timeout and now - start > timeout:
                if state["run"] is not None:
                    error = f"command timed out after {timeout:.0f} s; VM killed"
                else:
                    error = f"timed out after {timeout:.0f} s before the command started"
                code = EXIT_TIMEOUT
                break
            for key, _ in sel.select(0.5):
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                text = decoders[key.fileobj].decode(data)
                if key.fileobj is proc.stdout:
                    last_output = time.monotonic()
                    out.append(text)
                    if echo is not None:
                        echo.write(text)
                        echo.flush()
                    continue
                console.append(text)
                last_console = time.monotonic()
                pending += text
                *lines, pending = pending.split("\n")
                for line in lines:
                    _scan(line, state, start)
        if code is None:
            try:  # both pipes closed: vng is exiting
                proc.wait(VNG_EXIT_S)
            except subprocess.TimeoutExpired:
                error, code = f"vng did not exit within {VNG_EXIT_S:.0f} s of closing its output", EXIT_TIMEOUT
    finally:
        sel.close()
        # Also on Ctrl-C or any error here: QEMU is in its own session and
        # would otherwise outlive us.
        if code is not None or proc.poll() is None:
            _kill(proc)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    _scan(pending, state, start)

    result = Result(
        proc.returncode, "".join(out), "".join(console), boot_s=state["run"] or None,
        elapsed_s=time.monotonic() - start,
    )  # fmt: skip
    if code is not None:
        result.returncode, result.error = code, error
    elif state["failed"]:
        result.returncode, result.error = EXIT_VM, f"guest {state['failed']}"
    elif state["up"] is None:
        result.returncode = EXIT_VM
        result.error = f"{DIED_BEFORE_BOOT} (vng exit {proc.returncode})"
    elif state["run"] is None:
        result.returncode, result.error = EXIT_VM, "VM stopped before running the command"
    elif state["exit"] is None:
        result.returncode = EXIT_VM
        result.error = "VM died while the command ran (kernel panic?)"
    else:
        result.returncode = state["exit"]
    return result


def _first_oops(console: str) -> str | None:
    """The kernel's first complaint: later lines of a panic only echo it."""
    for line in console.splitlines():
        if re.search(r"\b(Oops|BUG|Kernel panic|general protection)\b", line):
            return line.strip()
    return None


def _scan(line: str, state: dict, start: float) -> None:
    m = _MARK.search(line)
    if not m:
        v = _VNG_EXIT.search(line)
        if v and state["run"] is not None and state["exit"] is None:
            # guest-init.sh exits with the command's code, or 125 on set-up failure
            state["exit"] = int(v.group(1))
        return
    word = m.group(1)
    if word == "up":
        state["up"] = time.monotonic() - start
    elif word == "run":
        state["run"] = time.monotonic() - start
    elif m.group(2) is not None:
        state["exit"] = int(m.group(2))
    else:
        state["failed"] = word


def _monitor(path: str, command: str) -> None:
    """One command to the QEMU monitor at `path`; nothing if it is gone."""
    import socket

    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(1.0)
            sock.connect(path)
            sock.sendall(command.encode() + b"\n")
            while sock.recv(4096):   # until QEMU's answer (its prompt again) has come
                pass
    except OSError:  # gone, or done answering (timeout)
        pass


def _kill(proc: subprocess.Popen) -> None:
    """Stop vng and the QEMU it started: the whole process group."""
    pgid = proc.pid  # start_new_session made vng the group leader
    try:
        os.killpg(pgid, signal.SIGTERM)
        proc.wait(5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    # vng may be gone while QEMU, in the same group, is still going down.
    for _ in range(50):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main(args: Sequence[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="tools/vm/run",
        description="Run COMMAND in the sits test VM (vivid + vkms + udmabuf + dma-heap).",
        epilog=f"Exit: the command's status; {EXIT_TIMEOUT} timeout; {EXIT_VM} setup missing, "
        "VM did not boot, guest setup failed or VM died.",
    )
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help="seconds for the whole run, 0 for no bound (default %(default)s)")
    p.add_argument("--idle-timeout", type=float, default=None, metavar="S",
                   help="seconds the command may write nothing before the VM is killed (default: no bound)")
    p.add_argument("--boot-timeout", type=float, default=DEFAULT_BOOT_TIMEOUT,
                   help="seconds the booting guest may print nothing (default %(default)s)")
    p.add_argument("--rwdir", action="append", default=[], metavar="DIR", help="host directory the guest may write (repeatable)")
    p.add_argument("--memory", default="2G")
    p.add_argument("--cpus", type=int, default=2)
    p.add_argument("--env", action="append", default=[], metavar="K=V", help="extra guest environment (repeatable)")
    p.add_argument("--console", metavar="FILE", help="write the kernel console to FILE")
    p.add_argument("--arch", choices=list(ARCHES), default=DEFAULT_ARCH,
                   help="the guest's architecture (default %(default)s; arm64: see tools/vm/README.md)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    ns = p.parse_args(args)
    command = ns.command[1:] if ns.command[:1] == ["--"] else ns.command
    if not command:
        p.error("no command; use: tools/vm/run [options] -- COMMAND [ARGS...]")
    env = dict(kv.split("=", 1) for kv in ns.env)

    def stop(signum, _frame):  # unwind through run_in_vm, which kills QEMU
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)

    r = run_in_vm(
        command, timeout=ns.timeout or None, idle_timeout=ns.idle_timeout, boot_timeout=ns.boot_timeout,
        rwdirs=ns.rwdir,
        env=env, memory=ns.memory, cpus=ns.cpus, echo=sys.stdout, arch=ns.arch,
    )  # fmt: skip
    if ns.console:
        Path(ns.console).write_text(r.console)
    if r.error:
        tail = r.console_tail()
        print(f"sits-vm: {r.error}" + ("; last console lines:" if tail else ""), file=sys.stderr)
        if tail:
            print(tail, file=sys.stderr)
    return r.returncode


if __name__ == "__main__":
    if sys.argv[1:2] == ["--shell-vars"]:  # tools/vm/setup --arch ARCH
        try:
            print(shell_vars(sys.argv[2]), end="")
        except (IndexError, ValueError) as e:
            sys.exit(f"sitsvm: {e}")
        sys.exit(0)
    sys.exit(main())
