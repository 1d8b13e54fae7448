"""Every kernel variant builds for every GPU sits targets, without a GPU:
nvcc compiles kernels/convert.cu (kernel.kernel_source, as the product
build) with each of kernel.all_kernel_names() instantiated, through ptxas
to a cubin (and kernels/stamp.cu), for sm_87 (Jetson Orin), sm_89 (Ada), sm_90 (H100/H200) and
the newest architecture this nvcc lists. An instruction that one target
lacks (cp.async.bulk before sm_90) fails here, not on the user's GPU."""
import concurrent.futures
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from sits.cuda import kernel as K


def find_nvcc() -> str | None:
    """nvcc on PATH, else the toolkit's at $CUDA_HOME or /usr/local/cuda."""
    nvcc = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc"
    return shutil.which("nvcc") or (str(nvcc) if nvcc.is_file() else None)


NVCC = find_nvcc()
pytestmark = pytest.mark.skipif(NVCC is None, reason="no nvcc (PATH, $CUDA_HOME/bin or /usr/local/cuda/bin)")


def targets(nvcc: str) -> list[str]:
    """sm_87, sm_89, sm_90 and the highest plain compute_NN in `nvcc --list-gpu-arch`."""
    listed = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, check=True).stdout
    newest = max(int(n) for n in re.findall(r"\bcompute_(\d+)\b", listed))
    return sorted({"sm_87", "sm_89", "sm_90", f"sm_{newest}"}, key=lambda a: int(a[3:]))


def build(nvcc: str, source: Path, arch: str) -> str | None:
    """None when every kernel builds for `arch`, else nvcc's first error."""
    cubin = source.with_suffix(f".{arch}.cubin")
    run = subprocess.run([nvcc, "-std=c++17", f"-arch={arch}", "-cubin", "-o", str(cubin), str(source)],
                         capture_output=True, text=True)
    return None if run.returncode == 0 else K.compiler_error(run.stderr + run.stdout)


def test_every_kernel_builds_for_every_target():
    archs = targets(NVCC)
    with tempfile.TemporaryDirectory(prefix="sits-arch-") as tmp:
        source = Path(tmp) / "convert.cu"
        source.write_text(K.kernel_source() + K.instantiations(K.all_kernel_names()))
        # one nvcc a target, as many at once as there are cores (each runs on one)
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            errors = dict(zip(archs, pool.map(lambda arch: build(NVCC, source, arch), archs)))
    failed = {arch: error for arch, error in errors.items() if error}
    assert not failed, "kernels that do not build: " + "; ".join(f"{a}: {e}" for a, e in failed.items())


def test_the_stamp_kernels_build_for_every_target():
    """kernels/stamp.cu (the frame queue's completion stamps) too: a GPU it
    does not build for would lose the C path."""
    from sits.cuda.stamp import STAMP_SOURCE_PATH
    archs = targets(NVCC)
    with tempfile.TemporaryDirectory(prefix="sits-arch-") as tmp:
        source = Path(tmp) / "stamp.cu"
        source.write_text(STAMP_SOURCE_PATH.read_text())
        errors = {arch: build(NVCC, source, arch) for arch in archs}
    failed = {arch: error for arch, error in errors.items() if error}
    assert not failed, "stamp kernels that do not build: " + "; ".join(f"{a}: {e}" for a, e in failed.items())
