"""Test tiers (see pyproject markers):

- unmarked: pure logic, run anywhere.
- bpf: real eBPF on the host kernel; skipped (with the reason) without root.
- vm: real V4L2/DRM/dma-buf; on the host these are run inside the test VM in
  one boot and their outcomes reported here (tests/vm_plugin.py).
- cuda: needs an NVIDIA GPU; skipped with the reason elsewhere.
"""
import ctypes
import functools
import os

import pytest

pytest_plugins = ["tests.vm_plugin"]

# every frame queue in the tests (and in the commands they run) ends each
# step with its buffer conservation check (sits/pipeline/frame_queue.py)
from sits.pipeline.frame_queue import CHECK_ENV  # noqa: E402

os.environ.setdefault(CHECK_ENV, "1")


@functools.cache
def cuda_unavailable_reason() -> str | None:
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no CUDA driver (libcuda.so.1) on this machine"
    count = ctypes.c_int(0)
    if libcuda.cuInit(0) != 0 or libcuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return "CUDA driver present but no usable GPU"
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "bpf" in item.keywords and os.geteuid() != 0:
            item.add_marker(pytest.mark.skip(reason="bpf tier needs root (CAP_BPF + CAP_PERFMON)"))
        if "cuda" in item.keywords:
            reason = cuda_unavailable_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"cuda tier: {reason}"))
