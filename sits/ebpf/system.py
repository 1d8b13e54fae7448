"""What this machine offers the probes: privileges, kernel BTF, cgroups,
libavcodec."""
from __future__ import annotations

import os

from sits.errors import SitsError, UsageError

BTF_PATH = "/sys/kernel/btf/vmlinux"
CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 21, 38, 39


def _cap_effective() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def check_privileges() -> None:
    """Raise one clear SitsError unless we may load tracing programs."""
    caps = _cap_effective()
    if os.geteuid() == 0 or caps & (1 << CAP_SYS_ADMIN):
        return
    if caps & (1 << CAP_BPF) and caps & (1 << CAP_PERFMON):
        return
    raise SitsError("eBPF probes need root, or CAP_BPF and CAP_PERFMON "
                    "(e.g. sudo sits probe ..., or setcap cap_bpf,cap_perfmon+ep)")


def find_avcodec() -> str | None:
    """The newest libavcodec.so.N on the usual library paths, or None.
    (A scan of each directory, not glob: a multiarch lib directory holds
    thousands of names, and glob's pattern matching of each cost ~10 ms of
    every start-up.)"""
    import sys
    dirs = []
    multiarch = getattr(sys.implementation, "_multiarch", None)  # sysconfig's MULTIARCH, without its import
    for base in ("/usr/lib", "/usr/local/lib", "/lib"):
        if multiarch:
            dirs.append(os.path.join(base, multiarch))
        dirs.append(base)
    dirs += ["/usr/lib64", "/lib64"]
    found, seen = [], set()
    for d in dirs:
        try:
            st = os.stat(d)
            if (st.st_dev, st.st_ino) in seen:  # /lib is /usr/lib on merged-/usr systems
                continue
            seen.add((st.st_dev, st.st_ino))
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            if name.startswith("libavcodec.so.") and name[14:].isdigit():
                found.append((int(name[14:]), os.path.join(d, name)))
    if not found:
        return None
    return os.path.realpath(max(found)[1])


def cgroup_id(path: str) -> int:
    """The cgroup v2 id (inode number) of a cgroup directory."""
    if not path.startswith("/"):
        path = os.path.join("/sys/fs/cgroup", path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UsageError(f"--cgroup {path}: {exc.strerror}") from exc
    return st.st_ino


def kernel_info() -> dict:
    u = os.uname()
    return {"release": u.release, "machine": u.machine, "btf": os.path.exists(BTF_PATH)}
