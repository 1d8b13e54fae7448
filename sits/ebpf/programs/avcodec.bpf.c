// SPDX-License-Identifier: GPL-2.0
/* libavcodec call latency: one entry and one return program, attached to
 * each of avcodec_send_packet/receive_frame/send_frame/receive_packet with
 * the probe id as the attach cookie. The return code is the row's key, so
 * EAGAIN (no frame yet) and real work are counted apart. */
#include "common.bpf.h"

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
	ret = (int)PT_REGS_RC(ctx);
	record(pid_tgid >> 32, (__u32)pid_tgid, probe, (__u64)(__s64)ret, delta);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
