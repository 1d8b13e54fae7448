/* The steady state of capture -> KMS in C: DQBUF -> atomic flip -> flip
 * event -> out-fence check -> QBUF, on the pipeline's own epoll fd.
 *
 * Why C: under the test VM's emulated CPU the Python loop spent about 70% of
 * its CPU per frame in the interpreter (perf), around kernel work of about a
 * millisecond. This is the same loop as sits/pipeline/capture_to_kms.py, for
 * the frames nothing but the display holds; everything else (writeback,
 * conversion, hotplug, signals, errors, freeze frames) returns to Python with
 * the state in struct sits_flip_loop, which Python turns back into its Frame,
 * lease and fence objects (sits/pipeline/fast_path.py). One owner at a time:
 * while C runs, the buffers and fences named in the struct are C's.
 *
 * One wake-up a frame: the DRM fd leaves the epoll set while C runs and the
 * flip event is read when the next frame is dequeued (a flip takes at most
 * a refresh; frames come slower than that or are dropped anyway). The DRM fd
 * is watched again only while a frame waits for the flip, or while too few
 * buffers are left with the driver to wait for the next frame. Under the
 * test VM's emulated CPU a wake-up (two context switches) costs about a
 * third of the loop's CPU per frame.
 */
#ifndef SITS_FLIP_LOOP_H
#define SITS_FLIP_LOOP_H

#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>

#define SITS_LOOP_MAX_BUFS 32
#define SITS_LOOP_NONE (-1)     /* no frame in this slot */
#define SITS_LOOP_OWN (-2)      /* a commit of a buffer of Python's (freeze frame) */

enum {
	SITS_LOOP_TIMEOUT = 0,      /* timeout_ms passed */
	SITS_LOOP_WAKE = 1,         /* an fd that is not ours is ready (signal, uevent, fence), or EINTR */
	SITS_LOOP_FRAMES = 2,       /* frames_limit frames captured */
	SITS_LOOP_HAND_BACK = 3,    /* the next commit is Python's (it carries a writeback) */
	SITS_LOOP_RETIRE_WAIT = 4,  /* a flip completed before its out-fence said signalled */
	SITS_LOOP_FULL = 5,         /* the sample arrays are full */
	SITS_LOOP_ERROR = 6,        /* err_op failed with err (on buffer err_index) */
};
enum { SITS_OP_DQBUF = 1, SITS_OP_QBUF, SITS_OP_ATOMIC, SITS_OP_READ, SITS_OP_EPOLL };

struct sits_loop_frame {
	int32_t index;              /* capture buffer, SITS_LOOP_NONE or SITS_LOOP_OWN */
	uint32_t sequence, bytesused, tag;
	int32_t fence;              /* the commit's out-fence, -1 when none or closed */
	int64_t timestamp_ns;       /* the V4L2 buffer timestamp */
	int64_t dequeued_ns;
	int64_t shown_from_ns;      /* the time latency counts from (timestamp, or dequeue when not believable) */
};

struct sits_flip_loop {
	/* set once by Python */
	int32_t epfd, vfd, dfd;
	uint32_t memory, nbufs;
	int32_t dmabuf_fd[SITS_LOOP_MAX_BUFS];
	uint32_t length[SITS_LOOP_MAX_BUFS];
	uint32_t fb_id[SITS_LOOP_MAX_BUFS];
	uint32_t plane_id, fb_prop, crtc_id, out_fence_prop;
	/* limits, set before each call */
	int64_t frames_limit;           /* stop at this many frames captured (0: none) */
	int64_t hand_back_displayed;    /* the commit made when displayed == this is Python's (-1: none) */
	int64_t hand_back_captured;     /* ... and any commit once captured >= this (0: none) */
	/* state: C's while it runs, Python's between calls */
	struct sits_loop_frame next, pending, on_screen, retire;
	uint32_t tag;
	int64_t captured, displayed, dropped, anomalies, last_frame_ns;
	int64_t dequeued, buffer_errors;    /* for CaptureStats; Python drains them */
	float *latency_ms, *submit_ms;      /* Python's arrays, drained after each call */
	int32_t samples_cap, latency_n, submit_n;
	int32_t err, err_op, err_index;
	int32_t dfd_watched;        /* the DRM fd is in the epoll set (Python: 0 on entry) */
};

static int64_t sits_loop_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int sits_loop_fail(struct sits_flip_loop *L, int op, int index)
{
	L->err = errno;
	L->err_op = op;
	L->err_index = index;
	return SITS_LOOP_ERROR;
}

static int sits_loop_qbuf(struct sits_flip_loop *L, int index)
{
	struct v4l2_buffer b;
	memset(&b, 0, sizeof b);
	b.index = index;
	b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
	b.memory = L->memory;
	if (L->memory == V4L2_MEMORY_DMABUF) {
		b.m.fd = L->dmabuf_fd[index];
		b.length = L->length[index];
	}
	if (ioctl(L->vfd, VIDIOC_QBUF, &b) < 0)
		return sits_loop_fail(L, SITS_OP_QBUF, index);  /* the buffer is idle: Python retries it */
	return 0;
}

