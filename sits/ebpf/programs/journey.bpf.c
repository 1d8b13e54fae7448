// SPDX-License-Identifier: GPL-2.0
/* Every frame's journey from the sensor to the screen, joined by buffer
 * identity (sits probe frames): one struct sits_frame a frame, streamed
 * when its journey ends.
 *
 *   captured   the V4L2 timestamp (vb2_buf_done starts the record; the timestamp and
 *              sequence are read at DQBUF, as the application gets them)
 *   dequeued   raw_tp vb2_dqbuf
 *   committed  a commit (atomic, SETPLANE, PAGE_FLIP, SETCRTC) whose plane
 *              gets a framebuffer backed by the buffer's dma-buf
 *              (drm_atomic_set_fb_for_plane: every path goes through it),
 *              timed from the ioctl's start
 *   scanout    the vblank whose event completed that commit on the CRTC
 *   replaced   the vblank at which the next frame took the plane
 *   requeued   raw_tp vb2_qbuf
 *
 * Identity: a framebuffer's GEM object keeps the dma-buf it was imported
 * from (drm_gem_object.dma_buf); the dma-buf is the capture buffer's,
 * learnt at VIDIOC_EXPBUF (vb2_core_expbuf -> dma_buf_fd) or, for
 * V4L2_MEMORY_DMABUF, from the plane at QBUF. A commit of a framebuffer
 * that is no capture buffer, by a process that has never committed one,
 * shows a copy: it is joined to that process's last dequeued frame.
 *
 * A frame is finished once nothing more can happen to it: requeued and
 * replaced, or requeued never committed (and not its process's last
 * dequeued frame, which a copy may still show); a buffer freed (REQBUFS
 * again, the queue's close) stands for its requeue. Its identity goes with
 * it: a new buffer may get the freed one's address, and must not be taken
 * for it. Then it is counted in the
 * interval's statistics (count_frame(): each stage's histogram, drops by
 * cause, glass to glass, as sits/journey/stats.py counts a record) and,
 * when user space asks for records (journey_cfg.records), streamed. User
 * space flushes what is left at the end.
 *
 * The kernel functions are hooked by BPF trampolines (fentry/fexit) where
 * the kernel's BTF has them, else by kprobes: each hook is written twice,
 * its kprobe twin named ..._kp, and user space loads one set
 * (the kprobes of sits/ebpf/points.py's JOURNEY_PROGRAMS). */
#include "common.bpf.h"
#include "sits_vblank.h"   /* the late rule, the frame queue's too */

struct vb2_queue___sits {
	unsigned int streaming:1;
} __attribute__((preserve_access_index));

struct vb2_plane___sits {
	void *dbuf;
} __attribute__((preserve_access_index));

/* an enum field relocates against an enum only; the value is the
 * kernel's (bpf_core_enum_value) */
enum vb2_buffer_state___sits { VB2_BUF_STATE_ERROR = 6 };

struct vb2_buffer___sits {
	unsigned int index;
	unsigned int memory;
	__u64 timestamp;
	enum vb2_buffer_state___sits state;
	struct vb2_plane___sits planes[8];
} __attribute__((preserve_access_index));

/* vb2_v4l2_buffer starts with its vb2_buffer: the same address */
struct vb2_v4l2_buffer___sits {
	__u32 sequence;
} __attribute__((preserve_access_index));

struct drm_gem_object___sits {
	void *dma_buf;
} __attribute__((preserve_access_index));

struct list_head___sits {
	struct list_head___sits *next;
} __attribute__((preserve_access_index));

struct drm_framebuffer___sits {
	struct list_head___sits filp_head;
	struct drm_gem_object___sits *obj[4];
} __attribute__((preserve_access_index));

struct drm_file___sits {
	struct list_head___sits fbs;
} __attribute__((preserve_access_index));

/* fbs a process's file may hold for the walk below: more than sits' or
 * GStreamer's (a few of their own, and one a capture buffer) */
#define FILE_FBS 32

struct drm_crtc___sits {
	unsigned int index;
} __attribute__((preserve_access_index));

struct drm_plane___sits;

struct drm_plane_state___sits {
	struct drm_plane___sits *plane;
	struct drm_crtc___sits *crtc;
} __attribute__((preserve_access_index));

struct drm_plane___sits {
	unsigned int index;
	struct drm_plane_state___sits *state;
} __attribute__((preserve_access_index));

#define VB2_MEMORY_DMABUF 4
#define MAX_CRTCS 8
#define CRTC_PLANES 4       /* planes of a CRTC a journey follows */
#define COMMIT_FRAMES 4     /* frames one commit can put on screen */
#define DRM_MODE_ATOMIC_TEST_ONLY 0x0100

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} frames_out SEC(".maps");

const volatile struct sits_journey_config journey_cfg SEC(".rodata.journey") = {};

