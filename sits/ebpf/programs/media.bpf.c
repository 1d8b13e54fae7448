// SPDX-License-Identifier: GPL-2.0
/* V4L2 (videobuf2) and DRM vblank latency, on kernels that have these
 * tracepoints (modules videobuf2-common and drm; not every kernel does).
 *
 *   v4l2_qbuf_done   vb2_qbuf -> vb2_buf_done   (driver holds the buffer)
 *   v4l2_done_dqbuf  vb2_buf_done -> vb2_dqbuf  (buffer ready, app not yet)
 *   drm_vblank_deliver  drm_vblank_event -> drm_vblank_event_delivered
 *   drm_event_wait      drm_vblank_event_queued -> ..._delivered
 *
 * raw_tp with buffers keyed by their kernel address: only the queue type is
 * read from a struct, through CO-RE against the module's BTF. */
#include "common.bpf.h"

struct vb2_queue___sits {
	unsigned int type;
} __attribute__((preserve_access_index));

struct vb_start {
	__u64 ts;
	__u32 pid;
	__u32 type;
};

SITS_HASH(BPF_MAP_TYPE_LRU_HASH, 1024, __u64, struct vb_start) vb_queued SEC(".maps"), vb_done SEC(".maps");

struct drm_pending_id {
	__u64 file;
	__u32 crtc;
	__u32 seq;
};

SITS_HASH(BPF_MAP_TYPE_LRU_HASH, 1024, struct drm_pending_id, struct vb_start) drm_pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} vblank_ts SEC(".maps");

SEC("raw_tp/vb2_qbuf")
int BPF_PROG(sits_vb2_qbuf, struct vb2_queue___sits *q, void *vb)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), key = (__u64)vb;
	struct vb_start st = { .ts = bpf_ktime_get_ns(), .pid = pid_tgid >> 32 };

	if (!probe_enabled(SITS_P_V4L2_QBUF_DONE) || !wanted(pid_tgid))
		return 0;
	st.type = BPF_CORE_READ(q, type);
	if (bpf_map_update_elem(&vb_queued, &key, &st, BPF_ANY))
		count_drop(SITS_DROP_START_FULL);
	return 0;
}

SEC("raw_tp/vb2_buf_done")
int BPF_PROG(sits_vb2_buf_done, struct vb2_queue___sits *q, void *vb)
{
	__u64 key = (__u64)vb, now = bpf_ktime_get_ns();
	struct vb_start *st = bpf_map_lookup_elem(&vb_queued, &key);
	struct vb_start done;

	if (!st)
		return 0;  /* queued before we attached, or not a traced process */
	/* buffer completion runs in an interrupt: the row is the queuer's */
	record(st->pid, 0, SITS_P_V4L2_QBUF_DONE, st->type, now - st->ts);
	done = *st;
	done.ts = now;
	bpf_map_delete_elem(&vb_queued, &key);
	if (bpf_map_update_elem(&vb_done, &key, &done, BPF_ANY))
		count_drop(SITS_DROP_START_FULL);
	return 0;
}

SEC("raw_tp/vb2_dqbuf")
int BPF_PROG(sits_vb2_dqbuf, struct vb2_queue___sits *q, void *vb)
{
	__u64 key = (__u64)vb, pid_tgid = bpf_get_current_pid_tgid();
	struct vb_start *st = bpf_map_lookup_elem(&vb_done, &key);

	if (!st)
		return 0;
	record(pid_tgid >> 32, (__u32)pid_tgid, SITS_P_V4L2_DONE_DQBUF, st->type,
	       bpf_ktime_get_ns() - st->ts);
	bpf_map_delete_elem(&vb_done, &key);
	return 0;
}

SEC("raw_tp/drm_vblank_event")
int BPF_PROG(sits_drm_vblank, int crtc, unsigned int seq)
{
	__u32 idx = crtc & 63;
	__u64 now = bpf_ktime_get_ns();

	bpf_map_update_elem(&vblank_ts, &idx, &now, BPF_ANY);
	return 0;
}

SEC("raw_tp/drm_vblank_event_queued")
int BPF_PROG(sits_drm_event_queued, void *file, int crtc, unsigned int seq)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct drm_pending_id id = { .file = (__u64)file, .crtc = crtc, .seq = seq };
	struct vb_start st = { .ts = bpf_ktime_get_ns(), .pid = pid_tgid >> 32, .type = crtc };

	if (!probe_enabled(SITS_P_DRM_EVENT_WAIT) || !wanted(pid_tgid))
		return 0;
	if (bpf_map_update_elem(&drm_pending, &id, &st, BPF_ANY))
		count_drop(SITS_DROP_START_FULL);
	return 0;
}

SEC("raw_tp/drm_vblank_event_delivered")
int BPF_PROG(sits_drm_event_delivered, void *file, int crtc, unsigned int seq)
{
	struct drm_pending_id id = { .file = (__u64)file, .crtc = crtc, .seq = seq };
	struct vb_start *st = bpf_map_lookup_elem(&drm_pending, &id);
	__u32 idx = crtc & 63;
	__u64 now = bpf_ktime_get_ns(), *vbl;

	if (!st)
		return 0;  /* not a traced process's event */
	record(st->pid, 0, SITS_P_DRM_EVENT_WAIT, crtc, now - st->ts);
	vbl = bpf_map_lookup_elem(&vblank_ts, &idx);
	if (vbl && *vbl && probe_enabled(SITS_P_DRM_VBLANK_DELIVER))
		record(st->pid, 0, SITS_P_DRM_VBLANK_DELIVER, crtc, now - *vbl);
	bpf_map_delete_elem(&drm_pending, &id);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
