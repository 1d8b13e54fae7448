"""Build sits for arm64 on this x86-64 machine (object files, nothing is
linked) and check at compile time that what the Python side assumes holds
there (issue 12).

1. The kernel binding: cffi's C source of sits._kernel_ffi
   (csrc/build_kernel.py), compiled by aarch64-linux-gnu-gcc against arm64's
   glibc and UAPI headers (Debian's *-arm64-cross), libdrm-dev:arm64 (its
   pkg-config file) and Python's arm64 headers, with a _Static_assert for
   every type, member and constant of csrc/kernel.cdef and every ioctl of
   csrc/sits_ioctls.h: the value this machine's build has. Both are LP64
   with the asm-generic ioctl encoding, so none of these may differ; what
   may (syscall numbers, pt_regs) sits under __TARGET_ARCH_ in the BPF
   sources, with checks of its own. For the structs that the cdef spells out
   in full, that value is also the layout cffi checks at import on arm64.
   And the ioctl fields sits/ebpf/ioctl_names.py decodes commands with.
2. csrc/libbpf.cdef, ABI mode (cffi lays its structs out itself, no
   compiler at import): every struct and enum against <bpf/libbpf.h> and
   sits_probe.h as aarch64-linux-gnu-gcc compiles them, and sits_probe.h's
   structs as clang -target bpf compiles them for arm64.
3. Every sits/ebpf/programs/*.bpf.c, by clang with csrc/build_bpf.py's
   flags (as setup.py) for __TARGET_ARCH_arm64, against a vmlinux.h made
   from the BTF inside Debian's arm64 kernel image.
4. The binding's objects linked into the extension module that arm64's
   Python imports (_kernel_ffi.cpython-3X-aarch64-linux-gnu.so, against
   libdrm-dev:arm64): what the arm64 test VM runs (tools/vm/setup --arch arm64).

Packages come from tools/bootstrap --packages (as root; as another user,
with some missing, this exits 77). Two arm64 packages are downloaded with
apt-get download and unpacked, not installed, into
${SITS_CACHE:-~/.cache/sits}/arm64/<package>_<version>/ (a new version
replaces the old): the kernel image linux-image-arm64 depends on, of which
only the vmlinux.h made from its BTF is kept, and libpython3.X-dev for its
pyconfig.h.
Installing libpython3.X-dev:arm64 would upgrade this machine's Python, as
dpkg keeps a Multi-Arch: same package at one version on all architectures;
libbpf-dev:arm64 would upgrade openssl and krb5 likewise, so libbpf's
headers are this machine's (libbpf-dev ships the same files for each).

    tools/cross/check-arm64 [--out DIR]      (DIR: build/arm64)

Exit status: 0 built and checked, 1 a build or a check failed, 77 what it
needs cannot be installed here (not root).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import fcntl
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CSRC = ROOT / "csrc"
PROGRAMS = ROOT / "sits" / "ebpf" / "programs"
sys.path.insert(0, str(CSRC))  # csrc is no package
from build_bpf import INCLUDE, clang_args  # noqa: E402
ARCH = "arm64"  # Debian's name and __TARGET_ARCH_'s
CC = "aarch64-linux-gnu-gcc"
TRIPLET = CC.removesuffix("-gcc")
# the name arm64's CPython of this version imports the binding by
MODULE_SUFFIX = f".cpython-3{sys.version_info.minor}-{TRIPLET}.so"
PKG_CONFIG_LIBDIR = "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig"
CACHE = Path(os.environ.get("SITS_CACHE", Path.home() / ".cache" / "sits")) / ARCH
# Warnings that mean wrong code on arm64, not style: cffi checks a member's
# type by taking its address (incompatible-pointer-types, pointer-sign), a
# declaration the arm64 headers lack becomes an implicit one, and integers
# and pointers must not be mixed.
WARNINGS = ["-Wall", "-Werror=incompatible-pointer-types", "-Werror=pointer-sign",
            "-Werror=int-conversion", "-Werror=implicit-function-declaration",
            "-Werror=int-to-pointer-cast", "-Werror=pointer-to-int-cast", "-Werror=overflow"]
SKIPPED = 77
BTF_HEADER = struct.Struct("<HBBIIIII")  # magic, version, flags, hdr_len, type/str off+len


class Skip(Exception):
    """What the check needs cannot be installed here."""


class Failed(Exception):
    """A build or a check failed."""


def run(argv, what, **kw) -> str:
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kw)
    if r.returncode:
        raise Failed(f"{what} failed:\n{r.stdout}{r.stderr}".rstrip())
    return r.stdout


# ---- what the build needs -------------------------------------------------

def ensure_packages():
    r = subprocess.run([ROOT / "tools" / "bootstrap", "--packages"], capture_output=True, text=True)
    if r.returncode:
        reason = (r.stderr.strip().splitlines() or ["tools/bootstrap --packages failed"])[-1]
        raise (Skip if os.geteuid() else Failed)(reason)


def apt_show(pkgs) -> dict[str, dict[str, str]]:
    """apt's candidate of each arm64 package, by name: its control fields.
    One apt-cache run for all (each one parses every package list: seconds)."""
    out = subprocess.run(["apt-cache", "show", "--no-all-versions", *(f"{p}:{ARCH}" for p in pkgs)],
                         capture_output=True, text=True).stdout
    stanzas = (dict(re.findall(r"^([\w-]+): (.*)$", s, re.M)) for s in out.split("\n\n"))
    return {f["Package"]: f for f in stanzas if "Package" in f}


def apt_update():
    if os.geteuid():
        raise Skip("apt's arm64 package lists are missing or out of date; run apt-get update as root")
    run(["apt-get", "update", "-qq"], "apt-get update")


def unpacked(pkg: str, version: str, members: str, fill=None) -> Path | None:
    """The cache folder of arm64 package `pkg` at `version`, holding its files
    that match `members` (a tar pattern) once fill(folder) has made what is
    kept from them; None when apt cannot download it."""
    folder = CACHE / f"{pkg}_{version}"
    if (folder / ".done").exists():
        return folder
    tmp = Path(tempfile.mkdtemp(prefix=f".{pkg}.", dir=CACHE))
    try:
        got = subprocess.run(["apt-get", "download", "-q", f"{pkg}:{ARCH}={version}"],
                             cwd=tmp, capture_output=True, text=True)
        deb = next(tmp.glob("*.deb"), None)
        if got.returncode or not deb:
            return None
        with subprocess.Popen(["dpkg-deb", "--fsys-tarfile", deb], stdout=subprocess.PIPE) as tar:
            run(["tar", "-x", "-C", tmp, "--wildcards", members], f"unpacking {deb.name}", stdin=tar.stdout)
        deb.unlink()
        if fill:
            fill(tmp)
        (tmp / ".done").touch()
        for old in CACHE.glob(f"{pkg}_*"):  # the version before
            shutil.rmtree(old)
        tmp.rename(folder)
        return folder
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def btf_blob(image: bytes) -> bytes:
    """The kernel's BTF out of its image, where the .BTF section lies as is:
    the one BTF header whose type and string sections fit the file."""
    found = []
    for m in re.finditer(rb"\x9f\xeb\x01\x00\x18\x00\x00\x00", image):
        _, _, _, hdr_len, type_off, type_len, str_off, str_len = BTF_HEADER.unpack_from(image, m.start())
        end = m.start() + hdr_len + str_off + str_len
        if type_off == 0 and str_off == type_len and end <= len(image) and image[end - str_len] == 0:
            found.append(image[m.start():end])
    if len(found) != 1:
        raise Failed(f"expected one BTF blob in the arm64 kernel image, found {len(found)}")
    return found[0]


def _make_vmlinux_h(folder: Path):
    image, = folder.glob("boot/vmlinuz-*")
    btf = folder / "vmlinux.btf"
    btf.write_bytes(btf_blob(image.read_bytes()))
    (folder / "vmlinux.h").write_text(run(["bpftool", "btf", "dump", "file", btf, "format", "c"],
                                          f"bpftool btf dump of {image.name}'s BTF"))
    btf.unlink()
    shutil.rmtree(folder / "boot")


# what build() takes from each downloaded package: tar pattern, then what is made of it
UNPACK = {"kernel": ("./boot/vmlinuz-*", _make_vmlinux_h), "python": ("./usr/include/*", None)}


def wanted() -> dict[str, tuple[str, str]] | None:
    """{"kernel": (package, version), "python": (...)}: apt's candidates of the
    kernel image linux-image-arm64 depends on and of the Python headers of
    this interpreter's version; None when apt knows neither."""
    meta, py = f"linux-image-{ARCH}", f"libpython3.{sys.version_info.minor}-dev"
    info = apt_show([meta, py])
    m = re.search(r"(linux-image-\S+) \(= (\S+)\)", info.get(meta, {}).get("Depends", ""))
    if not m or py not in info:
        return None
    return {"kernel": (m.group(1), m.group(2)), "python": (py, info[py]["Version"])}


