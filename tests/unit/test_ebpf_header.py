"""sits_probe.h is the one source of probe ids, drop counters and histogram
constants: sits.ebpf.header reads it at import. These tests hold that
reading to the compiler's (every enum member, every value), and the probe
points and report names to the header's enums."""
import json
import os
import shutil
import subprocess

import pytest

from sits.ebpf import header
from sits.ebpf.points import POINT_BY_NAME, POINTS

ENUMS = ("sits_probe_id", "sits_drop", "sits_frame_flags", "sits_frame_stage", "sits_frame_drop", "sits_frame_hist")


def compiler_enums(tmp_path) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """({enum: {member: value}}, {define: value}) as clang and the C compiler
    see the header."""
    ast = subprocess.run(["clang", "-x", "c", "-fsyntax-only", "-Xclang", "-ast-dump=json",
                          "-include", "linux/types.h", "-I", header.INCLUDE, header.PATH], capture_output=True, text=True, check=True)
    names = {n["name"]: [c["name"] for c in n["inner"]] for n in json.loads(ast.stdout)["inner"]
             if n.get("kind") == "EnumDecl" and n.get("name") in ENUMS}
    members = [m for e in ENUMS for m in names[e]]
    src = tmp_path / "values.c"
    src.write_text("#include <stdio.h>\n#include <linux/types.h>\n#include \"sits_probe.h\"\nint main(void)\n{\n"
                   + "".join(f'\tprintf("%lld\\n", (long long){m});\n' for m in members + list(header.DEFINES))
                   + "\treturn 0;\n}\n")
    exe = tmp_path / "values"
    subprocess.run(["cc", "-I", os.path.dirname(header.PATH), "-I", header.INCLUDE, "-o", str(exe), str(src)], check=True)
    values = [int(v) for v in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()]
    got = dict(zip(members + list(header.DEFINES), values))
    return {e: {m: got[m] for m in names[e]} for e in ENUMS}, {d: got[d] for d in header.DEFINES}


@pytest.mark.skipif(not (shutil.which("clang") and shutil.which("cc")), reason="clang and cc needed")
def test_header_read_as_the_compiler_reads_it(tmp_path):
    enums, defines = compiler_enums(tmp_path)
    for e in ENUMS:
        assert header.ENUMS[e] == enums[e], e
    assert header.DEFINES == defines
    assert {"SITS_HIST_SLOTS", "SITS_SUB_BITS", "SITS_COMM_LEN"} <= set(defines)


def test_every_probe_id_is_a_point():
    """A new SITS_P_ id needs its ProbePoint (and a point its id: _point()
    would fail at import)."""
    assert set(header.PROBE_IDS) == set(POINT_BY_NAME)
    ids = [p.id for p in POINTS]
    assert len(set(ids)) == len(ids)
    assert max(header.PROBE_IDS.values()) < header.PROBE_ID_LIMIT <= 64  # bits of cfg.probe_mask


def test_drop_names_are_the_audit_schema_keys():
    """The report's drops keys (schema sits.probe.audit/1, stable) are the
    SITS_DROP_ names: renaming one in the header would change the schema."""
    assert list(header.DROP_IDS) == ["ringbuf", "hist_map_full", "start_map_full", "fence_names_full",
                                     "hist_alloc_failed", "frame_ring", "frame_map_full"]
    assert max(header.DROP_IDS.values()) < header.ENUMS["sits_drop"]["SITS_DROP_MAX"]


@pytest.mark.parametrize("text", ["enum e { A = 1 << 2 };", "enum e { A = B };", "enum e { 1A };"])
def test_what_the_reader_does_not_understand_raises(text):
    with pytest.raises(ValueError, match="cannot read"):
        header.parse(text)


def test_reader_follows_c_rules():
    defines, enums = header.parse("/* enum no { X }; */ enum e { A, B = 0x10, C, // c\n D = 3 };\n"
                                  "#define N 608\n#define S \"x\"\nstruct s { enum e v; };\n")
    assert enums == {"e": {"A": 0, "B": 16, "C": 17, "D": 3}}
    assert defines == {"N": 608}


def test_the_journeys_stages_and_drops_are_the_headers():
    """journey.bpf.c counts by enum sits_frame_stage and sits_frame_drop;
    the records' schema (record.py) is read from them, so the kernel's
    statistics and the records' name the same things in the same order."""
    from sits.journey import record
    from sits.journey.stats import DISPLAY_CHAIN
    assert record.STAGES[:len(header.FRAME_STAGES)] == header.FRAME_STAGES == DISPLAY_CHAIN == (
        "captured", "dequeued", "committed", "scanout", "replaced", "requeued")
    assert record.DROP_CAUSES == header.FRAME_DROPS == ("sequence_gap", "not_shown", "late", "repeated")
    stage_max = header.ENUMS["sits_frame_stage"]["SITS_STAGE_MAX"]
    assert stage_max == len(header.FRAME_STAGES)
    # the histograms after the stages' ones, numbered on from them
    assert sorted(header.FRAME_HISTS.values()) == list(range(stage_max, header.FRAME_HIST_COUNT))
    assert header.ENUMS["sits_frame_drop"]["SITS_FRAME_DROP_MAX"] == len(header.FRAME_DROPS)


def test_an_enum_of_indices_must_count_from_zero():
    with pytest.raises(ValueError, match="not numbered"):
        header._in_order({"a": 0, "b": 2})
