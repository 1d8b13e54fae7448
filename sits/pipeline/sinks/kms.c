/* The KMS display as a sink of the frame queue: its C half. A frame it
 * takes is committed (next -> pending), goes on screen at its flip event
 * and leaves the screen at the next flip; the buffer goes back once the
 * flip that replaced it has come (and, for a commit of Python's that
 * carries an out-fence, once that fence has signalled). Its port keeps the
 * newest frame only (SITS_POLICY_LATEST): a frame that comes while a flip
 * is pending waits, and a newer one takes its place. Its Python half is
 * sits/pipeline/display.py (KmsDisplay): the first commit (a modeset),
 * commits that carry a writeback, CPU copies and freeze frames are its.
 *
 * The overlay layer: a second plane above the video's, whose buffers (a
 * frame's drawing, made by the drawing stage from that frame) come through
 * a sink of their own (the display's overlay port, same struct). A commit
 * shows a frame with the drawing its policy picks, both in one atomic
 * commit: `latest`, the newest drawing; `sync`, the frame's own, which
 * frames wait for in order up to a budget (then the last drawing, or the
 * frame is dropped when a newer one's drawing is ready). A drawing leaves
 * the plane, and goes back to the stage, at the flip that replaced it.
 *
 * One wake-up a frame: the DRM fd is in the epoll set only while a frame
 * waits for the flip, or while too few buffers are left with the driver to
 * wait for the next frame; otherwise the last flip's event is read when
 * the next frame comes (a flip takes at most a refresh; frames come slower
 * than that or are dropped anyway).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <poll.h>

#include "sits_kernel.h"
#include "sits_vblank.h"
#include "frame_queue.h"

/* cdef-begin */
enum {
	SITS_KMS_OWN = -2,      /* a commit of a buffer of Python's own (freeze frame) */
};

/* which drawing a frame is shown with (sits_kms.overlay_policy) */
enum {
	SITS_OVERLAY_LATEST = 0,        /* the newest drawing, whatever frame it was drawn for */
	SITS_OVERLAY_SYNC = 1,          /* the frame's own drawing, waited for up to overlay_budget_ns */
};

/* what the C half asks of the Python half (SITS_Q_SINK) */
enum {
	SITS_KMS_ASK_COMMIT = 1,        /* commit the waiting frame (writeback, conversion, first commit) */
	SITS_KMS_ASK_FENCE = 2,         /* a flip came before its out-fence said signalled: watch on_screen.fence */
};

/* One commit: pending until its flip event, on_screen until the next flip,
 * retire while the out-fence of the commit that replaced it has not signalled. */
struct sits_kms_commit {
	int32_t index;          /* the frame's buffer, or SITS_Q_NONE / SITS_KMS_OWN */
	uint32_t sequence, tag, record;
	int32_t fence;          /* the commit's out-fence (Python's commits), -1 when none or closed */
	int32_t overlay;        /* the drawing it put on the overlay plane (SITS_Q_NONE: the plane kept its own) */
	int64_t shown_from_ns;  /* the time latency counts from (timestamp, or dequeue when not believable) */
};