def _unpack_all(want) -> dict[str, tuple[Path, str]] | None:
    got = {}
    for role, (pkg, version) in want.items():
        folder = unpacked(pkg, version, *UNPACK[role])
        if not folder:
            return None
        got[role] = (folder, f"{pkg} {version}")
    return got


def fetch() -> dict[str, tuple[Path, str]]:
    """{"kernel": (folder with vmlinux.h, "package version"), "python":
    (folder with usr/include, ...)}, from the cache or downloaded."""
    want = wanted()
    got = want and _unpack_all(want)
    if not got:  # a new machine's lists, or a version the mirror has dropped
        apt_update()
        want = wanted()
        got = want and _unpack_all(want)
        if not got:
            raise Failed(f"apt cannot download {want or 'linux-image-arm64 and libpython3-dev'} for arm64")
    return got


# ---- the checks -----------------------------------------------------------

def _literal(value: int) -> str:
    return f"{value}ULL" if value >= 0 else f"({value}LL)"


def static_assert(expr: str, value: int, origin: str) -> str:
    shown = f"{value} ({value:#x})" if abs(value) > 4096 else str(value)
    return f'_Static_assert(({expr}) == {_literal(value)}, "{expr}: {shown} {origin}");'


def c_types(ffi) -> list[str]:
    """The C names of the types `ffi` knows the layout of (structs, unions,
    typedefs; not pointers, functions or opaque structs), once each."""
    typedefs, structs, unions = ffi.list_types()
    out = {}
    for name in [f"struct {s}" for s in structs] + [f"union {u}" for u in unions] + typedefs:
        t = ffi.typeof(name)
        if t.kind in ("pointer", "function"):
            continue
        try:
            ffi.sizeof(t)  # also completes a struct's lazy layout, before .fields
        except ffi.error:  # opaque
            continue
        out.setdefault(t.cname if t.kind in ("struct", "union") else name, t)
    return list(out)


