"""csrc/ holds the binding's declarations only: its headers include the
system's and each other, never product code (sits/pipeline, sits/include);
the binding's builder puts the product's headers after them."""
import re
from pathlib import Path

CSRC = Path(__file__).resolve().parents[2] / "csrc"


def test_csrc_headers_include_only_the_system_and_csrc():
    own = {p.name for p in CSRC.iterdir()}
    offenders = {}
    for p in CSRC.glob("*.h"):
        quoted = re.findall(r'^\s*#\s*include\s+"([^"]+)"', p.read_text(), re.M)
        bad = [q for q in quoted if q not in own]
        if bad:
            offenders[p.name] = bad
    assert offenders == {}
