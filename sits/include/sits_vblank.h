/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/* The "late" rule, one for the frame journey's BPF (journey.bpf.c) and the
 * frame queue's display sink (sinks/kms.c): a frame is late when a vblank
 * came between its dequeue and its commit's start, by the time since that
 * vblank. The vblanks are on a grid: `vblank` is one seen (0: none yet),
 * `period` the mode's frame time (0: unknown). Unsigned arithmetic only:
 * BPF's signed 64-bit division needs kernel 6.6, and Jetson's kernels are
 * 5.10 and 5.15. The includer provides __u64 (vmlinux.h, <linux/types.h>). */
#ifndef SITS_VBLANK_H
#define SITS_VBLANK_H

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* The last vblank at or before `t` on the grid through `vblank`. */
static __always_inline __u64 sits_vblank_before(__u64 vblank, __u64 period, __u64 t)
{
	if (!vblank || !period)
		return vblank;
	if (t >= vblank)
		return vblank + (t - vblank) / period * period;
	return vblank - (vblank - t + period - 1) / period * period;
}

/* How late a frame dequeued at `dequeued` and committed from `start` is
 * (0: not late). */
static __always_inline __u64 sits_late_ns(__u64 vblank, __u64 period, __u64 dequeued, __u64 start)
{
	__u64 before = sits_vblank_before(vblank, period, start);

	return dequeued && before > dequeued && before < start ? start - before : 0;
}

#endif
