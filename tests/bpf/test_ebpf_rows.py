"""Histogram rows when the kernel cannot allocate one, on the real kernel.

`hist` allocates rows as they appear, from a per-CPU cache of a few rows;
a burst of new keys in one program run empties it. The bench program's
burst (one new key per event) does that in process context, as two new rows
in one vblank interrupt do in a capture.
"""
import os
import sys

import pytest

from sits.ebpf.probes import Filters, ProbeSession

pytestmark = pytest.mark.bpf

BURST, CALLS = 256, 3
BENCH = 60  # SITS_P_BENCH


def _burst(spill_rows: int):
    """CALLS bursts of BURST new keys: ({key: count}, drops)."""
    with ProbeSession(("bench",), filters=Filters(follow=True), bench_burst=BURST,
                      spill_rows=spill_rows) as s:
        pid = s.spawn([sys.executable, "-c", f"import os\nfor _ in range({CALLS}): os.getppid()"])
        os.waitpid(pid, 0)
        rows, _ = s.collect()
        drops = s.drops()
    counts = {}
    for k, h in rows.items():
        if k.probe == BENCH:
            counts[k.key] = counts.get(k.key, 0) + h.count
    return counts, drops


def test_a_burst_of_new_keys_empties_the_cache_and_loss_is_counted():
    """With one spill row the burst loses samples: every one is either
    counted or reported (so the burst does empty the kernel's cache)."""
    counts, drops = _burst(spill_rows=1)
    lost = drops["hist_alloc_failed"]
    assert lost > 0
    # the interpreter's own getppid() calls may add whole bursts
    total = sum(counts.values()) + lost
    assert total % BURST == 0 and total >= BURST * CALLS


def test_rows_the_kernel_cannot_allocate_go_to_the_spill_map():
    """With room to spill nothing is lost, and a key whose first samples
    were spilled and whose later ones got a row is added up across both."""
    counts, drops = _burst(spill_rows=2 * BURST)
    assert all(v == 0 for v in drops.values()), drops
    assert sorted(counts) == list(range(BURST))
    assert len(set(counts.values())) == 1 and counts[0] >= CALLS, counts

