"""fd-level reads and writes of BPF maps, typed by the structs of
sits_probe.h as csrc/libbpf.cdef declares them (libbpf's thin wrappers over
the bpf() map commands). ProbeSession owns the fds and delegates here."""
from __future__ import annotations

import errno

from sits.ebpf import libbpf
from sits.ebpf.header import COMM_LEN
from sits.ebpf.histogram import SLOTS, Histogram, RowKey
from sits.errors import KernelCallError

#: struct sits_hist: count, sum_ns, max_ns, then the slots
HIST_VALUE_SIZE = 24 + 4 * SLOTS


def lookup_u64(map_fd: int, key: int) -> int:
    ffi, lib = libbpf.load()
    k = ffi.new("int *", key)
    v = ffi.new("unsigned long long *")
    libbpf.check_int(lib.bpf_map_lookup_elem(map_fd, k, v), "bpf_map_lookup_elem")
    return v[0]


def lookup_u32_u8(map_fd: int, key: int) -> int | None:
    """map[key] for maps of __u32 to __u8, or None when absent."""
    ffi, lib = libbpf.load()
    v = ffi.new("unsigned char *")
    return v[0] if lib.bpf_map_lookup_elem(map_fd, ffi.new("__u32 *", key), v) == 0 else None


def update_u32(map_fd: int, key: int, value: int, what: str) -> None:
    """map[key] = value, for maps of __u32 to __u32."""
    ffi, lib = libbpf.load()
    libbpf.check_int(lib.bpf_map_update_elem(map_fd, ffi.new("__u32 *", key), ffi.new("__u32 *", value), 0),
                     "bpf_map_update_elem", what)


def update_u32_u8(map_fd: int, key: int, value: int, what: str) -> None:
    """map[key] = value, for maps of __u32 to __u8 (`tracked`)."""
    ffi, lib = libbpf.load()
    libbpf.check_int(lib.bpf_map_update_elem(map_fd, ffi.new("__u32 *", key), ffi.new("unsigned char *", value), 0),
                     "bpf_map_update_elem", what)


def ncpus() -> int:
    """Possible CPUs: the number of values of a per-CPU map's element."""
    _, lib = libbpf.load()
    return libbpf.check_int(lib.libbpf_num_possible_cpus(), "libbpf_num_possible_cpus")


def percpu_u64_sums(map_fd: int, n: int, what: str) -> list[int]:
    """Elements 0..n-1 of a per-CPU array of __u64, each summed over CPUs."""
    ffi, lib = libbpf.load()
    ncpu = ncpus()
    vals = ffi.new("__u64[]", ncpu)
    key = ffi.new("__u32 *")
    out = []
    for i in range(n):
        key[0] = i
        libbpf.check_int(lib.bpf_map_lookup_elem(map_fd, key, vals), "bpf_map_lookup_elem", what)
        out.append(sum(vals[c] for c in range(ncpu)))
    return out


def percpu_value_bytes(map_fd: int, key: int, value_ctype: str, what: str) -> bytes:
    """Element `key` of a per-CPU array of `value_ctype`: every possible
    CPU's copy, one after the other (each 8-aligned, as the kernel copies
    them out)."""
    ffi, lib = libbpf.load()
    stride = (ffi.sizeof(value_ctype) + 7) & ~7
    vals = ffi.new("char[]", stride * ncpus())
    libbpf.check_int(lib.bpf_map_lookup_elem(map_fd, ffi.new("__u32 *", key), vals), "bpf_map_lookup_elem", what)
    return bytes(ffi.buffer(vals))


def percpu_zero(map_fd: int, key: int, value_ctype: str, what: str) -> None:
    """Zero element `key` of a per-CPU array of `value_ctype` on every CPU."""
    ffi, lib = libbpf.load()
    stride = (ffi.sizeof(value_ctype) + 7) & ~7
    zeros = ffi.new("char[]", stride * ncpus())
    libbpf.check_int(lib.bpf_map_update_elem(map_fd, ffi.new("__u32 *", key), zeros, 0), "bpf_map_update_elem", what)