/* The statistics of finished frames, one element an interval: user space
 * flips frame_epoch, waits until no program can still be counting into
 * the other element (an RCU grace period), then reads and zeroes it. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct sits_frame_epoch);
} frame_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} frame_epoch SEC(".maps");

/* the last finished frame's scanout, for the gaps between scanouts (in
 * the order frames finish, across CPUs and intervals) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} last_scanout SEC(".maps");

/* frames in flight, by id */
SITS_HASH(BPF_MAP_TYPE_HASH, 2048, __u64, struct sits_frame) frames SEC(".maps");
/* vb2 buffer -> its newest frame; dma-buf -> vb2 buffer; vb2 buffer -> the
 * process that queued it (only traced processes' buffers start journeys) */
SITS_HASH(BPF_MAP_TYPE_LRU_HASH, 1024, __u64, __u64) frame_of_vb SEC(".maps");
SITS_HASH(BPF_MAP_TYPE_LRU_HASH, 1024, __u64, __u64) vb_of_dmabuf SEC(".maps");
SITS_HASH(BPF_MAP_TYPE_LRU_HASH, 1024, __u64, __u32) vb_owner SEC(".maps");
/* vb2 buffer -> its vb2 queue (the buffers a queue frees are forgotten) */
SITS_HASH(BPF_MAP_TYPE_LRU_HASH, 1024, __u64, __u64) vb_queue SEC(".maps");

/* queues that freed buffers the journey knew (sits/journey/kernel.py) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} queues_freed SEC(".maps");

struct queue_seq {
	__u32 last;
	__u32 seen;
};

/* vb2 queue -> the last sequence number it completed */
SITS_HASH(BPF_MAP_TYPE_LRU_HASH, 64, __u64, struct queue_seq) queue_seq SEC(".maps");

struct process_frames {
	__u64 last_dequeued;   /* id, 0 none */
	/* the latest frame it gave back uncommitted (id, 0 none): a copy of it
	 * may still be committed, by a process that converts off its loop's
	 * thread and gives the buffer back once the copy is made */
	__u64 last_requeued;
	__u32 zero_copy;       /* it has committed a capture buffer: no copies to join */
	__u32 pad;
};

SITS_HASH(BPF_MAP_TYPE_LRU_HASH, 256, __u32, struct process_frames) process_frames SEC(".maps");

/* per CRTC: the frames its next commit completion puts on screen, and the
 * frame on screen, per plane; the last vblank */
struct crtc_frames {
	__u64 pending[CRTC_PLANES];
	__u64 on_screen[CRTC_PLANES];
	__u64 vblank_ns;
	__u64 period_ns;	/* between its last two consecutive vblanks */
	__u32 vblank_seq;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CRTCS);
	__type(key, __u32);
	__type(value, struct crtc_frames);
} crtcs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} next_id SEC(".maps");

/* the commit ioctl a task is in */
struct commit_ctx {
	__u64 start_ns;
	__u64 fbs;      /* the committing file's framebuffer list (its head) */
	__u32 active;
	__u32 n;
	__u64 id[COMMIT_FRAMES];
	__u32 crtc[COMMIT_FRAMES];
	__u32 plane[COMMIT_FRAMES];
};

SITS_TASK_STORAGE(struct commit_ctx) commit_ctx SEC(".maps");
/* VIDIOC_EXPBUF in progress: the vb2 buffer being exported */
SITS_TASK_STORAGE(__u64) exporting SEC(".maps");

/* events of one vblank: its completions are sent (..._delivered) before the
 * vblank itself is traced with its timestamp (drm_vblank_event), under
 * dev->event_lock on one CPU (media.bpf.c says more) */
struct shown {
	__u64 id, prev;
	__u32 crtc, seq;
};

struct shown_batch {
	__u32 n;
	__u32 pad;
	struct shown s[CRTC_PLANES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct shown_batch);
} shown_batch SEC(".maps");

static __always_inline void hist_add(struct sits_hist *h, __u64 v)
{
	h->count++;
	h->sum_ns += v;
	if (v > h->max_ns)
		h->max_ns = v;
	__u32 slot = sits_hist_slot(v);

	barrier_var(slot);
	if (slot < SITS_HIST_SLOTS)
		h->slots[slot]++;
}

static __always_inline void seen_at(__u64 *n, __u64 *lo, __u64 *hi, __u64 t)
{
	*n += 1;
	if (!*lo || t < *lo)
		*lo = t;
	if (t > *hi)
		*hi = t;
}

/* A finished frame into the interval's statistics, as Journey.add()
 * (sits/journey/stats.py) counts its record; the frames user space would
 * not make a record of (never dequeued, a driver error) as
 * sits/journey/kernel.py leaves them out. */
