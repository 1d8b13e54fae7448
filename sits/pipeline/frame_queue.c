/* The frame queue (frame_queue.h): one buffer's way from its source back to
 * its source, through the sinks that hold it.
 *
 * A buffer goes back to the driver only when no sink holds it any more:
 * sits_let_go() clears a sink's bit and sits_give_back() queues the buffer when
 * the last bit has gone, the one place that queues a buffer. A new frame is
 * offered to every sink that takes frames, through its port: the sink holds
 * it from then on, while it waits and while the sink works on it.
 *
 * Why C: under the test VM's emulated CPU the Python loop spent about 70% of
 * its CPU per frame in the interpreter, around kernel work of about a
 * millisecond. sits_queue_run() keeps the steady state here.
 *
 * One wake-up a frame: a sink's fd is in the epoll set only while the sink
 * says it is worth a wake-up of its own (want_fd); otherwise what it waits
 * for is looked at when the next frame comes (on_wake, pump).
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>

#include "sits_kernel.h"     /* the system's UAPI headers, as the binding sees them */
#include "sits_hist.h"
#include "frame_queue.h"

int64_t sits_now_ns(void)
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

int sits_queue_fail(struct sits_queue *L, int op, int index)
{
	L->err = errno;
	L->err_op = op;
	L->err_index = index;
	return SITS_Q_ERROR;
}

/* ------------------------------------------------------------ holders */

int sits_queue_held(struct sits_queue *L, int32_t index)
{
	return index >= 0 && index < SITS_Q_MAX_BUFS && L->holds[index] != 0;
}

int sits_queue_with_driver(struct sits_queue *L, int32_t source)
{
	struct sits_q_source *src = &L->sources[source];
	int n = 0;
	for (int32_t i = src->first; i < src->first + src->nbufs; i++)
		n += L->queued[i];
	return n;
}

/* One of the sources `s` takes has fewer than two buffers to fill: a
 * release `s` has pending may be the only way a next frame comes, so it
 * must not wait for one (an fd or a deadline armed). */
int sits_queue_short(struct sits_queue *L, const struct sits_sink *s)
{
	for (int32_t i = 0; i < L->nsources; i++)
		if ((s->sources >> i & 1) && sits_queue_with_driver(L, i) < 2)
			return 1;
	return 0;
}

int64_t sits_queue_captured(struct sits_queue *L)
{
	return L->captured;
}

const struct sits_q_frame *sits_queue_frame(struct sits_queue *L, int32_t index)
{
	return &L->frames[index];
}

int sits_queue_made(struct sits_queue *L, int32_t index)
{
	return index >= 0 && index < SITS_Q_MAX_BUFS && !L->sources[L->buffer_source[index]].counted;
}

/* Sequence numbers the source skipped between two frames (no buffer was
 * queued when it had one to fill): V4L2's rule, for every kind of source. */
static void count_sequence(struct sits_q_source *src, uint32_t sequence)
{
	if (src->sequence_seen && sequence > src->last_sequence + 1)
		src->sequence_gaps += sequence - src->last_sequence - 1;
	src->last_sequence = sequence;
	src->sequence_seen = 1;
}

/* Give `index` back to its source if nothing holds it: the one place that
 * does. A refusal (vivid injects refused QBUFs) must not lose the buffer:
 * counted, given again before the next take; a vanished device is Python's
 * to handle. */
int sits_give_back(struct sits_queue *L, int32_t index)
{
	if (index < 0 || L->queued[index] || L->holds[index])
		return 0;
	struct sits_q_source *src = &L->sources[L->buffer_source[index]];
	if (src->fd < 0)
		return 0;
	int r = src->ops->give(L, src, index);
	if (r < 0) {
		L->err_source = src->id;
		return -r;
	}
	if (r == SITS_GIVE_RETRY) {
		src->requeue_errors++;
		L->unqueued[index] = 1;
		return 0;
	}
	L->queued[index] = 1;
	sits_timeline_requeued(L, index);
	return 0;
}

/* The source took buffer `index` out, a frame of `sequence` (or one it
 * drops: the sequence numbers still count). */