/* Show L->next: FB_ID on the plane and an out-fence on the CRTC; the mode,
 * geometry and connector routing were set by Python's first commit and
 * persist in the atomic state. */
static int sits_loop_commit(struct sits_flip_loop *L)
{
	struct sits_loop_frame f = L->next;
	int32_t fence = -1;
	uint32_t objs[2] = {L->plane_id, L->crtc_id};
	uint32_t counts[2] = {1, 1};
	uint32_t props[2] = {L->fb_prop, L->out_fence_prop};
	uint64_t values[2] = {L->fb_id[f.index], (uint64_t)(uintptr_t)&fence};
	struct drm_mode_atomic a;
	memset(&a, 0, sizeof a);
	a.flags = DRM_MODE_ATOMIC_NONBLOCK | DRM_MODE_PAGE_FLIP_EVENT;
	a.count_objs = 2;
	a.objs_ptr = (uint64_t)(uintptr_t)objs;
	a.count_props_ptr = (uint64_t)(uintptr_t)counts;
	a.props_ptr = (uint64_t)(uintptr_t)props;
	a.prop_values_ptr = (uint64_t)(uintptr_t)values;
	a.user_data = L->tag + 1;
	int64_t now = sits_loop_now();
	if (drmIoctl(L->dfd, DRM_IOCTL_MODE_ATOMIC, &a) < 0)
		return sits_loop_fail(L, SITS_OP_ATOMIC, f.index);  /* the frame stays next */
	L->tag++;
	L->submit_ms[L->submit_n++] = (float)((now - f.dequeued_ns) / 1e6);
	/* a driver timestamp after our dequeue cannot be believed (vivid's
	 * schedule-based clock in a slow VM): count it, use the dequeue time */
	if (f.timestamp_ns <= 0 || f.timestamp_ns > f.dequeued_ns) {
		L->anomalies++;
		f.shown_from_ns = f.dequeued_ns;
	} else {
		f.shown_from_ns = f.timestamp_ns;
	}
	f.fence = fence;
	f.tag = L->tag;
	L->pending = f;
	L->next.index = SITS_LOOP_NONE;
	return 0;
}

/* Watch the DRM fd while a flip event is worth a wake-up of its own. */
static int sits_loop_sync_watch(struct sits_flip_loop *L)
{
	int held = (L->next.index >= 0) + (L->pending.index >= 0) + (L->on_screen.index >= 0);
	int want = L->pending.index != SITS_LOOP_NONE
		   && (L->next.index >= 0 || (int)L->nbufs - held < 2);
	if (want == L->dfd_watched)
		return 0;
	struct epoll_event ev;
	memset(&ev, 0, sizeof ev);
	ev.events = EPOLLIN;
	ev.data.fd = L->dfd;
	if (epoll_ctl(L->epfd, want ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, L->dfd, &ev) < 0)
		return sits_loop_fail(L, SITS_OP_EPOLL, -1);
	L->dfd_watched = want;
	return 0;
}

static int sits_loop_flip_events(struct sits_flip_loop *L);

static int sits_loop_try_commit(struct sits_flip_loop *L)
{
	if (L->pending.index != SITS_LOOP_NONE || L->next.index < 0)
		return 0;
	if (L->displayed == L->hand_back_displayed
	    || (L->hand_back_captured && L->captured >= L->hand_back_captured))
		return SITS_LOOP_HAND_BACK;
	return sits_loop_commit(L);
}

/* One DQBUF per wake-up; errored buffers are counted and requeued. */
static int sits_loop_capture(struct sits_flip_loop *L)
{
	struct v4l2_buffer b;
	for (;;) {
		memset(&b, 0, sizeof b);
		b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
		b.memory = L->memory;
		if (ioctl(L->vfd, VIDIOC_DQBUF, &b) < 0) {
			if (errno == EAGAIN)
				return 0;
			return sits_loop_fail(L, SITS_OP_DQBUF, -1);
		}
		L->dequeued++;
		if (!(b.flags & V4L2_BUF_FLAG_ERROR))
			break;
		L->buffer_errors++;
		if (sits_loop_qbuf(L, b.index))
			return SITS_LOOP_ERROR;
	}
	struct sits_loop_frame f;
	memset(&f, 0, sizeof f);
	f.index = b.index;
	f.sequence = b.sequence;
	f.bytesused = b.bytesused;
	f.fence = -1;
	f.timestamp_ns = (int64_t)b.timestamp.tv_sec * 1000000000 + (int64_t)b.timestamp.tv_usec * 1000;
	f.dequeued_ns = L->last_frame_ns = sits_loop_now();
	L->captured++;
	int dropped = L->next.index;
	L->next = f;
	if (dropped >= 0) {         /* a newer frame came first */
		L->dropped++;
		if (sits_loop_qbuf(L, dropped))
			return SITS_LOOP_ERROR;
	}
	if (L->pending.index != SITS_LOOP_NONE && !L->dfd_watched)
		return sits_loop_flip_events(L);    /* the last flip's event, read now; it commits */
	return sits_loop_try_commit(L);
}