static __always_inline void count_frame(struct sits_frame *f)
{
	__u32 zero = 0, *ep = bpf_map_lookup_elem(&frame_epoch, &zero), e = ep ? *ep & 1 : 0;
	struct sits_frame_epoch *fs = bpf_map_lookup_elem(&frame_stats, &e);
	__u64 *last = bpf_map_lookup_elem(&last_scanout, &zero);
	struct sits_frame_stats *st;
	__u64 t[SITS_STAGE_MAX];

	if (!fs || !f->dequeued_ns)
		return;
	st = &fs->stats;
	if (f->flags & SITS_FRAME_ERROR) {
		st->driver_errors++;
		return;
	}
	st->count++;
	t[SITS_STAGE_CAPTURED] = f->captured_ns;
	t[SITS_STAGE_DEQUEUED] = f->dequeued_ns;
	t[SITS_STAGE_COMMITTED] = f->committed_ns;
	t[SITS_STAGE_SCANOUT] = f->scanout_ns;
	t[SITS_STAGE_REPLACED] = f->replaced_ns;
	t[SITS_STAGE_REQUEUED] = f->requeued_ns;
	if (t[0])
		st->reached[0]++;
	for (int s = 1; s < SITS_STAGE_MAX; s++) {
		if (!t[s])
			continue;
		st->reached[s]++;
		for (int p = s - 1; p >= 0; p--) {
			if (t[p] && t[p] <= t[s]) {
				hist_add(&fs->hists[s], t[s] - t[p]);
				break;
			}
		}
	}
	st->drops[SITS_FRAME_DROP_SEQUENCE_GAP] += f->skipped_before;
	if (!f->committed_ns)
		st->drops[SITS_FRAME_DROP_NOT_SHOWN]++;
	if (f->late_ns) {
		st->drops[SITS_FRAME_DROP_LATE]++;
		hist_add(&fs->hists[SITS_FRAME_HIST_LATE], f->late_ns);
	}
	bool known = f->scanout_ns && f->replaced_ns;
	__s32 vblanks = known ? (__s32)(f->replaced_seq - f->scanout_seq) : 0;

	if (known && vblanks > 1)
		st->drops[SITS_FRAME_DROP_REPEATED]++;
	if (f->captured_ns)
		seen_at(&st->captured_n, &st->captured_lo, &st->captured_hi, f->captured_ns);
	if (!f->scanout_ns)
		return;
	seen_at(&st->scanout_n, &st->scanout_lo, &st->scanout_hi, f->scanout_ns);
	if (f->captured_ns && f->scanout_ns >= f->captured_ns)
		hist_add(&fs->hists[SITS_FRAME_HIST_GLASS],
			 f->scanout_ns - f->captured_ns + journey_cfg.display_latency_ns);
	if (vblanks) {  /* (known: replaced too) */
		st->shown_ns += (__s64)(f->replaced_ns - f->scanout_ns);
		st->shown_vblanks += vblanks;
	} else if (last && *last && f->scanout_ns != *last) {
		hist_add(&fs->hists[SITS_FRAME_HIST_GAPS],
			 f->scanout_ns > *last ? f->scanout_ns - *last : *last - f->scanout_ns);
	}
	if (last)
		*last = f->scanout_ns;
}

static __always_inline void emit(__u64 id, struct sits_frame *f)
{
	count_frame(f);
	if (journey_cfg.records && bpf_ringbuf_output(&frames_out, f, sizeof(*f), BPF_RB_NO_WAKEUP))
		count_drop(SITS_DROP_FRAME_RING);
	bpf_map_delete_elem(&frames, &id);
}

/* Stream `f` if nothing more can happen to it. */
static __always_inline void maybe_done(__u64 id, struct sits_frame *f)
{
	struct process_frames *p;

	if (!f->requeued_ns && !(f->flags & SITS_FRAME_FREED))
		return;
	if (f->committed_ns) {
		if (f->replaced_ns)
			emit(id, f);
		return;
	}
	p = bpf_map_lookup_elem(&process_frames, &f->pid);
	if (!p || p->zero_copy || (p->last_dequeued != id && p->last_requeued != id))
		emit(id, f);
}

SEC("raw_tp/vb2_qbuf")
int BPF_PROG(sits_journey_qbuf, void *q, struct vb2_buffer___sits *vb)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), key = (__u64)vb, *id;
	__u32 tgid = pid_tgid >> 32;
	struct sits_frame *f;

	if (!wanted(pid_tgid))
		return 0;
	bpf_map_update_elem(&vb_owner, &key, &tgid, BPF_ANY);
	__u64 qkey = (__u64)q;

	bpf_map_update_elem(&vb_queue, &key, &qkey, BPF_ANY);
	if (BPF_CORE_READ(vb, memory) == VB2_MEMORY_DMABUF) {
		__u64 dbuf = (__u64)BPF_CORE_READ(vb, planes[0].dbuf);

		if (dbuf)
			bpf_map_update_elem(&vb_of_dmabuf, &dbuf, &key, BPF_ANY);
	}
	id = bpf_map_lookup_elem(&frame_of_vb, &key);
	if (!id)
		return 0;
	__u64 fid = *id;

	f = bpf_map_lookup_elem(&frames, &fid);
	if (f && !f->requeued_ns) {
		f->requeued_ns = bpf_ktime_get_ns();
		struct process_frames *p = f->committed_ns ? 0 : bpf_map_lookup_elem(&process_frames, &f->pid);

		if (p && !p->zero_copy) {
			__u64 prev = p->last_requeued;
			struct sits_frame *old;

			p->last_requeued = fid;
			/* the one before will not be committed now */
			old = prev && prev != fid ? bpf_map_lookup_elem(&frames, &prev) : 0;
			if (old)
				maybe_done(prev, old);
		}
		maybe_done(fid, f);
	}
	return 0;
}

