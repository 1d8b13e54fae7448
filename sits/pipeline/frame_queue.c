/* The frame queue (frame_queue.h): one buffer's way from DQBUF back to QBUF.
 *
 * A buffer goes back to the driver only when nothing holds it any more: not
 * the display (it is next, committed, on screen or leaving the screen) and
 * not Python's consumers (py_hold, dropped when the last lease of its Frame
 * goes). That is give_back(), the one place that queues a buffer.
 *
 * Why C: under the test VM's emulated CPU the Python loop spent about 70% of
 * its CPU per frame in the interpreter, around kernel work of about a
 * millisecond. sits_queue_run() keeps the steady state here.
 *
 * One wake-up a frame: in run() the DRM fd leaves the epoll set and the last
 * flip's event is read when the next frame is dequeued (a flip takes at most
 * a refresh; frames come slower than that or are dropped anyway). The DRM fd
 * is watched again only while a frame waits for the flip, or while too few
 * buffers are left with the driver to wait for the next frame.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <poll.h>
#include <sys/epoll.h>

#include "sits_kernel.h"
#include "sits_hist.h"

static int64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void sits_q_hist_add(struct sits_q_hist *h, int64_t ns)
{
	uint64_t v = ns > 0 ? (uint64_t)ns : 0;
	h->count++;
	h->sum_ns += (int64_t)v;
	if ((int64_t)v > h->max_ns)
		h->max_ns = (int64_t)v;
	h->slots[sits_hist_slot(v)]++;
}

/* --timeline: a frame's record is open from its dequeue while its buffer
 * is out (until QBUF) and while it is committed or on screen (until the
 * flip that replaces it); then it moves to Python's array. */
enum { HOLD_BUFFER = 1, HOLD_SCREEN = 2 };

static void timeline_open(struct sits_queue *L, struct sits_q_frame *f)
{
	int64_t skipped = L->sequence_gaps - L->gaps_recorded;     /* count_sequence's, since the last */
	L->gaps_recorded = L->sequence_gaps;
	for (uint32_t i = 0; i < SITS_Q_OPEN_RECORDS; i++) {
		struct sits_q_record *r = &L->open_records[i];
		if (r->holds)
			continue;
		memset(r, 0, sizeof *r);
		r->frame = L->captured - 1;
		r->buffer = f->index;
		r->sequence = f->sequence;
		r->skipped_before = (uint32_t)skipped;
		r->captured_ns = f->timestamp_ns;
		r->dequeued_ns = f->dequeued_ns;
		r->holds = HOLD_BUFFER;
		L->buffer_record[f->index] = (uint8_t)(i + 1);
		f->record = i + 1;
		return;
	}
	L->records_lost++;      /* cannot happen: each open record holds a buffer or a screen slot */
}

static void timeline_let_go(struct sits_queue *L, uint32_t record, uint32_t hold)
{
	struct sits_q_record *r = &L->open_records[record - 1];
	r->holds &= ~hold;
	if (r->holds)
		return;
	if (L->records_n < L->records_cap)
		L->records[L->records_n++] = *r;
	else
		L->records_lost++;
}

static void timeline_requeued(struct sits_queue *L, int32_t index)
{
	uint32_t record = L->buffer_record[index];
	if (!record)
		return;
	L->buffer_record[index] = 0;
	L->open_records[record - 1].requeued_ns = now_ns();
	timeline_let_go(L, record, HOLD_BUFFER);
}

/* The last vblank at or before `ns`. Flip events tell of the vblanks that
 * completed a commit only; the others are on the same grid, a mode's frame
 * time apart (what the kernel's journey sees as every vblank's event). */
static int64_t vblank_before(const struct sits_queue *L, int64_t ns)
{
	int64_t v = L->last_vblank_ns, p = L->vblank_period_ns;
	if (!v || p <= 0)
		return v;
	return ns >= v ? v + (ns - v) / p * p : v - (v - ns + p - 1) / p * p;
}

