"""Where the programs that read classic tracepoint records at offsets find
their fields (sits.ebpf.records), from format files (here: fakes)."""
import pytest

from sits.ebpf import records
from sits.errors import SitsError

DMA_FENCE = {"common_type": (0, 2), "driver": (8, 4), "timeline": (12, 4), "context": (16, 4), "seqno": (20, 4)}


def fake_formats(monkeypatch, formats):
    monkeypatch.setattr(records, "event_fields", lambda category, event: formats.get((category, event), {}))


def test_fence_fields_are_offsets_and_sizes(monkeypatch):
    wide = dict(DMA_FENCE, context=(16, 8), seqno=(24, 8))
    fake_formats(monkeypatch, {("dma_fence", "a"): DMA_FENCE, ("dma_fence", "b"): DMA_FENCE,
                               ("dma_fence", "wide"): wide})
    assert records.fence_fields(["a", "b"]) == [8, 12, 16, 4, 20, 4]
    assert records.fence_fields(["wide"]) == [8, 12, 16, 8, 24, 8]


@pytest.mark.parametrize("other", [dict(DMA_FENCE, seqno=(24, 4)), dict(DMA_FENCE, context=(16, 2)),
                                   {k: v for k, v in DMA_FENCE.items() if k != "timeline"}])
def test_fence_fields_refuse_what_fence_bpf_c_cannot_read(monkeypatch, other):
    """One layout for every event the programs attach to (they share
    fence_fields), context and seqno of 4 or 8 bytes."""
    fake_formats(monkeypatch, {("dma_fence", "a"): DMA_FENCE, ("dma_fence", "b"): other})
    with pytest.raises(SitsError):
        records.fence_fields(["a", "b"] if "timeline" in other else ["b"])


def test_comm_offsets(monkeypatch):
    fake_formats(monkeypatch, {
        ("task", "task_newtask"): {"pid": (8, 4), "comm": (12, 16), "clone_flags": (32, 8)},
        ("task", "task_rename"): {"pid": (8, 4), "oldcomm": (12, 16), "newcomm": (28, 16)}})
    assert records.comm_offsets() == [8, 12, 8, 28]


def test_a_missing_tracepoint_names_what_needs_it(monkeypatch):
    fake_formats(monkeypatch, {("task", "task_newtask"): {"pid": (8, 4), "comm": (12, 16)}})
    with pytest.raises(SitsError, match="--comm needs the task:task_rename tracepoint"):
        records.comm_offsets()


@pytest.mark.parametrize("byteorder, offset", [("little", 32), ("big", 36)])
def test_low_32_bits_of_a_wide_field(monkeypatch, byteorder, offset):
    fake_formats(monkeypatch, {("task", "task_newtask"): {"pid": (8, 4), "clone_flags": (32, 8)}})
    monkeypatch.setattr(records.sys, "byteorder", byteorder)
    assert records.newtask_offsets() == [8, offset]