SEC("raw_tp/vb2_buf_done")
int BPF_PROG(sits_journey_buf_done, void *q, struct vb2_buffer___sits *vb)
{
	__u64 key = (__u64)vb, *n, fid;
	__u32 *owner = bpf_map_lookup_elem(&vb_owner, &key), zero = 0;
	struct sits_frame f = {};

	if (!owner)
		return 0;  /* not a traced process's buffer */
	f.pid = *owner;
	f.vb = key;
	f.buffer = BPF_CORE_READ(vb, index);
	if (BPF_CORE_READ(vb, state) == bpf_core_enum_value(enum vb2_buffer_state___sits, VB2_BUF_STATE_ERROR))
		f.flags |= SITS_FRAME_ERROR;
	n = bpf_map_lookup_elem(&next_id, &zero);
	if (!n)
		return 0;
	fid = __sync_fetch_and_add(n, 1) + 1;
	f.id = fid;
	if (bpf_map_update_elem(&frames, &fid, &f, BPF_ANY)) {
		count_drop(SITS_DROP_FRAME_MAP_FULL);
		return 0;
	}
	bpf_map_update_elem(&frame_of_vb, &key, &fid, BPF_ANY);
	return 0;
}

/* The timestamp and sequence number are the ones DQBUF hands the
 * application (vb2 copies them out here); sequence gaps are counted in
 * dequeue order, as the application sees them. */
SEC("raw_tp/vb2_dqbuf")
int BPF_PROG(sits_journey_dqbuf, void *q, struct vb2_buffer___sits *vb)
{
	__u64 key = (__u64)vb, qkey = (__u64)q, *id, fid;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct process_frames *p, np = {};
	struct queue_seq *qs, nqs = {};
	struct sits_frame *f, *old;

	id = bpf_map_lookup_elem(&frame_of_vb, &key);
	if (!id)
		return 0;
	fid = *id;
	f = bpf_map_lookup_elem(&frames, &fid);
	if (!f || f->dequeued_ns)
		return 0;
	f->dequeued_ns = bpf_ktime_get_ns();
	f->pid = tgid;
	f->captured_ns = BPF_CORE_READ(vb, timestamp);
	f->sequence = BPF_CORE_READ((struct vb2_v4l2_buffer___sits *)vb, sequence);
	/* a lower number than the last is a new STREAMON (it counts from 0) */
	qs = bpf_map_lookup_elem(&queue_seq, &qkey);
	if (qs && qs->seen && f->sequence > qs->last + 1)
		f->skipped_before = f->sequence - qs->last - 1;
	nqs.last = f->sequence;
	nqs.seen = 1;
	bpf_map_update_elem(&queue_seq, &qkey, &nqs, BPF_ANY);
	p = bpf_map_lookup_elem(&process_frames, &tgid);
	if (!p) {
		np.last_dequeued = fid;
		bpf_map_update_elem(&process_frames, &tgid, &np, BPF_ANY);
		return 0;
	}
	__u64 prev = p->last_dequeued;

	p->last_dequeued = fid;
	/* the frame before may have waited for a copy's commit that never came */
	old = prev ? bpf_map_lookup_elem(&frames, &prev) : 0;
	if (old)
		maybe_done(prev, old);
	return 0;
}

/* -- commits --------------------------------------------------------------- */

static __always_inline int commit_begin(__u32 flags, struct drm_file___sits *file)
{
	struct commit_ctx *c;

	if (flags & DRM_MODE_ATOMIC_TEST_ONLY || !wanted(bpf_get_current_pid_tgid()))
		return 0;
	c = bpf_task_storage_get(&commit_ctx, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!c)
		return 0;
	c->start_ns = bpf_ktime_get_ns();
	c->fbs = (__u64)&file->fbs;
	c->active = 1;
	c->n = 0;
	return 0;
}

/* The framebuffer is one the committing file made (ADDFB): on that file's
 * list. A copy of a frame is; the framebuffer a display restore puts back
 * at the end of a run (fbdev's, on the kernel client's file) is not. */