static void timeline_committed(struct sits_queue *L, uint32_t record, int64_t started_ns, int copied)
{
	struct sits_q_record *r = &L->open_records[record - 1];
	r->committed_ns = started_ns;
	r->copied = copied;
	/* late: a vblank came between its dequeue and this commit's start (the
	 * rule journey.bpf.c's set_fb() has) */
	int64_t vblank = vblank_before(L, started_ns);
	if (vblank > r->dequeued_ns && vblank < started_ns)
		r->late_ns = started_ns - vblank;
	r->holds |= HOLD_SCREEN;
}

/* A flip event: `shown` went on screen at vblank `ns` (counter `seq`),
 * `replaced` left it. */
static void timeline_flip(struct sits_queue *L, uint32_t shown, uint32_t replaced,
			  int64_t ns, uint32_t seq)
{
	if (shown) {
		L->open_records[shown - 1].scanout_ns = ns;
		L->open_records[shown - 1].scanout_vblank = seq;
	}
	if (replaced) {
		L->open_records[replaced - 1].replaced_ns = ns;
		L->open_records[replaced - 1].replaced_vblank = seq;
		timeline_let_go(L, replaced, HOLD_SCREEN);
	}
}

void sits_queue_timeline_cuda(struct sits_queue *L, int32_t index, int32_t done, int64_t ns)
{
	uint32_t record = index >= 0 && index < SITS_Q_MAX_BUFS ? L->buffer_record[index] : 0;
	if (!record)
		return;
	struct sits_q_record *r = &L->open_records[record - 1];
	*(done ? &r->cuda_done_ns : &r->cuda_submitted_ns) = ns ? ns : now_ns();
}

/* The camera went: its buffers are never queued again, so each open
 * record lets go of its buffer with no requeue (a new device's buffer of
 * the same index is another buffer); one on screen stays open until the
 * flip that replaces it. */
void sits_queue_timeline_device_gone(struct sits_queue *L)
{
	for (uint32_t i = 0; i < SITS_Q_MAX_BUFS; i++) {
		uint32_t record = L->buffer_record[i];
		if (record) {
			L->buffer_record[i] = 0;
			timeline_let_go(L, record, HOLD_BUFFER);
		}
	}
}

/* The run ended: every open record goes to Python as it is. */
void sits_queue_timeline_end(struct sits_queue *L)
{
	for (uint32_t i = 0; i < SITS_Q_OPEN_RECORDS; i++)
		if (L->open_records[i].holds)
			timeline_let_go(L, i + 1, L->open_records[i].holds);
	memset(L->buffer_record, 0, sizeof L->buffer_record);
	L->next.record = L->pending.record = L->on_screen.record = L->retire.record = L->delivered.record = 0;
	L->timeline = 0;
}

static int fail(struct sits_queue *L, int op, int index)
{
	L->err = errno;
	L->err_op = op;
	L->err_index = index;
	return SITS_Q_ERROR;
}

int sits_queue_held(struct sits_queue *L, int32_t index)
{
	return L->next.index == index || L->pending.index == index || L->on_screen.index == index
	       || L->retire.index == index || L->py_hold[index] || L->cuda_hold[index];
}

/* Queue `index` again if nothing holds it. A refused QBUF (vivid injects
 * them) must not lose the buffer: counted, retried before the next DQBUF;
 * a vanished device is Python's to handle. */
static int give_back(struct sits_queue *L, int32_t index)
{
	if (index < 0 || L->queued[index] || sits_queue_held(L, index) || L->vfd < 0)
		return 0;
	if (L->timer) {             /* the timer source's "driver" may fill it again */
		L->queued[index] = 1;
		L->queued_order[index] = ++L->queue_clock;
		timeline_requeued(L, index);
		return 0;
	}
	struct v4l2_buffer b;
	memset(&b, 0, sizeof b);
	b.index = index;
	b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
	b.memory = L->memory;
	if (L->memory == V4L2_MEMORY_DMABUF) {
		b.m.fd = L->dmabuf_fd[index];
		b.length = L->length[index];
	}
	if (ioctl(L->vfd, VIDIOC_QBUF, &b) < 0) {
		if (errno == ENODEV || errno == ENXIO)
			return fail(L, SITS_OP_QBUF, index);
		L->requeue_errors++;
		L->unqueued[index] = 1;
		return 0;
	}
	L->queued[index] = 1;
	timeline_requeued(L, index);
	return 0;
}

