/* A V4L2 capture device as the frame queue's source: DQBUF takes a filled
 * buffer, QBUF gives one back (MMAP, or DMABUF with the buffer's dma-buf).
 * Buffers the driver marks with V4L2_BUF_FLAG_ERROR are counted and given
 * back, never offered. V4L2's buffer i is the queue's src->first + i. */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

#include "sits_kernel.h"
#include "frame_queue.h"

/* cdef-begin */
struct sits_v4l2_source {
	/* set by Python */
	uint32_t memory;                        /* V4L2_MEMORY_MMAP or _DMABUF */
	int32_t dmabuf_fd[SITS_Q_MAX_BUFS];     /* DMABUF: each buffer's dma-buf (by V4L2 index) */
	uint32_t length[SITS_Q_MAX_BUFS];
};

const struct sits_source_ops *sits_v4l2_source(void);   /* its C half */
/* cdef-end */

static int v4l2_give(struct sits_queue *L, struct sits_q_source *src, int32_t index)
{
	struct sits_v4l2_source *V = src->state;
	struct v4l2_buffer b;
	int32_t i = index - src->first;
	memset(&b, 0, sizeof b);
	b.index = i;
	b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
	b.memory = V->memory;
	if (V->memory == V4L2_MEMORY_DMABUF) {
		b.m.fd = V->dmabuf_fd[i];
		b.length = V->length[i];
	}
	if (ioctl(src->fd, VIDIOC_QBUF, &b) < 0) {
		if (errno == ENODEV || errno == ENXIO)
			return -sits_queue_fail(L, SITS_OP_QBUF, index);
		return SITS_GIVE_RETRY;     /* vivid injects these: the queue retries it */
	}
	return SITS_GIVE_QUEUED;
}

static int v4l2_take(struct sits_queue *L, struct sits_q_source *src, struct sits_q_frame *f)
{
	struct sits_v4l2_source *V = src->state;
	struct v4l2_buffer b;
	for (;;) {
		memset(&b, 0, sizeof b);
		b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
		b.memory = V->memory;
		if (ioctl(src->fd, VIDIOC_DQBUF, &b) < 0) {
			if (errno == EAGAIN)
				return 0;
			return -sits_queue_fail(L, SITS_OP_DQBUF, -1);
		}
		int given = L->queued[src->first + (int32_t)b.index];
		sits_source_took(L, src, src->first + (int32_t)b.index, b.sequence);
		if (!given) {
			/* a frame in a buffer the driver did not have (v4l2loopback's
			 * readers share its writer's ring): a sink may still read
			 * that buffer, so the frame is not taken (its sequence
			 * number counts: no gap) */
			src->unqueued_fills++;
			continue;
		}
		if (!(b.flags & V4L2_BUF_FLAG_ERROR))
			break;
		src->buffer_errors++;
		int r = sits_give_back(L, src->first + (int32_t)b.index);
		if (r)
			return -r;
	}
	memset(f, 0, sizeof *f);
	f->index = src->first + (int32_t)b.index;
	f->sequence = b.sequence;
	f->bytesused = b.bytesused;
	f->timestamp_ns = (int64_t)b.timestamp.tv_sec * 1000000000 + (int64_t)b.timestamp.tv_usec * 1000;
	return 1;
}

static const struct sits_source_ops ops = {
	.take = v4l2_take,
	.give = v4l2_give,
};

const struct sits_source_ops *sits_v4l2_source(void)
{
	return &ops;
}