static __always_inline bool own_fb(struct commit_ctx *c, struct drm_framebuffer___sits *fb)
{
	struct list_head___sits *node = BPF_CORE_READ(fb, filp_head.next);

	for (int i = 0; i < FILE_FBS && node; i++) {
		if ((__u64)node == c->fbs)
			return true;
		node = BPF_CORE_READ(node, next);
	}
	return false;
}

/* The commit ioctls (dev, data, file): drm_mode_atomic_ioctl's data is a
 * struct drm_mode_atomic, flags first. */
static __always_inline int atomic_begin(void *data, struct drm_file___sits *file)
{
	__u32 flags = 0;

	bpf_probe_read_kernel(&flags, sizeof(flags), data);
	return commit_begin(flags, file);
}

SEC("fentry/drm_mode_atomic_ioctl")
int BPF_PROG(sits_journey_atomic, void *dev, void *data, struct drm_file___sits *file)
{
	return atomic_begin(data, file);
}

SEC("kprobe/drm_mode_atomic_ioctl")
int BPF_KPROBE(sits_journey_atomic_kp, void *dev, void *data, struct drm_file___sits *file)
{
	return atomic_begin(data, file);
}

SEC("fentry/drm_mode_setplane")
int BPF_PROG(sits_journey_setplane, void *dev, void *data, struct drm_file___sits *file)
{
	return commit_begin(0, file);
}

SEC("kprobe/drm_mode_setplane")
int BPF_KPROBE(sits_journey_setplane_kp, void *dev, void *data, struct drm_file___sits *file)
{
	return commit_begin(0, file);
}

SEC("fentry/drm_mode_page_flip_ioctl")
int BPF_PROG(sits_journey_page_flip, void *dev, void *data, struct drm_file___sits *file)
{
	return commit_begin(0, file);
}

SEC("kprobe/drm_mode_page_flip_ioctl")
int BPF_KPROBE(sits_journey_page_flip_kp, void *dev, void *data, struct drm_file___sits *file)
{
	return commit_begin(0, file);
}

SEC("fentry/drm_mode_setcrtc")
int BPF_PROG(sits_journey_setcrtc, void *dev, void *data, struct drm_file___sits *file)
{
	return commit_begin(0, file);
}

SEC("kprobe/drm_mode_setcrtc")
int BPF_KPROBE(sits_journey_setcrtc_kp, void *dev, void *data, struct drm_file___sits *file)
{
	return commit_begin(0, file);
}

/* drm_atomic_set_fb_for_plane(plane_state, fb): the plane gets `fb` in the
 * commit being built; the commit may still fail */
static __always_inline int set_fb(struct drm_plane_state___sits *st, struct drm_framebuffer___sits *fb)
{
	struct commit_ctx *c = bpf_task_storage_get(&commit_ctx, bpf_get_current_task_btf(), 0, 0);
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, i;
	struct process_frames *p;
	struct drm_crtc___sits *crtc;
	__u64 dbuf, *vb, *id, fid = 0;
	bool copy = false;

	if (!c || !c->active || !fb || c->n >= COMMIT_FRAMES)
		return 0;
	p = bpf_map_lookup_elem(&process_frames, &tgid);
	if (!p)
		return 0;  /* it has dequeued no frame */
	dbuf = (__u64)BPF_CORE_READ(fb, obj[0], dma_buf);
	vb = dbuf ? bpf_map_lookup_elem(&vb_of_dmabuf, &dbuf) : 0;
	if (vb) {
		id = bpf_map_lookup_elem(&frame_of_vb, vb);
		if (!id)
			return 0;
		fid = *id;
		p->zero_copy = 1;
	} else if (!p->zero_copy && p->last_dequeued && own_fb(c, fb)) {
		/* a copy: of the frame given back uncommitted since the last
		 * dequeue (made off the loop's thread), else of the last dequeued */
		struct sits_frame *given = p->last_requeued ? bpf_map_lookup_elem(&frames, &p->last_requeued) : 0;
		struct sits_frame *last = bpf_map_lookup_elem(&frames, &p->last_dequeued);

		fid = given && !given->committed_ns && (!last || given->requeued_ns >= last->dequeued_ns)
		      ? p->last_requeued : p->last_dequeued;
		copy = true;
	}
	if (!fid)
		return 0;
	struct sits_frame *f = bpf_map_lookup_elem(&frames, &fid);

	if (!f || f->committed_ns)
		return 0;  /* a frame commits once (a writeback commit repeats the plane) */
	crtc = BPF_CORE_READ(st, crtc);
	if (!crtc)
		crtc = BPF_CORE_READ(st, plane, state, crtc);
	if (copy)
		f->flags |= SITS_FRAME_COPIED;
	i = c->n & (COMMIT_FRAMES - 1);
	c->id[i] = fid;
	c->crtc[i] = crtc ? BPF_CORE_READ(crtc, index) : 0;
	c->plane[i] = BPF_CORE_READ(st, plane, index) & (CRTC_PLANES - 1);
	c->n = i + 1;
	/* pending from now: a blocking commit completes before it returns */
	__u32 ci = c->crtc[i];
	struct crtc_frames *cf = bpf_map_lookup_elem(&crtcs, &ci);

	if (cf) {
		__u32 s = c->plane[i] & (CRTC_PLANES - 1);

		cf->pending[s] = fid;
		/* a vblank came between its dequeue and this commit's start: the
		 * last one at or before the start, on the grid of the vblanks seen
		 * (a vblank's event may run before or after a commit that began
		 * near it: the stamp is its timer's expiry; sits' timeline, which
		 * sees only its flips' vblanks, has the same rule: sits_vblank.h) */
		__u64 late = sits_late_ns(cf->vblank_ns, cf->period_ns, f->dequeued_ns, c->start_ns);

		if (late)
			f->late_ns = late;
	}
	f->committed_ns = c->start_ns;
	return 0;
}

