"""Probe points and the session that loads, attaches, reads and detaches them.

A `ProbeSession` loads syscalls.bpf.o first (it creates the shared maps:
histograms, drop counters, tracked pids, the event ring, and needs no parse
of the kernel's BTF, so its probes attach within milliseconds), then one
object per other probe group, handing each the same map fds. Configuration
goes through the `.rodata.cfg` section and autoload; what the kernel lacks
(a tracepoint, BTF, a library) is skipped with its reason and the rest runs.

Histograms are swapped per interval (`collect()`): every row's key holds the
interval's epoch; `active` is pointed at the other epoch, then an update of
the array-of-maps `rcu_sync` returns only after every program that could
still be using the old epoch has finished (the kernel waits for an RCU grace
period on map-in-map updates), and the old epoch's rows are then read and
deleted. Nothing is lost between intervals.
"""
from __future__ import annotations

import collections
import errno
import os
import time

from sits.ebpf import libbpf
from sits.ebpf.histogram import SLOTS, Histogram
from sits.ebpf.loader import BpfObject, program_path
from sits.ebpf.tracefs import ensure_tracefs, has_tracepoint
from sits.errors import KernelCallError, SitsError, UsageError

BTF_PATH = "/sys/kernel/btf/vmlinux"


# (plain namedtuples: dataclasses/typing cost ~15 ms of import, and startup counts)
#: id: enum sits_probe_id; name: stable, used in reports and metrics; group:
#: what --probes selects; key: what a row's key is; what: one line for
#: `probe list`; kind: threshold class, "decode", "buffer_wait" or ""
ProbePoint = collections.namedtuple("ProbePoint", "id name group key what kind", defaults=("",))


POINTS: tuple[ProbePoint, ...] = (
    ProbePoint(1, "sys_read", "syscalls", "fd", "read() latency"),
    ProbePoint(2, "sys_write", "syscalls", "fd", "write() latency"),
    ProbePoint(3, "sys_ioctl", "ioctl", "cmd", "ioctl() latency by command"),
    ProbePoint(4, "sys_poll", "syscalls", "", "poll()/ppoll() latency"),
    ProbePoint(5, "sys_epoll_wait", "syscalls", "epfd", "epoll_wait()/epoll_pwait() latency"),
    ProbePoint(6, "sys_select", "syscalls", "", "select()/pselect6() latency"),
    ProbePoint(10, "fence_signal", "fence", "context", "dma_fence emit (or init) -> signaled"),
    ProbePoint(11, "fence_wait", "fence", "context", "dma_fence_wait start -> end", "buffer_wait"),
    ProbePoint(20, "v4l2_qbuf_done", "v4l2", "buf_type", "vb2 QBUF -> buffer done (capture/output)"),
    ProbePoint(21, "v4l2_done_dqbuf", "v4l2", "buf_type", "vb2 buffer done -> DQBUF", "buffer_wait"),
    ProbePoint(30, "drm_vblank_deliver", "drm", "crtc", "drm vblank -> its event delivered (page flip, WAIT_VBLANK)"),
    ProbePoint(31, "drm_event_wait", "drm", "crtc", "drm WAIT_VBLANK event queued -> delivered"),
    ProbePoint(32, "drm_event_read", "drm", "crtc", "drm event delivered -> read() by the client"),
    ProbePoint(40, "avcodec_send_packet", "avcodec", "ret", "avcodec_send_packet() (decode)", "decode"),
    ProbePoint(41, "avcodec_receive_frame", "avcodec", "ret", "avcodec_receive_frame() (decode)", "decode"),
    ProbePoint(42, "avcodec_send_frame", "avcodec", "ret", "avcodec_send_frame() (encode)", "decode"),
    ProbePoint(43, "avcodec_receive_packet", "avcodec", "ret", "avcodec_receive_packet() (encode)", "decode"),
)
POINT_BY_ID = {p.id: p for p in POINTS}
POINT_BY_NAME = {p.name: p for p in POINTS}
GROUPS = ("syscalls", "ioctl", "fence", "v4l2", "drm", "avcodec")
DEFAULT_GROUPS = ("syscalls", "ioctl", "fence", "v4l2", "drm", "avcodec")

