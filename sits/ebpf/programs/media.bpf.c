// SPDX-License-Identifier: GPL-2.0
/* V4L2 (videobuf2) and DRM vblank latency, on kernels that have these
 * tracepoints (modules videobuf2-common and drm; not every kernel does).
 *
 *   v4l2_qbuf_done   vb2_qbuf -> vb2_buf_done   (driver holds the buffer)
 *   v4l2_done_dqbuf  vb2_buf_done -> vb2_dqbuf  (buffer ready, app not yet)
 *   drm_vblank_deliver  vblank (its timestamp) -> event delivered, for
 *                       page-flip and DRM_IOCTL_WAIT_VBLANK events
 *   drm_event_wait      drm_vblank_event_queued -> ..._delivered (WAIT_VBLANK)
 *   drm_event_read      event delivered -> drm_read() returns it
 *
 * raw_tp with buffers keyed by their kernel address: only the queue type and
 * a file's private_data are read from structs, through CO-RE. drm_file is
 * only used as a key, never read. */
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

/* DRM_IOCTL_WAIT_VBLANK events, from drm_vblank_event_queued */
SITS_HASH(BPF_MAP_TYPE_LRU_HASH, 1024, struct drm_pending_id, struct vb_start) drm_pending SEC(".maps");

/* drm_file -> the process that last asked it for a page-flip event (atomic
 * commit or legacy page flip with DRM_MODE_PAGE_FLIP_EVENT). Flip-complete
 * events reach drm_vblank_event_delivered from the vblank interrupt with
 * only the file: this names their owner. Set in the client's own context,
 * so the --pid/--comm/--cgroup filters apply as for any syscall. */
SITS_HASH(BPF_MAP_TYPE_LRU_HASH, 256, __u64, __u32) drm_owner SEC(".maps");

/* drm_file -> its oldest delivered event not yet read() */
struct drm_unread {
	__u64 ts;
	__u32 crtc;
	__u32 pad;
};

SITS_HASH(BPF_MAP_TYPE_LRU_HASH, 256, __u64, struct drm_unread) drm_unread SEC(".maps");

/* drm_read() entry -> exit: the file being read */
SITS_TASK_STORAGE(__u64) drm_reading SEC(".maps");

/* drm_handle_vblank_events() sends a vblank's events (..._delivered) and
 * only then traces the vblank itself, with its timestamp (drm_vblank_event).
 * Both run under dev->event_lock with interrupts off, so on one CPU: the
 * delivered events wait here, per CPU, for the vblank they belong to. */
#define DRM_BATCH 4
struct drm_delivery {
	__u64 ts;
	__u32 pid;
	__u32 crtc;
	__u32 seq;
	__u32 pad;
};

struct drm_batch {
	__u32 n;
	__u32 pad;
	struct drm_delivery d[DRM_BATCH];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct drm_batch);
} drm_batch SEC(".maps");

SEC("raw_tp/vb2_qbuf")
int BPF_PROG(sits_vb2_qbuf, struct vb2_queue___sits *q, void *vb)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), key = (__u64)vb;
	struct vb_start st = { .ts = bpf_ktime_get_ns(), .pid = pid_tgid >> 32 };

	if (!probe_enabled(SITS_P_V4L2_QBUF_DONE) || !wanted(pid_tgid))
		return 0;
	st.type = BPF_CORE_READ(q, type);
	if (bpf_map_update_elem(&vb_queued, &key, &st, BPF_ANY))
		count_drop(SITS_DROP_START_MAP_FULL);
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
		count_drop(SITS_DROP_START_MAP_FULL);
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

/* drm_vblank_event(crtc, seq, time, high_prec): time is the vblank's
 * CLOCK_MONOTONIC timestamp (ktime), as the events carry it */
SEC("raw_tp/drm_vblank_event")
int BPF_PROG(sits_drm_vblank, int crtc, unsigned int seq, __s64 time)
{
	__u32 zero = 0;
	struct drm_batch *b = bpf_map_lookup_elem(&drm_batch, &zero);

	if (!b || !b->n)
		return 0;
	for (int i = 0; i < DRM_BATCH; i++) {
		struct drm_delivery *d = &b->d[i];

		if (i >= b->n)
			break;
		/* events sent outside a vblank (a flip on a disabled CRTC, a
		 * WAIT_VBLANK for a passed sequence) never match a vblank */
		if (d->crtc == (__u32)crtc && d->seq == seq && d->ts >= (__u64)time)
			record(d->pid, 0, SITS_P_DRM_VBLANK_DELIVER, crtc, d->ts - time);
	}
	b->n = 0;
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
		count_drop(SITS_DROP_START_MAP_FULL);
	return 0;
}

