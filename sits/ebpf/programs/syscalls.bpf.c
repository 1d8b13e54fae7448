// SPDX-License-Identifier: GPL-2.0
/* Per-call latency of the syscalls a video pipeline blocks in: read, write,
 * ioctl (keyed by command), poll/ppoll, epoll_wait/epoll_pwait(2),
 * select/pselect6. Also the first object of every session: it creates the
 * shared maps (common.bpf.h) that the other objects reuse.
 *
 * One raw_tp program on each of the raw sys_enter/sys_exit tracepoints with
 * the syscall id tested first costs about half of per-syscall tracepoints
 * (research/ebpf-anchors.md: 177 vs 350 ns). raw_tp rather than tp_btf, and
 * no CO-RE relocation: libbpf then never parses the kernel's BTF for this
 * object (~9 ms and ~11 MB of peak RSS with libbpf 1.1), so the first probe
 * is attached sooner. pt_regs is read at fixed offsets, which are ABI
 * (ptrace's user_regs_struct). The start time lives in task local storage:
 * no hash lookup, no map to fill up. */
#include "common.bpf.h"

/* Syscall numbers are ABI: fixed per architecture forever. The exit program
 * reads one window of pt_regs holding the syscall number and the arguments
 * that key a row (SYS_ARG1: fd/epfd, SYS_ARG2: ioctl command); syscalls do
 * not change these saved registers. */
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
/* struct pt_regs: ... si (104), di (112), orig_ax (120) */
struct sys_regs {
	__u64 si, di, orig_ax;
};
#define SYS_REGS_OFFSET 104
#define SYS_NR(r) ((long)(r).orig_ax)
#define SYS_ARG1(r) ((r).di)
#define SYS_ARG2(r) ((r).si)
_Static_assert(__builtin_offsetof(struct pt_regs, si) == SYS_REGS_OFFSET &&
	       __builtin_offsetof(struct pt_regs, di) == SYS_REGS_OFFSET + 8 &&
	       __builtin_offsetof(struct pt_regs, orig_ax) == SYS_REGS_OFFSET + 16,
	       "x86 pt_regs layout");
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
/* struct pt_regs: regs[31] (0), sp, pc, pstate, orig_x0 (272), syscallno
 * (280); x0 holds the return value at exit, x1 is still the second argument */
struct sys_regs {
	__u64 orig_x0;
	__s32 syscallno;
	__u32 pad;
};
#define SYS_REGS_OFFSET 272
#define SYS_NR(r) ((long)(r).syscallno)
#define SYS_ARG1(r) ((r).orig_x0)
#define SYS_ARG2_OFFSET 8
_Static_assert(__builtin_offsetof(struct pt_regs, orig_x0) == SYS_REGS_OFFSET &&
	       __builtin_offsetof(struct pt_regs, syscallno) == SYS_REGS_OFFSET + 8,
	       "arm64 pt_regs layout");
#else
#error "syscalls.bpf.c: add this architecture's syscall numbers and pt_regs offsets"
#endif

struct sys_start {
	__u64 ts;
	__u64 pid_tgid;
	__u32 probe;
	__u32 pad;
};

SITS_TASK_STORAGE(struct sys_start) sys_start SEC(".maps");

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

SEC("raw_tp/sys_enter")
int BPF_PROG(sits_sys_enter, struct pt_regs *regs, long nr)
{
	__u32 probe = sys_probe(nr);
	struct sys_start *st;
	__u64 pid_tgid;

	if (!probe || !probe_enabled(probe))
		return 0;
	pid_tgid = bpf_get_current_pid_tgid();
	if (!wanted(pid_tgid))
		return 0;
	st = bpf_task_storage_get(&sys_start, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st) {
		count_drop(SITS_DROP_START_MAP_FULL);
		return 0;
	}
	st->probe = probe;
	st->pid_tgid = pid_tgid;  /* the exit program need not ask again */
	st->ts = bpf_ktime_get_ns();
	return 0;
}

SEC("raw_tp/sys_exit")
int BPF_PROG(sits_sys_exit, struct pt_regs *regs, long ret)
{
	struct sys_regs r;
	struct sys_start *st;
	__u64 now, key = 0;
	__u32 probe;

	if (bpf_probe_read_kernel(&r, sizeof(r), (void *)regs + SYS_REGS_OFFSET))
		return 0;
	probe = sys_probe(SYS_NR(r));
	if (!probe)
		return 0;
	st = bpf_task_storage_get(&sys_start, bpf_get_current_task_btf(), 0, 0);
	if (!st || !st->ts || st->probe != probe)
		return 0;
	now = bpf_ktime_get_ns();
	if (probe == SITS_P_SYS_IOCTL) {
#ifdef SYS_ARG2_OFFSET
		bpf_probe_read_kernel(&key, sizeof(key), (void *)regs + SYS_ARG2_OFFSET);
#else
		key = SYS_ARG2(r);
#endif
		key = (__u32)key;
	} else if (probe == SITS_P_SYS_READ || probe == SITS_P_SYS_WRITE ||
		   probe == SITS_P_SYS_EPOLL_WAIT) {
		key = (__u32)SYS_ARG1(r);
	}
	record(st->pid_tgid >> 32, (__u32)st->pid_tgid, probe, key, now - st->ts);
	st->ts = 0;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