SEC("fentry/drm_atomic_set_fb_for_plane")
int BPF_PROG(sits_journey_set_fb, struct drm_plane_state___sits *st, struct drm_framebuffer___sits *fb)
{
	return set_fb(st, fb);
}

SEC("kprobe/drm_atomic_set_fb_for_plane")
int BPF_KPROBE(sits_journey_set_fb_kp, struct drm_plane_state___sits *st, struct drm_framebuffer___sits *fb)
{
	return set_fb(st, fb);
}

static __always_inline int commit_end(long ret)
{
	struct commit_ctx *c = bpf_task_storage_get(&commit_ctx, bpf_get_current_task_btf(), 0, 0);

	if (!c || !c->active)
		return 0;
	c->active = 0;
	if (!ret)
		return 0;
	/* refused: what it staged never went anywhere */
	for (int i = 0; i < COMMIT_FRAMES; i++) {
		if (i >= c->n)
			break;
		__u64 fid = c->id[i];
		__u32 ci = c->crtc[i];
		struct sits_frame *f = bpf_map_lookup_elem(&frames, &fid);
		struct crtc_frames *cf = bpf_map_lookup_elem(&crtcs, &ci);

		if (f && !f->scanout_ns) {
			f->committed_ns = 0;
			f->late_ns = 0;
			f->flags &= ~SITS_FRAME_COPIED;
		}
		if (cf && cf->pending[c->plane[i] & (CRTC_PLANES - 1)] == fid)
			cf->pending[c->plane[i] & (CRTC_PLANES - 1)] = 0;
	}
	return 0;
}

/* fexit sees the arguments, then the return value */
SEC("fexit/drm_mode_atomic_ioctl")
int BPF_PROG(sits_journey_atomic_exit, void *dev, void *data, void *file, int ret)
{
	return commit_end(ret);
}

SEC("kretprobe/drm_mode_atomic_ioctl")
int BPF_KRETPROBE(sits_journey_atomic_exit_kp, long ret)
{
	return commit_end(ret);
}

SEC("fexit/drm_mode_setplane")
int BPF_PROG(sits_journey_setplane_exit, void *dev, void *data, void *file, int ret)
{
	return commit_end(ret);
}

SEC("kretprobe/drm_mode_setplane")
int BPF_KRETPROBE(sits_journey_setplane_exit_kp, long ret)
{
	return commit_end(ret);
}

SEC("fexit/drm_mode_page_flip_ioctl")
int BPF_PROG(sits_journey_page_flip_exit, void *dev, void *data, void *file, int ret)
{
	return commit_end(ret);
}

SEC("kretprobe/drm_mode_page_flip_ioctl")
int BPF_KRETPROBE(sits_journey_page_flip_exit_kp, long ret)
{
	return commit_end(ret);
}

SEC("fexit/drm_mode_setcrtc")
int BPF_PROG(sits_journey_setcrtc_exit, void *dev, void *data, void *file, int ret)
{
	return commit_end(ret);
}

SEC("kretprobe/drm_mode_setcrtc")
int BPF_KRETPROBE(sits_journey_setcrtc_exit_kp, long ret)
{
	return commit_end(ret);
}

/* -- on screen ----------------------------------------------------------- */

/* Put `id` on plane `s` of `cf` at `ts`/`seq`, the frame before it leaving;
 * returns that frame's id. */
static __always_inline __u64 show(struct crtc_frames *cf, __u32 s, __u64 id, __u64 ts, __u32 seq, __u32 crtc)
{
	__u64 prev = cf->on_screen[s & (CRTC_PLANES - 1)];
	struct sits_frame *f = bpf_map_lookup_elem(&frames, &id), *old;

	cf->on_screen[s & (CRTC_PLANES - 1)] = id;
	if (f) {
		f->scanout_ns = ts;
		f->scanout_seq = seq;
		f->crtc = crtc;
		if (probe_enabled(SITS_P_FRAME_SCANOUT) && ts > f->captured_ns)
			record(f->pid, 0, SITS_P_FRAME_SCANOUT, crtc, ts - f->captured_ns);
	}
	if (prev && prev != id) {
		old = bpf_map_lookup_elem(&frames, &prev);
		if (old) {
			old->replaced_ns = ts;
			old->replaced_seq = seq;
		}
	}
	return prev;
}