SEC("raw_tp/drm_vblank_event_delivered")
int BPF_PROG(sits_drm_event_delivered, void *file, int crtc, unsigned int seq)
{
	struct drm_pending_id id = { .file = (__u64)file, .crtc = crtc, .seq = seq };
	struct vb_start *st = bpf_map_lookup_elem(&drm_pending, &id);
	__u64 now = bpf_ktime_get_ns(), fkey = (__u64)file;
	__u32 pid, zero = 0, *owner;
	struct drm_batch *b;

	if (st) {  /* a DRM_IOCTL_WAIT_VBLANK event */
		pid = st->pid;
		record(pid, 0, SITS_P_DRM_EVENT_WAIT, crtc, now - st->ts);
		bpf_map_delete_elem(&drm_pending, &id);
	} else {  /* a page flip's event, or not a traced process's */
		owner = bpf_map_lookup_elem(&drm_owner, &fkey);
		if (!owner)
			return 0;
		pid = *owner;
	}
	if (probe_enabled(SITS_P_DRM_EVENT_READ)) {
		struct drm_unread u = { .ts = now, .crtc = crtc };

		bpf_map_update_elem(&drm_unread, &fkey, &u, BPF_NOEXIST);
	}
	if (!probe_enabled(SITS_P_DRM_VBLANK_DELIVER))
		return 0;
	b = bpf_map_lookup_elem(&drm_batch, &zero);
	if (!b)
		return 0;
	if (b->n >= DRM_BATCH) {
		count_drop(SITS_DROP_START_MAP_FULL);
		return 0;
	}
	/* constant-bounded index for the verifier */
	__u32 i = b->n & (DRM_BATCH - 1);

	b->d[i].ts = now;
	b->d[i].pid = pid;
	b->d[i].crtc = crtc;
	b->d[i].seq = seq;
	b->n = i + 1;
	return 0;
}

/* The ioctls that ask for a page-flip event; args 2 and 3 are the kernel
 * copy of the request and the drm_file. Only the flags are read, at their
 * UAPI offsets. */
#define DRM_MODE_PAGE_FLIP_EVENT 0x01
#define DRM_MODE_ATOMIC_TEST_ONLY 0x0100

static __always_inline int remember_owner(void *file, void *flags_ptr)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), key = (__u64)file;
	__u32 flags = 0, pid = pid_tgid >> 32;

	if (!wanted(pid_tgid))
		return 0;
	bpf_probe_read_kernel(&flags, sizeof(flags), flags_ptr);
	if (!(flags & DRM_MODE_PAGE_FLIP_EVENT) || (flags & DRM_MODE_ATOMIC_TEST_ONLY))
		return 0;
	bpf_map_update_elem(&drm_owner, &key, &pid, BPF_ANY);
	return 0;
}

/* drm_mode_atomic_ioctl(dev, struct drm_mode_atomic *data, file): flags first */
SEC("kprobe/drm_mode_atomic_ioctl")
int BPF_KPROBE(sits_drm_atomic, void *dev, void *data, void *file)
{
	return remember_owner(file, data);
}

/* drm_mode_page_flip_ioctl(dev, struct drm_mode_crtc_page_flip_target *data,
 * file): crtc_id, fb_id, flags */
SEC("kprobe/drm_mode_page_flip_ioctl")
int BPF_KPROBE(sits_drm_page_flip, void *dev, void *data, void *file)
{
	return remember_owner(file, data + 8);
}

/* drm_read(): event delivered -> read by the client (its event loop's delay) */
SEC("kprobe/drm_read")
int BPF_KPROBE(sits_drm_read_enter, struct file *filp)
{
	__u64 *reading, fkey;

	if (!wanted(bpf_get_current_pid_tgid()))
		return 0;
	fkey = (__u64)BPF_CORE_READ(filp, private_data);
	if (!bpf_map_lookup_elem(&drm_unread, &fkey))
		return 0;  /* nothing of ours to read: keep the exit cheap */
	reading = bpf_task_storage_get(&drm_reading, bpf_get_current_task_btf(), 0,
				       BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (reading)
		*reading = fkey;
	return 0;
}

SEC("kretprobe/drm_read")
int BPF_KRETPROBE(sits_drm_read_exit, long ret)
{
	__u64 *reading = bpf_task_storage_get(&drm_reading, bpf_get_current_task_btf(), 0, 0);
	__u64 fkey, pid_tgid;
	struct drm_unread *u;

	if (!reading || !*reading)
		return 0;
	fkey = *reading;
	*reading = 0;
	if (ret <= 0)
		return 0;  /* EAGAIN, a signal: the event is still there */
	u = bpf_map_lookup_elem(&drm_unread, &fkey);
	if (!u)
		return 0;
	pid_tgid = bpf_get_current_pid_tgid();
	record(pid_tgid >> 32, (__u32)pid_tgid, SITS_P_DRM_EVENT_READ, u->crtc,
	       bpf_ktime_get_ns() - u->ts);
	/* the next event's vblank -> delivered sample is taken in an interrupt */
	if (probe_enabled(SITS_P_DRM_VBLANK_DELIVER))
		ensure_row(pid_tgid >> 32, SITS_P_DRM_VBLANK_DELIVER, u->crtc);
	bpf_map_delete_elem(&drm_unread, &fkey);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
