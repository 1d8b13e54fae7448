"""The session that loads, attaches, reads and detaches the probes.

What can be probed is sits.ebpf.points; the maps are read through
sits.ebpf.maps. A `ProbeSession` loads syscalls.bpf.o first (it creates the shared maps:
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

import os
import time

from sits.ebpf import libbpf, maps
from sits.ebpf.header import DROP_IDS, PROBE_ID_LIMIT
from sits.ebpf.histogram import Histogram, RowKey
from sits.ebpf.loader import BpfObject, program_path
from sits.ebpf.points import (DEFAULT_GROUPS, GROUPS, POINT_BY_NAME, POINTS, ProbePoint, Program, point_reason,
                              program_unavailable, programs_for)
from sits.ebpf.system import cgroup_id, check_privileges, find_avcodec
from sits.ebpf.records import comm_offsets, fence_fields, newtask_offsets
from sits.ebpf.tracefs import ensure_tracefs
from sits.errors import KernelCallError, SitsError, UsageError

SHARED_MAPS = ("hist", "hist_spill", "active", "rcu_inner", "rcu_sync", "zero_hist", "drops", "tracked", "events",
               "comms", "comm_match")
#: preallocated rows (per CPU, 2.4 KB each) taken when the histogram map
#: cannot allocate one (common.bpf.h, record()); the few a burst of new keys
#: in one interrupt needs, two epochs of them
SPILL_ROWS = 64
#: --comm: rows of `comm_match`, one per live task that was created,
#: renamed or probed since the start (preallocated, 64 bytes each); beyond
#: them a task decides from its name at every event (common.bpf.h)
COMM_TASKS = 32768


def _hooks(prog: Program, kprobes: bool) -> tuple[str, ...]:
    """The programs that make `prog`: its kprobe twins or itself."""
    return prog.kprobes if kprobes and prog.kprobes else (prog.name,)


class _Thread:
    """fn() on a thread; join() returns once it has ended (even when
    interrupted: the caller's clean-up must not race it), then raises what
    it raised."""

    def __init__(self, fn):
        import threading

        def run():
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - handed to join()
                self._exc = exc
        self._exc = None
        self._thread = threading.Thread(target=run, name="sits-uprobes", daemon=True)
        self._thread.start()

    def join(self) -> None:
        interrupted = None
        while self._thread.is_alive():
            try:
                self._thread.join()
            except KeyboardInterrupt as exc:
                interrupted = exc
        if interrupted is not None:
            raise interrupted
        if self._exc is not None:
            raise self._exc


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
                 stats: bool = False, spill_rows: int = SPILL_ROWS, trampolines: bool = True, configure=None):
        unknown = [g for g in groups if g not in GROUPS]
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
        self.spill_rows = spill_rows
        # BPF trampolines (fentry/fexit) where a program has kprobe twins;
        # False loads the twins instead
        self.trampolines = trampolines
        #: {object name: fn(BpfObject)}, called before the object loads
        #: (its own .rodata sections)
        self.configure = dict(configure or {})
        self.objects: dict[str, BpfObject] = {}
        self.attached: list[str] = []           # program names
        self.skipped: dict[str, str] = {}       # point or program name -> reason
        self.kprobed: dict[str, str] = {}       # program name -> why its kprobe twins stand in
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

    def _start(self) -> None:
        ensure_tracefs()
        if self.avcodec_lib is None and "avcodec" in self.groups:
            self.avcodec_lib = find_avcodec()
        if self.stats:
            self._stats_fd = self._lib.bpf_enable_stats(self._lib.BPF_STATS_RUN_TIME)
        programs = programs_for(self.groups)
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
        if self.filters.comm:  # before any probe: no rename may go unseen
            comm = self._load_object("comm", [], must=True)
            for pname in comm.program_names():
                comm.attach(pname)
        self._attach(first, sys_progs if "syscalls" in self.objects else [])
        if self.filters.follow:
            follow = self._load_object("follow", [], must=True)
            follow.attach("sits_follow_fork")

        objects = list(runnable)
        # A process's first uprobe waits in the kernel for an RCU grace
        # period (uprobe_register() takes dup_mmap_sem for writing: 5-30 ms,
        # asleep): objects with uprobes load and attach on a thread while
        # the others load.
        slow = [o for o in objects if any(p.uprobe for p in runnable.get(o, ()))]
        worker = _Thread(lambda: [self._load_and_attach(o, runnable[o]) for o in slow]) if slow else None
        try:
            for objname in objects:
                if objname not in slow:
                    self._load_and_attach(objname, runnable.get(objname, []))
        finally:
            if worker is not None:
                worker.join()
        self.started_at = time.monotonic()
        self._last_collect = self.started_at

    def _load_and_attach(self, objname: str, progs: list[Program]) -> None:
        twinned = [p for p in progs if p.kprobes]
        kprobes = bool(twinned) and not self.trampolines
        why = "asked for kprobes (trampolines=False)"
        obj = self._load_object(objname, progs, kprobes=kprobes)
        failed = self._attach(obj, progs, kprobes=kprobes) if obj is not None else progs
        if twinned and not kprobes and any(p.kprobes for p in failed):
            # a trampoline the kernel refused (no BTF for its function, no
            # trampolines on this architecture): the object again, with
            # every kprobe twin instead, so that the hooks stay one kind
            why = self.skipped.get(next(p.name for p in failed if p.kprobes), "refused")
            if obj is not None:
                self.objects.pop(objname).close()
                self.attached = [n for n in self.attached if n not in {p.name for p in progs}]
            for p in progs:
                self.skipped.pop(p.name, None)
            obj = self._load_object(objname, progs, kprobes=True)
            if obj is None:
                return
            self._attach(obj, progs, kprobes=True)
            kprobes = True
        if kprobes:
            for p in twinned:
                self.kprobed[p.name] = why

    def _load_object(self, objname: str, progs: list[Program], *, first: bool = False,
                     must: bool = False, kprobes: bool = False) -> BpfObject | None:
        """Open and load `objname` with only `progs` autoloaded (a helper
        object's: follow's and comm's all; with `kprobes`, a program's
        kprobe twins instead of it). A refused load skips those programs
        with the reason, unless `must`."""
        obj = self._open(objname, first=first)
        try:
            self._record_offsets(obj, objname, progs)
        except SitsError as exc:
            self.objects.pop(objname).close()
            if must:
                raise
            for p in progs:
                self.skipped[p.name] = str(exc)
            return None
        names = {n for p in progs for n in _hooks(p, kprobes)}
        for pname in obj.program_names():
            obj.set_autoload(pname, objname in ("follow", "comm") or pname in names)
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

    def _attach(self, obj: BpfObject, progs: list[Program], kprobes: bool = False) -> list[Program]:
        """Attach `progs` (with `kprobes`, their kprobe twins instead); a
        program attached is in `attached` by its own name either way.
        Returns the programs that failed."""
        failed = []
        for prog in progs:
            try:
                if prog.uprobe:
                    self._attach_avcodec(obj, prog)
                else:
                    for name in _hooks(prog, kprobes):
                        obj.attach(name)
                self.attached.append(prog.name)
            except KernelCallError as exc:
                self.skipped[prog.name] = f"attach failed: {exc}"
                failed.append(prog)
        return failed

    def _attach_avcodec(self, obj: BpfObject, prog: Program) -> None:
        ret = prog.name == "sits_av_exit"
        for name in prog.points:  # each point times the function it is named after
            obj.attach_uprobe(prog.name, self.avcodec_lib, name, retprobe=ret, cookie=POINT_BY_NAME[name].id)

    def _open(self, name: str, first: bool = False, path: str | None = None) -> BpfObject:
        obj = BpfObject(path or program_path(name))
        self.objects[name] = obj
        cfg = obj.section(".rodata.cfg", "struct sits_config *")
        cfg.self_pid = os.getpid()
        cfg.filter_pids = bool(self.filters.pids) or self.filters.follow
        if len(self.filters.pids) == 1 and not self.filters.follow:
            cfg.filter_tgid = self.filters.pids[0]  # one compare instead of a map lookup
        cfg.per_thread = self.per_thread
        cfg.hist = self.hist
        cfg.stream = self.stream
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
        assert mask < 1 << PROBE_ID_LIMIT  # probe ids are bits of the 64-bit mask
        cfg.probe_mask = mask
        if first:
            ring = self.ring_bytes if self.stream else 4096
            libbpf.check_int(self._lib.bpf_map__set_max_entries(obj.map("events"), ring),
                             "bpf_map__set_max_entries", "events")
            libbpf.check_int(self._lib.bpf_map__set_max_entries(obj.map("hist_spill"), self.spill_rows),
                             "bpf_map__set_max_entries", "hist_spill")
            libbpf.check_int(self._lib.bpf_map__set_max_entries(obj.map("comm_match"),
                                                                COMM_TASKS if self.filters.comm else 1),
                             "bpf_map__set_max_entries", "comm_match")
        else:
            for m in SHARED_MAPS:
                libbpf.check_int(self._lib.bpf_map__reuse_fd(obj.map(m), self._fds[m]),
                                 "bpf_map__reuse_fd", m)
        if name in self.configure:
            self.configure[name](obj)
        return obj

    def add_object(self, name: str, path: str, programs, configure=None) -> BpfObject:
        """Load another object built on common.bpf.h into the started
        session (a benchmark's event source, say) and attach its `programs`,
        the only ones it loads. It shares the session's maps and .rodata.cfg
        as the session's own objects do; `configure(obj)` writes its own
        sections before the load; it closes with the session."""
        if not self._fds:
            raise ValueError(f"{name}: start() the session before adding objects to it")
        if name in self.objects:
            raise ValueError(f"{name}: the session has an object of that name")
        obj = self._open(name, path=path)
        try:
            if configure is not None:
                configure(obj)
            for pname in obj.program_names():
                obj.set_autoload(pname, pname in programs)
            obj.load()
            for pname in programs:
                obj.attach(pname)
        except BaseException:
            self.objects.pop(name).close()
            raise
        return obj

    @staticmethod
    def _record_offsets(obj: BpfObject, name: str, progs: list[Program]) -> None:
        """Where the objects that read classic tracepoint records at offsets
        (no CO-RE, no BTF parse) find their fields: from the format files."""
        fields = {"follow": newtask_offsets, "comm": comm_offsets,
                  "fence": lambda: fence_fields(p.tracepoint[1] for p in progs)}.get(name)
        if fields is None:
            return
        section = obj.section(f".rodata.{name}", "__u32 *")
        for i, value in enumerate(fields()):
            section[i] = value

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
        maps.update_u32_u8(self._fds["tracked"], pid, 1, "tracked")

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
        maps.update_u32(self._fds["active"], 0, epoch, "active")
        self._epoch = epoch
        self.wait_for_programs()  # no program still sees the old epoch

    def wait_for_programs(self) -> None:
        """Returns once every program that was running has finished: an
        update of the array-of-maps `rcu_sync` waits for an RCU grace
        period."""
        maps.update_u32(self._fds["rcu_sync"], 0, self._fds["rcu_inner"], "rcu_sync")

    def collect(self) -> tuple[dict[RowKey, Histogram], float]:
        """Swap the histogram epochs and return the interval that ended:
        ({row: histogram}, seconds since the previous collect())."""
        ended = self._epoch
        self._set_epoch(ended ^ 1)  # waits for RCU
        now = time.monotonic()
        elapsed, self._last_collect = now - self._last_collect, now
        rows: dict[RowKey, Histogram] = {}
        for name in ("hist", "hist_spill"):  # a key can have a row in both
            maps.drain_hist(self._fds[name], ended, rows, name)
        return rows, elapsed

    def drops(self) -> dict[str, int]:
        """Samples not counted, by cause, since start (always reported)."""
        counts = maps.percpu_u64_sums(self._fds["drops"], max(DROP_IDS.values()) + 1, "drops")
        return {name: counts[i] for name, i in DROP_IDS.items()}

    def comms(self, pids) -> dict[int, str]:
        """Process names recorded in-kernel when a pid's first row appeared
        (so an exited process is still named)."""
        return maps.comms(self._fds["comms"], pids)

    def fence_names(self) -> dict[int, str]:
        """fence context -> "driver:timeline", as the fence programs saw them."""
        obj = self.objects.get("fence")
        return maps.fence_names(obj.map_fd("fence_names")) if obj is not None else {}

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

    def point_reason(self, p: ProbePoint) -> str | None:
        """None when `p` is live in this session, else why not."""
        if p.group not in self.groups:
            return "not selected"
        return point_reason(p, set(self.attached), self.skipped)
