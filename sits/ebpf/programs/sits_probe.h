/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/* What the BPF programs and user space agree on: probe point ids, the
 * histogram key and value, the streamed event, drop counters and the
 * .rodata configuration. User space sees the same structs through
 * csrc/libbpf.cdef (checked against this object's BTF by
 * tests/unit/test_ebpf_layout.py), so change both together. The enums and
 * the numeric #defines are read by sits/ebpf/header.py itself: a probe
 * point's name is its id's name without SITS_P_, in lower case, and a drop
 * counter's report name is its SITS_DROP_ name so written. */
#ifndef SITS_PROBE_H
#define SITS_PROBE_H

#include "sits_hist.h"   /* SITS_HIST_SLOTS: the histogram's slots */
#include "sits_frame.h"  /* struct sits_frame: one frame's journey, streamed when it ends */

#define SITS_HIST_ROWS 4096  /* rows per interval (the map holds two epochs) */
#define SITS_COMM_LEN 16
#define SITS_NAME_LEN 32

enum sits_probe_id {
	SITS_P_NONE = 0,
	SITS_P_SYS_READ = 1,
	SITS_P_SYS_WRITE = 2,
	SITS_P_SYS_IOCTL = 3,
	SITS_P_SYS_POLL = 4,
	SITS_P_SYS_EPOLL_WAIT = 5,
	SITS_P_SYS_SELECT = 6,
	SITS_P_FENCE_SIGNAL = 10,
	SITS_P_FENCE_WAIT = 11,
	SITS_P_V4L2_QBUF_DONE = 20,
	SITS_P_V4L2_DONE_DQBUF = 21,
	SITS_P_DRM_VBLANK_DELIVER = 30,
	SITS_P_DRM_EVENT_WAIT = 31,
	SITS_P_DRM_EVENT_READ = 32,
	SITS_P_AVCODEC_SEND_PACKET = 40,
	SITS_P_AVCODEC_RECEIVE_FRAME = 41,
	SITS_P_AVCODEC_SEND_FRAME = 42,
	SITS_P_AVCODEC_RECEIVE_PACKET = 43,
	SITS_P_FRAME_SCANOUT = 50,   /* journey.bpf.c: captured -> on screen, by CRTC */
	SITS_P_MAX = 64
};

enum sits_drop {
	SITS_DROP_RINGBUF = 0,           /* ringbuf reserve failed: event lost */
	SITS_DROP_HIST_MAP_FULL = 1,     /* histogram map full: sample not counted */
	SITS_DROP_START_MAP_FULL = 2,    /* no room to remember a start time */
	SITS_DROP_FENCE_NAMES_FULL = 3,  /* fence timeline names map full */
	SITS_DROP_HIST_ALLOC_FAILED = 4, /* histogram row not allocated (not a full
					  * map: the kernel's per-CPU element cache
					  * was empty) and every spill row taken */
	SITS_DROP_FRAME_RING = 5,        /* a finished frame record found the ring full */
	SITS_DROP_FRAME_MAP_FULL = 6,    /* no room for a frame in flight */
	SITS_DROP_MAX = 8
};

/* Rows are per (pid, tid, probe, key); tid is 0 unless per_thread. The key
 * is the fd for read/write, the command for ioctl, the fence context, the
 * buffer type, the CRTC, or the return code of an avcodec call. epoch is
 * the interval (0 or 1) the row was filled in (common.bpf.h). */
struct sits_hist_key {
	__u32 pid;
	__u32 tid;
	__u32 probe;
	__u32 epoch;
	__u64 key;
};

struct sits_hist {
	__u64 count;
	__u64 sum_ns;
	__u64 max_ns;
	__u32 slots[SITS_HIST_SLOTS];
};

/* One streamed sample (ringbuf), 40 bytes. */
struct sits_event {
	__u64 ts_ns;
	__u64 delta_ns;
	__u64 key;
	__u32 pid;
	__u32 tid;
	__u32 probe;
	__u32 pad;
};

/* Why a frame did not show as it should: record.py's DROP_CAUSES */
enum sits_frame_drop {
	SITS_FRAME_DROP_SEQUENCE_GAP = 0,  /* sequence numbers the driver skipped */
	SITS_FRAME_DROP_NOT_SHOWN = 1,     /* dequeued, never committed */
	SITS_FRAME_DROP_LATE = 2,          /* committed after a vblank it could have made */
	SITS_FRAME_DROP_REPEATED = 3,      /* on screen for more than one vblank */
	SITS_FRAME_DROP_MAX = 4
};

/* The journey's in-kernel histograms (struct sits_hist each): one per
 * stage, its span (SITS_STAGE_CAPTURED's stays empty), then these. */
enum sits_frame_hist {
	SITS_FRAME_HIST_GLASS = 6,   /* captured -> scanout, plus the display's latency */
	SITS_FRAME_HIST_LATE = 7,    /* late_ns of the late frames */
	SITS_FRAME_HIST_GAPS = 8,    /* between consecutive scanouts, when the vblanks a frame was on screen are unknown */
	SITS_FRAME_HISTS = 9
};

/* The journey's in-kernel counters of one interval (journey.bpf.c
 * count_frame()): what sits/journey/stats.py's Journey keeps besides its
 * histograms, over the frames that finished. Frames the application never
 * dequeued are not counted; those the driver marked as errors only in
 * driver_errors. Times are CLOCK_MONOTONIC ns; lo/hi 0 when n is. */
struct sits_frame_stats {
	__u64 count;
	__u64 driver_errors;
	__u64 reached[SITS_STAGE_MAX];
	__u64 drops[SITS_FRAME_DROP_MAX];
	__u64 captured_n, captured_lo, captured_hi;
	__u64 scanout_n, scanout_lo, scanout_hi;
	__s64 shown_ns;      /* time on screen of the frames whose vblanks on screen are known */
	__s64 shown_vblanks; /* ... and those vblanks */
};

/* One interval's statistics: the counters, then the histograms by
 * SITS_STAGE_* and SITS_FRAME_HIST_* (journey.bpf.c's frame_stats, per CPU) */
struct sits_frame_epoch {
	struct sits_frame_stats stats;
	struct sits_hist hists[SITS_FRAME_HISTS];
};

/* journey.bpf.c's .rodata.journey, written by sits/journey/kernel.py */
struct sits_journey_config {
	__u64 display_latency_ns;  /* added to glass to glass */
	__u32 records;             /* stream each finished frame's struct sits_frame */
	__u32 pad;
};

struct sits_fence_name {
	char driver[SITS_NAME_LEN];
	char timeline[SITS_NAME_LEN];
};

struct sits_config {
	__u32 self_pid;      /* never trace ourselves */
	__u32 filter_pids;   /* only tgids present in the `tracked` map */
	__u32 per_thread;    /* fill hist_key.tid */
	__u32 hist;          /* aggregate in-kernel histograms */
	__u64 filter_cgroup; /* cgroup v2 id, 0 = any */
	char filter_comm[SITS_COMM_LEN]; /* "" = any */
	__u64 probe_mask;    /* bit per enum sits_probe_id */
	__u32 stream;        /* emit one sits_event per sample */
	__u32 filter_tgid;   /* the one traced tgid (no map lookup), 0 = see filter_pids */
};

#endif