int sits_queue_release(struct sits_queue *L, int32_t index)
{
	L->py_hold[index] = 0;
	return give_back(L, index);
}

int sits_queue_requeue_idle(struct sits_queue *L)
{
	for (uint32_t i = 0; i < L->nbufs; i++) {
		L->unqueued[i] = 0;
		int r = give_back(L, i);
		if (r)
			return r;
	}
	return 0;
}

int sits_queue_drop_next(struct sits_queue *L)
{
	int32_t index = L->next.index;
	if (index == SITS_Q_NONE)
		return 0;
	L->next.index = SITS_Q_NONE;
	L->dropped++;
	return give_back(L, index);
}

/* A commit of `f` was made (by C or by Python) with user_data tag + 1. */
static void shown(struct sits_queue *L, struct sits_q_frame f, int32_t fence, int64_t started_ns)
{
	L->tag++;
	if (f.index != SITS_Q_OWN) {
		sits_q_hist_add(&L->submit, started_ns - f.dequeued_ns);
		/* a driver timestamp after our dequeue cannot be believed (vivid's
		 * schedule-based clock in a slow VM): count it, use the dequeue time */
		if (f.timestamp_ns <= 0 || f.timestamp_ns > f.dequeued_ns) {
			L->anomalies++;
			f.shown_from_ns = f.dequeued_ns;
		} else {
			f.shown_from_ns = f.timestamp_ns;
		}
		if (f.record)
			timeline_committed(L, f.record, started_ns, f.index == SITS_Q_COPY);
	}
	f.fence = fence;
	f.tag = L->tag;
	L->pending = f;
}

void sits_queue_committed(struct sits_queue *L, int32_t kind, int32_t fence, int64_t started_ns)
{
	struct sits_q_frame f = L->next;
	if (kind == SITS_Q_OWN) {
		memset(&f, 0, sizeof f);
		f.index = SITS_Q_OWN;
		shown(L, f, fence, started_ns);
		return;
	}
	L->next.index = SITS_Q_NONE;
	if (kind == SITS_Q_COPY) {
		int32_t index = f.index;
		f.index = SITS_Q_COPY;
		shown(L, f, fence, started_ns);
		give_back(L, index);    /* the CPU copy is done with it; a failure is retried */
		return;
	}
	shown(L, f, fence, started_ns);
}

/* Show L->next: FB_ID on the plane; the mode, geometry and connector
 * routing were set by Python's first commit and persist in the atomic
 * state. No out-fence: the kernel signals a commit's out-fence and queues
 * its flip event in one step (drm_send_event_helper), so the event already
 * says what the fence would, and the fence would cost a sync_file, an fd, a
 * poll() and a close() a frame. */
static int commit(struct sits_queue *L)
{
	uint32_t objs[1] = {L->plane_id};
	uint32_t counts[1] = {1};
	uint32_t props[1] = {L->fb_prop};
	uint64_t values[1] = {L->fb_id[L->next.index]};
	struct drm_mode_atomic a;
	memset(&a, 0, sizeof a);
	a.flags = DRM_MODE_ATOMIC_NONBLOCK | DRM_MODE_PAGE_FLIP_EVENT;
	a.count_objs = 1;
	a.objs_ptr = (uint64_t)(uintptr_t)objs;
	a.count_props_ptr = (uint64_t)(uintptr_t)counts;
	a.props_ptr = (uint64_t)(uintptr_t)props;
	a.prop_values_ptr = (uint64_t)(uintptr_t)values;
	a.user_data = L->tag + 1;
	int64_t started = now_ns();
	if (drmIoctl(L->dfd, DRM_IOCTL_MODE_ATOMIC, &a) < 0)
		return fail(L, SITS_OP_ATOMIC, L->next.index);  /* the frame stays next */
	struct sits_q_frame f = L->next;
	L->next.index = SITS_Q_NONE;
	shown(L, f, -1, started);
	return 0;
}

