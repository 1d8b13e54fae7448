/* SPDX-License-Identifier: GPL-2.0 */
/* Maps every sits object declares identically (user space creates them with
 * the first object, syscalls.bpf.c, and hands the same fds to the others
 * with bpf_map__reuse_fd), the filter, and the histogram update. */
#ifndef SITS_COMMON_BPF_H
#define SITS_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "sits_probe.h"

#define EEXIST 17
#define E2BIG 7

/* The map definitions sits repeats: a hash (or LRU hash) from key to value. */
#define SITS_HASH(map_type, nentries, key_t, value_t)	\
	struct {					\
		__uint(type, map_type);			\
		__uint(max_entries, nentries);		\
		__type(key, key_t);			\
		__type(value, value_t);			\
	}

/* Per-task start records: freed with the task, no map to fill up. */
#define SITS_TASK_STORAGE(value_t)			\
	struct {					\
		__uint(type, BPF_MAP_TYPE_TASK_STORAGE);\
		__uint(map_flags, BPF_F_NO_PREALLOC);	\
		__type(key, int);			\
		__type(value, value_t);			\
	}

const volatile struct sits_config cfg SEC(".rodata.cfg") = {};

/* One histogram map; `active` holds the interval's epoch, which is part of
 * every key. Per interval user space flips `active`, waits until no program
 * can still be using the old epoch (an update of the array-of-maps
 * `rcu_sync` returns only after an RCU grace period: the kernel's
 * maybe_wait_bpf_programs()), then reads and deletes the old epoch's rows.
 * No sample lands between read and delete. One map, named by a constant,
 * lets the verifier inline the lookup (choosing between two maps at run
 * time made it a generic helper call: ~25 ns more per sample). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 2 * SITS_HIST_ROWS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sits_hist_key);
	__type(value, struct sits_hist);
} hist SEC(".maps");

/* Where a row goes when `hist` cannot allocate one (see record()): the same
 * keys and values, preallocated, so taking a row never allocates. Sized by
 * user space before the first load (ProbeSession's spill_rows), which adds
 * its rows to `hist`'s each interval. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1);
	__type(key, struct sits_hist_key);
	__type(value, struct sits_hist);
} hist_spill SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} active SEC(".maps");

struct rcu_sync_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} rcu_inner SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct rcu_sync_inner);
} rcu_sync SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sits_hist);
} zero_hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SITS_DROP_MAX);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

SITS_HASH(BPF_MAP_TYPE_HASH, 4096, __u32, __u8) tracked SEC(".maps");

/* --comm: by tid, whether the task's name is cfg.filter_comm (1) or not
 * (0), decided once: when the task is created (from its name in the
 * task_newtask record), again when it is renamed (exec, prctl PR_SET_NAME,
 * a write to /proc/<tid>/comm, by itself or by another thread: the
 * task_rename record names it), and, for a task older than the session,
 * at its first event (comm_wanted()). comm.bpf.c keeps the first two and
 * deletes a row when its task exits. Preallocated and sized by user space
 * (one row without --comm): an update of a row never fails, and with the
 * map full a new task decides from its name at every event instead. */
SITS_HASH(BPF_MAP_TYPE_HASH, 1, __u32, __u8) comm_match SEC(".maps");

/* Process names, written when a pid's first row appears, so that a
 * process that has exited by the time user space looks is still named. */
SITS_HASH(BPF_MAP_TYPE_HASH, 4096, __u32, char[SITS_COMM_LEN]) comms SEC(".maps");

/* Streaming: sized by user space before the first load (one page when
 * streaming is off). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

static __always_inline void count_drop(__u32 what)
{
	__u64 *n = bpf_map_lookup_elem(&drops, &what);

	if (n)
		*n += 1;
}

static __always_inline bool probe_enabled(__u32 probe)
{
	return cfg.probe_mask & (1ULL << (probe & 63));
}

/* 1 when `comm` (a task's name, NUL-padded) is cfg.filter_comm, else 0 */
static __always_inline __u8 comm_is_filtered(const char *comm)
{
	for (int i = 0; i < SITS_COMM_LEN; i++) {
		if (comm[i] != cfg.filter_comm[i])
			return 0;
		if (!comm[i])
			break;
	}
	return 1;
}

static __always_inline bool comm_wanted(__u32 tid)
{
	__u8 *match = bpf_map_lookup_elem(&comm_match, &tid);
	char comm[SITS_COMM_LEN];
	__u8 m;

	if (match)
		return *match;
	bpf_get_current_comm(comm, sizeof(comm));
	m = comm_is_filtered(comm);
	/* BPF_NOEXIST: a row comm.bpf.c wrote meanwhile comes from a rename
	 * that may not be in task->comm yet (task_rename fires before the copy) */
	bpf_map_update_elem(&comm_match, &tid, &m, BPF_NOEXIST);
	return m;
}