void sits_source_took(struct sits_queue *L, struct sits_q_source *src, int32_t index, uint32_t sequence)
{
	L->queued[index] = 0;
	src->dequeued++;
	count_sequence(src, sequence);
}

int sits_let_go(struct sits_queue *L, struct sits_sink *s, int32_t index)
{
	if (index < 0 || index >= SITS_Q_MAX_BUFS)
		return 0;
	L->holds[index] &= ~(1u << s->id);
	return sits_give_back(L, index);
}

int sits_drop(struct sits_queue *L, struct sits_sink *s, int32_t index)
{
	s->dropped++;
	return sits_let_go(L, s, index);
}

int sits_queue_release(struct sits_queue *L, int32_t sink, int32_t index)
{
	return sits_let_go(L, &L->sinks[sink], index);
}

/* `sink` lets go of everything it holds and everything waiting for it
 * (it stops; its C half keeps no buffer it could still read). */
int sits_queue_release_all(struct sits_queue *L, int32_t sink)
{
	struct sits_sink *s = &L->sinks[sink];
	s->port_n = 0;
	s->deadline_ns = 0;
	for (uint32_t i = 0; i < L->nbufs; i++) {
		if (!(L->holds[i] & (1u << sink)))
			continue;
		int r = sits_let_go(L, s, (int32_t)i);
		if (r)
			return r;
	}
	return 0;
}

/* A sink holds a buffer it was not offered (Python's, for a frame it keeps). */
int sits_queue_hold(struct sits_queue *L, int32_t sink, int32_t index)
{
	if (index < 0 || index >= SITS_Q_MAX_BUFS || L->queued[index])
		return -1;
	L->holds[index] |= 1u << sink;
	return 0;
}

int sits_queue_requeue_idle(struct sits_queue *L, int32_t source)
{
	struct sits_q_source *src = &L->sources[source];
	src->streaming = 1;
	src->sequence_seen = 0;
	for (int32_t i = src->first; i < src->first + src->nbufs; i++) {
		L->unqueued[i] = 0;
		int r = sits_give_back(L, i);
		if (r)
			return r;
	}
	return 0;
}

/* STREAMOFF took every queued buffer back from the source. */
void sits_queue_forget_queued(struct sits_queue *L, int32_t source)
{
	struct sits_q_source *src = &L->sources[source];
	src->streaming = 0;
	for (int32_t i = src->first; i < src->first + src->nbufs; i++)
		L->queued[i] = L->unqueued[i] = 0;
}

static int check_failed(struct sits_queue *L, int what, int32_t index)
{
	L->err = what;
	L->err_op = SITS_OP_CHECK;
	L->err_index = index;
	return SITS_Q_ERROR;
}

/* Buffer conservation: each buffer is with the source, or held by the sinks
 * that wait for it or read it, or waits for a retried QBUF; never two of
 * these at once, never none while streaming. SITS_Q_ERROR (SITS_OP_CHECK,
 * err: SITS_CHECK_*) names the first buffer that is not. */
int sits_queue_check(struct sits_queue *L)
{
	for (uint32_t i = 0; i < L->nbufs; i++) {
		if (L->queued[i] && L->holds[i])
			return check_failed(L, SITS_CHECK_DRIVER_AND_HELD, i);
		if (L->queued[i] && L->unqueued[i])
			return check_failed(L, SITS_CHECK_DRIVER_AND_RETRY, i);
		const struct sits_q_source *src = &L->sources[L->buffer_source[i]];
		if (src->streaming && src->fd >= 0 && !L->queued[i] && !L->holds[i] && !L->unqueued[i])
			return check_failed(L, SITS_CHECK_NOWHERE, i);
	}
	for (int32_t k = 0; k < L->nsinks; k++) {
		struct sits_sink *s = &L->sinks[k];
		for (int32_t a = 0; a < s->port_n; a++) {
			int32_t index = s->port[a];
			if (!(L->holds[index] & (1u << s->id)))
				return check_failed(L, SITS_CHECK_PORT_UNHELD, index);
			for (int32_t b = a + 1; b < s->port_n; b++)
				if (s->port[b] == index)
					return check_failed(L, SITS_CHECK_PORT_TWICE, index);
		}
		if (s->ops && s->ops->reads)
			for (uint32_t i = 0; i < L->nbufs; i++)
				if (s->ops->reads(L, s, i) && !(L->holds[i] & (1u << s->id)))
					return check_failed(L, SITS_CHECK_READ_UNHELD, i);
	}
	if (L->delivered.index != SITS_Q_NONE && !(L->holds[L->delivered.index] & (1u << L->delivered_sink)))
		return check_failed(L, SITS_CHECK_DELIVERED_UNHELD, L->delivered.index);
	return 0;
}