struct sits_kms {
	/* set by Python */
	int32_t sink;               /* its id in the frame queue */
	int32_t dfd;
	uint32_t plane_id, fb_prop;
	uint32_t fb_id[SITS_Q_MAX_BUFS];
	int64_t vblank_period_ns;   /* the mode's time between vblanks (0: unknown) */
	int32_t python_commits;     /* every commit is Python's (the conversion path, the first) */
	int32_t hold_commits;       /* no commit now (a writeback is in flight) */
	int32_t paused;             /* no display connected: frames are dropped */
	int64_t hand_back_displayed;    /* the commit made when displayed == this is Python's (-1: none) */
	int64_t hand_back_captured;     /* ... and any commit once captured >= this (0: none) */
	/* the overlay layer */
	int32_t overlay_on;             /* there is one (0: the other overlay_ fields mean nothing) */
	int32_t overlay_sink;           /* the sink its drawings come to */
	uint32_t overlay_plane_id, overlay_fb_prop;
	int32_t overlay_policy;         /* SITS_OVERLAY_ */
	int64_t overlay_budget_ns;      /* sync: how long a frame waits for its drawing */
	/* state */
	struct sits_kms_commit pending, on_screen, retire;
	uint32_t tag;
	int32_t asks;               /* SITS_KMS_ASK_ of the last SITS_Q_SINK */
	int64_t last_vblank_ns;     /* the vblank of the latest flip event (0: none in this mode yet) */
	int64_t displayed, anomalies, c_commits;
	int32_t overlay_shown;          /* the drawing on the overlay plane (SITS_Q_NONE: its blank one) */
	int64_t overlay_seq;            /* the sequence of the drawing last committed (-1: none yet) */
	/* frames committed with their own drawing, an older one, none; frames
	 * dropped while they waited for theirs (sync); the drawings' age in frames */
	int64_t with_own, with_older, with_none, dropped_waiting, age_sum, age_max;
	struct sits_q_hist latency;         /* capture (V4L2 timestamp) -> on screen (flip event) */
	struct sits_q_hist submit;          /* dequeue -> commit */
};

const struct sits_sink_ops *sits_kms_sink(void);   /* its C half */
const struct sits_sink_ops *sits_kms_overlay_sink(void);   /* ... and its overlay port's (state: the same struct) */
int sits_kms_flip_events(struct sits_queue *L, struct sits_kms *D);
int sits_kms_try_commit(struct sits_queue *L, struct sits_kms *D);
/* showing: the waiting frame's buffer or SITS_KMS_OWN (a buffer of Python's
 * own); overlay: the drawing committed with it (sits_kms_choose), or SITS_Q_NONE */
void sits_kms_committed(struct sits_queue *L, struct sits_kms *D, int32_t showing, int32_t overlay, int32_t fence,
			int64_t started_ns);
int sits_kms_retired(struct sits_queue *L, struct sits_kms *D);
int sits_kms_drop_waiting(struct sits_queue *L, struct sits_kms *D);
int32_t sits_kms_waiting(struct sits_queue *L, struct sits_kms *D);
/* the frame to commit now (SITS_Q_NONE: none, or it waits for its drawing)
 * and, in *overlay, the drawing to show with it (SITS_Q_NONE: the plane's own) */
int32_t sits_kms_choose(struct sits_queue *L, struct sits_kms *D, int32_t *overlay);
/* cdef-end */

static struct sits_sink *sink(struct sits_queue *L, struct sits_kms *D)
{
	return &L->sinks[D->sink];
}

static int ask(struct sits_queue *L, struct sits_kms *D, int what)
{
	D->asks = what;
	L->asking = D->sink;
	return SITS_Q_SINK;
}

static struct sits_sink *overlay_port(struct sits_queue *L, struct sits_kms *D)
{
	return D->overlay_on ? &L->sinks[D->overlay_sink] : NULL;
}

static uint32_t seq_of(struct sits_queue *L, int32_t index)
{
	return sits_queue_frame(L, index)->sequence;
}

/* The frame that waits in the port (the oldest), or SITS_Q_NONE. */
int32_t sits_kms_waiting(struct sits_queue *L, struct sits_kms *D)
{
	struct sits_sink *s = sink(L, D);
	return s->port_n ? s->port[0] : SITS_Q_NONE;
}

/* Where the drawing of the frame of `sequence` waits in the overlay port, or -1. */
static int32_t drawing_of(struct sits_queue *L, struct sits_sink *o, uint32_t sequence)
{
	for (int32_t a = 0; a < o->port_n; a++)
		if (seq_of(L, o->port[a]) == sequence)
			return a;
	return -1;
}

/* The newest drawing in the overlay port made for a frame before `sequence`
 * (after it, for `latest`, any), or SITS_Q_NONE. */
