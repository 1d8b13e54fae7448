// SPDX-License-Identifier: GPL-2.0
/* The smallest useful proof that BPF works here: `sits doctor` loads this,
 * attaches it to a syscall tracepoint, makes that syscall and reads the
 * count back. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

const volatile int target_tgid = 0;
__u64 hits = 0;

SEC("tracepoint/syscalls/sys_enter_getppid")
int doctor_getppid(void *ctx)
{
	if ((int)(bpf_get_current_pid_tgid() >> 32) == target_tgid)
		__sync_fetch_and_add(&hits, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
