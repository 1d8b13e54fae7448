// SPDX-License-Identifier: GPL-2.0
/* When following a command (`sits probe audit -- CMD`) or --follow: add the
 * children of tracked processes to `tracked`, so that a pipeline's helper
 * processes are traced too. */
#include "common.bpf.h"

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sits_follow_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ppid = parent->tgid, pid = child->tgid;
	__u8 one = 1;

	if (ppid == pid || !bpf_map_lookup_elem(&tracked, &ppid))
		return 0;
	bpf_map_update_elem(&tracked, &pid, &one, BPF_ANY);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
