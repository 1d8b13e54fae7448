"""Where the programs that read classic tracepoint records at offsets find
their fields (follow.bpf.c, comm.bpf.c, fence.bpf.c): from the events'
format files. Reading at offsets instead of through CO-RE means libbpf
never parses the kernel's BTF for these objects (~10-20 ms and ~11 MB of
peak RSS each with libbpf 1.1)."""
import sys

from sits.ebpf.header import COMM_LEN
from sits.ebpf.tracefs import event_fields
from sits.errors import SitsError


def record_offsets(category: str, event: str, sizes: dict[str, int | None], needed_for: str) -> list[int]:
    """Byte offsets of `sizes`' fields in a tracepoint's record, from its
    format file, for the programs that read records at offsets (no CO-RE);
    a size of None takes the field as it is. The low 32 bits of a wider
    field are where a __u32 read finds them."""
    fields = event_fields(category, event)
    out = []
    for name, size in sizes.items():
        if name not in fields or fields[name][1] != (size or fields[name][1]):
            raise SitsError(f"{needed_for} needs the {category}:{event} tracepoint (is tracefs mounted?)")
        off, actual = fields[name]
        if size is None and sys.byteorder == "big":
            off += actual - 4
        out.append(off)
    return out


def newtask_offsets() -> list[int]:
    """task_newtask's new task's pid and the low 32 bits of its clone_flags
    (follow.bpf.c)."""
    return record_offsets("task", "task_newtask", {"pid": 4, "clone_flags": None}, "following a command")


def comm_offsets() -> list[int]:
    """task_newtask's pid and comm, task_rename's pid and newcomm (comm.bpf.c)."""
    return (record_offsets("task", "task_newtask", {"pid": 4, "comm": COMM_LEN}, "--comm")
            + record_offsets("task", "task_rename", {"pid": 4, "newcomm": COMM_LEN}, "--comm"))


def fence_fields(events) -> list[int]:
    """fence.bpf.c's fence_fields: the driver and timeline __data_loc
    offsets, then context and seqno as offset and size, in the records of
    the dma_fence `events` (one class: they must agree)."""
    layouts = set()
    for event in events:
        f = event_fields("dma_fence", event)
        try:
            layouts.add((f["driver"][0], f["timeline"][0], *f["context"], *f["seqno"]))
        except KeyError:
            raise SitsError(f"dma_fence:{event}: no driver, timeline, context or seqno field "
                            "in its format file") from None
    if len(layouts) != 1 or any(size not in (4, 8) for size in list(layouts)[0][3::2]):
        raise SitsError("the dma_fence tracepoints' records are not laid out as fence.bpf.c reads them")
    return list(layouts.pop())
