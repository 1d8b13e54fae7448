// SPDX-License-Identifier: GPL-2.0
/* When following a command (`sits probe audit -- CMD`) or --follow: add the
 * processes that tracked processes create to `tracked`, so that a
 * pipeline's helper processes are traced too.
 *
 * A classic tracepoint read at offsets that user space takes from its
 * format file, not tp_btf/sched_process_fork: no CO-RE, so libbpf never
 * parses the kernel's BTF for this object (~9 ms and ~11 MB of peak RSS)
 * and `audit -- CMD` starts the command sooner. task_newtask fires in
 * copy_process(), in the parent and before the child first runs, with the
 * clone flags that tell a new process from a new thread. */
#include "common.bpf.h"

#define CLONE_THREAD 0x00010000

/* byte offsets in the task_newtask record: the child's pid, and the low 32
 * bits of clone_flags (user space fills these from the format file) */
const volatile __u32 newtask_offsets[2] SEC(".rodata.follow") = { 8, 32 };

SEC("tracepoint/task/task_newtask")
int sits_follow_fork(void *ctx)
{
	__u32 ppid = bpf_get_current_pid_tgid() >> 32, flags = 0;
	__s32 pid = 0;
	__u8 one = 1;

	if (!bpf_map_lookup_elem(&tracked, &ppid))
		return 0;
	bpf_probe_read_kernel(&flags, sizeof(flags), ctx + newtask_offsets[1]);
	if (flags & CLONE_THREAD)
		return 0;  /* a thread: its process is tracked already */
	bpf_probe_read_kernel(&pid, sizeof(pid), ctx + newtask_offsets[0]);
	if (pid > 0)
		bpf_map_update_elem(&tracked, &pid, &one, BPF_ANY);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
