// SPDX-License-Identifier: GPL-2.0
/* dma_fence latency: emit (or init, for fences no driver "emits") ->
 * signaled per fence context (a driver's timeline), and dma_fence_wait
 * start -> end per waiting task.
 *
 * Classic tracepoints, not tp_btf: the driver and timeline names exist only
 * as strings in the trace record (the dma_fence holds function pointers to
 * produce them). They are read once per context into `fence_names`. */
#include "common.bpf.h"

struct fence_id {
	__u64 context;
	__u64 seqno;
};

struct fence_start {
	__u64 ts;
	__u32 pid;
	__u32 pad;
};

/* LRU: a fence that is never signaled nor destroyed while we watch must
 * not fill the map for good. */
SITS_HASH(BPF_MAP_TYPE_LRU_HASH, 16384, struct fence_id, struct fence_start) fence_starts SEC(".maps");

SITS_HASH(BPF_MAP_TYPE_HASH, 1024, __u64, struct sits_fence_name) fence_names SEC(".maps");

struct wait_start {
	__u64 ts;
	__u64 context;
};

SITS_TASK_STORAGE(struct wait_start) fence_waits SEC(".maps");

static __always_inline void remember_name(struct trace_event_raw_dma_fence *ctx)
{
	__u64 context = ctx->context;
	struct sits_fence_name name = {};
	__u32 loc;

	if (bpf_map_lookup_elem(&fence_names, &context))
		return;
	loc = ctx->__data_loc_driver;
	bpf_probe_read_kernel_str(name.driver, sizeof(name.driver), (void *)ctx + (loc & 0xFFFF));
	loc = ctx->__data_loc_timeline;
	bpf_probe_read_kernel_str(name.timeline, sizeof(name.timeline), (void *)ctx + (loc & 0xFFFF));
	if (bpf_map_update_elem(&fence_names, &context, &name, BPF_NOEXIST) == -7 /* E2BIG */)
		count_drop(SITS_DROP_FENCE_NAMES_FULL);
}

static __always_inline int fence_started(struct trace_event_raw_dma_fence *ctx, __u64 flags)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct fence_id id = { .context = ctx->context, .seqno = ctx->seqno };
	struct fence_start st = { .ts = bpf_ktime_get_ns(), .pid = pid_tgid >> 32 };

	if (!probe_enabled(SITS_P_FENCE_SIGNAL) || !wanted(pid_tgid))
		return 0;
	remember_name(ctx);
	bpf_map_update_elem(&fence_starts, &id, &st, flags);
	ensure_row(st.pid, SITS_P_FENCE_SIGNAL, id.context);  /* signaled: often in an interrupt */
	return 0;
}

SEC("tracepoint/dma_fence/dma_fence_init")
int sits_fence_init(struct trace_event_raw_dma_fence *ctx)
{
	return fence_started(ctx, BPF_NOEXIST);
}

/* Emission (submission to hardware) is the better start: it replaces init. */
SEC("tracepoint/dma_fence/dma_fence_emit")
int sits_fence_emit(struct trace_event_raw_dma_fence *ctx)
{
	return fence_started(ctx, BPF_ANY);
}

SEC("tracepoint/dma_fence/dma_fence_signaled")
int sits_fence_signaled(struct trace_event_raw_dma_fence *ctx)
{
	struct fence_id id = { .context = ctx->context, .seqno = ctx->seqno };
	struct fence_start *st = bpf_map_lookup_elem(&fence_starts, &id);
	__u64 now = bpf_ktime_get_ns();

	if (!st)
		return 0;
	/* signaled mostly runs in an interrupt: the row belongs to the emitter */
	record(st->pid, 0, SITS_P_FENCE_SIGNAL, id.context, now - st->ts);
	bpf_map_delete_elem(&fence_starts, &id);
	return 0;
}

SEC("tracepoint/dma_fence/dma_fence_destroy")
int sits_fence_destroy(struct trace_event_raw_dma_fence *ctx)
{
	struct fence_id id = { .context = ctx->context, .seqno = ctx->seqno };

	bpf_map_delete_elem(&fence_starts, &id);
	return 0;
}

SEC("tracepoint/dma_fence/dma_fence_wait_start")
int sits_fence_wait_start(struct trace_event_raw_dma_fence *ctx)
{
	struct wait_start *w;

	if (!probe_enabled(SITS_P_FENCE_WAIT) || !wanted(bpf_get_current_pid_tgid()))
		return 0;
	remember_name(ctx);
	w = bpf_task_storage_get(&fence_waits, bpf_get_current_task_btf(), 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!w) {
		count_drop(SITS_DROP_START_MAP_FULL);
		return 0;
	}
	w->context = ctx->context;
	w->ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tracepoint/dma_fence/dma_fence_wait_end")
int sits_fence_wait_end(struct trace_event_raw_dma_fence *ctx)
{
	struct wait_start *w = bpf_task_storage_get(&fence_waits, bpf_get_current_task_btf(), 0, 0);
	__u64 pid_tgid;

	if (!w || !w->ts)
		return 0;
	pid_tgid = bpf_get_current_pid_tgid();
	record(pid_tgid >> 32, (__u32)pid_tgid, SITS_P_FENCE_WAIT, w->context,
	       bpf_ktime_get_ns() - w->ts);
	w->ts = 0;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
