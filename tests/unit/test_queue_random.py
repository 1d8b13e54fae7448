"""The C frame queue driven through seeded random events over every set of
holders (the display with out-fences signalled late or at once, a CUDA
stand-in whose launches complete late, Python's consumers releasing in any
order, the source going away): after every event each buffer is with the
source, or held by the sinks that wait for it or read it -- never both,
never lost (sits_queue_check, the C's own rule) -- and once the run winds
down every buffer is back with the source but the one on screen."""
import random

import pytest

from sits._kernel import lib
from sits.pipeline.frame_queue import CHECKS, NONE
from tests.unit.queue_steps import CONFIGS, Steps

SEEDS = range(12)
EVENTS = 300


def check(steps, what):
    L = steps.c_queue
    if lib.sits_queue_check(L):
        raise AssertionError(f"after {what}: buffer {L.err_index} {CHECKS[L.err]}")


def wind_down(steps, rng):
    """No more frames; everything in flight completes: flips, fences,
    launches, releases (as Pipeline's stop waits for them)."""
    steps.stopping = True
    for _ in range(1000):
        kinds = steps.can()
        if not kinds:
            return
        kind = rng.choice(kinds)
        steps.release(rng.randrange(len(steps.held))) if kind == "release" else getattr(steps, kind)()
        check(steps, f"winding down: {kind}")
    raise AssertionError("the run never wound down")


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("seed", SEEDS)
def test_buffers_are_conserved_through_random_events(config, seed):
    rng = random.Random(seed)
    steps = Steps(**CONFIGS[config], commit_after_retire=True)
    steps.rng_fence = lambda: rng.random() < 0.6
    gone_at = rng.randrange(EVENTS // 2, EVENTS) if seed % 3 == 0 else None   # a third lose the source
    try:
        for n in range(EVENTS):
            if n == gone_at:
                steps.disconnect()
                check(steps, "the source went")
                continue
            kinds = steps.can()
            if not kinds:   # the source went and nothing is in flight
                break
            kind = rng.choice(kinds)
            steps.release(rng.randrange(len(steps.held))) if kind == "release" else getattr(steps, kind)()
            check(steps, f"event {n} ({kind})")
        wind_down(steps, rng)
        L = steps.c_queue
        on_screen = steps.d.K.on_screen.index if steps.d is not None else NONE
        out = [i for i in range(steps.nbufs) if not L.queued[i] and i != on_screen]
        if gone_at is None:
            assert out == [], f"buffers {out} never came back to the source"
        assert [i for i in range(steps.nbufs) if L.holds[i] and i != on_screen] == []
    finally:
        steps.close()
