// SPDX-License-Identifier: GPL-2.0
/* Synthetic event producer for the benchmarks and the bpf tier
 * (tools/bench/bench_probe.py adds it to a ProbeSession): each trigger
 * from a traced process emits `bench.burst` events through record(), the
 * same path sits' probes take, under the probe id `bench.probe`, which no
 * sits point has. Only the chosen trigger's program loads. */
#include "common.bpf.h"

#if defined(__TARGET_ARCH_x86)
#define NR_getppid 110
#elif defined(__TARGET_ARCH_arm64)
#define NR_getppid 173
#endif

/* written by bench_probe.py before the load */
const volatile struct {
	__u32 burst;   /* events per trigger */
	__u32 probe;   /* their probe id */
} bench SEC(".rodata.bench") = {};

static long emit_one(__u64 i, void *ctx)
{
	record(cfg.self_pid + 1, 0, bench.probe, i, i);
	return 0;
}

SEC("raw_tp/sys_enter")
int BPF_PROG(sits_bench_burst, struct pt_regs *regs, long nr)
{
	if (nr != NR_getppid || !wanted(bpf_get_current_pid_tgid()))
		return 0;
	bpf_loop(bench.burst, emit_one, NULL, 0);
	return 0;
}

/* The same burst when a traced task is switched out: the scheduler runs
 * this with interrupts off, so the kernel cannot refill its per-CPU cache
 * of histogram rows during the burst, as in a vblank interrupt
 * (tests/bpf/test_ebpf_rows.py). */
SEC("tp_btf/sched_switch")
int BPF_PROG(sits_bench_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	if (!wanted(bpf_get_current_pid_tgid()))
		return 0;
	bpf_loop(bench.burst, emit_one, NULL, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