AVCODEC_FUNCS = {
    "avcodec_send_packet": 40,
    "avcodec_receive_frame": 41,
    "avcodec_send_frame": 42,
    "avcodec_receive_packet": 43,
}


#: one BPF program of an object, its points, the (category, event) tracepoint
#: that must exist, whether it needs kernel BTF, whether it is a uprobe
Program = collections.namedtuple("Program", "obj name points tracepoint needs_btf uprobe",
                                 defaults=(None, False, False))


PROGRAMS: tuple[Program, ...] = (
    Program("syscalls", "sits_sys_enter", (1, 2, 3, 4, 5, 6), needs_btf=True),
    Program("syscalls", "sits_sys_exit", (1, 2, 3, 4, 5, 6), needs_btf=True),
    Program("fence", "sits_fence_init", (10,), ("dma_fence", "dma_fence_init")),
    Program("fence", "sits_fence_emit", (10,), ("dma_fence", "dma_fence_emit")),
    Program("fence", "sits_fence_signaled", (10,), ("dma_fence", "dma_fence_signaled")),
    Program("fence", "sits_fence_destroy", (10,), ("dma_fence", "dma_fence_destroy")),
    Program("fence", "sits_fence_wait_start", (11,), ("dma_fence", "dma_fence_wait_start")),
    Program("fence", "sits_fence_wait_end", (11,), ("dma_fence", "dma_fence_wait_end")),
    Program("media", "sits_vb2_qbuf", (20,), ("vb2", "vb2_qbuf")),
    Program("media", "sits_vb2_buf_done", (20, 21), ("vb2", "vb2_buf_done")),
    Program("media", "sits_vb2_dqbuf", (21,), ("vb2", "vb2_dqbuf")),
    Program("media", "sits_drm_vblank", (30,), ("drm", "drm_vblank_event")),
    Program("media", "sits_drm_event_queued", (31,), ("drm", "drm_vblank_event_queued")),
    Program("media", "sits_drm_event_delivered", (30, 31, 32), ("drm", "drm_vblank_event_delivered")),
    # kprobes on drm functions: the drm tracepoints stand for "drm is there"
    Program("media", "sits_drm_atomic", (30, 32), ("drm", "drm_vblank_event_delivered")),
    Program("media", "sits_drm_page_flip", (30, 32), ("drm", "drm_vblank_event_delivered")),
    Program("media", "sits_drm_read_enter", (32,), ("drm", "drm_vblank_event_delivered")),
    Program("media", "sits_drm_read_exit", (32,), ("drm", "drm_vblank_event_delivered")),
    Program("avcodec", "sits_av_enter", (40, 41, 42, 43), uprobe=True),
    Program("avcodec", "sits_av_exit", (40, 41, 42, 43), uprobe=True),
)
#: a point is live only when every program it is listed in is attached,
#: but for these:
_POINT_PROGRAMS = {p.id: [g for g in PROGRAMS if p.id in g.points] for p in POINTS}
# fence init/emit are alternatives (one of them is needed)
_ALTERNATIVES = {"sits_fence_init", "sits_fence_emit"}
# the fence destroy program only cleans up
_OPTIONAL = {"sits_fence_destroy"} | _ALTERNATIVES

#: the bench object's bursts (bench.bpf.c): on each getppid() of a tracked
#: process, or each switch away from one (interrupts off); their rows' probe
BENCH_PROGRAMS = {"getppid": "sits_bench_burst", "switch": "sits_bench_switch"}
BENCH_PROBE = 60  # SITS_P_BENCH
SHARED_MAPS = ("hist", "hist_spill", "active", "rcu_inner", "rcu_sync", "zero_hist", "drops", "tracked", "events",
               "comms")
DROP_NAMES = ("ringbuf", "hist_map_full", "start_map_full", "fence_names_full", "hist_alloc_failed")
HIST_VALUE_SIZE = 24 + 4 * SLOTS
#: preallocated rows (per CPU, 2.4 KB each) taken when the histogram map
#: cannot allocate one (common.bpf.h, record()); the few a burst of new keys
#: in one interrupt needs, two epochs of them
SPILL_ROWS = 64


RowKey = collections.namedtuple("RowKey", "pid tid probe key")


# -- environment ---------------------------------------------------------------

