/* The CUDA conversion as a sink of the frame queue: its C half. Each
 * frame's buffer's conversion graph is launched when the frame comes, and
 * the buffer is let go once the graph's last node has written its end stamp
 * (sits/cuda/stamp.py: the GPU's clock at the graph's first and last node,
 * in host-mapped memory), looked at when the source next wakes: one driver
 * call a frame (cuGraphLaunch), no CUDA thread, no wake-up of its own. When
 * the work was done is the GPU's clock placed on CLOCK_MONOTONIC by the
 * launch clock (cuda_done_ns). A launch whose stamp is late asks the stream
 * (cuStreamQuery) for the error that stopped it. While fewer than two
 * buffers are left with the driver (a next frame may never come), a
 * deadline looks again every CU_POLL_NS. Function pointers: the
 * driver's cuGraphLaunch and cuStreamQuery, resolved by Python. Its Python
 * half is sits/pipeline/cuda.py (CudaConsumer).
 */
#include <errno.h>
#include <string.h>

#include "sits_kernel.h"
#include "frame_queue.h"

/* cdef-begin */
enum {
	SITS_CU_LAUNCHES = 64,          /* the launch ring: more than the buffers a run can have in flight, and one */
	SITS_CU_NOT_READY = 600,        /* CUDA_ERROR_NOT_READY (cuda.h): cuStreamQuery's "not yet" */
	SITS_CU_STAMP_WORDS = 2,        /* u64 a buffer's stamp: {begin, end} (sits/cuda/stamp.py) */
	SITS_CU_STAMP_MISSING = 1000001, /* the stream is idle and a launch wrote no end stamp */
	SITS_CU_ASK_DRAIN = 1,          /* its sample arrays are half full: Python reads them */
};

struct sits_cuda {
	/* set by Python */
	int32_t sink;                           /* its id in the frame queue */
	uint64_t graph[SITS_Q_MAX_BUFS];        /* CUgraphExec of each buffer's conversion */
	uint64_t stream;                        /* CUstream */
	uint64_t graph_launch, stream_query;    /* the driver's cuGraphLaunch, cuStreamQuery */
	uint64_t *stamps;                       /* SITS_CU_STAMP_WORDS a buffer index: {begin, end} GPU ns */
	float *latency_ms;                      /* V4L2 timestamp -> done on the GPU; Python drains it */
	float *release_ms;                      /* done on the GPU -> the buffer let go */
	int32_t samples_cap;
	/* state */
	int32_t samples_n;
	int32_t asks;
	int32_t launch_index[SITS_CU_LAUNCHES];     /* the buffer a launch converts */
	int64_t launch_ns[SITS_CU_LAUNCHES];        /* CLOCK_MONOTONIC before it was launched */
	int64_t launch_from_ns[SITS_CU_LAUNCHES];   /* the frame's timestamp: latency counts from there */
	int64_t launched, completed;                /* launches made / seen done: launch n is at n % SITS_CU_LAUNCHES */
	int64_t start_bound_ns;                 /* no later than the last completed launch's begin stamp */
	uint64_t last_begin;                    /* that launch's begin stamp, GPU ns */
	int64_t frames;
};

const struct sits_sink_ops *sits_cuda_sink(void);   /* its C half */
int sits_cuda_done(struct sits_queue *L, struct sits_cuda *C);
/* cdef-end */

typedef int (*cu_graph_launch_fn)(uint64_t exec, uint64_t stream);
typedef int (*cu_stream_query_fn)(uint64_t stream);

/* How far the GPU's clock may run ahead of CLOCK_MONOTONIC, in parts per
 * million. */
#define CU_DRIFT_PPM 100
/* A launch older than this without its end stamp: the stream is asked why
 * (an error stops the work before the stamp; a frame's work is far less). */
#define CU_STAMP_LATE_NS 200000000
/* How often the stamps are looked at when no next frame may come to look:
 * a frame's conversion takes well under it on the GPUs sits runs on. */
#define CU_POLL_NS 1000000

static int cuda_fail(struct sits_queue *L, int rc, int index)
{
	errno = rc;     /* a CUresult, not an errno: Python names it */
	return sits_queue_fail(L, SITS_OP_CUDA, index);
}

static uint64_t *stamp_of(struct sits_cuda *C, int index)
{
	return C->stamps + (size_t)index * SITS_CU_STAMP_WORDS;
}

