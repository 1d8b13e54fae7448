/* A stage's interface (stage.c): the work a stage does to a frame, and
 * the stage's own struct. Each stage's work (stages/*.c) includes it. */
#ifndef SITS_STAGE_H
#define SITS_STAGE_H

#include <stdint.h>
#include "frame_queue.h"

/* cdef-begin */
struct sits_stage;

/* What a stage does to a frame: on the worker thread, make the frame in
 * buffer `in` (its bytes in_ptr[in], bytesused of them) into buffer
 * `out` (out_ptr[out]). 0, or an errno (the frame is counted as an error
 * and dropped; the stage goes on). */
struct sits_stage_work {
	int (*work)(struct sits_stage *S, int32_t in, uint32_t bytesused, int32_t out);
};

struct sits_stage {
	/* set by Python */
	const struct sits_stage_work *work;
	void *work_state;                       /* the work's own struct */
	int32_t sink, source;                   /* its ids in the queue: the frames it takes, the buffers it fills */
	const uint8_t *in_ptr[SITS_Q_MAX_BUFS];  /* each input buffer's bytes, by the queue's numbering */
	int32_t in_dmabuf[SITS_Q_MAX_BUFS];     /* its dma-buf's fd + 1, whose reads DMA_BUF_IOCTL_SYNC brackets (0: plain memory) */
	uint8_t *out_ptr[SITS_Q_MAX_BUFS];       /* each of its own buffers' bytes */
	uint32_t out_bytes;                     /* what a made frame's bytesused says */
	/* state */
	int32_t go_fd, done_fd;                 /* eventfds: a job for the worker; a job done (its source's fd) */
	int32_t busy;                           /* a job is with the worker */
	int32_t job_in, job_out, job_err;
	uint32_t job_bytes;
	uint8_t out_free[SITS_Q_MAX_BUFS];      /* its buffers it may fill */
	int64_t made, errors;
	int64_t work_ns, work_max_ns;           /* the worker's time, in all and at most */
	int64_t job_start_ns;
	void *worker;                           /* the thread (sits_stage_start .. sits_stage_stop) */
};

const struct sits_sink_ops *sits_stage_sink(void);      /* its C halves */
const struct sits_source_ops *sits_stage_source(void);
int sits_stage_start(struct sits_stage *S);     /* the worker and the eventfds: 0, or an errno */
void sits_stage_stop(struct sits_stage *S);     /* it ends its job, then goes (the job is abandoned); the eventfds are closed */
int sits_stage_drop_waiting(struct sits_queue *L, struct sits_stage *S);  /* the frames waiting for it are dropped (counted) */
/* cdef-end */

#endif