int sits_queue_add_sink(struct sits_queue *L, const struct sits_sink_ops *ops, void *state,
			int32_t policy, int32_t depth, int32_t offered, uint32_t sources)
{
	if (L->nsinks >= SITS_Q_MAX_SINKS || depth < 1 || depth > SITS_Q_PORT_DEPTH
	    || policy < SITS_POLICY_LATEST || policy > SITS_POLICY_BLOCK)
		return -1;
	struct sits_sink *s = &L->sinks[L->nsinks];
	memset(s, 0, sizeof *s);
	s->ops = ops;
	s->state = state;
	s->id = L->nsinks++;
	s->policy = policy;
	s->depth = depth;
	s->offered = offered;
	s->sources = sources;
	s->ready = 1;
	s->fd = -1;
	return s->id;
}

/* A source of `nbufs` buffers, numbered after those of the sources before
 * it; its ops, state and fd are set by its Python half. Its id, or -1. */
int sits_queue_add_source(struct sits_queue *L, int32_t nbufs, int32_t counted)
{
	if (L->nsources >= SITS_Q_MAX_SOURCES || nbufs < 1 || L->nbufs + (uint32_t)nbufs > SITS_Q_MAX_BUFS)
		return -1;
	struct sits_q_source *src = &L->sources[L->nsources];
	memset(src, 0, sizeof *src);
	src->id = L->nsources++;
	src->fd = -1;
	src->first = (int32_t)L->nbufs;
	src->nbufs = nbufs;
	src->counted = counted;
	for (int32_t i = src->first; i < src->first + nbufs; i++) {
		L->buffer_source[i] = (int8_t)src->id;
		L->queued[i] = L->unqueued[i] = 0;
		L->holds[i] = 0;
	}
	L->nbufs += (uint32_t)nbufs;
	return src->id;
}

/* -------------------------------------------------------------- ports */

int32_t sits_port_remove(struct sits_sink *s, int32_t at)
{
	int32_t index = s->port[at];
	memmove(s->port + at, s->port + at + 1, (size_t)(s->port_n - at - 1) * sizeof s->port[0]);
	s->port_n--;
	return index;
}

int32_t sits_port_take(struct sits_queue *L, struct sits_sink *s)
{
	(void)L;
	if (!s->port_n)
		return SITS_Q_NONE;
	s->taken++;
	return sits_port_remove(s, 0);
}

/* Every frame waiting in `s`'s port is dropped. */
int sits_port_drop(struct sits_queue *L, struct sits_sink *s)
{
	while (s->port_n) {
		int r = sits_drop(L, s, s->port[--s->port_n]);
		if (r)
			return r;
	}
	return 0;
}

/* `index` comes to `s`'s port; its policy makes room. A frame the port
 * drops is let go at once. */
static int port_offer(struct sits_queue *L, struct sits_sink *s, int32_t index)
{
	L->holds[index] |= 1u << s->id;
	if (s->policy == SITS_POLICY_LATEST) {
		int r = sits_port_drop(L, s);
		if (r)
			return r;
	} else if (s->port_n >= s->depth) {
		if (s->policy == SITS_POLICY_DROP_NEWEST)
			return sits_drop(L, s, index);
		/* drop-oldest; block never gets here (the source waits first) */
		int r = sits_drop(L, s, sits_port_remove(s, 0));
		if (r)
			return r;
	}
	s->port[s->port_n++] = index;
	return 0;
}

/* A Python sink takes what waits while its Python half is ready and
 * Python has taken the last frame handed over. */
static int python_pump(struct sits_queue *L, struct sits_sink *s)
{
	if (!s->ready || L->delivered.index != SITS_Q_NONE)
		return 0;
	int32_t index = sits_port_take(L, s);
	if (index == SITS_Q_NONE)
		return 0;
	L->delivered = L->frames[index];
	L->delivered_sink = s->id;
	return 0;
}