def _cap_effective() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 21, 38, 39


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
    """The newest libavcodec.so.N on the usual library paths, or None."""
    import glob
    import sysconfig
    dirs = []
    multiarch = sysconfig.get_config_var("MULTIARCH")
    for base in ("/usr/lib", "/usr/local/lib", "/lib"):
        if multiarch:
            dirs.append(os.path.join(base, multiarch))
        dirs.append(base)
    dirs += ["/usr/lib64", "/lib64"]
    found = []
    for d in dirs:
        for path in glob.glob(os.path.join(d, "libavcodec.so.*")):
            suffix = path.rsplit(".so.", 1)[1]
            if suffix.isdigit():
                found.append((int(suffix), path))
    if not found:
        return None
    return os.path.realpath(max(found)[1])


def program_unavailable(prog: Program, *, avcodec_lib: str | None = None) -> str | None:
    """Why `prog` cannot run on this machine, or None."""
    if prog.needs_btf and not os.path.exists(BTF_PATH):
        return f"no kernel BTF ({BTF_PATH}; needs CONFIG_DEBUG_INFO_BTF=y)"
    if prog.tracepoint:
        if ensure_tracefs() is None:
            return "tracefs is not mounted (mount -t tracefs tracefs /sys/kernel/tracing)"
        cat, name = prog.tracepoint
        if not has_tracepoint(cat, name):
            return f"no {cat}:{name} tracepoint on this kernel"
    if prog.uprobe:
        if avcodec_lib is None:
            return "libavcodec not found (install ffmpeg's libavcodec or pass --lib PATH)"
        if not os.path.exists(avcodec_lib):
            return f"{avcodec_lib}: no such library"
    return None


def point_availability(groups=GROUPS, *, avcodec_lib: str | None = None) -> list[tuple[ProbePoint, str | None]]:
    """(point, reason it is unavailable or None) for `probe list`."""
    if avcodec_lib is None:
        avcodec_lib = find_avcodec()
    out = []
    for p in POINTS:
        if p.group not in groups:
            continue
        reasons = [r for g in _POINT_PROGRAMS[p.id] if g.name not in _OPTIONAL
                   for r in [program_unavailable(g, avcodec_lib=avcodec_lib)] if r]
        if p.id == 10 and not reasons:
            starts = [program_unavailable(g) for g in PROGRAMS if g.name in ("sits_fence_init", "sits_fence_emit")]
            if all(starts):
                reasons.append(starts[0])
        out.append((p, reasons[0] if reasons else None))
    return out


def newtask_offsets() -> tuple[int, int]:
    """Byte offsets, in a task:task_newtask trace record, of the new task's
    pid and of the low 32 bits of its clone_flags (follow.bpf.c reads them
    there), from the tracepoint's format file."""
    import sys
    base = ensure_tracefs()
    fields = {}
    try:
        with open(f"{base}/events/task/task_newtask/format") as f:
            for line in f:
                parts = dict(p.strip().split(":", 1) for p in line.split(";") if ":" in p)
                if "field" in parts:
                    fields[parts["field"].split()[-1]] = (int(parts["offset"]), int(parts["size"]))
    except (OSError, TypeError, ValueError):
        fields = {}
    if "pid" not in fields or "clone_flags" not in fields or fields["pid"][1] != 4:
        raise SitsError("following a command needs the task:task_newtask tracepoint "
                        "(is tracefs mounted?)")
    off, size = fields["clone_flags"]
    if sys.byteorder == "big":
        off += size - 4
    return fields["pid"][0], off


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


# -- the session ----------------------------------------------------------------

class Filters:
    """Which processes to trace: pids, a comm, a cgroup (v2 path); `follow`
    traces only tracked pids (added later too) and their children."""

    def __init__(self, pids=(), comm: str | None = None, cgroup: str | None = None,
                 follow: bool = False):
        self.pids = tuple(pids)
        self.comm = comm
        self.cgroup = cgroup
        self.follow = follow


