// SPDX-License-Identifier: GPL-2.0
/* --comm: keeps `comm_match` (common.bpf.h) current, so that the filter is
 * one map lookup per event instead of reading and comparing the task's
 * name each time.
 *
 * Classic tracepoints read at offsets that user space takes from their
 * format files, as follow.bpf.c: no CO-RE, so libbpf never parses the
 * kernel's BTF for this object. task_newtask fires in copy_process(), in
 * the parent before the child first runs, with the child's tid and name;
 * task_rename fires in __set_task_comm() (exec, prctl PR_SET_NAME, a write
 * to /proc/<tid>/comm) before the new name is copied in, with the renamed
 * task's tid and new name, whichever task renames it. Both overwrite the
 * row: a row left by an exited task whose tid is reused, or one that
 * comm_wanted() wrote from the old name, is replaced. Attached before any
 * probe, so no rename goes unseen. */
#include "common.bpf.h"

/* byte offsets: task_newtask's pid and comm, task_rename's pid and newcomm
 * (user space fills these from the format files) */
const volatile __u32 comm_offsets[4] SEC(".rodata.comm") = { 8, 12, 8, 28 };

static __always_inline int decide(void *ctx, __u32 pid_off, __u32 comm_off)
{
	char comm[SITS_COMM_LEN];
	__s32 tid = 0;
	__u8 m;

	if (bpf_probe_read_kernel(&tid, sizeof(tid), ctx + pid_off) || tid <= 0 ||
	    bpf_probe_read_kernel(comm, sizeof(comm), ctx + comm_off))
		return 0;
	m = comm_is_filtered(comm);
	bpf_map_update_elem(&comm_match, &tid, &m, BPF_ANY);
	return 0;
}

SEC("tracepoint/task/task_newtask")
int sits_comm_newtask(void *ctx)
{
	return decide(ctx, comm_offsets[0], comm_offsets[1]);
}

SEC("tracepoint/task/task_rename")
int sits_comm_rename(void *ctx)
{
	return decide(ctx, comm_offsets[2], comm_offsets[3]);
}

/* The exiting task is current. Its last events (closing its files can
 * wait for fences) may write its row again; task_newtask replaces that row
 * when the tid is given to a new task. */
SEC("tracepoint/sched/sched_process_exit")
int sits_comm_exit(void *ctx)
{
	__u32 tid = bpf_get_current_pid_tgid();

	bpf_map_delete_elem(&comm_match, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
