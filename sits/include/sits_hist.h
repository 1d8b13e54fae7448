/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/* The latency histogram's slots, one rule for the BPF programs
 * (common.bpf.h, journey.bpf.c) and the frame queue (frame_queue.c).
 * The includer provides __u32 and __u64 (vmlinux.h, or <linux/types.h>).
 * sits/ebpf/header.py reads the #defines.
 *
 * Values in ns; 16 linear sub-buckets per power of two, so a bucket is at
 * most 1/16 of its lower bound wide and a quantile read from it is within
 * ~3% (midpoint) before interpolation. Slot i < 16 holds the value i;
 * above, slot 16*(e-3)+m holds [(16+m) << (e-4), (17+m) << (e-4)) where
 * e = floor(log2 v). 608 slots reach 2^41 ns (~36 min). */
#ifndef SITS_HIST_H
#define SITS_HIST_H

#define SITS_SUB_BITS 4
#define SITS_HIST_SLOTS 608

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* floor(log2 v) without a count-leading-zeros instruction (BPF has none) */
static __always_inline __u32 sits_log2_u32(__u32 v)
{
	__u32 r, shift;

	r = (v > 0xFFFF) << 4; v >>= r;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

static __always_inline __u32 sits_log2_u64(__u64 v)
{
	__u32 hi = v >> 32;

	return hi ? sits_log2_u32(hi) + 32 : sits_log2_u32(v);
}

static __always_inline __u32 sits_hist_slot(__u64 v)
{
	__u32 e, slot;

	if (v < (1 << SITS_SUB_BITS))
		return v;
	e = sits_log2_u64(v);
	slot = ((e - SITS_SUB_BITS + 1) << SITS_SUB_BITS) +
	       ((v >> (e - SITS_SUB_BITS)) - (1 << SITS_SUB_BITS));
	return slot < SITS_HIST_SLOTS ? slot : SITS_HIST_SLOTS - 1;
}

#endif
