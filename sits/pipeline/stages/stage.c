/* A stage: a sink of one source's frames and the source of frames it
 * makes from them in buffers of its own (a CPU conversion, a decoder).
 * The frame's identity and times go with it (sequence, timestamps, its
 * timeline record); the input buffer goes back once its frame is made.
 *
 * The work runs on a thread of its own, one frame at a time, so that a
 * stage that costs milliseconds never delays the loop (a flip, another
 * source): the loop hands a job over through one eventfd, the worker says
 * it is done through another, which is the stage's source fd, so that the
 * made frame comes in the loop's one epoll_wait like a camera's. The
 * worker touches only the two buffers' bytes and the job's three fields;
 * the eventfds' write and read order them.
 *
 * Its port's policy is the stage's Python half's to choose: the newest
 * frame waits (a display chain), or none is dropped (a decoder of a
 * stream). A job starts when a frame waits, the worker is idle and one of
 * its own buffers is free: on a frame, when the last job ends, and when
 * one of its buffers comes back.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>

#include "sits_kernel.h"
#include "frame_queue.h"
#include "stage.h"


struct worker {
	pthread_t thread;
	int quit;
};

/* CPU reads of a dma-buf are bracketed, so that caches are right where
 * the device writes without snooping them. */
static int bracket(struct sits_stage *S, int32_t in, uint64_t when)
{
	if (!S->in_dmabuf[in])
		return 0;
	struct dma_buf_sync sync = {.flags = when | DMA_BUF_SYNC_READ};
	while (ioctl(S->in_dmabuf[in] - 1, DMA_BUF_IOCTL_SYNC, &sync) < 0)
		if (errno != EINTR && errno != EAGAIN)
			return errno;
	return 0;
}

static void *work_loop(void *arg)
{
	struct sits_stage *S = arg;
	struct worker *w = S->worker;
	for (;;) {
		uint64_t n;
		if (read(S->go_fd, &n, sizeof n) != sizeof n) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (__atomic_load_n(&w->quit, __ATOMIC_ACQUIRE))
			break;
		int err = bracket(S, S->job_in, DMA_BUF_SYNC_START);
		if (!err)
			err = S->work->work(S, S->job_in, S->job_bytes, S->job_out);
		int end = bracket(S, S->job_in, DMA_BUF_SYNC_END);
		err = err ? err : end;
		__atomic_store_n(&S->job_err, err, __ATOMIC_RELEASE);
		n = 1;
		if (write(S->done_fd, &n, sizeof n) != sizeof n)
			break;
	}
	return NULL;
}

int sits_stage_start(struct sits_stage *S)
{
	struct worker *w = calloc(1, sizeof *w);
	if (!w)
		return ENOMEM;
	S->go_fd = eventfd(0, EFD_CLOEXEC);
	S->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int err = S->go_fd < 0 || S->done_fd < 0 ? errno : 0;
	S->worker = w;
	if (!err)
		err = pthread_create(&w->thread, NULL, work_loop, S);
	if (err) {
		if (S->go_fd >= 0)
			close(S->go_fd);
		if (S->done_fd >= 0)
			close(S->done_fd);
		S->go_fd = S->done_fd = -1;
		S->worker = NULL;
		free(w);
	}
	return err;
}

void sits_stage_stop(struct sits_stage *S)
{
	struct worker *w = S->worker;
	if (!w)
		return;
	__atomic_store_n(&w->quit, 1, __ATOMIC_RELEASE);
	uint64_t n = 1;
	if (write(S->go_fd, &n, sizeof n) == sizeof n)
		pthread_join(w->thread, NULL);
	else
		pthread_detach(w->thread);
	close(S->go_fd);
	close(S->done_fd);
	S->go_fd = S->done_fd = -1;
	S->worker = NULL;
	S->busy = 0;    /* its job, if one was running, is abandoned */
	free(w);
}

int sits_stage_drop_waiting(struct sits_queue *L, struct sits_stage *S)
{
	return sits_port_drop(L, &L->sinks[S->sink]);
}

/* A job, if a frame waits, the worker is idle and a buffer of its own is free. */
static int start_job(struct sits_queue *L, struct sits_stage *S)
{
	struct sits_sink *s = &L->sinks[S->sink];
	if (S->busy || !s->port_n || !S->worker)
		return 0;
	const struct sits_q_source *src = &L->sources[S->source];
	int32_t out = -1;
	for (int32_t i = src->first; i < src->first + src->nbufs; i++)
		if (S->out_free[i]) {
			out = i;
			break;
		}
	if (out < 0)
		return 0;
	int32_t in = sits_port_take(L, s);
	S->out_free[out] = 0;
	S->job_in = in;
	S->job_out = out;
	S->job_bytes = L->frames[in].bytesused;
	S->busy = 1;
	S->job_start_ns = sits_now_ns();
	uint64_t n = 1;
	if (write(S->go_fd, &n, sizeof n) != sizeof n)
		return sits_queue_fail(L, SITS_OP_STAGE, in);
	return 0;
}

static int stage_pump(struct sits_queue *L, struct sits_sink *s)
{
	return start_job(L, s->state);
}

static int stage_reads(struct sits_queue *L, struct sits_sink *s, int32_t index)
{
	(void)L;
	struct sits_stage *S = s->state;
	return S->busy && S->job_in == index;
}

/* The worker is done: the made frame, with the frame's identity, times
 * and record; the input buffer goes back; the next job starts. */
static int stage_take(struct sits_queue *L, struct sits_q_source *src, struct sits_q_frame *f)
{
	struct sits_stage *S = src->state;
	uint64_t n;
	if (read(S->done_fd, &n, sizeof n) != sizeof n)
		return errno == EAGAIN ? 0 : -sits_queue_fail(L, SITS_OP_STAGE, -1);
	int32_t in = S->job_in, out = S->job_out;
	int err = __atomic_load_n(&S->job_err, __ATOMIC_ACQUIRE);
	int64_t ns = sits_now_ns() - S->job_start_ns;
	S->busy = 0;
	S->work_ns += ns;
	if (ns > S->work_max_ns)
		S->work_max_ns = ns;
	int got = 0;
	if (err) {
		S->errors++;
		S->out_free[out] = 1;
	} else {
		*f = L->frames[in];
		f->index = out;
		f->bytesused = S->out_bytes;
		sits_source_took(L, src, out, f->sequence);
		sits_timeline_staged(L, in, f);
		S->made++;
		got = 1;
	}
	int r = sits_let_go(L, &L->sinks[S->sink], in);
	if (!r)
		r = start_job(L, S);
	return r ? -r : got;
}

static int stage_give(struct sits_queue *L, struct sits_q_source *src, int32_t index)
{
	struct sits_stage *S = src->state;
	S->out_free[index] = 1;
	int r = start_job(L, S);
	return r ? -r : SITS_GIVE_QUEUED;
}

static const struct sits_sink_ops sink_ops = {
	.pump = stage_pump,
	.reads = stage_reads,
};

static const struct sits_source_ops source_ops = {
	.take = stage_take,
	.give = stage_give,
};

const struct sits_sink_ops *sits_stage_sink(void)
{
	return &sink_ops;
}

const struct sits_source_ops *sits_stage_source(void)
{
	return &source_ops;
}