def layout_checks(ffi, types, origin) -> list[str]:
    """Each type's size, and each member's offset and size, as `ffi` has them."""
    lines = []
    for cname in types:
        t = ffi.typeof(cname)
        lines.append(static_assert(f"sizeof({cname})", ffi.sizeof(t), origin))
        members = t.fields if t.kind in ("struct", "union") else []
        for member, f in members:
            if member and f.bitsize < 0:  # offsetof cannot name a bit-field
                lines.append(static_assert(f"__builtin_offsetof({cname}, {member})", f.offset, origin))
                lines.append(static_assert(f"sizeof((({cname} *)0)->{member})", ffi.sizeof(f.type), origin))
    return lines


def ioctl_field_checks(origin) -> list[str]:
    """sits/ebpf/ioctl_names.py's _IOC field layout against asm-generic/ioctl.h's."""
    from sits.ebpf import ioctl_names as py
    lines = [static_assert(f"_IOC{name}", getattr(py, name), origin)
             for name in ("_NRBITS", "_TYPEBITS", "_SIZEBITS",
                          "_NRSHIFT", "_TYPESHIFT", "_SIZESHIFT", "_DIRSHIFT")]
    direction = {"_IO": "_IOC_NONE", "_IOW": "_IOC_WRITE", "_IOR": "_IOC_READ",
                 "_IOWR": "_IOC_READ | _IOC_WRITE"}
    lines += [static_assert(direction[name], value, origin) for value, name in py._DIRS.items()]
    lines.append(static_assert("1 << _IOC_DIRBITS", len(py._DIRS), origin))
    return lines


