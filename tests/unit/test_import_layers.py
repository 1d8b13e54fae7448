"""sits.journey builds on sits.ebpf, never the other way round: no module
of sits.ebpf imports sits.journey, at the top or inside a function (the
CLI combines what both report)."""
import ast
from pathlib import Path

EBPF = Path(__file__).resolve().parents[2] / "sits" / "ebpf"


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_ebpf_imports_nothing_of_journey():
    offenders = {p.name: sorted(m for m in _imports(p) if m == "sits.journey" or m.startswith("sits.journey."))
                 for p in EBPF.glob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}