/* The commit now on screen carries an out-fence; the frame it replaced
 * goes back to V4L2 once that fence has signalled. The kernel signals it
 * before it sends the flip event, so one SYNC_IOC_FILE_INFO settles it. */
static int sits_loop_retire(struct sits_flip_loop *L, struct sits_loop_frame previous)
{
	int32_t fence = L->on_screen.fence;
	if (fence >= 0) {
		struct sync_file_info info;
		memset(&info, 0, sizeof info);
		if (ioctl(fence, SYNC_IOC_FILE_INFO, &info) < 0 || info.status != 1) {
			L->retire = previous;   /* Python polls the fence */
			return SITS_LOOP_RETIRE_WAIT;
		}
		close(fence);
		L->on_screen.fence = -1;
	}
	if (previous.index >= 0)
		return sits_loop_qbuf(L, previous.index);
	return 0;
}

static int sits_loop_flip_events(struct sits_flip_loop *L)
{
	char buf[1024];
	ssize_t n = read(L->dfd, buf, sizeof buf);
	if (n < 0)
		return errno == EAGAIN ? 0 : sits_loop_fail(L, SITS_OP_READ, -1);
	for (ssize_t pos = 0; pos + (ssize_t)sizeof(struct drm_event) <= n;) {
		struct drm_event *e = (struct drm_event *)(buf + pos);
		pos += e->length > sizeof *e ? e->length : sizeof *e;
		if (e->type != DRM_EVENT_FLIP_COMPLETE && e->type != DRM_EVENT_VBLANK)
			continue;
		struct drm_event_vblank *v = (struct drm_event_vblank *)e;
		if (L->pending.index == SITS_LOOP_NONE || v->user_data != L->pending.tag)
			continue;   /* not ours: a commit of Python's before a mode change, say */
		if (L->pending.index >= 0) {
			L->displayed++;
			int64_t flip_ns = (int64_t)v->tv_sec * 1000000000 + (int64_t)v->tv_usec * 1000;
			if (flip_ns < L->pending.shown_from_ns) {
				/* a vblank clock behind the capture clock (vkms's
				 * overrun hrtimer in a slow VM): use arrival time */
				L->anomalies++;
				flip_ns = sits_loop_now();
			}
			L->latency_ms[L->latency_n++] = (float)((flip_ns - L->pending.shown_from_ns) / 1e6);
		}
		struct sits_loop_frame previous = L->on_screen;
		L->on_screen = L->pending;
		L->pending.index = SITS_LOOP_NONE;
		L->pending.fence = -1;
		int r = sits_loop_retire(L, previous);
		if (r)
			return r;
	}
	return sits_loop_try_commit(L);
}

/* After each event: the DRM fd watched or not, as sits_loop_sync_watch says. */
static int sits_loop_settle(struct sits_flip_loop *L, int r)
{
	if (r)
		return r;
	return sits_loop_sync_watch(L);
}

static int sits_flip_loop_run(struct sits_flip_loop *L, int timeout_ms)
{
	int64_t end = sits_loop_now() + (int64_t)timeout_ms * 1000000;
	struct epoll_event ev[8];
	int r0 = sits_loop_sync_watch(L);
	if (r0)
		return r0;
	for (;;) {
		if (L->frames_limit && L->captured >= L->frames_limit)
			return SITS_LOOP_FRAMES;
		/* each pass adds at most one sample of each kind */
		if (L->latency_n >= L->samples_cap - 2 || L->submit_n >= L->samples_cap - 2)
			return SITS_LOOP_FULL;
		int64_t left = end - sits_loop_now();
		if (left <= 0)
			return SITS_LOOP_TIMEOUT;
		int n = epoll_wait(L->epfd, ev, 8, (int)((left + 999999) / 1000000));
		if (n < 0)
			return errno == EINTR ? SITS_LOOP_WAKE : sits_loop_fail(L, SITS_OP_EPOLL, -1);
		int wake = 0;
		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd, r = 0;
			if (fd == L->vfd && (ev[i].events & EPOLLIN))
				r = sits_loop_settle(L, sits_loop_capture(L));
			else if (fd == L->dfd)
				r = sits_loop_settle(L, sits_loop_flip_events(L));
			else
				wake = 1;   /* level-triggered: Python's poll sees it again */
			if (r)
				return r;
		}
		if (wake)
			return SITS_LOOP_WAKE;
	}
}

#endif
