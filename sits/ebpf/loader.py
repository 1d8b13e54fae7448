"""Owners for libbpf objects: BpfObject (open + configure + load) and
BpfLink (one attachment). Closing the object destroys its links first, so
nothing of ours stays attached after close() or interpreter exit."""
import os
import weakref

from sits.ebpf import libbpf
from sits.ebpf.tracefs import ensure_tracefs

PROGRAMS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")


def program_path(name: str) -> str:
    """Path of a compiled CO-RE object shipped with sits, e.g. 'doctor'."""
    return os.path.join(PROGRAMS_DIR, f"{name}.bpf.o")


def _destroy_link(lib, ptr):
    lib.bpf_link__destroy(ptr)


def _close_object(lib, ptr, links):
    for link in list(links):
        link.destroy()
    lib.bpf_object__close(ptr)


class BpfLink:
    """One attached program; destroy() detaches it (idempotent)."""

    def __init__(self, obj: "BpfObject", ptr, what: str):
        _, lib = libbpf.load()
        self.obj = obj  # a link keeps its object alive
        self.what = what
        self._ptr = ptr
        self._finalizer = weakref.finalize(self, _destroy_link, lib, ptr)

    def destroy(self) -> None:
        if self._ptr is not None:
            self._ptr = None
            self._finalizer()
            self.obj._links.discard(self)

    def info(self) -> dict[str, str]:
        """What the kernel says of the attachment (its fd's fdinfo): e.g.
        link_type "tracing" for a BPF trampoline (fentry/fexit), "perf_event"
        for a kprobe, "raw_tracepoint"."""
        if self._ptr is None:
            raise ValueError(f"{self.what}: destroyed")
        _, lib = libbpf.load()
        fd = libbpf.check_int(lib.bpf_link__fd(self._ptr), "bpf_link__fd", self.what)
        out = {}
        with open(f"/proc/self/fdinfo/{fd}") as f:
            for line in f:
                k, sep, v = line.partition(":")
                if sep:
                    out[k.strip()] = v.strip()
        return out

    def __repr__(self):
        return f"<BpfLink {self.what}{' destroyed' if self._ptr is None else ''}>"


class BpfObject:
    """A CO-RE object file: open, set .rodata / autoload, load(), attach.

    Configure read-only globals before load() through `rodata` (a cffi view
    of the .rodata section typed by the caller) and choose programs with
    `set_autoload()`, instead of editing C text.
    """

    def __init__(self, path: str):
        ffi, lib = libbpf.load()
        self._ffi, self._lib = ffi, lib
        self.path = path
        if not os.path.exists(path):
            raise FileNotFoundError(f"BPF object not found: {path} (reinstall sits)")
        ptr = libbpf.check_ptr(lib.bpf_object__open_file(path.encode(), ffi.NULL),
                               "bpf_object__open_file", path)
        self._ptr = ptr
        self._links: set[BpfLink] = set()
        self._finalizer = weakref.finalize(self, _close_object, lib, ptr, self._links)
        self.loaded = False

    # -- before load --------------------------------------------------------
    def program(self, name: str):
        prog = self._lib.bpf_object__find_program_by_name(self._ptr, name.encode())
        if prog == self._ffi.NULL:
            raise KeyError(f"no BPF program {name!r} in {self.path}")
        return prog

    def program_names(self) -> list[str]:
        names, prog = [], self._ffi.NULL
        while True:
            prog = self._lib.bpf_object__next_program(self._ptr, prog)
            if prog == self._ffi.NULL:
                return names
            names.append(self._ffi.string(self._lib.bpf_program__name(prog)).decode())

    def set_autoload(self, name: str, autoload: bool) -> None:
        libbpf.check_int(self._lib.bpf_program__set_autoload(self.program(name), autoload),
                         "bpf_program__set_autoload", name)

    def map(self, name: str):
        m = self._lib.bpf_object__find_map_by_name(self._ptr, name.encode())
        if m == self._ffi.NULL:
            raise KeyError(f"no BPF map {name!r} in {self.path}")
        return m

    def section(self, name: str, ctype: str):
        """A writable cffi view of a global-data section (".rodata", ".bss")
        as `ctype` (e.g. "struct config *"); write .rodata before load()."""
        size = self._ffi.new("size_t *")
        ptr = self._lib.bpf_map__initial_value(self.map(name), size)
        if ptr == self._ffi.NULL:
            raise KeyError(f"{self.path} has no {name} section")
        view = self._ffi.cast(ctype, ptr)
        if self._ffi.typeof(view).item.kind != "void" and self._ffi.sizeof(self._ffi.typeof(view).item) > size[0]:
            raise ValueError(f"{ctype} is larger than {name} ({size[0]} bytes)")
        return view

    def load(self) -> "BpfObject":
        ret = self._lib.bpf_object__load(self._ptr)
        libbpf.check_int(ret, "bpf_object__load", f"{os.path.basename(self.path)}: {libbpf.recent_log()}")
        self.loaded = True
        return self

    # -- after load -----------------------------------------------------------
    def map_fd(self, name: str) -> int:
        return libbpf.check_int(self._lib.bpf_map__fd(self.map(name)), "bpf_map__fd", name)

    def attach(self, name: str) -> BpfLink:
        """Attach by the program's SEC() (tracepoint/..., tp_btf/..., uprobe...)."""
        ensure_tracefs()
        ptr = libbpf.check_ptr(self._lib.bpf_program__attach(self.program(name)),
                               "bpf_program__attach", name)
        return self._track(BpfLink(self, ptr, name))

    def attach_uprobe(self, name: str, binary: str, func: str, *, retprobe=False, pid=-1,
                      cookie: int = 0) -> BpfLink:
        """Attach at `func` of `binary` (resolved by libbpf by name);
        `cookie` is what bpf_get_attach_cookie() returns in the program."""
        opts = self._ffi.new("struct bpf_uprobe_opts *")
        opts.sz = self._ffi.sizeof("struct bpf_uprobe_opts")
        opts.retprobe = retprobe
        opts.bpf_cookie = cookie
        fname = self._ffi.new("char[]", func.encode())
        opts.func_name = fname
        ptr = libbpf.check_ptr(
            self._lib.bpf_program__attach_uprobe_opts(self.program(name), pid, binary.encode(), 0, opts),
            "bpf_program__attach_uprobe_opts", f"{binary}:{func}")
        return self._track(BpfLink(self, ptr, f"{name}@{func}"))

    def _track(self, link: BpfLink) -> BpfLink:
        self._links.add(link)
        return link

    @property
    def links(self) -> list[BpfLink]:
        return list(self._links)

    def close(self) -> None:
        """Destroy every link, then the object (programs and maps)."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
