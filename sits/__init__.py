"""sits: zero-copy V4L2 -> dma-buf -> DRM/KMS/CUDA chains, and eBPF latency
observability, for Linux video appliances.

Importing sits needs neither CUDA nor a device; each interface lives in its
own subpackage (v4l2, drm, dmabuf, ebpf, cuda) and is imported on demand.
"""
from sits.errors import IoctlError, SitsError

__version__ = "0.1.0"
__all__ = ["IoctlError", "SitsError", "__version__", "open_chain"]


def __getattr__(name):
    if name == "open_chain":  # the chain's API (sits/pipeline/chain.py), loaded when asked for
        from sits.pipeline.chain import open_chain
        return open_chain
    raise AttributeError(name)