static int32_t newest_drawing(struct sits_queue *L, struct sits_sink *o, int64_t before)
{
	int32_t best = SITS_Q_NONE;
	for (int32_t a = 0; a < o->port_n; a++) {
		uint32_t q = seq_of(L, o->port[a]);
		if ((before < 0 || q < (uint32_t)before) && (best == SITS_Q_NONE || q > seq_of(L, best)))
			best = o->port[a];
	}
	return best;
}

/* What sits_kms_choose() says, and 0 or SITS_Q_ERROR: sync drops a frame
 * whose budget has passed while a newer one's drawing is ready, and sets
 * the display's deadline while the oldest frame may still wait. */
static int choose(struct sits_queue *L, struct sits_kms *D, int32_t *index, int32_t *overlay)
{
	struct sits_sink *s = sink(L, D), *o = overlay_port(L, D);
	*overlay = SITS_Q_NONE;
	*index = sits_kms_waiting(L, D);
	if (!o || *index == SITS_Q_NONE)
		return 0;
	if (D->overlay_policy == SITS_OVERLAY_LATEST) {
		*overlay = newest_drawing(L, o, -1);
		return 0;
	}
	for (*index = SITS_Q_NONE; s->port_n;) {
		int32_t w = s->port[0];
		int32_t at = drawing_of(L, o, seq_of(L, w));
		if (at >= 0) {
			*index = w;
			*overlay = o->port[at];
			return 0;
		}
		int64_t due = sits_queue_frame(L, w)->dequeued_ns + D->overlay_budget_ns;
		if (sits_now_ns() < due) {
			s->deadline_ns = due;
			return 0;
		}
		int newer_ready = 0;
		for (int32_t k = 1; k < s->port_n && !newer_ready; k++)
			newer_ready = drawing_of(L, o, seq_of(L, s->port[k])) >= 0;
		if (!newer_ready) {     /* shown with the last drawing */
			*index = w;
			*overlay = newest_drawing(L, o, seq_of(L, w));
			return 0;
		}
		D->dropped_waiting++;
		int r = sits_drop(L, s, sits_port_remove(s, 0));
		if (r)
			return r;
	}
	return 0;
}

int32_t sits_kms_choose(struct sits_queue *L, struct sits_kms *D, int32_t *overlay)
{
	int32_t index;
	return choose(L, D, &index, overlay) ? SITS_Q_NONE : index;
}

/* The frame in `index` was committed with `overlay` (SITS_Q_NONE: the
 * plane kept its drawing): counted, and the drawings it makes useless go
 * (the chosen one leaves the port, to be held until the flip that
 * replaces it; every drawing of a frame before this one is let go). */
static int overlay_committed(struct sits_queue *L, struct sits_kms *D, int32_t index, int32_t overlay)
{
	struct sits_sink *o = overlay_port(L, D);
	D->pending.overlay = overlay;
	if (!o)
		return 0;
	uint32_t q = seq_of(L, index);
	if (overlay != SITS_Q_NONE)
		D->overlay_seq = seq_of(L, overlay);
	if (D->overlay_seq < 0) {
		D->with_none++;
	} else {
		int64_t age = (int64_t)q - D->overlay_seq;
		age = age < 0 ? -age : age;     /* latest: a drawing may be of a newer frame */
		if (age == 0)
			D->with_own++;
		else
			D->with_older++;
		D->age_sum += age;
		if (age > D->age_max)
			D->age_max = age;
	}
	for (int32_t a = 0; a < o->port_n;) {
		int32_t d = o->port[a];
		if (d != overlay && seq_of(L, d) > q) {
			a++;
			continue;
		}
		sits_port_remove(o, a);
		if (d == overlay) {
			o->taken++;
			continue;
		}
		int r = sits_drop(L, o, d);
		if (r)
			return r;
	}
	return 0;
}

/* A commit of buffer `index` (`showing` it, or an own buffer)
 * was made, by C or by Python, with user_data tag + 1. */