int sits_queue_try_commit(struct sits_queue *L)
{
	if (!L->display || L->pending.index != SITS_Q_NONE || L->retire.index != SITS_Q_NONE
	    || L->next.index == SITS_Q_NONE)
		return 0;
	if (L->paused)
		return sits_queue_drop_next(L);     /* no display: the frame is dropped */
	if (L->hold_commits)
		return 0;
	if (L->python_commits || L->displayed == L->hand_back_displayed
	    || (L->hand_back_captured && L->captured >= L->hand_back_captured))
		return SITS_Q_HAND_BACK;
	return commit(L);
}

/* Sequence numbers the source skipped between two frames (no buffer was
 * queued when it had one to fill): V4L2's rule, for both kinds of source. */
static void count_sequence(struct sits_queue *L, uint32_t sequence)
{
	if (L->sequence_seen && sequence > L->last_sequence + 1)
		L->sequence_gaps += sequence - L->last_sequence - 1;
	L->last_sequence = sequence;
	L->sequence_seen = 1;
}

/* A tick of the timer source: the buffer queued longest ago is filled. */
static int timer_tick(struct sits_queue *L, struct sits_q_frame *f)
{
	uint64_t ticks = 0;
	if (read(L->vfd, &ticks, sizeof ticks) != sizeof ticks)
		return errno == EAGAIN ? 0 : fail(L, SITS_OP_DQBUF, -1);
	int32_t index = -1;
	for (uint32_t i = 0; i < L->nbufs; i++)
		if (L->queued[i] && (index < 0 || L->queued_order[i] < L->queued_order[index]))
			index = i;
	int64_t last = L->timer_ticks + (int64_t)ticks - 1;    /* the newest tick's sequence */
	L->timer_ticks += ticks;
	if (index < 0)
		return 0;       /* lost: the next frame's sequence number shows the gap */
	count_sequence(L, (uint32_t)last);
	L->queued[index] = 0;
	L->dequeued++;
	memset(f, 0, sizeof *f);
	f->index = index;
	f->sequence = (uint32_t)last;
	f->timestamp_ns = L->timer_first_ns + last * L->timer_period_ns;
	return 1;
}

typedef int (*cu_graph_launch_fn)(uint64_t exec, uint64_t stream);
typedef int (*cu_stream_query_fn)(uint64_t stream);

/* How far the GPU's clock may run ahead of CLOCK_MONOTONIC, in parts per
 * million. */
#define CU_DRIFT_PPM 100
/* A launch older than this without its end stamp: the stream is asked why
 * (an error stops the work before the stamp; a frame's work is far less). */
#define CU_STAMP_LATE_NS 200000000

static int cuda_fail(struct sits_queue *L, int rc, int index)
{
	errno = rc;     /* a CUresult, not an errno: Python names it */
	return fail(L, SITS_OP_CUDA, index);
}

static uint64_t *stamp_of(struct sits_queue *L, int index)
{
	return L->cu_stamps + (size_t)index * SITS_CU_STAMP_WORDS;
}

/* The frame's conversion: its buffer's graph, the clock read just before. */
static int cuda_submit(struct sits_queue *L, struct sits_q_frame *f)
{
	sits_queue_timeline_cuda(L, f->index, 0, 0);
	int slot = (int)(L->cu_launched % SITS_Q_CU_SLOTS);
	/* zeroed before the launch that writes it: a non-zero end is this one's */
	__atomic_store_n(&stamp_of(L, f->index)[1], 0, __ATOMIC_RELEASE);
	int64_t launch_ns = now_ns();
	int rc = ((cu_graph_launch_fn)(uintptr_t)L->cu_graph_launch)(L->cu_graph[f->index], L->cu_stream);
	if (rc != 0)
		return cuda_fail(L, rc, f->index);
	L->cu_slot_index[slot] = f->index;
	L->cu_slot_launch_ns[slot] = launch_ns;
	L->cu_slot_from_ns[slot] = f->timestamp_ns > 0 && f->timestamp_ns <= f->dequeued_ns
				   ? f->timestamp_ns : f->dequeued_ns;
	L->cu_launched++;
	L->cuda_hold[f->index] = 1;
	return 0;
}

