"""The CUDA modules and the benchmarks use one another through public names:
a module reads only the private attributes it defines itself (sits/cuda's
bench and extmem once reached into the converter's and the probe's)."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "sits" / "cuda").glob("*.py")) + sorted((ROOT / "tools" / "bench").glob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def foreign_privates(source: str) -> list[str]:
    """`obj._name` and `from m import _name` in `source` whose _name the
    source does not define (a def, a class, or an assignment to it)."""
    tree = ast.parse(source)
    own = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom):
            found += [f"line {node.lineno}: from {node.module} import {a.name}" for a in node.names
                      if _private(a.name)]
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_reads_another_modules_privates(path):
    assert foreign_privates(path.read_text()) == []


def test_the_check_finds_them():
    # What the bench and extmem did: a converter's method, a module's function.
    assert foreign_privates("out = conv._allocate(1)\ndrv = P._load_driver()\n") == [
        "line 1: conv._allocate", "line 2: P._load_driver"]
    assert foreign_privates("from sits.cuda.bench import _torch_chain\n") == [
        "line 1: from sits.cuda.bench import _torch_chain"]
    # A class of the module reading another's (FixedConversion and its converter) is the module's own.
    assert foreign_privates("class A:\n    def __init__(self):\n        self._k = 1\n"
                            "def f(a):\n    return a._k\n") == []