static void shown(struct sits_queue *L, struct sits_kms *D, int32_t index, int32_t showing, int32_t fence,
		  int64_t started_ns)
{
	struct sits_kms_commit commit;
	memset(&commit, 0, sizeof commit);
	commit.index = showing;
	D->tag++;
	if (showing != SITS_KMS_OWN) {
		const struct sits_q_frame *f = sits_queue_frame(L, index);
		sits_q_hist_add(&D->submit, started_ns - f->dequeued_ns);
		commit.sequence = f->sequence;
		commit.record = f->record;
		/* a driver timestamp after our dequeue cannot be believed (vivid's
		 * schedule-based clock in a slow VM): count it, use the dequeue time */
		if (f->timestamp_ns <= 0 || f->timestamp_ns > f->dequeued_ns) {
			D->anomalies++;
			commit.shown_from_ns = f->dequeued_ns;
		} else {
			commit.shown_from_ns = f->timestamp_ns;
		}
		if (f->record) {
			/* late: a vblank came between its dequeue and this commit's
			 * start (sits_vblank.h, journey.bpf.c's rule too). Flip
			 * events tell of the vblanks that completed a commit only;
			 * the others are on the same grid, a mode's frame time apart
			 * (what the kernel's journey sees as every vblank's event). */
			__u64 late = sits_late_ns((__u64)D->last_vblank_ns,
						  D->vblank_period_ns > 0 ? (__u64)D->vblank_period_ns : 0,
						  (__u64)f->dequeued_ns, (__u64)started_ns);
			sits_timeline_committed(L, f->record, started_ns, (int64_t)late, sits_queue_made(L, index));
		}
	}
	commit.fence = fence;
	commit.overlay = SITS_Q_NONE;
	commit.tag = D->tag;
	D->pending = commit;
}

void sits_kms_committed(struct sits_queue *L, struct sits_kms *D, int32_t showing, int32_t overlay, int32_t fence,
			int64_t started_ns)
{
	if (showing == SITS_KMS_OWN) {
		shown(L, D, SITS_Q_NONE, showing, fence, started_ns);
		return;
	}
	struct sits_sink *s = sink(L, D);
	int32_t index = sits_port_take(L, s);
	shown(L, D, index, showing, fence, started_ns);
	overlay_committed(L, D, index, overlay);
}

/* Show the waiting frame: FB_ID on the plane; the mode, geometry and
 * connector routing were set by Python's first commit and persist in the
 * atomic state. No out-fence: the kernel signals a commit's out-fence and
 * queues its flip event in one step (drm_send_event_helper), so the event
 * already says what the fence would, and the fence would cost a sync_file,
 * an fd, a poll() and a close() a frame. */
static int commit(struct sits_queue *L, struct sits_kms *D, int32_t index, int32_t overlay)
{
	uint32_t objs[2] = {D->plane_id, D->overlay_plane_id};
	uint32_t counts[2] = {1, 1};
	uint32_t props[2] = {D->fb_prop, D->overlay_fb_prop};
	uint64_t values[2] = {D->fb_id[index], overlay != SITS_Q_NONE ? D->fb_id[overlay] : 0};
	struct drm_mode_atomic a;
	memset(&a, 0, sizeof a);
	a.flags = DRM_MODE_ATOMIC_NONBLOCK | DRM_MODE_PAGE_FLIP_EVENT;
	a.count_objs = overlay != SITS_Q_NONE ? 2 : 1;
	a.objs_ptr = (uint64_t)(uintptr_t)objs;
	a.count_props_ptr = (uint64_t)(uintptr_t)counts;
	a.props_ptr = (uint64_t)(uintptr_t)props;
	a.prop_values_ptr = (uint64_t)(uintptr_t)values;
	a.user_data = D->tag + 1;
	int64_t started = sits_now_ns();
	if (drmIoctl(D->dfd, DRM_IOCTL_MODE_ATOMIC, &a) < 0)
		return sits_queue_fail(L, SITS_OP_ATOMIC, index);  /* the frame keeps waiting */
	sits_port_take(L, sink(L, D));
	shown(L, D, index, index, -1, started);
	D->c_commits++;
	return overlay_committed(L, D, index, overlay);
}

