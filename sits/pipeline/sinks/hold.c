/* A sink that counts frames and holds each for a set time, then lets it go:
 * GStreamer's `identity sleep-time=... ! fakesink` as a frame queue sink,
 * for sizing a chain's buffers against a consumer's latency without that
 * consumer, in the C steady state (its release is a deadline of the
 * queue's loop, no thread, no Python a frame). Python attaches it as
 * CSink("hold", hold_ns=...) (sits/pipeline/csink.py).
 */
#include <string.h>

#include "sits_kernel.h"
#include "frame_queue.h"

/* cdef-begin */
struct sits_hold {
	int64_t hold_ns;                        /* set by Python: how long each frame is held */
	int64_t frames;                         /* frames taken */
	int64_t released;                       /* frames let go */
	int32_t ring[SITS_Q_MAX_BUFS];          /* held buffers, oldest first from `first` */
	int64_t until_ns[SITS_Q_MAX_BUFS];
	int32_t first, n;
};

const struct sits_sink_ops *sits_hold_sink(void);
/* cdef-end */

static int hold_pump(struct sits_queue *L, struct sits_sink *s)
{
	struct sits_hold *H = s->state;
	int32_t index;
	while (H->n < SITS_Q_MAX_BUFS && (index = sits_port_take(L, s)) != SITS_Q_NONE) {
		int32_t at = (H->first + H->n++) % SITS_Q_MAX_BUFS;
		H->ring[at] = index;
		H->until_ns[at] = sits_now_ns() + H->hold_ns;
		H->frames++;
		if (H->n == 1)
			s->deadline_ns = H->until_ns[at];
	}
	return 0;
}

static int hold_on_deadline(struct sits_queue *L, struct sits_sink *s)
{
	struct sits_hold *H = s->state;
	int64_t now = sits_now_ns();
	while (H->n && H->until_ns[H->first] <= now) {
		int32_t index = H->ring[H->first];
		H->first = (H->first + 1) % SITS_Q_MAX_BUFS;
		H->n--;
		H->released++;
		int r = sits_let_go(L, s, index);
		if (r)
			return r;
	}
	s->deadline_ns = H->n ? H->until_ns[H->first] : 0;
	return 0;
}

static int hold_reads(struct sits_queue *L, struct sits_sink *s, int32_t index)
{
	struct sits_hold *H = s->state;
	(void)L;
	for (int32_t k = 0; k < H->n; k++)
		if (H->ring[(H->first + k) % SITS_Q_MAX_BUFS] == index)
			return 1;
	return 0;
}

static const struct sits_sink_ops ops = {
	.pump = hold_pump,
	.on_deadline = hold_on_deadline,
	.reads = hold_reads,
};

const struct sits_sink_ops *sits_hold_sink(void)
{
	return &ops;
}
