"""Traces of the frame queue's events, recorded from the queue before it
became a graph of holders (tests/unit/queue_steps.py, seeded random runs
over sets of holders: the display, a CUDA stand-in, Python's consumers),
replayed through the queue as it is: the same events must make it queue
the same buffers again in the same order, make the same commits and hand
the same frames to Python and to the GPU."""
import json
import pathlib

import pytest

from tests.unit.queue_steps import CONFIGS, Steps, run_events

TRACES = sorted((pathlib.Path(__file__).parent / "queue_traces").glob("*.json"))


def test_every_set_of_holders_has_traces():
    assert {json.loads(p.read_text())["config"] for p in TRACES} == set(CONFIGS)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_replay(path):
    trace = json.loads(path.read_text())
    steps = Steps(**CONFIGS[trace["config"]])
    try:
        outs = run_events(steps, trace["events"])
    finally:
        steps.close()
    for i, (event, out) in enumerate(zip(trace["events"], outs)):
        assert out == event["out"], f"event {i} ({event['do']}): {out} != recorded {event['out']}"
