"""eBPF: CO-RE programs (programs/*.bpf.c, compiled at build time) and a
libbpf loader over cffi. Importing this does not load libbpf; the first
BpfObject does."""
