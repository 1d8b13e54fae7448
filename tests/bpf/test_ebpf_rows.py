"""Histogram rows when the kernel cannot allocate one, on the real kernel.

`hist` allocates rows as they appear, from a per-CPU cache of a few rows
that the kernel refills from irq_work. tools/bench/bench_probe.py's burst (one new
key per event) run when the traced task is switched out, with interrupts
off, empties it every time, as two new rows in one vblank interrupt can in
a capture. (From a syscall, with interrupts on, the refill often keeps up.)
"""
import os
import sys
import time

import pytest

from sits.ebpf.probes import Filters, ProbeSession

pytestmark = pytest.mark.bpf

BURST, CALLS = 256, 3


def _burst(bench_probe, spill_rows: int):
    """At least CALLS bursts of BURST new keys, one a switch away from the
    traced process: ({key: count}, drops)."""
    with ProbeSession((), filters=Filters(follow=True), spill_rows=spill_rows) as s:
        bench_probe.add_bursts(s, BURST, trigger="switch")
        pid = s.spawn([sys.executable, "-c", f"import time\nfor _ in range({CALLS}): time.sleep(0.002)"])
        os.waitpid(pid, 0)
        # its last switch, out of exit, can still run when it has been
        # reaped: an interval later every burst is in one of the two
        first, _ = s.collect()
        time.sleep(0.05)
        second, _ = s.collect()
        drops = s.drops()
    counts = {}
    for rows in (first, second):
        for k, h in rows.items():
            if k.probe == bench_probe.PROBE:
                counts[k.key] = counts.get(k.key, 0) + h.count
    return counts, drops


def test_a_burst_of_new_keys_empties_the_cache_and_loss_is_counted(bench_probe):
    """With one spill row the burst loses samples: every one is either
    counted or reported (so the burst does empty the kernel's cache)."""
    counts, drops = _burst(bench_probe, spill_rows=1)
    lost = drops["hist_alloc_failed"]
    assert lost > 0
    # every switch (the interpreter's start too) adds a whole burst
    total = sum(counts.values()) + lost
    assert total % BURST == 0 and total >= BURST * CALLS


def test_rows_the_kernel_cannot_allocate_go_to_the_spill_map(bench_probe):
    """With room to spill nothing is lost, and a key whose first samples
    were spilled and whose later ones got a row is added up across both."""
    counts, drops = _burst(bench_probe, spill_rows=2 * BURST)
    assert all(v == 0 for v in drops.values()), drops
    assert sorted(counts) == list(range(BURST))
    assert len(set(counts.values())) == 1 and counts[0] >= CALLS, counts

