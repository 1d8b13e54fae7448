// SPDX-License-Identifier: GPL-2.0
/* Per-call latency of the syscalls a video pipeline blocks in: read, write,
 * ioctl (keyed by command), poll/ppoll, epoll_wait/epoll_pwait(2),
 * select/pselect6.
 *
 * One tp_btf program on the raw sys_enter/sys_exit tracepoints with the
 * syscall id tested first costs about half of per-syscall tracepoints
 * (research/ebpf-anchors.md: 177 vs 350 ns), and tp_btf reads pt_regs
 * directly instead of through bpf_probe_read. The start time lives in task
 * local storage: no hash lookup, no map to fill up. */
#include "common.bpf.h"

/* Syscall numbers are ABI: fixed per architecture forever. */
#if defined(__TARGET_ARCH_x86)
#define NR_read 0
#define NR_write 1
#define NR_poll 7
#define NR_ioctl 16
#define NR_select 23
#define NR_epoll_wait 232
#define NR_pselect6 270
#define NR_ppoll 271
#define NR_epoll_pwait 281
#define NR_epoll_pwait2 441
#define SYSCALL_NR(regs) ((regs)->orig_ax)
#elif defined(__TARGET_ARCH_arm64)
#define NR_read 63
#define NR_write 64
#define NR_ioctl 29
#define NR_pselect6 72
#define NR_ppoll 73
#define NR_epoll_pwait 22
#define NR_epoll_pwait2 441
#define NR_poll -1
#define NR_select -2
#define NR_epoll_wait -3
#define SYSCALL_NR(regs) ((regs)->syscallno)
#else
#error "syscalls.bpf.c: add this architecture's syscall numbers"
#endif

struct sys_start {
	__u64 ts;
	__u64 key;
	__u32 probe;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sys_start);
} sys_start SEC(".maps");

static __always_inline __u32 sys_probe(long nr)
{
	switch (nr) {
	case NR_read: return SITS_P_SYS_READ;
	case NR_write: return SITS_P_SYS_WRITE;
	case NR_ioctl: return SITS_P_SYS_IOCTL;
	case NR_poll: case NR_ppoll: return SITS_P_SYS_POLL;
	case NR_epoll_wait: case NR_epoll_pwait: case NR_epoll_pwait2: return SITS_P_SYS_EPOLL_WAIT;
	case NR_select: case NR_pselect6: return SITS_P_SYS_SELECT;
	}
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sits_sys_enter, struct pt_regs *regs, long nr)
{
	__u32 probe = sys_probe(nr);
	struct sys_start *st;

	if (!probe || !probe_enabled(probe) || !wanted(bpf_get_current_pid_tgid()))
		return 0;
	st = bpf_task_storage_get(&sys_start, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st) {
		count_drop(SITS_DROP_START_FULL);
		return 0;
	}
	st->probe = probe;
	if (probe == SITS_P_SYS_IOCTL)
		st->key = (__u32)PT_REGS_PARM2_SYSCALL(regs);
	else if (probe == SITS_P_SYS_READ || probe == SITS_P_SYS_WRITE || probe == SITS_P_SYS_EPOLL_WAIT)
		st->key = (__u32)PT_REGS_PARM1_SYSCALL(regs);
	else
		st->key = 0;
	st->ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sits_sys_exit, struct pt_regs *regs, long ret)
{
	__u32 probe = sys_probe(SYSCALL_NR(regs));
	struct sys_start *st;
	__u64 pid_tgid, now;

	if (!probe)
		return 0;
	st = bpf_task_storage_get(&sys_start, bpf_get_current_task_btf(), 0, 0);
	if (!st || !st->ts || st->probe != probe)
		return 0;
	now = bpf_ktime_get_ns();
	pid_tgid = bpf_get_current_pid_tgid();
	record(pid_tgid >> 32, (__u32)pid_tgid, probe, st->key, now - st->ts);
	st->ts = 0;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