/* When a completed launch's work was done, on CLOCK_MONOTONIC. The GPU's
 * clock says how long after the graph's begin stamp its end stamp was
 * written. When the begin stamp ran is bounded from below twice: by the
 * launch's clock (read before the launch), and by the bound of the launch
 * before it plus the GPU time between the two begin stamps (a launch that
 * waited behind earlier work began late, and this carries it); the larger
 * is kept, less CU_DRIFT_PPM of the gap. So each done time is a lower
 * bound, short by at most the smallest delay seen between a launch's clock
 * and its first node on the GPU (an idle stream's submission: microseconds). */
static int64_t cuda_done_ns(struct sits_queue *L, int slot, uint64_t begin, uint64_t end)
{
	int64_t start = L->cu_slot_launch_ns[slot];
	if (L->cu_completed > 0 && begin > L->cu_last_begin) {  /* the launch before is this attachment's */
		int64_t gap = (int64_t)(begin - L->cu_last_begin);
		int64_t chained = L->cu_start_bound_ns + gap - gap / 1000000 * CU_DRIFT_PPM;
		if (chained > start)
			start = chained;
	}
	L->cu_start_bound_ns = start;
	L->cu_last_begin = begin;
	return start + (end > begin ? (int64_t)(end - begin) : 0);
}

/* A launch whose end stamp has not come: the stream says whether an error
 * stopped it (the CUresult), or that it is idle with no stamp written. */
static int cuda_stamp_late(struct sits_queue *L, int index)
{
	int rc = ((cu_stream_query_fn)(uintptr_t)L->cu_stream_query)(L->cu_stream);
	if (rc == SITS_CU_NOT_READY)
		return 0;
	if (rc == 0 && __atomic_load_n(&stamp_of(L, index)[1], __ATOMIC_ACQUIRE))
		return 0;   /* written meanwhile */
	return cuda_fail(L, rc ? rc : SITS_CU_STAMP_MISSING, index);
}

/* Launches whose end stamp is written, oldest first (one stream: they
 * complete in order): each releases its buffer. */
int sits_queue_cuda_done(struct sits_queue *L)
{
	int64_t seen_ns = 0;
	while (L->cu_completed < L->cu_launched) {
		int slot = (int)(L->cu_completed % SITS_Q_CU_SLOTS);
		int32_t index = L->cu_slot_index[slot];
		uint64_t *stamp = stamp_of(L, index);
		uint64_t end = __atomic_load_n(&stamp[1], __ATOMIC_ACQUIRE);
		if (!end) {
			if (now_ns() - L->cu_slot_launch_ns[slot] > CU_STAMP_LATE_NS)
				return cuda_stamp_late(L, index);
			return 0;
		}
		int64_t done_ns = cuda_done_ns(L, slot, __atomic_load_n(&stamp[0], __ATOMIC_RELAXED), end);
		L->cu_completed++;
		sits_queue_timeline_cuda(L, index, 1, done_ns);
		L->cuda_hold[index] = 0;
		L->cuda_frames++;
		if (!seen_ns)
			seen_ns = now_ns();
		if (L->cuda_latency_n < L->samples_cap) {
			L->cuda_latency_ms[L->cuda_latency_n] = (float)((done_ns - L->cu_slot_from_ns[slot]) / 1e6);
			L->cuda_release_ms[L->cuda_latency_n++] = (float)((seen_ns - done_ns) / 1e6);
		}
		int r = give_back(L, index);
		if (r)
			return r;
	}
	return 0;
}

/* One DQBUF; buffers the driver marks with V4L2_BUF_FLAG_ERROR are counted
 * and queued again, never shown or delivered. */
