// SPDX-License-Identifier: GPL-2.0
/* Loaded first by every probe session, with no program of its own: it
 * creates the shared maps (common.bpf.h) that the other objects reuse. It
 * has no CO-RE relocation on purpose, so libbpf need not parse the kernel's
 * BTF (~25 ms) for it. */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL";
