"""Small typed helpers over bpf_map_* syscalls (libbpf's thin wrappers)."""
from sits.ebpf import libbpf


def lookup_u64(map_fd: int, key: int) -> int:
    ffi, lib = libbpf.load()
    k = ffi.new("int *", key)
    v = ffi.new("unsigned long long *")
    libbpf.check_int(lib.bpf_map_lookup_elem(map_fd, k, v), "bpf_map_lookup_elem")
    return v[0]
