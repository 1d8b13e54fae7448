// SPDX-License-Identifier: GPL-2.0
/* dma_fence latency: emit (or init, for fences no driver "emits") ->
 * signaled per fence context (a driver's timeline), and dma_fence_wait
 * start -> end per waiting task.
 *
 * Classic tracepoints, not tp_btf: the driver and timeline names exist only
 * as strings in the trace record (the dma_fence holds function pointers to
 * produce them). They are read once per context into `fence_names`.
 *
 * The records are read at the offsets of the dma_fence class's format file
 * (one layout for all its events), not through CO-RE: libbpf then never
 * parses the kernel's BTF for this object (~10-20 ms of start-up). */
#include "common.bpf.h"

/* user space fills these from the format file: the driver and timeline
 * __data_loc words, then context and seqno, each as offset and size (4 or
 * 8 bytes) */
enum { F_DRIVER, F_TIMELINE, F_CONTEXT, F_CONTEXT_SIZE, F_SEQNO, F_SEQNO_SIZE, F_MAX };
const volatile __u32 fence_fields[F_MAX] SEC(".rodata.fence") = { 8, 12, 16, 4, 20, 4 };

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

static __always_inline __u64 record_uint(void *ctx, __u32 off, __u32 size)
{
	__u64 v64 = 0;
	__u32 v32 = 0;

	if (size == 8) {
		bpf_probe_read_kernel(&v64, sizeof(v64), ctx + off);
		return v64;
	}
	bpf_probe_read_kernel(&v32, sizeof(v32), ctx + off);
	return v32;
}

static __always_inline struct fence_id fence_of(void *ctx)
{
	struct fence_id id = {
		.context = record_uint(ctx, fence_fields[F_CONTEXT], fence_fields[F_CONTEXT_SIZE]),
		.seqno = record_uint(ctx, fence_fields[F_SEQNO], fence_fields[F_SEQNO_SIZE]),
	};

	return id;
}

/* a __data_loc string of the record: its offset in the low 16 bits */
static __always_inline void record_str(void *ctx, __u32 loc_off, char *out, __u32 size)
{
	__u32 loc = 0;

	bpf_probe_read_kernel(&loc, sizeof(loc), ctx + loc_off);
	bpf_probe_read_kernel_str(out, size, ctx + (loc & 0xFFFF));
}

static __always_inline void remember_name(void *ctx, __u64 context)
{
	struct sits_fence_name name = {};

	if (bpf_map_lookup_elem(&fence_names, &context))
		return;
	record_str(ctx, fence_fields[F_DRIVER], name.driver, sizeof(name.driver));
	record_str(ctx, fence_fields[F_TIMELINE], name.timeline, sizeof(name.timeline));
	if (bpf_map_update_elem(&fence_names, &context, &name, BPF_NOEXIST) == -7 /* E2BIG */)
		count_drop(SITS_DROP_FENCE_NAMES_FULL);
}

static __always_inline int fence_started(void *ctx, __u64 flags)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct fence_id id = fence_of(ctx);
	struct fence_start st = { .ts = bpf_ktime_get_ns(), .pid = pid_tgid >> 32 };

	if (!probe_enabled(SITS_P_FENCE_SIGNAL) || !wanted(pid_tgid))
		return 0;
	remember_name(ctx, id.context);
	bpf_map_update_elem(&fence_starts, &id, &st, flags);
	ensure_row(st.pid, SITS_P_FENCE_SIGNAL, id.context);  /* signaled: often in an interrupt */
	return 0;
}

SEC("tracepoint/dma_fence/dma_fence_init")
int sits_fence_init(void *ctx)
{
	return fence_started(ctx, BPF_NOEXIST);
}

/* Emission (submission to hardware) is the better start: it replaces init. */
SEC("tracepoint/dma_fence/dma_fence_emit")
int sits_fence_emit(void *ctx)
{
	return fence_started(ctx, BPF_ANY);
}

SEC("tracepoint/dma_fence/dma_fence_signaled")
int sits_fence_signaled(void *ctx)
{
	struct fence_id id = fence_of(ctx);
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
int sits_fence_destroy(void *ctx)
{
	struct fence_id id = fence_of(ctx);

	bpf_map_delete_elem(&fence_starts, &id);
	return 0;
}

SEC("tracepoint/dma_fence/dma_fence_wait_start")
int sits_fence_wait_start(void *ctx)
{
	struct wait_start *w;
	__u64 context;

	if (!probe_enabled(SITS_P_FENCE_WAIT) || !wanted(bpf_get_current_pid_tgid()))
		return 0;
	context = record_uint(ctx, fence_fields[F_CONTEXT], fence_fields[F_CONTEXT_SIZE]);
	remember_name(ctx, context);
	w = bpf_task_storage_get(&fence_waits, bpf_get_current_task_btf(), 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!w) {
		count_drop(SITS_DROP_START_MAP_FULL);
		return 0;
	}
	w->context = context;
	w->ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tracepoint/dma_fence/dma_fence_wait_end")
int sits_fence_wait_end(void *ctx)
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
