"""dma-buf: buffers (buffer.py), allocators (heap.py, udmabuf.py) and
sync_file fences (sync_file.py)."""
from sits.dmabuf.buffer import DmaBuf
from sits.dmabuf.sync_file import SyncFile

__all__ = ["DmaBuf", "SyncFile"]