int sits_queue_pump(struct sits_queue *L, int32_t sink)
{
	struct sits_sink *s = &L->sinks[sink];
	return s->ops ? s->ops->pump(L, s) : python_pump(L, s);
}

/* A blocking sink of `source`'s frames has a full port: the source is not
 * dequeued (Python takes its fd out of the loop). */
int sits_queue_blocked(struct sits_queue *L, int32_t source)
{
	for (int32_t i = 0; i < L->nsinks; i++) {
		struct sits_sink *s = &L->sinks[i];
		if (s->offered && (s->sources >> source & 1) && s->policy == SITS_POLICY_BLOCK && s->port_n >= s->depth)
			return 1;
	}
	return 0;
}

/* ------------------------------------------------------------ sources */

/* Buffers the source refused are given again before it is asked for a frame. */
static int give_again(struct sits_queue *L, struct sits_q_source *src)
{
	for (int32_t i = src->first; i < src->first + src->nbufs; i++) {
		if (!L->unqueued[i])
			continue;
		L->unqueued[i] = 0;
		int r = sits_give_back(L, i);
		if (r)
			return r;
	}
	return 0;
}

/* A source woke: completions first, then its frame, offered to every
 * sink that takes that source's frames. */
int sits_queue_capture(struct sits_queue *L, int32_t source)
{
	struct sits_q_source *src = &L->sources[source];
	struct sits_q_frame f = {.index = SITS_Q_NONE};
	int ret = 0;    /* a sink's request for its Python half: the frame still comes */
	for (int32_t i = 0; i < L->nsinks; i++) {
		struct sits_sink *s = &L->sinks[i];
		if (s->ops && s->ops->on_wake) {
			int r = s->ops->on_wake(L, s);
			if (r == SITS_Q_ERROR)
				return r;
			if (r && !ret)
				ret = r;
		}
	}
	if (sits_queue_blocked(L, source))
		return ret ? ret : SITS_Q_BLOCKED;   /* Python takes the source's fd out of the loop */
	int again = give_again(L, src);
	if (again)
		return again;
	int got = src->ops->take(L, src, &f);
	if (got < 0)
		L->err_source = source;
	if (got <= 0)
		return got < 0 ? -got : ret;
	src->captured++;
	if (src->counted) {     /* a stage's frame keeps its source's identity and times */
		f.source = source;
		f.dequeued_ns = L->last_frame_ns = sits_now_ns();
		if (!L->first_frame_ns)
			L->first_frame_ns = f.dequeued_ns;
		L->captured++;
		if (L->timeline)
			sits_timeline_open(L, &f);
	}
	L->frames[f.index] = f;
	/* every sink it is offered to holds it first: a port that drops it
	 * must not give it back to the source before the next sink's port
	 * has had it */
	L->holds[f.index] = 0;
	for (int32_t i = 0; i < L->nsinks; i++)
		if (L->sinks[i].offered && (L->sinks[i].sources >> source & 1))
			L->holds[f.index] |= 1u << L->sinks[i].id;
	for (int32_t i = 0; i < L->nsinks; i++) {
		struct sits_sink *s = &L->sinks[i];
		if (!s->offered || !(s->sources >> source & 1))
			continue;
		int r = port_offer(L, s, f.index);
		if (!r)
			r = sits_queue_pump(L, i);
		if (r == SITS_Q_ERROR)
			return r;
		if (r && !ret)
			ret = r;
	}
	if (!L->holds[f.index]) {   /* no sink took it */
		int r = sits_give_back(L, f.index);
		if (r)
			return r;
	}
	return ret;
}

/* -------------------------------------------------------------- loop */

/* After a step: a frame for Python first; each sink's fd in the epoll set
 * while it wants a wake-up of its own. */