int sits_queue_capture(struct sits_queue *L)
{
	struct v4l2_buffer b;
	struct sits_q_frame f;
	if (L->cuda) {  /* conversions done since the last frame give their buffers back first */
		int r = sits_queue_cuda_done(L);
		if (r)
			return r;
	}
	if (L->timer) {
		int got = timer_tick(L, &f);
		if (got <= 0)
			return got < 0 ? SITS_Q_ERROR : 0;
		goto frame;
	}
	for (uint32_t i = 0; i < L->nbufs; i++) {
		if (L->unqueued[i]) {
			L->unqueued[i] = 0;
			int r = give_back(L, i);
			if (r)
				return r;
		}
	}
	for (;;) {
		memset(&b, 0, sizeof b);
		b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
		b.memory = L->memory;
		if (ioctl(L->vfd, VIDIOC_DQBUF, &b) < 0) {
			if (errno == EAGAIN)
				return 0;
			return fail(L, SITS_OP_DQBUF, -1);
		}
		L->dequeued++;
		L->queued[b.index] = 0;
		count_sequence(L, b.sequence);
		if (!(b.flags & V4L2_BUF_FLAG_ERROR))
			break;
		L->buffer_errors++;
		int r = give_back(L, b.index);
		if (r)
			return r;
	}
	memset(&f, 0, sizeof f);
	f.index = b.index;
	f.sequence = b.sequence;
	f.bytesused = b.bytesused;
	f.timestamp_ns = (int64_t)b.timestamp.tv_sec * 1000000000 + (int64_t)b.timestamp.tv_usec * 1000;
frame:
	f.fence = -1;
	f.dequeued_ns = L->last_frame_ns = now_ns();
	L->captured++;
	if (L->timeline)
		timeline_open(L, &f);
	if (L->cuda) {
		int r = cuda_submit(L, &f);
		if (r)
			return r;
	}
	if (L->deliver) {
		L->py_hold[f.index] = 1;
		L->delivered = f;
	}
	if (!L->display)
		return give_back(L, f.index);   /* unless a consumer holds it, queued again */
	int32_t dropped = L->next.index;
	L->next = f;
	if (dropped != SITS_Q_NONE) {       /* a newer frame came first */
		L->dropped++;
		int r = give_back(L, dropped);
		if (r)
			return r;
	}
	if (L->pending.index != SITS_Q_NONE && !L->dfd_watched)
		return sits_queue_flip_events(L);   /* the last flip's event, read now; it commits */
	return sits_queue_try_commit(L);
}

/* The frame the flip replaced goes back. A commit of Python's carries an
 * out-fence: the frame goes once that fence has signalled. The kernel
 * signals it before it sends the flip event, so one poll() that does not
 * wait settles it (a sync_file is readable once its fence has signalled). */
static int retire(struct sits_queue *L, struct sits_q_frame previous)
{
	int32_t fence = L->on_screen.fence;
	if (fence >= 0) {
		struct pollfd p = {.fd = fence, .events = POLLIN};
		if (poll(&p, 1, 0) != 1 || !(p.revents & POLLIN)) {
			L->retire = previous;   /* Python polls the fence, then calls retired() */
			return previous.index == SITS_Q_NONE ? 0 : SITS_Q_RETIRE_WAIT;
		}
		close(fence);
		L->on_screen.fence = -1;
	}
	return give_back(L, previous.index);
}

int sits_queue_retired(struct sits_queue *L)
{
	if (L->on_screen.fence >= 0) {
		close(L->on_screen.fence);
		L->on_screen.fence = -1;
	}
	int32_t index = L->retire.index;
	L->retire.index = SITS_Q_NONE;
	return give_back(L, index);
}

