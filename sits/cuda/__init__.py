"""The CUDA stage: frames from the zero-copy chain into model-ready tensors.

`import sits.cuda` needs no GPU, CuPy or CUDA driver; the GPU parts import
CuPy on first use and raise DeviceError with the reason when there is none.

- `probe.probe()`: which import strategies this driver supports (ctypes, never raises).
- `formats`: formats, colour matrices, geometry, all checked at set-up (`make_plan`).
- `reference`: the numpy oracle of the fused kernel.
- `convert.FrameConverter`: one fused kernel launch per batch, CUDA graphs, DLPack batches.
- `hostmem`: memfd buffers registered once with cudaHostRegister.
- `batcher.DynamicBatcher`: batch size from a latency budget.
- `sink.CudaFrameSink`: submit(frame, on_done) from the poll loop; leases released on CUDA events.
"""
from sits.cuda.formats import OutputSpec, SourceFormat, make_plan

__all__ = ["OutputSpec", "SourceFormat", "make_plan"]
