import json
import subprocess
import sys
from pathlib import Path

import pytest

CHECK_ARM64 = Path(__file__).resolve().parents[2] / "tools" / "cross" / "check_arm64.py"


@pytest.fixture(scope="session")
def arm64_build(tmp_path_factory) -> dict:
    """tools/cross/check_arm64.py's summary after one run into a temporary
    folder ("out"): the arm64 build and its compile-time checks passed."""
    out = tmp_path_factory.mktemp("arm64")
    r = subprocess.run([sys.executable, CHECK_ARM64, "--out", out], capture_output=True, text=True)
    if r.returncode == 77:
        pytest.skip(r.stderr.strip())
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads((out / "summary.json").read_text()) | {"out": out}
