#!/usr/bin/env python3
"""An overlay drawing on the GPU (sits.cuda.overlay.GpuDrawing) against
cairo (sits.overlay.render), in the same run: ten outlined, filled boxes
and a 160x160 mask scaled twice on a 1280x720 ARGB8888 image.

    PYTHONPATH=. python3 tools/bench/overlay_draw_bench.py      # on the GPU machine

GPU: each draw's upload, launch and wait, into device memory; cairo: into
host memory. Prints wall and CPU ms a drawing and the ratio.
"""
import time

import numpy as np

W, H = 1280, 720


def drawing():
    from sits.overlay import Drawing
    d = Drawing()
    for i in range(10):
        d.box(50 + i * 100, 100, 130 + i * 100, 300, color=(255, 64, 0, 255), width=3, fill_alpha=60)
    ramp = np.tile(np.linspace(0, 255, 160).astype(np.uint8), (160, 1))
    return d.mask(ramp, x=400, y=400, color=(0, 255, 0, 160), scale=2)


def timed(fn, n: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        fn()
    return (time.perf_counter() - wall) / n * 1e3, (time.process_time() - cpu) / n * 1e3


def main() -> None:
    import cupy as cp

    from sits.cuda.overlay import GpuDrawing
    from sits.overlay import render
    d = drawing()
    gpu = GpuDrawing(W, H, W * 4)
    out = cp.zeros((H, W * 4), cp.uint8)

    def on_gpu():
        gpu.draw(d, out.data.ptr)
        gpu.wait()
    buf = np.zeros((H, W * 4), np.uint8)
    timed(on_gpu, 20)
    g_wall, g_cpu = timed(on_gpu, 200)
    c_wall, c_cpu = timed(lambda: render(d, buf, W, H, W * 4), 50)
    print(f"GPU: {g_wall:.3f} ms wall, {g_cpu:.3f} ms CPU a drawing; cairo: {c_wall:.3f} ms wall, {c_cpu:.3f} ms CPU; "
          f"GPU / cairo: {g_wall / c_wall:.3f}x wall, {g_cpu / c_cpu:.3f}x CPU")


if __name__ == "__main__":
    main()
