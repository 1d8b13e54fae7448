// SPDX-License-Identifier: GPL-2.0
/* libavcodec call latency: one entry and one return program, attached to
 * each of avcodec_send_packet/receive_frame/send_frame/receive_packet with
 * the probe id as the attach cookie. The return code is the row's key, so
 * EAGAIN (no frame yet) and real work are counted apart. */
#include "common.bpf.h"

/* The return value's place in struct pt_regs, which is ABI (ptrace's
 * user_regs_struct): read at a fixed offset, not through PT_REGS_RC(),
 * whose CO-RE relocation would make libbpf parse the kernel's BTF for this
 * object (~10-20 ms of start-up). */
#if defined(__TARGET_ARCH_x86)
#define RC_OFFSET 80
_Static_assert(__builtin_offsetof(struct pt_regs, ax) == RC_OFFSET, "x86 pt_regs layout");
#elif defined(__TARGET_ARCH_arm64)
#define RC_OFFSET 0
_Static_assert(__builtin_offsetof(struct pt_regs, regs) == RC_OFFSET, "arm64 pt_regs layout");
#else
#error "avcodec.bpf.c: add this architecture's return register offset in pt_regs"
#endif

/* tid << 8 | probe id -> entry time */
SITS_HASH(BPF_MAP_TYPE_HASH, 8192, __u64, __u64) av_starts SEC(".maps");

SEC("uprobe")
int sits_av_enter(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 key = ((pid_tgid & 0xFFFFFFFF) << 8) | (bpf_get_attach_cookie(ctx) & 0xFF);
	__u64 ts;

	if (!wanted(pid_tgid))
		return 0;
	ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&av_starts, &key, &ts, BPF_ANY))
		count_drop(SITS_DROP_START_MAP_FULL);
	return 0;
}

SEC("uretprobe")
int sits_av_exit(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 probe = bpf_get_attach_cookie(ctx) & 0xFF;
	__u64 key = ((pid_tgid & 0xFFFFFFFF) << 8) | probe;
	__u64 *ts = bpf_map_lookup_elem(&av_starts, &key);
	__u64 delta;
	int ret;

	if (!ts)
		return 0;
	delta = bpf_ktime_get_ns() - *ts;
	bpf_map_delete_elem(&av_starts, &key);
	ret = (int)*(__u64 *)((void *)ctx + RC_OFFSET);
	record(pid_tgid >> 32, (__u32)pid_tgid, probe, (__u64)(__s64)ret, delta);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