static int settle(struct sits_queue *L, int r)
{
	if (L->check && r != SITS_Q_ERROR) {
		int c = sits_queue_check(L);
		if (c)
			return c;
	}
	if (r)
		return r;
	if (L->delivered.index != SITS_Q_NONE)
		return SITS_Q_DELIVER;
	for (int32_t i = 0; i < L->nsinks; i++) {
		struct sits_sink *s = &L->sinks[i];
		if (s->fd < 0 || !s->ops)
			continue;
		int want = s->ops->want_fd ? s->ops->want_fd(L, s) : 1;
		if (want == s->fd_watched)
			continue;
		struct epoll_event ev;
		memset(&ev, 0, sizeof ev);
		ev.events = EPOLLIN;
		ev.data.fd = s->fd;
		if (epoll_ctl(L->epfd, want ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, s->fd, &ev) < 0)
			return sits_queue_fail(L, SITS_OP_EPOLL, -1);
		s->fd_watched = want;
	}
	return 0;
}

/* The earliest deadline a sink's C half set (0: none). */
int64_t sits_queue_next_deadline(struct sits_queue *L)
{
	int64_t due = 0;
	for (int32_t i = 0; i < L->nsinks; i++) {
		struct sits_sink *s = &L->sinks[i];
		if (s->deadline_ns && s->ops && s->ops->on_deadline && (!due || s->deadline_ns < due))
			due = s->deadline_ns;
	}
	return due;
}

/* Every sink whose deadline has passed is called (the first code wins). */
int sits_queue_deadlines(struct sits_queue *L)
{
	int64_t now = sits_now_ns();
	int ret = 0;
	for (int32_t i = 0; i < L->nsinks; i++) {
		struct sits_sink *s = &L->sinks[i];
		if (!s->deadline_ns || s->deadline_ns > now || !s->ops || !s->ops->on_deadline)
			continue;
		s->deadline_ns = 0;
		int r = s->ops->on_deadline(L, s);
		if (r == SITS_Q_ERROR)
			return r;
		if (r && !ret)
			ret = r;
	}
	return ret;
}

static struct sits_sink *sink_of_fd(struct sits_queue *L, int fd)
{
	for (int32_t i = 0; i < L->nsinks; i++)
		if (L->sinks[i].fd == fd && L->sinks[i].ops && L->sinks[i].ops->on_fd)
			return &L->sinks[i];
	return NULL;
}

static int source_of_fd(struct sits_queue *L, int fd)
{
	for (int32_t i = 0; i < L->nsources; i++)
		if (fd >= 0 && L->sources[i].fd == fd)
			return i;
	return -1;
}

enum { EVENTS = 8 };    /* epoll events a pass of run() handles */

int sits_queue_run(struct sits_queue *L, int timeout_ms)
{
	int64_t end = sits_now_ns() + (int64_t)timeout_ms * 1000000;
	struct epoll_event ev[EVENTS];
	int r0 = settle(L, 0);
	if (r0)
		return r0;
	for (;;) {
		if (L->frames_limit && L->captured >= L->frames_limit)
			return SITS_Q_FRAMES;
		/* a pass of n events closes at most the open records and n new ones */
		if (L->timeline && L->records_n > L->records_cap - SITS_Q_OPEN_RECORDS - EVENTS)
			return SITS_Q_FULL;
		int64_t now = sits_now_ns(), left = end - now, due = sits_queue_next_deadline(L);
		if (left <= 0)
			return SITS_Q_TIMEOUT;
		if (due && due - now < left)
			left = due > now ? due - now : 0;
		int n = epoll_wait(L->epfd, ev, EVENTS, (int)((left + 999999) / 1000000));
		L->wakeups++;
		if (n < 0)
			return errno == EINTR ? SITS_Q_WAKE : sits_queue_fail(L, SITS_OP_EPOLL, -1);
		int wake = 0;
		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd, r = 0, source = source_of_fd(L, fd);
			struct sits_sink *s;
			if (source >= 0 && (ev[i].events & EPOLLIN))
				r = settle(L, sits_queue_capture(L, source));
			else if ((s = sink_of_fd(L, fd)) != NULL && s->fd_watched)
				r = settle(L, s->ops->on_fd(L, s));
			else
				wake = 1;   /* level-triggered: Python's poll sees it again */
			if (r)
				return r;
		}
		int r = settle(L, sits_queue_deadlines(L));
		if (r)
			return r;
		if (wake)
			return SITS_Q_WAKE;
	}
}