class ProbeSession:
    """Loads and attaches the selected probe groups; `collect()` per interval.

    Use as a context manager, or call close(): that destroys every link and
    object, so nothing of ours stays attached.
    """

    def __init__(self, groups=DEFAULT_GROUPS, *, filters: Filters | None = None,
                 per_thread: bool = False, hist: bool = True, stream: bool = False,
                 ring_bytes: int = 16 << 20, avcodec_lib: str | None = None,
                 stats: bool = False, bench_burst: int = 0, bench_trigger: str = "getppid",
                 spill_rows: int = SPILL_ROWS):
        unknown = [g for g in groups if g not in GROUPS and g != "bench"]
        if unknown:
            raise UsageError(f"unknown probe group(s) {', '.join(unknown)} "
                             f"(known: {', '.join(GROUPS)})")
        if ring_bytes & (ring_bytes - 1) or ring_bytes < 4096:
            raise UsageError("ring size must be a power of two of at least 4096 bytes")
        self.groups = tuple(groups)
        self.filters = filters or Filters()
        self.per_thread = per_thread
        self.hist = hist
        self.stream = stream
        self.ring_bytes = ring_bytes
        self.avcodec_lib = avcodec_lib
        self.stats = stats
        if bench_trigger not in BENCH_PROGRAMS:
            raise UsageError(f"unknown bench trigger {bench_trigger!r} (known: {', '.join(BENCH_PROGRAMS)})")
        self.bench_burst = bench_burst
        self.bench_trigger = bench_trigger
        self.spill_rows = spill_rows
        self.objects: dict[str, BpfObject] = {}
        self.attached: list[str] = []           # program names
        self.skipped: dict[str, str] = {}       # point or program name -> reason
        self.started_at: float | None = None
        self._stats_fd = -1
        self._fds: dict[str, int] = {}
        self._epoch = 0
        self._ffi = self._lib = None
        self._last_collect = None

    # -- lifecycle --------------------------------------------------------------
    def start(self) -> "ProbeSession":
        check_privileges()
        self._ffi, self._lib = libbpf.load()
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _wanted_programs(self) -> list[Program]:
        want = []
        for prog in PROGRAMS:
            groups = {POINT_BY_ID[i].group for i in prog.points}
            if groups & set(self.groups):
                want.append(prog)
        return want

    def _start(self) -> None:
        ensure_tracefs()
        if self.avcodec_lib is None and "avcodec" in self.groups:
            self.avcodec_lib = find_avcodec()
        if self.stats:
            self._stats_fd = self._lib.bpf_enable_stats(self._lib.BPF_STATS_RUN_TIME)
        programs = self._wanted_programs()
        runnable: dict[str, list[Program]] = {}
        for prog in programs:
            reason = program_unavailable(prog, avcodec_lib=self.avcodec_lib)
            if reason:
                self.skipped[prog.name] = reason
            else:
                runnable.setdefault(prog.obj, []).append(prog)

        # syscalls.bpf.o first: it creates the shared maps and attaches fast
        # (no kernel BTF parse), so the syscall probes run while the rest load
        sys_progs = runnable.pop("syscalls", [])
        first = self._load_object("syscalls", sys_progs, first=True)
        if first is None:  # its programs were refused: the maps still come from it
            first = self._load_object("syscalls", [], first=True, must=True)
        for name in SHARED_MAPS:
            self._fds[name] = first.map_fd(name)
        for pid in self.filters.pids:
            self.track(pid)
        self._attach(first, sys_progs if "syscalls" in self.objects else [])
        if self.filters.follow:
            follow = self._load_object("follow", [], must=True)
            follow.attach("sits_follow_fork")

        objects = list(runnable)
        if "bench" in self.groups:
            objects.append("bench")
        for objname in objects:
            progs = runnable.get(objname, [])
            obj = self._load_object(objname, progs)
            if obj is None:
                continue
            self._attach(obj, progs)
            if objname == "bench":
                obj.attach(BENCH_PROGRAMS[self.bench_trigger])
        self.started_at = time.monotonic()
        self._last_collect = self.started_at

    def _load_object(self, objname: str, progs: list[Program], *, first: bool = False,
                     must: bool = False) -> BpfObject | None:
        """Open and load `objname` with only `progs` autoloaded (a helper
        object's: follow's all, bench's the chosen trigger's). A refused load
        skips those programs with the reason, unless `must`."""
        obj = self._open(objname, first=first)
        names = {p.name for p in progs}
        if objname == "bench":
            names.add(BENCH_PROGRAMS[self.bench_trigger])  # (only it: the other may need BTF)
        for pname in obj.program_names():
            obj.set_autoload(pname, objname == "follow" or pname in names)
        try:
            obj.load()
        except KernelCallError as exc:
            self.objects.pop(objname).close()
            if must:
                raise
            for p in progs:
                self.skipped[p.name] = f"load failed: {exc}"
            return None
        return obj

    def _attach(self, obj: BpfObject, progs: list[Program]) -> None:
        for prog in progs:
            try:
                if prog.uprobe:
                    self._attach_avcodec(obj, prog)
                else:
                    obj.attach(prog.name)
                self.attached.append(prog.name)
            except KernelCallError as exc:
                self.skipped[prog.name] = f"attach failed: {exc}"

    def _attach_avcodec(self, obj: BpfObject, prog: Program) -> None:
        ret = prog.name == "sits_av_exit"
        for func, pid in AVCODEC_FUNCS.items():
            if POINT_BY_ID[pid].group in self.groups:
                obj.attach_uprobe(prog.name, self.avcodec_lib, func, retprobe=ret, cookie=pid)

    def _open(self, name: str, first: bool = False) -> BpfObject:
        obj = BpfObject(program_path(name))
        self.objects[name] = obj
        cfg = obj.section(".rodata.cfg", "struct sits_config *")
        cfg.self_pid = os.getpid()
        cfg.filter_pids = bool(self.filters.pids) or self.filters.follow
        if len(self.filters.pids) == 1 and not self.filters.follow:
            cfg.filter_tgid = self.filters.pids[0]  # one compare instead of a map lookup
        cfg.per_thread = self.per_thread
        cfg.hist = self.hist
        cfg.stream = self.stream
        cfg.bench_burst = self.bench_burst
        if self.filters.cgroup:
            cfg.filter_cgroup = cgroup_id(self.filters.cgroup)
        if self.filters.comm:
            comm = self.filters.comm.encode()[:15]
            for i, b in enumerate(comm):
                cfg.filter_comm[i] = bytes([b])
        mask = 0
        for p in POINTS:
            if p.group in self.groups:
                mask |= 1 << p.id
        if "bench" in self.groups:
            mask |= 1 << BENCH_PROBE
        cfg.probe_mask = mask
        if name == "follow":
            offsets = obj.section(".rodata.follow", "__u32 *")
            offsets[0], offsets[1] = newtask_offsets()
        if first:
            ring = self.ring_bytes if self.stream else 4096
            libbpf.check_int(self._lib.bpf_map__set_max_entries(obj.map("events"), ring),
                             "bpf_map__set_max_entries", "events")
            libbpf.check_int(self._lib.bpf_map__set_max_entries(obj.map("hist_spill"), self.spill_rows),
                             "bpf_map__set_max_entries", "hist_spill")
        else:
            for m in SHARED_MAPS:
                libbpf.check_int(self._lib.bpf_map__reuse_fd(obj.map(m), self._fds[m]),
                                 "bpf_map__reuse_fd", m)
        return obj

    def close(self) -> None:
        """Destroy every link and object (idempotent)."""
        for obj in reversed(list(self.objects.values())):
            obj.close()
        self.objects.clear()
        if self._stats_fd >= 0:
            os.close(self._stats_fd)
            self._stats_fd = -1

    def __enter__(self):
        return self.start() if not self.objects else self

    def __exit__(self, *exc):
        self.close()

    # -- maps -----------------------------------------------------------------------
    def map_fd(self, name: str) -> int:
        return self._fds[name]

    def track(self, pid: int) -> None:
        """Trace `pid` (with --pid / a followed command)."""
        ffi = self._ffi
        key = ffi.new("__u32 *", pid)
        one = ffi.new("char *", b"\x01")
        libbpf.check_int(self._lib.bpf_map_update_elem(self._fds["tracked"], key, one, 0),
                         "bpf_map_update_elem", "tracked")

    def spawn(self, command: list[str]) -> int:
        """Start `command` traced from its first instruction: forked, held
        before exec until its pid is tracked. Returns the pid (the caller
        waits for it). Needs Filters(follow=True) to see only it."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: wait for the go, then exec
            try:
                os.close(w)
                os.read(r, 1)
                os.close(r)
                os.execvp(command[0], command)
            except OSError as exc:
                os.write(2, f"sits: error: {command[0]}: {exc.strerror}\n".encode())
            os._exit(127)
        os.close(r)
        try:
            self.track(pid)
        finally:
            os.close(w)  # EOF releases the child
        return pid

    def _set_epoch(self, epoch: int) -> None:
        """Point the programs at `epoch`; returns once none can still be
        filling the previous one."""
        ffi, lib = self._ffi, self._lib
        key = ffi.new("__u32 *", 0)
        val = ffi.new("__u32 *", epoch)
        libbpf.check_int(lib.bpf_map_update_elem(self._fds["active"], key, val, 0),
                         "bpf_map_update_elem", "active")
        self._epoch = epoch
        # returns after an RCU grace period: no program still sees the old epoch
        val[0] = self._fds["rcu_inner"]
        libbpf.check_int(lib.bpf_map_update_elem(self._fds["rcu_sync"], key, val, 0),
                         "bpf_map_update_elem", "rcu_sync")

    @property
    def ncpus(self) -> int:
        return libbpf.check_int(self._lib.libbpf_num_possible_cpus(), "libbpf_num_possible_cpus")

    def collect(self) -> tuple[dict[RowKey, Histogram], float]:
        """Swap the histogram epochs and return the interval that ended:
        ({row: histogram}, seconds since the previous collect())."""
        ended = self._epoch
        self._set_epoch(ended ^ 1)  # waits for RCU
        now = time.monotonic()
        elapsed, self._last_collect = now - self._last_collect, now
        rows: dict[RowKey, Histogram] = {}
        for name in ("hist", "hist_spill"):  # a key can have a row in both
            self._drain(name, ended, rows)
        return rows, elapsed

    def _drain(self, name: str, epoch: int, rows: dict[RowKey, Histogram]) -> None:
        """Add the rows of `epoch` in map `name` to `rows`, then delete them
        (the other epoch's rows, being filled meanwhile, are read along and
        left alone)."""
        ffi, lib = self._ffi, self._lib
        fd = self._fds[name]
        ncpu = self.ncpus
        stride = HIST_VALUE_SIZE  # already a multiple of 8
        ended = []
        batch = 64
        opts = ffi.new("struct bpf_map_batch_opts *")
        opts.sz = ffi.sizeof("struct bpf_map_batch_opts")
        token_in = ffi.new("char[]", 32)
        token_out = ffi.new("char[]", 32)
        first = True
        while True:
            keys = ffi.new("struct sits_hist_key[]", batch)
            vals = ffi.new("char[]", batch * ncpu * stride)
            count = ffi.new("__u32 *", batch)
            ret = lib.bpf_map_lookup_batch(
                fd, ffi.NULL if first else token_in, token_out, keys, vals, count, opts)
            err = -ret if ret < 0 else 0
            if err == errno.ENOSPC and count[0] == 0:
                batch *= 4  # a bucket holds more keys than the batch
                continue
            if err and err != errno.ENOENT:
                raise KernelCallError(err, "bpf_map_lookup_batch", name)
            ended += self._decode(rows, keys, vals, count[0], ncpu, stride, epoch)
            if err == errno.ENOENT:
                break
            first = False
            token_in, token_out = token_out, token_in
        if ended:
            dead = ffi.new("struct sits_hist_key[]", len(ended))
            for d, k in zip(dead, ended):
                d.pid, d.tid, d.probe, d.epoch, d.key = k.pid, k.tid, k.probe, epoch, k.key
            count = ffi.new("__u32 *", len(ended))
            libbpf.check_int(lib.bpf_map_delete_batch(fd, dead, count, opts),
                             "bpf_map_delete_batch", name)

    def _decode(self, rows, keys, vals, n, ncpu, stride, epoch) -> list:
        """Fold the rows of `epoch` among the first `n` into `rows`; returns
        their keys (as RowKeys: cffi items would not outlive the batch)."""
        words = memoryview(self._ffi.buffer(vals)).cast("I")
        wstride = stride // 4
        mine = []
        for i in range(n):
            k = keys[i]
            if k.epoch != epoch:
                continue
            rk = RowKey(k.pid, k.tid, k.probe, k.key)
            mine.append(rk)
            h = rows.get(rk)
            if h is None:
                h = rows[rk] = Histogram()
            for c in range(ncpu):
                base = (i * ncpu + c) * wstride
                cnt = words[base] | words[base + 1] << 32
                if not cnt:
                    continue
                h.count += cnt
                h.sum_ns += words[base + 2] | words[base + 3] << 32
                mx = words[base + 4] | words[base + 5] << 32
                if mx > h.max_ns:
                    h.max_ns = mx
                seg = words[base + 6: base + 6 + SLOTS]
                slots = h.slots
                for s, v in enumerate(seg):
                    if v:
                        slots[s] = slots.get(s, 0) + v
        # drop rows whose every CPU copy was empty
        for rk in [rk for rk, h in rows.items() if not h.count]:
            del rows[rk]
        return mine

    def drops(self) -> dict[str, int]:
        """Samples not counted, by cause, since start (always reported)."""
        ffi, lib = self._ffi, self._lib
        ncpu = self.ncpus
        out = {}
        vals = ffi.new("__u64[]", ncpu)
        key = ffi.new("__u32 *")
        for i, name in enumerate(DROP_NAMES):
            key[0] = i
            libbpf.check_int(lib.bpf_map_lookup_elem(self._fds["drops"], key, vals),
                             "bpf_map_lookup_elem", "drops")
            out[name] = sum(vals[c] for c in range(ncpu))
        return out

    def comms(self, pids) -> dict[int, str]:
        """Process names recorded in-kernel when a pid's first row appeared
        (so an exited process is still named)."""
        ffi, lib = self._ffi, self._lib
        key = ffi.new("__u32 *")
        val = ffi.new("char[16]")
        out = {}
        for pid in pids:
            key[0] = pid
            if lib.bpf_map_lookup_elem(self._fds["comms"], key, val) == 0:
                out[pid] = ffi.string(val).decode(errors="replace")
        return out

    def fence_names(self) -> dict[int, str]:
        """fence context -> "driver:timeline", as the fence programs saw them."""
        obj = self.objects.get("fence")
        if obj is None:
            return {}
        ffi, lib = self._ffi, self._lib
        fd = obj.map_fd("fence_names")
        key, nxt = ffi.new("__u64 *"), ffi.new("__u64 *")
        val = ffi.new("struct sits_fence_name *")
        out, prev = {}, ffi.NULL
        while lib.bpf_map_get_next_key(fd, prev, nxt) == 0:
            key[0] = nxt[0]
            prev = key
            if lib.bpf_map_lookup_elem(fd, key, val) == 0:
                out[key[0]] = (f"{ffi.string(val.driver).decode(errors='replace')}:"
                               f"{ffi.string(val.timeline).decode(errors='replace')}")
        return out

    def program_stats(self) -> list[dict]:
        """Per attached program: run count and CPU time spent in it (needs
        stats=True: kernel run-time accounting is on only while we ask)."""
        out = []
        for obj in self.objects.values():
            for name in obj.program_names():
                prog = obj.program(name)
                fd = self._lib.bpf_program__fd(prog)
                if fd < 0:
                    continue
                info = {}
                try:
                    with open(f"/proc/self/fdinfo/{fd}") as f:
                        for line in f:
                            k, _, v = line.partition(":")
                            if k in ("run_time_ns", "run_cnt"):
                                info[k] = int(v)
                except OSError:
                    continue
                out.append({"program": name, "run_cnt": info.get("run_cnt", 0),
                            "run_time_ns": info.get("run_time_ns", 0)})
        return out

    def attached_points(self) -> list[ProbePoint]:
        return [p for p in POINTS if p.group in self.groups and self.point_reason(p) is None]

    def point_reason(self, p: ProbePoint) -> str | None:
        """None when `p` is live in this session, else why not."""
        if p.group not in self.groups:
            return "not selected"
        attached = set(self.attached)
        progs = _POINT_PROGRAMS[p.id]
        required = [g for g in progs if g.name not in _OPTIONAL]
        for g in required:
            if g.name not in attached:
                return self.skipped.get(g.name, "not attached")
        either = [g for g in progs if g.name in _ALTERNATIVES]
        if either and not any(g.name in attached for g in either):
            return self.skipped.get(either[0].name, "not attached")
        return None