def comms(map_fd: int, pids) -> dict[int, str]:
    """{pid: name} for the pids present in a map of __u32 to char[COMM_LEN]."""
    ffi, lib = libbpf.load()
    key = ffi.new("__u32 *")
    val = ffi.new("char[]", COMM_LEN)
    out = {}
    for pid in pids:
        key[0] = pid
        if lib.bpf_map_lookup_elem(map_fd, key, val) == 0:
            out[pid] = ffi.string(val).decode(errors="replace")
    return out


def fence_names(map_fd: int) -> dict[int, str]:
    """{fence context: "driver:timeline"} of a map of __u64 to struct sits_fence_name."""
    ffi, lib = libbpf.load()
    key, nxt = ffi.new("__u64 *"), ffi.new("__u64 *")
    val = ffi.new("struct sits_fence_name *")
    out, prev = {}, ffi.NULL
    while lib.bpf_map_get_next_key(map_fd, prev, nxt) == 0:
        key[0] = nxt[0]
        prev = key
        if lib.bpf_map_lookup_elem(map_fd, key, val) == 0:
            out[key[0]] = (f"{ffi.string(val.driver).decode(errors='replace')}:"
                           f"{ffi.string(val.timeline).decode(errors='replace')}")
    return out


def values_bytes(map_fd: int, value_ctype: str) -> bytes:
    """Every value of a hash map keyed by __u64, as one run of `value_ctype`
    structs (for numpy), in no particular order."""
    ffi, lib = libbpf.load()
    key, nxt = ffi.new("__u64 *"), ffi.new("__u64 *")
    val = ffi.new(f"{value_ctype} *")
    size = ffi.sizeof(value_ctype)
    out, prev = [], ffi.NULL
    while lib.bpf_map_get_next_key(map_fd, prev, nxt) == 0:
        key[0] = nxt[0]
        prev = key
        if lib.bpf_map_lookup_elem(map_fd, key, val) == 0:
            out.append(bytes(ffi.buffer(val, size)))
    return b"".join(out)


def drain_hist(map_fd: int, epoch: int, rows: dict[RowKey, Histogram], what: str) -> None:
    """Add the rows of `epoch` in a per-CPU histogram map (struct
    sits_hist_key -> struct sits_hist) to `rows`, then delete them; the
    other epoch's rows, being filled meanwhile, are read along and left
    alone."""
    ffi, lib = libbpf.load()
    ncpu = ncpus()
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
            map_fd, ffi.NULL if first else token_in, token_out, keys, vals, count, opts)
        err = -ret if ret < 0 else 0
        if err == errno.ENOSPC and count[0] == 0:
            batch *= 4  # a bucket holds more keys than the batch
            continue
        if err and err != errno.ENOENT:
            raise KernelCallError(err, "bpf_map_lookup_batch", what)
        ended += _decode(rows, keys, vals, count[0], ncpu, stride, epoch)
        if err == errno.ENOENT:
            break
        first = False
        token_in, token_out = token_out, token_in
    if ended:
        dead = ffi.new("struct sits_hist_key[]", len(ended))
        for d, k in zip(dead, ended):
            d.pid, d.tid, d.probe, d.epoch, d.key = k.pid, k.tid, k.probe, epoch, k.key
        count = ffi.new("__u32 *", len(ended))
        libbpf.check_int(lib.bpf_map_delete_batch(map_fd, dead, count, opts), "bpf_map_delete_batch", what)


def _decode(rows, keys, vals, n, ncpu, stride, epoch) -> list[RowKey]:
    """Fold the rows of `epoch` among the first `n` into `rows`; returns
    their keys (as RowKeys: cffi items would not outlive the batch)."""
    ffi, _ = libbpf.load()
    words = memoryview(ffi.buffer(vals)).cast("I")
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