static __always_inline bool wanted(__u64 pid_tgid)
{
	__u32 tgid = pid_tgid >> 32;

	if (tgid == cfg.self_pid)
		return false;
	if (cfg.filter_tgid) {
		if (tgid != cfg.filter_tgid)
			return false;
	} else if (cfg.filter_pids && !bpf_map_lookup_elem(&tracked, &tgid))
		return false;
	if (cfg.filter_cgroup && bpf_get_current_cgroup_id() != cfg.filter_cgroup)
		return false;
	if (cfg.filter_comm[0] && !comm_wanted((__u32)pid_tgid))
		return false;
	return true;
}

/* Adds an empty row for `k` to `map` (hist or hist_spill): 0, or the
 * update's error (-EEXIST, another CPU was first, counts as done). */
static __always_inline long new_row(void *map, struct sits_hist_key *k)
{
	__u32 zero = 0;
	struct sits_hist *z = bpf_map_lookup_elem(&zero_hist, &zero);
	long err;

	if (!z)
		return 0;  /* cannot happen (element 0 of an array); the lookup after fails */
	err = bpf_map_update_elem(map, k, z, BPF_NOEXIST);
	return err == -EEXIST ? 0 : err;
}

/* Rows are allocated as they appear (BPF_F_NO_PREALLOC) from a per-CPU
 * cache that holds one or two spare rows and is refilled from irq_work: two
 * new rows in one interrupt (a vblank that signals a fence and delivers a
 * flip event) find it empty. Programs whose sample ends in an interrupt call
 * this where it starts, in process context, so that the row exists by then
 * and the interrupt does not take one of the few spill rows. A failure here
 * loses nothing. */
static __always_inline void ensure_row(__u32 pid, __u32 probe, __u64 key)
{
	__u32 zero = 0, *epoch = bpf_map_lookup_elem(&active, &zero);
	struct sits_hist_key k = {
		.pid = pid,
		.probe = probe,
		.epoch = epoch ? *epoch : 0,
		.key = key,
	};

	if (cfg.hist && !bpf_map_lookup_elem(&hist, &k))
		new_row(&hist, &k);
}

static __always_inline void record(__u32 pid, __u32 tid, __u32 probe, __u64 key, __u64 delta)
{
	if (cfg.stream) {
		struct sits_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

		if (e) {
			e->ts_ns = bpf_ktime_get_ns();
			e->delta_ns = delta;
			e->key = key;
			e->pid = pid;
			e->tid = tid;
			e->probe = probe;
			e->pad = 0;
			/* user space drains on its own clock; no wakeup per event */
			bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
		} else {
			count_drop(SITS_DROP_RINGBUF);
		}
	}
	if (!cfg.hist)
		return;

	__u32 zero = 0, *epoch = bpf_map_lookup_elem(&active, &zero);
	struct sits_hist_key k = {
		.pid = pid,
		.tid = cfg.per_thread ? tid : 0,
		.probe = probe,
		.epoch = epoch ? *epoch : 0,
		.key = key,
	};
	struct sits_hist *h;

	h = bpf_map_lookup_elem(&hist, &k);
	if (!h) {
		long err = new_row(&hist, &k);

		if (err == -E2BIG) {
			count_drop(SITS_DROP_HIST_MAP_FULL);  /* every row taken */
			return;
		}
		if (err) {
			/* Not a full map: rows are allocated as they appear
			 * (BPF_F_NO_PREALLOC), from a small per-CPU cache that the
			 * kernel refills asynchronously and that can run dry (two new
			 * rows in one interrupt; a burst of new keys). The sample
			 * goes to the preallocated spill map instead; a later sample
			 * of the key may get its row in `hist`, and user space adds
			 * the two. */
			h = bpf_map_lookup_elem(&hist_spill, &k);
			if (!h) {
				if (new_row(&hist_spill, &k)) {
					count_drop(SITS_DROP_HIST_ALLOC_FAILED);  /* spill full too */
					return;
				}
				h = bpf_map_lookup_elem(&hist_spill, &k);
			}
		} else {
			h = bpf_map_lookup_elem(&hist, &k);
		}
		if (!h)
			return;
		if (pid == bpf_get_current_pid_tgid() >> 32) {
			char comm[SITS_COMM_LEN];

			bpf_get_current_comm(comm, sizeof(comm));
			bpf_map_update_elem(&comms, &pid, comm, BPF_ANY);
		}
	}
	/* per-CPU value: this CPU only, so plain increments */
	h->count++;
	h->sum_ns += delta;
	if (delta > h->max_ns)
		h->max_ns = delta;
	__u32 slot = sits_hist_slot(delta);

	barrier_var(slot);  /* keep the compiler from dropping the bound check */
	if (slot < SITS_HIST_SLOTS)
		h->slots[slot]++;
}

#endif