/* The frames waiting are dropped, and the drawings waiting for them. */
int sits_kms_drop_waiting(struct sits_queue *L, struct sits_kms *D)
{
	struct sits_sink *o = overlay_port(L, D);
	int r = o ? sits_port_drop(L, o) : 0;
	return r ? r : sits_port_drop(L, sink(L, D));
}

int sits_kms_try_commit(struct sits_queue *L, struct sits_kms *D)
{
	if (D->pending.index != SITS_Q_NONE || D->retire.index != SITS_Q_NONE || sits_kms_waiting(L, D) == SITS_Q_NONE)
		return 0;
	if (D->paused)
		return sits_kms_drop_waiting(L, D);     /* no display: the frame is dropped */
	if (D->hold_commits)
		return 0;
	int32_t index, overlay;
	int r = choose(L, D, &index, &overlay);
	if (r || index == SITS_Q_NONE)
		return r;
	if (D->python_commits || D->displayed == D->hand_back_displayed
	    || (D->hand_back_captured && sits_queue_captured(L) >= D->hand_back_captured))
		return ask(L, D, SITS_KMS_ASK_COMMIT);
	return commit(L, D, index, overlay);
}

/* The flip put pending on screen; the frame it replaced goes back. A
 * commit of Python's carries an out-fence: the frame goes once that fence
 * has signalled. The kernel signals it before it sends the flip event, so
 * one poll() that does not wait settles it (a sync_file is readable once
 * its fence has signalled). */
static int retire(struct sits_queue *L, struct sits_kms *D, struct sits_kms_commit previous)
{
	int32_t fence = D->on_screen.fence;
	if (fence >= 0) {
		struct pollfd p = {.fd = fence, .events = POLLIN};
		if (poll(&p, 1, 0) != 1 || !(p.revents & POLLIN)) {
			D->retire = previous;   /* Python polls the fence, then calls retired() */
			return previous.index == SITS_Q_NONE ? 0 : ask(L, D, SITS_KMS_ASK_FENCE);
		}
		close(fence);
		D->on_screen.fence = -1;
	}
	return previous.index >= 0 ? sits_let_go(L, sink(L, D), previous.index) : 0;
}

int sits_kms_retired(struct sits_queue *L, struct sits_kms *D)
{
	if (D->on_screen.fence >= 0) {
		close(D->on_screen.fence);
		D->on_screen.fence = -1;
	}
	int32_t index = D->retire.index;
	D->retire.index = SITS_Q_NONE;
	return index >= 0 ? sits_let_go(L, sink(L, D), index) : 0;
}

