/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/* One frame's journey, one record for both who follow it: the kernel's
 * journey (journey.bpf.c, joined by buffer identity; `sits probe frames`)
 * and the frame queue's own timeline (frame_queue.c; `sits capture
 * --timeline`), so that one can be held against the other field by field.
 * The includer provides __u32 and __u64 (vmlinux.h, or <linux/types.h>).
 * The part between the cdef markers is read by both cffi builds
 * (csrc/build_kernel.py, csrc/build_libbpf.py); sits/ebpf/header.py reads
 * the enums.
 *
 * Times are CLOCK_MONOTONIC ns, 0 where the frame did not get there. */
#ifndef SITS_FRAME_H
#define SITS_FRAME_H

/* cdef-begin */
struct sits_frame {
	__u64 id;            /* in capture order */
	__u64 vb;            /* the vb2 buffer's kernel address (the kernel's journey) */
	__u64 captured_ns;   /* the V4L2 timestamp */
	__u64 dequeued_ns;
	__u64 committed_ns;  /* the commit's ioctl began */
	__u64 scanout_ns;    /* the vblank it went on screen at */
	__u64 replaced_ns;   /* the vblank the next frame on its plane did */
	__u64 requeued_ns;
	__u64 made_ns;       /* a stage made it into a buffer of its own (the frame queue's) */
	__u64 cuda_submitted_ns;   /* its conversion was launched (the frame queue's) */
	__u64 cuda_done_ns;        /* ... and completed on the GPU */
	__u64 late_ns;       /* committed this long after a vblank that followed its dequeue */
	__u32 pid;           /* the process that dequeued it */
	__u32 buffer;        /* V4L2 buffer index (the frame queue's: in its source's own numbering) */
	__u32 sequence;
	__u32 skipped_before;   /* sequence numbers the driver skipped just before it */
	__u32 scanout_seq;   /* vblank counts */
	__u32 replaced_seq;
	__u32 flags;         /* SITS_FRAME_* */
	__u32 crtc;
	__u32 source;        /* the frame queue's source it came from (0: the first; the kernel's journey: 0) */
	__u32 made_buffer;   /* the buffer a stage made it into, in the stage's own numbering, + 1 (0: none) */
};
/* cdef-end */

enum sits_frame_flags {
	SITS_FRAME_COPIED = 1,     /* the commit showed a copy (no capture dma-buf behind it) */
	SITS_FRAME_ERROR = 2,      /* the driver marked the buffer as an error */
	SITS_FRAME_FREED = 4,      /* its buffer was freed before it was requeued (REQBUFS again, close) */
};

/* A frame's stages in the order it reaches them: the first of
 * sits/journey/record.py's STAGES, which reads them from here. A stage's
 * span runs from the nearest earlier stage the frame reached at or before
 * it (sits/journey/stats.py spans(), journey.bpf.c count_frame()). */
enum sits_frame_stage {
	SITS_STAGE_CAPTURED = 0,
	SITS_STAGE_DEQUEUED = 1,
	SITS_STAGE_COMMITTED = 2,
	SITS_STAGE_SCANOUT = 3,
	SITS_STAGE_REPLACED = 4,
	SITS_STAGE_REQUEUED = 5,
	SITS_STAGE_MAX = 6
};

#endif