def kernel_checks(build_kernel) -> list[str]:
    from sits._kernel_ffi import ffi, lib
    origin = "in this machine's build (sits._kernel_ffi)"
    ioctls = set(build_kernel.ioctl_names())
    lines = layout_checks(ffi, c_types(ffi), origin)
    for name in dir(lib):
        value = getattr(lib, name)
        if isinstance(value, int):  # functions are not
            # an ioctl by its UAPI macro: SITS_<NAME> is a variable, no constant expression in C
            lines.append(static_assert(name[len("SITS_"):] if name in ioctls else name, value, origin))
    return lines + ioctl_field_checks("in sits/ebpf/ioctl_names.py")


def libbpf_cdef_checks(keep=lambda cname: True) -> list[str]:
    """csrc/libbpf.cdef's types whose C name `keep` accepts, and its enums'
    values, as cffi has them."""
    from sits.ebpf._libbpf_ffi import ffi
    origin = "as cffi lays out csrc/libbpf.cdef"
    # list_types() leaves enums out: their names come from the cdef itself
    enums = [f"enum {e}" for e in re.findall(r"\benum (\w+) *\{", (CSRC / "libbpf.cdef").read_text())]
    types = [c for c in c_types(ffi) + enums if keep(c)]
    lines = layout_checks(ffi, types, origin)
    for cname in types:
        if cname in enums:
            lines += [static_assert(name, value, origin) for value, name in ffi.typeof(cname).elements.items()]
    return lines


def sits_probe_h(cname: str) -> bool:
    """sits_probe.h's types: sits' own, shared by the BPF side and user space."""
    return cname.startswith("struct sits_")


LIBBPF_TU = """\
#include <stdarg.h>
#include <linux/types.h>
#include <bpf/libbpf.h>
#include <bpf/bpf.h>
#include "sits_probe.h"

/* libbpf.cdef passes the va_list libbpf's print callback gets on to
 * vsnprintf as a void *: AAPCS64 passes a composite over 16 bytes by
 * reference, so a va_list argument is a pointer there too. */
_Static_assert(sizeof(va_list) > 16, "va_list is passed by reference (AAPCS64)");
"""
BPF_TU = '#include "vmlinux.h"\n#include "sits_probe.h"\n'


# ---- the build ------------------------------------------------------------

