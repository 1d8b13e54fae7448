"""Runs sits/cuda/kernels/convert.cu on the CPU: each CUDA thread is a host
thread and __syncthreads() a std::barrier, so the kernel text that the GPU
runs is checked against the numpy oracle where there is no GPU (CI).

It is an emulator of the CUDA execution model only as far as these kernels
need it (blocks run one at a time, threads of a block concurrently).
"""
import ctypes
import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from sits.cuda import kernel as K
from sits.cuda.formats import DTYPES

DRIVER = r"""
#include <barrier>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>
#include <math.h>

#define SITS_EMULATE 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
typedef _Float16 __half;
static inline __half __float2half_rn(float x) { return (__half)x; }
static inline unsigned short __half_as_ushort(__half h) { unsigned short u; std::memcpy(&u, &h, 2); return u; }
static inline int __float2int_rn(float x) { return (int)std::nearbyint(x); }
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned r = 0;
    for (int n = 0; n < 4; ++n) r |= (unsigned)((v >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
    return r;
}
#define __ldg(p) (*(p))
static inline unsigned __dp2a_lo(unsigned a, unsigned b, unsigned c) {
    return c + (a & 0xffffu) * (b & 0xffu) + (a >> 16) * ((b >> 8) & 0xffu);
}
static inline unsigned __dp2a_hi(unsigned a, unsigned b, unsigned c) {
    return c + (a & 0xffffu) * ((b >> 16) & 0xffu) + (a >> 16) * (b >> 24);
}
struct emu_dim3 { unsigned x, y, z; };
struct uint4 { unsigned x, y, z, w; };
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
#define __powf(x, y) std::pow((float)(x), (float)(y))  // glibc declares its own __powf, unexported
static inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }
static thread_local emu_dim3 threadIdx, blockIdx;
static emu_dim3 blockDim, gridDim;
static thread_local std::barrier<>* emu_barrier;
static thread_local float* emu_shared;
static inline void __syncthreads() { emu_barrier->arrive_and_wait(); }
#define SITS_SHARED_FLOATS(name) float* name = emu_shared
using std::floor; using std::ceil; using std::fmin; using std::fmax;

#include "convert.cu"

typedef void (*kern_t)(const sits::Params, const unsigned char*, const unsigned long long*);

static void run(kern_t k, const sits::Params* P, const unsigned long long* T,
                emu_dim3 g, emu_dim3 b, int smem) {
    blockDim = b; gridDim = g;
    const unsigned nt = b.x * b.y * b.z;
    for (unsigned bz = 0; bz < g.z; ++bz)
    for (unsigned by = 0; by < g.y; ++by)
    for (unsigned bx = 0; bx < g.x; ++bx) {
        std::vector<float> shared(smem / 4 + 1, NAN);  // poisoned: unwritten reads show
        std::barrier<> bar(nt);
        std::vector<std::thread> ts;
        ts.reserve(nt);
        for (unsigned tz = 0; tz < b.z; ++tz)
        for (unsigned ty = 0; ty < b.y; ++ty)
        for (unsigned tx = 0; tx < b.x; ++tx)
            ts.emplace_back([&, tx, ty, tz] {
                threadIdx = {tx, ty, tz};
                blockIdx = {bx, by, bz};
                emu_barrier = &bar;
                emu_shared = shared.data();
                k(*P, reinterpret_cast<const unsigned char*>(P), T);  // by value, and the tables
                bar.arrive_and_drop();
            });
        for (auto& t : ts) t.join();
    }
}

#define K2(KIND, F, O) case (F * 4 + O): k = &sits::KIND<F, O>; break;
#define KF(KIND, F) K2(KIND, F, 0) K2(KIND, F, 1) K2(KIND, F, 2) K2(KIND, F, 3)
#define KALL(KIND) KF(KIND, 0) KF(KIND, 1) KF(KIND, 2) KF(KIND, 3) KF(KIND, 4) KF(KIND, 5) KF(KIND, 6) \
    KF(KIND, 7) KF(KIND, 8) KF(KIND, 9) KF(KIND, 10) KF(KIND, 11) KF(KIND, 12)
#define A2(F, O, V) case (F * 4 + O): k = &sits::area<F, O, V>; break;
#define AF(F, V) A2(F, 0, V) A2(F, 1, V) A2(F, 2, V) A2(F, 3, V)
#define AALL(V) AF(0, V) AF(1, V) AF(2, V) AF(3, V) AF(4, V) AF(5, V) AF(6, V)
#define I2(F, O, S) case (F * 4 + O): k = &sits::area_int<F, O, S>; break;
#define IF(F, S) I2(F, 0, S) I2(F, 1, S) I2(F, 2, S) I2(F, 3, S)

extern "C" int emu_launch(int fmt, int out, int area, const void* P, const void* T,
                          unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int smem) {
    kern_t k = nullptr;
    if (area == 7) { switch (fmt * 4 + out) { KF(area_px, 7) KF(area_px, 8) KF(area_px, 9) KF(area_px, 10) KF(area_px, 11) KF(area_px, 12) default: return -1; } }
    else if (area == 5) { switch (fmt * 4 + out) { IF(0, 0) IF(1, 0) IF(2, 0) IF(3, 0) default: return -1; } }
    else if (area == 6) { switch (fmt * 4 + out) { IF(0, 1) IF(1, 1) IF(2, 1) IF(3, 1) default: return -1; } }
    else if (area == 4) { switch (fmt * 4 + out) { AALL(4) default: return -1; } }
    else if (area) { switch (fmt * 4 + out) { AALL(1) default: return -1; } }
    else { switch (fmt * 4 + out) { KALL(bilinear) default: return -1; } }
    run(k, (const sits::Params*)P, (const unsigned long long*)T, {gx, gy, gz}, {bx, by, bz}, smem);
    return 0;
}
"""