int sits_queue_flip_events(struct sits_queue *L)
{
	char buf[1024];
	ssize_t n = read(L->dfd, buf, sizeof buf);
	if (n < 0)
		return errno == EAGAIN ? 0 : fail(L, SITS_OP_READ, -1);
	for (ssize_t pos = 0; pos + (ssize_t)sizeof(struct drm_event) <= n;) {
		struct drm_event *e = (struct drm_event *)(buf + pos);
		pos += e->length > sizeof *e ? e->length : sizeof *e;
		if (e->type != DRM_EVENT_FLIP_COMPLETE && e->type != DRM_EVENT_VBLANK)
			continue;
		struct drm_event_vblank *v = (struct drm_event_vblank *)e;
		if (L->pending.index == SITS_Q_NONE || v->user_data != L->pending.tag)
			continue;   /* not ours: a commit made before a mode change, say */
		int64_t vblank_ns = (int64_t)v->tv_sec * 1000000000 + (int64_t)v->tv_usec * 1000;
		L->last_vblank_ns = vblank_ns;
		if (L->timeline && L->pending.index == SITS_Q_OWN) {
			/* the freeze frame of a lost camera: a copy of the frame on
			 * screen, whose pixels stay there until a next frame replaces
			 * them (as the kernel sees it: no frame took the plane) */
			L->pending.record = L->on_screen.record;
			timeline_flip(L, 0, 0, vblank_ns, v->sequence);
		} else if (L->timeline) {
			timeline_flip(L, L->pending.record, L->on_screen.record, vblank_ns, v->sequence);
		}
		if (L->pending.index != SITS_Q_OWN) {
			L->displayed++;
			int64_t flip_ns = vblank_ns;
			if (flip_ns < L->pending.shown_from_ns) {
				/* a vblank clock behind the capture clock (vkms's
				 * overrun hrtimer in a slow VM): use arrival time */
				L->anomalies++;
				flip_ns = now_ns();
			}
			sits_q_hist_add(&L->latency, flip_ns - L->pending.shown_from_ns);
		}
		struct sits_q_frame previous = L->on_screen;
		L->on_screen = L->pending;
		L->pending.index = SITS_Q_NONE;
		L->pending.fence = -1;
		int r = retire(L, previous);
		if (r)
			return r;
	}
	return sits_queue_try_commit(L);
}

/* Watch the DRM fd while a flip event is worth a wake-up of its own. */
static int sync_watch(struct sits_queue *L)
{
	int held = 0;
	for (uint32_t i = 0; i < L->nbufs; i++)
		held += !L->queued[i];
	int want = L->pending.index != SITS_Q_NONE
		   && (L->next.index != SITS_Q_NONE || (int)L->nbufs - held < 2);
	if (want == L->dfd_watched)
		return 0;
	struct epoll_event ev;
	memset(&ev, 0, sizeof ev);
	ev.events = EPOLLIN;
	ev.data.fd = L->dfd;
	if (epoll_ctl(L->epfd, want ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, L->dfd, &ev) < 0)
		return fail(L, SITS_OP_EPOLL, -1);
	L->dfd_watched = want;
	return 0;
}

static int settle(struct sits_queue *L, int r)
{
	if (r)
		return r;
	if (L->delivered.index != SITS_Q_NONE)
		return SITS_Q_DELIVER;
	return L->display ? sync_watch(L) : 0;
}

enum { EVENTS = 8 };    /* epoll events a pass of run() handles */

int sits_queue_run(struct sits_queue *L, int timeout_ms)
{
	int64_t end = now_ns() + (int64_t)timeout_ms * 1000000;
	struct epoll_event ev[EVENTS];
	int r0 = settle(L, 0);
	if (r0)
		return r0;
	for (;;) {
		if (L->frames_limit && L->captured >= L->frames_limit)
			return SITS_Q_FRAMES;
		/* a pass completes at most every buffer's CUDA launch; a pass of
		 * n events closes at most the open records and n new ones */
		if (L->cuda_latency_n >= L->samples_cap - (int32_t)L->nbufs
		    || (L->timeline && L->records_n > L->records_cap - SITS_Q_OPEN_RECORDS - EVENTS))
			return SITS_Q_FULL;
		int64_t left = end - now_ns();
		if (left <= 0)
			return SITS_Q_TIMEOUT;
		int n = epoll_wait(L->epfd, ev, EVENTS, (int)((left + 999999) / 1000000));
		L->wakeups++;
		if (n < 0)
			return errno == EINTR ? SITS_Q_WAKE : fail(L, SITS_OP_EPOLL, -1);
		int wake = 0;
		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd, r = 0;
			if (fd == L->vfd && L->vfd >= 0 && (ev[i].events & EPOLLIN))
				r = settle(L, sits_queue_capture(L));
			else if (fd == L->dfd && L->display)
				r = settle(L, sits_queue_flip_events(L));
			else
				wake = 1;   /* level-triggered: Python's poll sees it again */
			if (r)
				return r;
		}
		if (wake)
			return SITS_Q_WAKE;
	}
}