/* drm_vblank_event_delivered(file, crtc, seq): a commit's completion (its
 * flip event, or a blocking commit's own) -- the frames pending on the CRTC
 * are on screen from this vblank. Timed now, corrected to the vblank's own
 * timestamp when drm_vblank_event follows. */
SEC("raw_tp/drm_vblank_event_delivered")
int BPF_PROG(sits_journey_delivered, void *file, int crtc, unsigned int seq)
{
	__u32 ci = crtc, zero = 0;
	struct crtc_frames *cf = bpf_map_lookup_elem(&crtcs, &ci);
	struct shown_batch *b = bpf_map_lookup_elem(&shown_batch, &zero);
	__u64 now = bpf_ktime_get_ns();

	if (!cf || !b)
		return 0;
	for (int s = 0; s < CRTC_PLANES; s++) {
		__u64 id = cf->pending[s], prev;

		if (!id)
			continue;
		cf->pending[s] = 0;
		prev = show(cf, s, id, now, seq, ci);
		if (b->n < CRTC_PLANES) {
			__u32 i = b->n & (CRTC_PLANES - 1);

			b->s[i].id = id;
			b->s[i].prev = prev;
			b->s[i].crtc = ci;
			b->s[i].seq = seq;
			b->n = i + 1;
		} else {
			struct sits_frame *old = prev ? bpf_map_lookup_elem(&frames, &prev) : 0;

			if (old)
				maybe_done(prev, old);
		}
	}
	return 0;
}

/* drm_vblank_event(crtc, seq, time, high_prec): every vblank, after its
 * events; `time` is its CLOCK_MONOTONIC timestamp, as the events carry it */
SEC("raw_tp/drm_vblank_event")
int BPF_PROG(sits_journey_vblank, int crtc, unsigned int seq, __s64 time)
{
	__u32 ci = crtc, zero = 0;
	struct crtc_frames *cf = bpf_map_lookup_elem(&crtcs, &ci);
	struct shown_batch *b = bpf_map_lookup_elem(&shown_batch, &zero);

	if (cf) {
		if (cf->vblank_ns && seq == cf->vblank_seq + 1 && time > cf->vblank_ns)
			cf->period_ns = time - cf->vblank_ns;
		cf->vblank_ns = time;
		cf->vblank_seq = seq;
	}
	if (!b || !b->n)
		return 0;
	for (int i = 0; i < CRTC_PLANES; i++) {
		if (i >= b->n)
			break;
		struct shown *s = &b->s[i];
		struct sits_frame *f = bpf_map_lookup_elem(&frames, &s->id);
		struct sits_frame *old = s->prev ? bpf_map_lookup_elem(&frames, &s->prev) : 0;
		bool ours = s->crtc == ci && s->seq == seq;

		if (ours && f)
			f->scanout_ns = time;
		if (old) {
			if (ours)
				old->replaced_ns = time;
			maybe_done(s->prev, old);
		}
	}
	b->n = 0;
	return 0;
}

/* -- identity ---------------------------------------------------------------- */

static __always_inline void exported(void *vb, void *dmabuf)
{
	__u64 key = (__u64)dmabuf, v = (__u64)vb;

	bpf_map_update_elem(&vb_of_dmabuf, &key, &v, BPF_ANY);
}

/* vb2_core_expbuf(q, int *fd, type, struct vb2_buffer *vb, plane, flags)
 * exports plane 0 of `vb` as a new dma-buf and installs it at *fd (its
 * return 0). One fexit: the dma-buf is the file at that fd in the
 * caller's table (file->private_data, whose own ->file it is). */
