import importlib.util
from pathlib import Path

import pytest

BENCH_PROBE = Path(__file__).resolve().parents[2] / "tools" / "bench" / "bench_probe.py"


@pytest.fixture(scope="session")
def bench_probe():
    """tools/bench/bench_probe.py: bursts of synthetic events in a session
    (no part of sits, so loaded from its file)."""
    spec = importlib.util.spec_from_file_location("bench_probe", BENCH_PROBE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
