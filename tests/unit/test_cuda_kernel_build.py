"""Building the CUDA kernels: each one on its own (convert._kernel), so that
one that does not build for a GPU leaves the others usable, and says why
in one line. CuPy is replaced by a stand-in: no GPU needed."""
from types import SimpleNamespace

import pytest

from sits.cuda import convert as C
from sits.cuda import kernel as K
from sits.errors import DeviceError

PTXAS_LOG = """kern.cu(3): warning: a note that is not the error
ptxas /tmp/kern.ptx, line 60025; error   : Feature 'cp.async.bulk.prefetch' requires .target sm_90 or higher
ptxas fatal   : Ptx assembly aborted due to errors
"""


class CompileException(Exception):
    def get_message(self) -> str:
        return PTXAS_LOG


class RawModule:
    """Fails to build any module that holds an area_int kernel, as NVRTC did
    for sm_87 when the bulk prefetch was unguarded."""

    built: list = []

    def __init__(self, code, options, name_expressions):
        self.names = tuple(name_expressions)
        self.code = code

    def compile(self):
        RawModule.built.append(self.names)
        RawModule.sources.append(self.code)
        if any("area_int" in n for n in self.names):
            raise CompileException()

    def get_function(self, name):
        return ("kernel", name)


@pytest.fixture
def fake_cupy(monkeypatch):
    cp = SimpleNamespace(RawModule=RawModule, cuda=SimpleNamespace(
        compiler=SimpleNamespace(CompileException=CompileException),
        Device=lambda: SimpleNamespace(compute_capability="87")))
    monkeypatch.setattr(C, "cupy", lambda: cp)
    RawModule.built = []
    RawModule.sources = []
    C._built.cache_clear()
    yield cp
    C._built.cache_clear()  # no stand-in kernels left for a later (GPU) test


def test_a_kernel_that_does_not_build_costs_only_its_plans(fake_cupy):
    with pytest.raises(DeviceError) as err:
        C._kernel("sits::area_int<0, 1, 1>")
    assert str(err.value) == ("the CUDA kernel sits::area_int<0, 1, 1> does not build for sm_87: ptxas "
                              "/tmp/kern.ptx, line 60025; error   : Feature 'cp.async.bulk.prefetch' "
                              "requires .target sm_90 or higher")
    assert C._kernel("sits::area<0, 1, 4>") == ("kernel", "sits::area<0, 1, 4>")
    assert C._kernel("sits::bilinear<2, 0>") == ("kernel", "sits::bilinear<2, 0>")
    assert C._kernel("sits::bilinear<2, 0>") == ("kernel", "sits::bilinear<2, 0>")  # built once
    assert RawModule.built == [("sits::area_int<0, 1, 1>",), ("sits::area<0, 1, 4>",), ("sits::bilinear<2, 0>",)]


def test_a_variant_builds_its_own_text(fake_cupy):
    # A benchmark's variant is built from its own kernel text, beside the
    # product's, and never stands in for it.
    variant = K.Variant(int_threads=128, defines=(("SITS_AREA_MIN_BLOCKS", "4"),))
    C._kernel("sits::area<0, 1, 4>")
    C._kernel("sits::area<0, 1, 4>", variant)
    C._kernel("sits::area<0, 1, 4>")
    product, mine = RawModule.sources
    assert product == K.kernel_source()
    assert "#define SITS_INT_THREADS 128\n#define SITS_AREA_MIN_BLOCKS 4\n" in mine
    assert "SITS_AREA_MIN_BLOCKS 4" not in product and "#define SITS_INT_THREADS 256\n" in product
