"""dma-buf allocators and sync_file against the VM kernel."""
import os

import pytest

from sits.dmabuf import buffer
from sits.dmabuf.heap import DmaHeap
from sits.dmabuf.udmabuf import Udmabuf

pytestmark = pytest.mark.vm


def test_heap_buffer_round_trip(need_dma_heaps, no_leaks):
    with DmaHeap.open("system") as heap, heap.alloc(1 << 20) as buf:
        assert buf.size == 1 << 20
        with buf.cpu_access(buffer.WRITE) as m:
            m[:4] = b"sits"
        with buf.cpu_access(buffer.READ) as m:
            assert m[:4] == b"sits"


def test_udmabuf_shares_pages_with_its_memfd(no_leaks):
    with Udmabuf.open() as u, u.alloc(3 * 4096 + 1) as buf:
        assert buf.size == 4 * 4096  # rounded to pages
        memfd = buf.backing
        os.pwrite(memfd.fileno(), b"frame", 100)
        with buf.cpu_access(buffer.READ) as m:
            assert m[100:105] == b"frame"


def test_udmabuf_needs_a_sealed_memfd():
    from sits._kernel import ffi, ioctl, lib
    from sits.errors import IoctlError
    fd = os.memfd_create("unsealed", os.MFD_CLOEXEC)
    os.ftruncate(fd, 4096)
    try:
        with Udmabuf.open() as u:
            arg = ffi.new("struct udmabuf_create *", {"memfd": fd, "size": 4096})
            with pytest.raises(IoctlError, match="^UDMABUF_CREATE: Invalid argument"):
                ioctl(u.fileno(), lib.SITS_UDMABUF_CREATE, arg)
    finally:
        os.close(fd)


def test_sync_file_export_info_and_merge(need_dma_heaps, no_leaks):
    with DmaHeap.open("system") as heap, heap.alloc(4096) as buf:
        with buf.export_fence(buffer.READ) as a, buf.export_fence(buffer.WRITE) as b:
            assert a.wait(1.0) and a.signalled()
            with a.merge(b) as merged:
                assert merged.wait(0) is True
                assert merged.status() == 1
            buf.import_fence(a)  # a signalled fence imported as a write: still idle
            with buf.export_fence() as c:
                assert c.signalled()
