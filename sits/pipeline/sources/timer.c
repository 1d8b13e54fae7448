/* A timer as the frame queue's source (sits/pipeline/synthetic.py's memfd
 * buffers): the queue's source fd is a timerfd; each tick fills the buffer
 * given back longest ago, as drivers fill theirs, stamped first_ns + tick *
 * period_ns; a tick that finds none is a skipped sequence number, as a
 * driver's. Nothing is written: the pixels were written once. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "sits_kernel.h"
#include "frame_queue.h"

/* cdef-begin */
struct sits_timer_source {
	/* set by Python (when the timer starts) */
	int64_t first_ns, period_ns;            /* tick k lands at first_ns + k * period_ns */
	uint32_t bytesused[SITS_Q_MAX_BUFS];    /* what each buffer's frame holds (by the queue's numbering) */
	/* state */
	int64_t ticks;                          /* ticks read */
	uint64_t given_order[SITS_Q_MAX_BUFS];  /* when each was given back (by the queue's numbering): filled oldest first */
	uint64_t clock;
};

const struct sits_source_ops *sits_timer_source(void);  /* its C half */
/* cdef-end */

static int timer_give(struct sits_queue *L, struct sits_q_source *src, int32_t index)
{
	(void)L;
	struct sits_timer_source *T = src->state;
	T->given_order[index] = ++T->clock;
	return SITS_GIVE_QUEUED;
}

static int timer_take(struct sits_queue *L, struct sits_q_source *src, struct sits_q_frame *f)
{
	struct sits_timer_source *T = src->state;
	uint64_t ticks = 0;
	if (read(src->fd, &ticks, sizeof ticks) != sizeof ticks)
		return errno == EAGAIN ? 0 : -sits_queue_fail(L, SITS_OP_DQBUF, -1);
	int32_t index = -1;
	for (int32_t i = src->first; i < src->first + src->nbufs; i++)
		if (L->queued[i] && (index < 0 || T->given_order[i] < T->given_order[index]))
			index = i;
	int64_t last = T->ticks + (int64_t)ticks - 1;    /* the newest tick's sequence */
	T->ticks += ticks;
	if (index < 0)
		return 0;       /* lost: the next frame's sequence number shows the gap */
	sits_source_took(L, src, index, (uint32_t)last);
	memset(f, 0, sizeof *f);
	f->index = index;
	f->sequence = (uint32_t)last;
	f->bytesused = T->bytesused[index];
	f->timestamp_ns = T->first_ns + last * T->period_ns;
	return 1;
}

static const struct sits_source_ops ops = {
	.take = timer_take,
	.give = timer_give,
};

const struct sits_source_ops *sits_timer_source(void)
{
	return &ops;
}