int sits_kms_flip_events(struct sits_queue *L, struct sits_kms *D)
{
	char buf[1024];
	ssize_t n = read(D->dfd, buf, sizeof buf);
	if (n < 0)
		return errno == EAGAIN ? 0 : sits_queue_fail(L, SITS_OP_READ, -1);
	for (ssize_t pos = 0; pos + (ssize_t)sizeof(struct drm_event) <= n;) {
		struct drm_event *e = (struct drm_event *)(buf + pos);
		pos += e->length > sizeof *e ? e->length : sizeof *e;
		if (e->type != DRM_EVENT_FLIP_COMPLETE && e->type != DRM_EVENT_VBLANK)
			continue;
		struct drm_event_vblank *v = (struct drm_event_vblank *)e;
		if (D->pending.index == SITS_Q_NONE || v->user_data != D->pending.tag)
			continue;   /* not ours: a commit made before a mode change, say */
		int64_t vblank_ns = (int64_t)v->tv_sec * 1000000000 + (int64_t)v->tv_usec * 1000;
		D->last_vblank_ns = vblank_ns;
		if (D->pending.index == SITS_KMS_OWN) {
			/* the freeze frame of a lost camera: a copy of the frame on
			 * screen, whose pixels stay there until a next frame replaces
			 * them (as the kernel sees it: no frame took the plane) */
			D->pending.record = D->on_screen.record;
		} else {
			sits_timeline_flip(L, D->pending.record, D->on_screen.record, vblank_ns, v->sequence);
			D->displayed++;
			int64_t flip_ns = vblank_ns;
			if (flip_ns < D->pending.shown_from_ns) {
				/* a vblank clock behind the capture clock (vkms's
				 * overrun hrtimer in a slow VM): use arrival time */
				D->anomalies++;
				flip_ns = sits_now_ns();
			}
			sits_q_hist_add(&D->latency, flip_ns - D->pending.shown_from_ns);
		}
		struct sits_kms_commit previous = D->on_screen;
		D->on_screen = D->pending;
		D->pending.index = D->pending.overlay = SITS_Q_NONE;
		D->pending.fence = -1;
		int r = 0;
		if (D->overlay_on && D->on_screen.overlay != SITS_Q_NONE) {
			/* the drawing it replaced left the plane at this flip */
			int32_t old = D->overlay_shown;
			D->overlay_shown = D->on_screen.overlay;
			D->on_screen.overlay = SITS_Q_NONE;
			if (old != SITS_Q_NONE)
				r = sits_let_go(L, overlay_port(L, D), old);
		}
		if (!r)
			r = retire(L, D, previous);
		if (r)
			return r;
	}
	return sits_kms_try_commit(L, D);
}

/* A frame (or, to the overlay port, a drawing) came: the last flip's event
 * first, read now unless the DRM fd is watched (it commits), else a commit
 * if one can be made. */
static int kms_pump(struct sits_queue *L, struct sits_sink *s)
{
	struct sits_kms *D = s->state;
	if (D->pending.index != SITS_Q_NONE && !sink(L, D)->fd_watched)
		return sits_kms_flip_events(L, D);
	return sits_kms_try_commit(L, D);
}

static int kms_on_fd(struct sits_queue *L, struct sits_sink *s)
{
	return sits_kms_flip_events(L, s->state);
}

/* sync: the oldest frame's budget for its drawing has passed */
static int kms_on_deadline(struct sits_queue *L, struct sits_sink *s)
{
	return sits_kms_try_commit(L, s->state);
}

/* The DRM fd is worth a wake-up of its own while a frame waits for the
 * flip, or while the driver has too few buffers for a next frame to come. */
static int kms_want_fd(struct sits_queue *L, struct sits_sink *s)
{
	struct sits_kms *D = s->state;
	return D->pending.index != SITS_Q_NONE && (s->port_n > 0 || sits_queue_short(L, s));
}

/* A buffer committed, on screen or waiting for its out-fence */
static int kms_reads(struct sits_queue *L, struct sits_sink *s, int32_t index)
{
	struct sits_kms *D = s->state;
	(void)L;
	return D->pending.index == index || D->on_screen.index == index || D->retire.index == index;
}

static const struct sits_sink_ops ops = {
	.pump = kms_pump,
	.on_fd = kms_on_fd,
	.on_wake = NULL,
	.want_fd = kms_want_fd,
	.on_deadline = kms_on_deadline,
	.reads = kms_reads,
};

const struct sits_sink_ops *sits_kms_sink(void)
{
	return &ops;
}

/* A drawing committed and not yet on the plane, or on the plane */
static int overlay_reads(struct sits_queue *L, struct sits_sink *s, int32_t index)
{
	struct sits_kms *D = s->state;
	(void)L;
	return index != SITS_Q_NONE && (D->overlay_shown == index || D->pending.overlay == index);
}

static const struct sits_sink_ops overlay_ops = {
	.pump = kms_pump,
	.reads = overlay_reads,
};

const struct sits_sink_ops *sits_kms_overlay_sink(void)
{
	return &overlay_ops;
}