def build(out: Path) -> dict:
    t0 = time.monotonic()
    ensure_packages()
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:  # two runs at once share the cache
        fcntl.flock(lock, fcntl.LOCK_EX)
        got = fetch()
    (kernel_dir, kernel), (py_dir, py_pkg) = got["kernel"], got["python"]
    inc = py_dir / "usr" / "include"
    py_flags = ["-isystem", inc / f"python3.{sys.version_info.minor}", "-isystem", inc]
    t_fetch = time.monotonic()
    if out.exists():
        shutil.rmtree(out)
    (out / "bpf").mkdir(parents=True)
    summary = {"cc": CC, "kernel": kernel, "python_headers": py_pkg,
               "vmlinux_h": str(kernel_dir / "vmlinux.h"), "checks": {}, "seconds": {}}

    # 1. the kernel binding, its checks appended to cffi's C source
    import build_kernel  # parses the cdef: here, not when a test imports this module
    os.environ["PKG_CONFIG_LIBDIR"] = PKG_CONFIG_LIBDIR
    opts = build_kernel.source_options()
    del os.environ["PKG_CONFIG_LIBDIR"]
    src = out / "_kernel_ffi.c"
    with contextlib.redirect_stdout(io.StringIO()):  # cffi says "generating ..."
        build_kernel.ffibuilder.emit_c_code(str(src))
    checks = kernel_checks(build_kernel)
    with open(src, "a") as f:
        f.write("\n/* tools/cross/check_arm64.py */\n" + "\n".join(checks) + "\n")
    summary["checks"]["kernel binding"] = len(checks)
    includes = [f"-I{d}" for d in opts["include_dirs"]]
    jobs = {"kernel binding": [CC, "-c", "-fPIC", *WARNINGS, *opts["extra_compile_args"],
                               *includes, *py_flags, src, "-o", out / "_kernel_ffi.o"]}
    module_objects = [out / "_kernel_ffi.o"]
    for c_file in opts["sources"]:   # the frame queue's C, compiled into the same module
        name = os.path.basename(c_file)
        module_objects.append(out / (name[:-2] + ".o"))
        jobs[name] = [CC, "-c", "-fPIC", *WARNINGS, *opts["extra_compile_args"], *includes,
                      ROOT / c_file,
                      "-o", module_objects[-1]]

    # 2. libbpf.cdef, by the arm64 C compiler and by clang for BPF
    checks = libbpf_cdef_checks()
    (out / "libbpf_cdef.c").write_text(LIBBPF_TU + "\n".join(checks) + "\n")
    summary["checks"]["libbpf.cdef"] = len(checks)
    jobs["libbpf.cdef"] = [CC, "-c", *WARNINGS, "-I", PROGRAMS, "-I", INCLUDE, out / "libbpf_cdef.c",
                           "-o", out / "libbpf_cdef.o"]
    bpf = ["clang", *clang_args(ARCH, str(kernel_dir))]
    checks = libbpf_cdef_checks(sits_probe_h)
    (out / "sits_probe.bpf.c").write_text(BPF_TU + "\n".join(checks) + "\n")
    summary["checks"]["sits_probe.h for BPF"] = len(checks)
    jobs["sits_probe.h for BPF"] = [*bpf, "-fsyntax-only", out / "sits_probe.bpf.c"]

    # 3. every BPF program
    for prog in sorted(PROGRAMS.glob("*.bpf.c")):
        obj = out / "bpf" / (prog.name[:-2] + ".o")
        jobs[prog.name] = [*bpf, "-c", prog, "-o", obj]

    def timed(item):
        what, argv = item
        start = time.monotonic()
        run(argv, f"{what} ({argv[0]})")
        return what, round(time.monotonic() - start, 2)

    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        summary["seconds"] = dict(pool.map(timed, jobs.items()))

    # 4. the extension module, once its objects are there
    module = out / f"_kernel_ffi{MODULE_SUFFIX}"
    jobs["module"] = [CC, "-shared", *module_objects, *(f"-l{lib}" for lib in opts["libraries"]), "-o", module]
    summary["seconds"].update([timed(("module", jobs["module"]))])
    summary["module"] = str(module)
    summary["commands"] = {what: [str(a) for a in argv] for what, argv in jobs.items()}
    summary["objects"] = sorted(str(p) for p in (out / "bpf").glob("*.o"))
    summary["seconds"]["fetch"] = round(t_fetch - t0, 2)
    summary["seconds"]["total"] = round(time.monotonic() - t0, 2)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tools/cross/check-arm64", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "build" / ARCH,
                    help="where the objects and generated sources go (default: build/arm64)")
    args = ap.parse_args(argv)
    try:
        s = build(args.out.resolve())
    except Skip as e:
        print(f"check-arm64: skipped: {e}", file=sys.stderr)
        return SKIPPED
    except Failed as e:
        print(f"check-arm64: {e}", file=sys.stderr)
        return 1
    checks = ", ".join(f"{what} {n}" for what, n in s["checks"].items())
    print(f"check-arm64: ok in {s['seconds']['total']} s (fetch {s['seconds']['fetch']} s): "
          f"{len(s['objects'])} BPF objects against the vmlinux.h of {s['kernel']}; "
          f"_Static_asserts: {checks} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