/* The frame's conversion: its buffer's graph, the clock read just before. */
static int submit(struct sits_queue *L, struct sits_cuda *C, int32_t index)
{
	const struct sits_q_frame *f = sits_queue_frame(L, index);
	sits_queue_timeline_cuda(L, index, 0, 0);
	int launch = (int)(C->launched % SITS_CU_LAUNCHES);
	/* zeroed before the launch that writes it: a non-zero end is this one's */
	__atomic_store_n(&stamp_of(C, index)[1], 0, __ATOMIC_RELEASE);
	int64_t launch_ns = sits_now_ns();
	int rc = ((cu_graph_launch_fn)(uintptr_t)C->graph_launch)(C->graph[index], C->stream);
	if (rc != 0) {
		sits_let_go(L, &L->sinks[C->sink], index);  /* nothing reads it */
		return cuda_fail(L, rc, index);
	}
	C->launch_index[launch] = index;
	C->launch_ns[launch] = launch_ns;
	C->launch_from_ns[launch] = f->timestamp_ns > 0 && f->timestamp_ns <= f->dequeued_ns
				   ? f->timestamp_ns : f->dequeued_ns;
	C->launched++;
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
static int64_t cuda_done_ns(struct sits_cuda *C, int launch, uint64_t begin, uint64_t end)
{
	int64_t start = C->launch_ns[launch];
	if (C->completed > 0 && begin > C->last_begin) {  /* the launch before is this attachment's */
		int64_t gap = (int64_t)(begin - C->last_begin);
		int64_t chained = C->start_bound_ns + gap - gap / 1000000 * CU_DRIFT_PPM;
		if (chained > start)
			start = chained;
	}
	C->start_bound_ns = start;
	C->last_begin = begin;
	return start + (end > begin ? (int64_t)(end - begin) : 0);
}

/* A launch whose end stamp has not come: the stream says whether an error
 * stopped it (the CUresult), or that it is idle with no stamp written. */
static int stamp_late(struct sits_queue *L, struct sits_cuda *C, int index)
{
	int rc = ((cu_stream_query_fn)(uintptr_t)C->stream_query)(C->stream);
	if (rc == SITS_CU_NOT_READY)
		return 0;
	if (rc == 0 && __atomic_load_n(&stamp_of(C, index)[1], __ATOMIC_ACQUIRE))
		return 0;   /* written meanwhile */
	return cuda_fail(L, rc ? rc : SITS_CU_STAMP_MISSING, index);
}

/* Launches whose end stamp is written, oldest first (one stream: they
 * complete in order): each lets its buffer go. */
int sits_cuda_done(struct sits_queue *L, struct sits_cuda *C)
{
	struct sits_sink *s = &L->sinks[C->sink];
	int64_t seen_ns = 0;
	while (C->completed < C->launched) {
		int launch = (int)(C->completed % SITS_CU_LAUNCHES);
		int32_t index = C->launch_index[launch];
		uint64_t *stamp = stamp_of(C, index);
		uint64_t end = __atomic_load_n(&stamp[1], __ATOMIC_ACQUIRE);
		if (!end) {
			if (sits_now_ns() - C->launch_ns[launch] > CU_STAMP_LATE_NS)
				return stamp_late(L, C, index);
			break;
		}
		int64_t done_ns = cuda_done_ns(C, launch, __atomic_load_n(&stamp[0], __ATOMIC_RELAXED), end);
		C->completed++;
		sits_queue_timeline_cuda(L, index, 1, done_ns);
		C->frames++;
		if (!seen_ns)
			seen_ns = sits_now_ns();
		if (C->samples_n < C->samples_cap) {
			C->latency_ms[C->samples_n] = (float)((done_ns - C->launch_from_ns[launch]) / 1e6);
			C->release_ms[C->samples_n++] = (float)((seen_ns - done_ns) / 1e6);
		}
		int r = sits_let_go(L, s, index);
		if (r)
			return r;
	}
	if (C->samples_n >= C->samples_cap / 2) {
		C->asks = SITS_CU_ASK_DRAIN;
		L->asking = C->sink;
		return SITS_Q_SINK;
	}
	return 0;
}

/* A launch in flight while the driver is short of buffers: looked at
 * again soon, not only when a next frame comes. */
static void arm(struct sits_queue *L, struct sits_sink *s)
{
	struct sits_cuda *C = s->state;
	s->deadline_ns = C->completed < C->launched && sits_queue_short(L, s)
			 ? sits_now_ns() + CU_POLL_NS : 0;
}

/* Every frame that came is launched at once. */
static int cuda_pump(struct sits_queue *L, struct sits_sink *s)
{
	int32_t index;
	while ((index = sits_port_take(L, s)) != SITS_Q_NONE) {
		int r = submit(L, s->state, index);
		if (r)
			return r;
	}
	arm(L, s);
	return 0;
}

static int cuda_on_wake(struct sits_queue *L, struct sits_sink *s)
{
	int r = sits_cuda_done(L, s->state);
	arm(L, s);
	return r;
}

static int cuda_on_deadline(struct sits_queue *L, struct sits_sink *s)
{
	return cuda_on_wake(L, s);
}

/* A buffer a launch not yet seen done converts */
static int cuda_reads(struct sits_queue *L, struct sits_sink *s, int32_t index)
{
	struct sits_cuda *C = s->state;
	(void)L;
	for (int64_t n = C->completed; n < C->launched; n++)
		if (C->launch_index[n % SITS_CU_LAUNCHES] == index)
			return 1;
	return 0;
}

static const struct sits_sink_ops ops = {
	.pump = cuda_pump,
	.on_fd = NULL,
	.on_wake = cuda_on_wake,
	.want_fd = NULL,
	.on_deadline = cuda_on_deadline,
	.reads = cuda_reads,
};

const struct sits_sink_ops *sits_cuda_sink(void)
{
	return &ops;
}