SEC("fexit/vb2_core_expbuf")
int BPF_PROG(sits_journey_export, void *q, int *fdp, unsigned int type, void *vb, unsigned int plane,
	     unsigned int flags, int ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct file **table, *file = 0;
	struct fdtable *fdt;
	struct dma_buf *dbuf;
	int fd = -1;

	if (ret || plane || !wanted(bpf_get_current_pid_tgid()))
		return 0;
	bpf_probe_read_kernel(&fd, sizeof(fd), fdp);
	fdt = BPF_CORE_READ(task, files, fdt);
	if (fd < 0 || !fdt || (unsigned int)fd >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	table = BPF_CORE_READ(fdt, fd);
	bpf_probe_read_kernel(&file, sizeof(file), &table[fd]);
	if (!file)
		return 0;
	dbuf = BPF_CORE_READ(file, private_data);
	if (dbuf && BPF_CORE_READ(dbuf, file) == file)
		exported(vb, dbuf);
	return 0;
}

/* The kprobes' way: vb2_core_expbuf's entry notes `vb` for dma_buf_fd(),
 * which it calls with the new dma-buf; its return forgets it. */
SEC("kprobe/vb2_core_expbuf")
int BPF_KPROBE(sits_journey_expbuf_kp, void *q, void *fd, unsigned int type, void *vb, unsigned int plane)
{
	__u64 *exporting_vb;

	if (plane || !wanted(bpf_get_current_pid_tgid()))
		return 0;
	exporting_vb = bpf_task_storage_get(&exporting, bpf_get_current_task_btf(), 0,
					    BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (exporting_vb)
		*exporting_vb = (__u64)vb;
	return 0;
}

SEC("kretprobe/vb2_core_expbuf")
int BPF_KRETPROBE(sits_journey_expbuf_exit_kp)
{
	__u64 *exporting_vb = bpf_task_storage_get(&exporting, bpf_get_current_task_btf(), 0, 0);

	if (exporting_vb)
		*exporting_vb = 0;
	return 0;
}

SEC("kprobe/dma_buf_fd")
int BPF_KPROBE(sits_journey_dma_buf_fd_kp, void *dmabuf)
{
	__u64 *exporting_vb = bpf_task_storage_get(&exporting, bpf_get_current_task_btf(), 0, 0);

	if (!exporting_vb || !*exporting_vb)
		return 0;
	exported((void *)*exporting_vb, dmabuf);
	*exporting_vb = 0;
	return 0;
}

/* -- a queue's buffers freed ------------------------------------------------ */

struct forget_ctx {
	__u64 q;
	/* a buffer was forgotten: set, never counted up -- a value the
	 * callback changes on each call keeps the verifier from finding the
	 * state it has seen, and it walks every call until it gives up (E2BIG) */
	__u64 forgot;
};

static long forget_dmabuf(struct bpf_map *map, __u64 *dbuf, __u64 *vb, struct forget_ctx *ctx)
{
	__u64 *q = bpf_map_lookup_elem(&vb_queue, vb);

	if (q && *q == ctx->q)
		bpf_map_delete_elem(map, dbuf);
	return 0;
}

static long forget_vb(struct bpf_map *map, __u64 *vb, __u64 *q, struct forget_ctx *ctx)
{
	__u64 *id;

	if (*q != ctx->q)
		return 0;
	id = bpf_map_lookup_elem(&frame_of_vb, vb);
	if (id) {
		__u64 fid = *id;
		struct sits_frame *f = bpf_map_lookup_elem(&frames, &fid);

		/* ended by the next event that looks at it (its replacement on
		 * screen, its process's next dequeue) or the final flush: ending
		 * it here would put count_frame() in this callback, past what
		 * the verifier takes */
		if (f && !f->requeued_ns)
			f->flags |= SITS_FRAME_FREED;
		bpf_map_delete_elem(&frame_of_vb, vb);
	}
	bpf_map_delete_elem(&vb_owner, vb);
	bpf_map_delete_elem(map, vb);
	ctx->forgot = 1;
	return 0;
}

/* `q` frees its buffers: each one's frame is marked to end as if
 * requeued, and the buffer, its dma-buf and its owner are forgotten
 * (dma-bufs first: they are found through the buffers' queue). */
static __always_inline int forget_queue(void *q)
{
	struct forget_ctx ctx = { .q = (__u64)q };
	__u32 zero = 0;
	__u64 *n;

	bpf_for_each_map_elem(&vb_of_dmabuf, forget_dmabuf, &ctx, 0);
	bpf_for_each_map_elem(&vb_queue, forget_vb, &ctx, 0);
	n = bpf_map_lookup_elem(&queues_freed, &zero);
	if (ctx.forgot && n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

/* vb2_core_reqbufs frees a queue's buffers unless it is streaming (EBUSY) */
static __always_inline int reqbufs(struct vb2_queue___sits *q)
{
	if (BPF_CORE_READ_BITFIELD_PROBED(q, streaming))
		return 0;
	return forget_queue(q);
}

SEC("fentry/vb2_core_reqbufs")
int BPF_PROG(sits_journey_reqbufs, struct vb2_queue___sits *q)
{
	return reqbufs(q);
}

SEC("kprobe/vb2_core_reqbufs")
int BPF_KPROBE(sits_journey_reqbufs_kp, struct vb2_queue___sits *q)
{
	return reqbufs(q);
}

/* the queue's owner closed it: its buffers go */
SEC("fentry/vb2_core_queue_release")
int BPF_PROG(sits_journey_queue_release, void *q)
{
	return forget_queue(q);
}

SEC("kprobe/vb2_core_queue_release")
int BPF_KPROBE(sits_journey_queue_release_kp, void *q)
{
	return forget_queue(q);
}

char LICENSE[] SEC("license") = "GPL";
