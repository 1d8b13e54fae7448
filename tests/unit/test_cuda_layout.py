"""The host reads the conversion kernel's parameter block, span entry and
codes from the kernel's own text (sits/cuda/layout.py), with no copy: here
that reading is held against the C++ compiler's, of the same text (the CPU
emulator's build of kernels/convert.cu), and the pixel format table against
the kernel's codes."""
import pytest

from sits.cuda import layout
from sits.cuda.formats import kernel_code
from sits.formats import FORMATS
from tests.unit import cuda_emulator as emu

pytestmark = pytest.mark.skipif(emu.compiler() is None, reason="no C++ compiler (g++ or clang++)")


def test_the_compiler_lays_out_what_layout_read():
    got = iter(emu.compiled_layout())
    offset = 0
    for name, count, _ in layout.PARAM_FIELDS:
        assert next(got) == offset, f"Params.{name}"
        offset += 4 * count
    assert next(got) == 4 * layout.PARAM_WORDS, "sizeof(Params)"
    for name in layout.SPAN_DTYPE.names:
        assert next(got) == layout.SPAN_DTYPE.fields[name][1], f"Span.{name}"
    assert next(got) == layout.SPAN_DTYPE.itemsize, "sizeof(Span)"
    assert layout.SPAN_DTYPE.itemsize % next(got) == 0, "alignof(Span)"
    for name, code in layout.FORMAT_CODES.items():
        assert next(got) == code, f"FMT_{name}"
    for name, code in layout.OUT_CODES.items():
        assert next(got) == code, f"OUT_{name.upper()}"


def test_every_format_the_table_sends_to_cuda_has_a_kernel_code_and_back():
    assert {kernel_code(f) for f in FORMATS if f.cuda} == set(layout.FORMAT_CODES.values())


def test_what_the_reader_does_not_understand_is_an_error():
    with pytest.raises(ValueError, match="cannot read"):
        layout.struct_fields("struct Params { int a; double b; };", "Params")
    with pytest.raises(ValueError, match="cannot read"):
        layout.enum_members("enum { FMT_A = 0, FMT_B = FMT_A + 1 };", "FMT_")