def compiler() -> str | None:
    return shutil.which("g++") or shutil.which("clang++")


@functools.cache
def library() -> ctypes.CDLL:
    """The emulator built from the kernel text with kernel_defines() (as the GPU build)."""
    cxx = compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler")
    tmp = Path(tempfile.mkdtemp(prefix="sits-cuda-emu-"))
    (tmp / "driver.cpp").write_text(DRIVER + _layout_source())
    so = tmp / "emu.so"
    cmd = [cxx, "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-ffp-contract=off",
           *(f"-D{k}={v}" for k, v in K.kernel_defines().items()),
           "-I", str(K.KERNEL_SOURCE_PATH.parent), str(tmp / "driver.cpp"), "-o", str(so)]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"emulator build failed:\n{res.stderr[-4000:]}")
        lib = ctypes.CDLL(str(so))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)   # a loaded library outlives its file
    lib.emu_launch.argtypes = [ctypes.c_int] * 3 + [ctypes.c_void_p] * 2 + [ctypes.c_uint] * 6 + [ctypes.c_int]
    lib.emu_launch.restype = ctypes.c_int
    return lib


def _layout_items() -> list[str]:
    """C expressions for what sits.cuda.layout read from the kernel's text:
    the compiler's own offsets, sizes and enum values of the same names."""
    from sits.cuda import layout
    return ([f"offsetof(sits::Params, {n})" for n, _, _ in layout.PARAM_FIELDS] + ["sizeof(sits::Params)"]
            + [f"offsetof(sits::Span, {n})" for n in layout.SPAN_DTYPE.names]
            + ["sizeof(sits::Span)", "alignof(sits::Span)"]
            + [f"sits::FMT_{k}" for k in layout.FORMAT_CODES] + [f"sits::OUT_{k.upper()}" for k in layout.OUT_CODES])


def _layout_source() -> str:
    body = "".join(f"    o[{i}] = (long)({e});\n" for i, e in enumerate(_layout_items()))
    return f'#include <cstddef>\nextern "C" void emu_layout(long* o) {{\n{body}}}\n'


def compiled_layout() -> list[int]:
    """_layout_items() as the compiler has them."""
    n = len(_layout_items())
    out = (ctypes.c_long * n)()
    library().emu_layout(out)
    return list(out)


def _aligned(frame: np.ndarray) -> np.ndarray:
    """A copy of `frame` starting on a 64-byte boundary."""
    raw = np.empty(frame.size + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    out = raw[off:off + frame.size]
    out[:] = frame
    return out


def run(plan, frames: list[np.ndarray], out_strides=None, out: np.ndarray | None = None,
        vec: int = 1, variant: K.Variant = K.PRODUCT) -> np.ndarray:
    """Convert `frames` (each one buffer holding all planes) with the emulated
    kernel, launched as `variant` says (its choices; the text is the product's)."""
    if K.kernel_source(variant) != K.kernel_source():
        raise ValueError("the emulator builds the product's kernel text; this variant changes it")
    lib = library()
    batch = len(frames)
    dtype = DTYPES[plan.out.dtype]
    if out is None:
        poison = {"uint8": 77, "bfloat16": 0x7fc0}.get(plan.out.dtype, np.nan)  # 0x7fc0: a bfloat16 NaN
        out = np.full(plan.out_shape(batch), poison, dtype=dtype)
        strides = None
    else:
        strides = out_strides
    params = _aligned(K.pack_params(plan, strides, vec, variant))  # the Span table is 16-byte aligned
    bufs = [_aligned(np.ascontiguousarray(f, dtype=np.uint8).reshape(-1)) for f in frames]
    planes = [K.frame_planes(b.ctypes.data, plan) for b in bufs]
    table = K.pointer_table(out.ctypes.data, planes, plan)
    grid, block, smem = K.launch_shape(plan, batch, vec, variant=variant)
    area = 0
    if plan.resize == "area" and plan.info.pixelwise:
        area = 7
    elif plan.resize == "area":
        area = (6 if K.area_int_short(plan) else 5) if K.area_integer(plan, vec, variant) else 4 if vec == 4 else 1
    rc = lib.emu_launch(plan.info.code, K.OUT_CODES[plan.out.dtype], area,
                        params.ctypes.data, table.ctypes.data, *grid, *block, smem)
    if rc != 0:
        raise RuntimeError(f"emu_launch returned {rc}")
    return out
