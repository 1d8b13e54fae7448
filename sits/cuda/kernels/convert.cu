// Fused frame conversion: decode (YUV 4:2:x / P010 / XRGB) + resize (bilinear
// or area) + crop/letterbox + colour matrix + mean/std + layout, for a whole
// batch in one launch. Conventions are written in sits/cuda/formats.py; the
// numpy oracle is sits/cuda/reference.py.
//
// Compiled with NVRTC through CuPy (template instantiations by name), and on
// the CPU by tests/unit/test_cuda_kernel_emulated.py with SITS_EMULATE, which
// runs each thread as a host thread so the same text is checked in CI.
//
// Arguments: a Params block in device memory (constant per plan; the area
// kernel's Span table follows it at span_offset) and a table
// of 64-bit device pointers written before every launch (so a captured CUDA
// graph replays on new frames): table[0] = output base, table[1 + 2n] and
// table[2 + 2n] = plane 0 and plane 1 of frame n.

#ifndef SITS_EMULATE
#include <cuda_fp16.h>
#define SITS_SHARED_FLOATS(name) extern __shared__ float name[]
#endif

namespace sits {

enum { FMT_YUYV = 0, FMT_UYVY = 1, FMT_NV12 = 2, FMT_NV16 = 3, FMT_P010 = 4, FMT_XRGB = 5, FMT_XBGR = 6 };
enum { OUT_U8 = 0, OUT_F16 = 1, OUT_F32 = 2, OUT_BF16 = 3 };

// Every field is 4 bytes; sits/cuda/kernel.py packs the same names in this order.
struct Params {
    int stride0, stride1;               // bytes per row of plane 0 / plane 1
    int crop_x, crop_y, crop_w, crop_h; // source pixels
    int out_w, out_h;                   // output canvas
    int content_x, content_y, content_w, content_h;  // picture inside the canvas
    int out_stride_n, out_stride_c, out_stride_y, out_stride_x;  // elements
    int word_start0, word_count0, word_start1, word_count1;      // area: 32-bit words covering the crop
    int smem_off1, smem_off2, smem_row; // area: where c1, c2 start in a row buffer, its floats
    int span_offset;                    // area: bytes from this block to the Span table
    int span_rows1, span_cols0, span_cols1;  // area: first Span of each table (rows0 is at 0)
    float m[12];                        // 3x4 affine: code values -> RGB in [0,1], output channel order
    float norm_a[3], norm_b[3];         // out = clamp(rgb) * a + b
    float pad[3];                       // letterbox fill, already normalised
};

template <int FMT> struct Traits {
    static constexpr bool rgb = FMT == FMT_XRGB || FMT == FMT_XBGR;
    static constexpr bool planar = FMT == FMT_NV12 || FMT == FMT_NV16 || FMT == FMT_P010;
    static constexpr int sub_y = (FMT == FMT_NV12 || FMT == FMT_P010) ? 2 : 1;
};

template <int OUT> struct OutType;
template <> struct OutType<OUT_U8> { typedef unsigned char T; };
template <> struct OutType<OUT_F16> { typedef __half T; };
template <> struct OutType<OUT_F32> { typedef float T; };
template <> struct OutType<OUT_BF16> { typedef unsigned short T; };  // the bfloat16 bit pattern

template <int OUT>
__device__ __forceinline__ void store(typename OutType<OUT>::T* dst, float v) {
    if (OUT == OUT_U8) {
        v = fminf(fmaxf(v, 0.0f), 255.0f);
        *reinterpret_cast<unsigned char*>(dst) = (unsigned char)__float2int_rn(v);
    } else if (OUT == OUT_F16) {
        *reinterpret_cast<__half*>(dst) = __float2half_rn(v);
    } else if (OUT == OUT_BF16) {  // round to nearest even (v is finite)
        unsigned int u = __float_as_uint(v);
        u += 0x7fffu + ((u >> 16) & 1u);
        *reinterpret_cast<unsigned short*>(dst) = (unsigned short)(u >> 16);
    } else {
        *reinterpret_cast<float*>(dst) = v;
    }
}

template <int OUT>
__device__ __forceinline__ void write_pixel(const Params& p, typename OutType<OUT>::T* o,
                                            float c0, float c1, float c2) {
    #pragma unroll
    for (int c = 0; c < 3; ++c) {
        float v = p.m[4 * c] * c0 + p.m[4 * c + 1] * c1 + p.m[4 * c + 2] * c2 + p.m[4 * c + 3];
        v = fminf(fmaxf(v, 0.0f), 1.0f);
        store<OUT>(o + (long long)c * p.out_stride_c, v * p.norm_a[c] + p.norm_b[c]);
    }
}

template <int OUT>
__device__ __forceinline__ void write_pad(const Params& p, typename OutType<OUT>::T* o) {
    #pragma unroll
    for (int c = 0; c < 3; ++c) store<OUT>(o + (long long)c * p.out_stride_c, p.pad[c]);
}

__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int imax(int a, int b) { return a > b ? a : b; }

// One axis of bilinear sampling: clamp to [lo, hi], two taps and the fraction.
__device__ __forceinline__ void bilinear_axis(double u, int lo, int hi, int& i0, int& i1, float& f) {
    u = fmin(fmax(u, (double)lo), (double)hi);
    i0 = (int)floor(u);
    i1 = imin(i0 + 1, hi);
    f = (float)(u - (double)i0);
}

__device__ __forceinline__ float u8at(const unsigned char* p) { return (float)*p; }
__device__ __forceinline__ float u10at(const unsigned char* p) {
    return (float)(*reinterpret_cast<const unsigned short*>(p) >> 6);
}

template <int FMT>
__device__ __forceinline__ float luma_at(const unsigned char* p0, int stride0, int x, int y) {
    const unsigned char* row = p0 + (long long)y * stride0;
    if (FMT == FMT_YUYV) return u8at(row + 2 * x);
    if (FMT == FMT_UYVY) return u8at(row + 2 * x + 1);
    if (FMT == FMT_P010) return u10at(row + 2 * x);
    return u8at(row + x);  // NV12, NV16
}

template <int FMT>
__device__ __forceinline__ void chroma_at(const unsigned char* p0, const unsigned char* p1,
                                          int stride0, int stride1, int xc, int yc, float& u, float& v) {
    if (FMT == FMT_YUYV || FMT == FMT_UYVY) {
        const unsigned char* px = p0 + (long long)yc * stride0 + 4 * xc;
        u = u8at(px + (FMT == FMT_YUYV ? 1 : 0));
        v = u8at(px + (FMT == FMT_YUYV ? 3 : 2));
    } else if (FMT == FMT_P010) {
        const unsigned char* px = p1 + (long long)yc * stride1 + 4 * xc;
        u = u10at(px);
        v = u10at(px + 2);
    } else {
        const unsigned char* px = p1 + (long long)yc * stride1 + 2 * xc;
        u = u8at(px);
        v = u8at(px + 1);
    }
}

template <int FMT>
__device__ __forceinline__ void rgb_at(const unsigned char* p0, int stride0, int x, int y,
                                       float& r, float& g, float& b) {
    const unsigned char* px = p0 + (long long)y * stride0 + 4 * x;
    r = u8at(px + (FMT == FMT_XRGB ? 2 : 0));
    g = u8at(px + 1);
    b = u8at(px + (FMT == FMT_XRGB ? 0 : 2));
}

__device__ __forceinline__ float lerp4(float a, float b, float c, float d, float fx, float fy) {
    return (a * (1.0f - fx) + b * fx) * (1.0f - fy) + (c * (1.0f - fx) + d * fx) * fy;
}

// Bilinear: one thread per output pixel; block (32, 8), grid (ceil(W/32), ceil(H/8), N).
template <int FMT, int OUT>
__global__ void __launch_bounds__(256)
bilinear(const Params* __restrict__ P, const unsigned long long* __restrict__ T) {
    typedef typename OutType<OUT>::T OT;
    typedef Traits<FMT> Tr;
    const Params& p = *P;
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int n = blockIdx.z;
    if (x >= p.out_w || y >= p.out_h) return;
    OT* o = reinterpret_cast<OT*>(T[0]) + (long long)n * p.out_stride_n + (long long)y * p.out_stride_y
            + (long long)x * p.out_stride_x;
    const int lx = x - p.content_x, ly = y - p.content_y;
    if (lx < 0 || ly < 0 || lx >= p.content_w || ly >= p.content_h) {
        write_pad<OUT>(p, o);
        return;
    }
    const unsigned char* p0 = reinterpret_cast<const unsigned char*>(T[1 + 2 * n]);
    const unsigned char* p1 = reinterpret_cast<const unsigned char*>(T[2 + 2 * n]);
    const double sx = (double)p.crop_w / p.content_w, sy = (double)p.crop_h / p.content_h;
    const double u = p.crop_x + (lx + 0.5) * sx - 0.5;
    const double v = p.crop_y + (ly + 0.5) * sy - 0.5;
    int x0, x1, y0, y1;
    float fx, fy;
    bilinear_axis(u, p.crop_x, p.crop_x + p.crop_w - 1, x0, x1, fx);
    bilinear_axis(v, p.crop_y, p.crop_y + p.crop_h - 1, y0, y1, fy);
    float c0, c1, c2;
    if (Tr::rgb) {
        float r00, g00, b00, r01, g01, b01, r10, g10, b10, r11, g11, b11;
        rgb_at<FMT>(p0, p.stride0, x0, y0, r00, g00, b00);
        rgb_at<FMT>(p0, p.stride0, x1, y0, r01, g01, b01);
        rgb_at<FMT>(p0, p.stride0, x0, y1, r10, g10, b10);
        rgb_at<FMT>(p0, p.stride0, x1, y1, r11, g11, b11);
        c0 = lerp4(r00, r01, r10, r11, fx, fy);
        c1 = lerp4(g00, g01, g10, g11, fx, fy);
        c2 = lerp4(b00, b01, b10, b11, fx, fy);
    } else {
        c0 = lerp4(luma_at<FMT>(p0, p.stride0, x0, y0), luma_at<FMT>(p0, p.stride0, x1, y0),
                   luma_at<FMT>(p0, p.stride0, x0, y1), luma_at<FMT>(p0, p.stride0, x1, y1), fx, fy);
        // Chroma: co-sited horizontally; centred between rows for 4:2:0.
        int cx0, cx1, cy0, cy1;
        float fcx, fcy;
        bilinear_axis(u * 0.5, p.crop_x / 2, (p.crop_x + p.crop_w - 1) / 2, cx0, cx1, fcx);
        if (Tr::sub_y == 2) {
            bilinear_axis((v + 0.5) * 0.5 - 0.5, p.crop_y / 2, (p.crop_y + p.crop_h - 1) / 2, cy0, cy1, fcy);
        } else {
            cy0 = y0; cy1 = y1; fcy = fy;
        }
        float u00, v00, u01, v01, u10, v10, u11, v11;
        chroma_at<FMT>(p0, p1, p.stride0, p.stride1, cx0, cy0, u00, v00);
        chroma_at<FMT>(p0, p1, p.stride0, p.stride1, cx1, cy0, u01, v01);
        chroma_at<FMT>(p0, p1, p.stride0, p.stride1, cx0, cy1, u10, v10);
        chroma_at<FMT>(p0, p1, p.stride0, p.stride1, cx1, cy1, u11, v11);
        c1 = lerp4(u00, u01, u10, u11, fcx, fcy);
        c2 = lerp4(v00, v01, v10, v11, fcx, fcy);
    }
    write_pixel<OUT>(p, o, c0, c1, c2);
}

// Area. Host-computed spans (kernel.py `area_spans`, the same double
// arithmetic the oracle uses) give, for each content row and column, the first
// source sample, how many samples it covers and the overlap fractions of the
// two end samples; weight(j) = (min(j + 1, f1) - max(j, f0)) * inv.
struct alignas(16) Span { int i0, n; float f0, f1, inv, unused0, unused1, unused2; };

// Shared-memory index of column sum i: one padding word every 32, so the
// strided stores of the vertical pass (thread t writes word 8t + k) and the
// reads of the horizontal pass land in distinct banks.
__device__ __forceinline__ int spad(int i) { return i + (i >> 5); }

// Byte I of `w` as a float: the byte in the mantissa of 2^23, minus 2^23 (a
// byte permute and an add, where a conversion instruction runs at quarter rate).
template <int I>
__device__ __forceinline__ float byte_value(unsigned int w) {
    return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | I)) - 8388608.0f;
}

template <int FMT, int PLANE>
__device__ __forceinline__ void area_store_word(int w, const float* a, float* s0, float* s1, float* s2) {
    if (FMT == FMT_YUYV) {
        s0[spad(2 * w)] = a[0]; s1[spad(w)] = a[1]; s0[spad(2 * w + 1)] = a[2]; s2[spad(w)] = a[3];
    } else if (FMT == FMT_UYVY) {
        s1[spad(w)] = a[0]; s0[spad(2 * w)] = a[1]; s2[spad(w)] = a[2]; s0[spad(2 * w + 1)] = a[3];
    } else if (FMT == FMT_XRGB) {
        s2[spad(w)] = a[0]; s1[spad(w)] = a[1]; s0[spad(w)] = a[2];
    } else if (FMT == FMT_XBGR) {
        s0[spad(w)] = a[0]; s1[spad(w)] = a[1]; s2[spad(w)] = a[2];
    } else if (FMT == FMT_P010) {
        if (PLANE == 0) { s0[spad(2 * w)] = a[0]; s0[spad(2 * w + 1)] = a[1]; }
        else { s1[spad(w)] = a[0]; s2[spad(w)] = a[1]; }
    } else {  // NV12, NV16
        if (PLANE == 0) {
            s0[spad(4 * w)] = a[0]; s0[spad(4 * w + 1)] = a[1]; s0[spad(4 * w + 2)] = a[2]; s0[spad(4 * w + 3)] = a[3];
        } else {
            s1[spad(2 * w)] = a[0]; s2[spad(2 * w)] = a[1]; s1[spad(2 * w + 1)] = a[2]; s2[spad(2 * w + 1)] = a[3];
        }
    }
}

template <int FMT>
__device__ __forceinline__ void area_accumulate(unsigned int word, float wt, float* a) {
    if (FMT == FMT_P010) {
        a[0] += wt * (float)((word & 0xffffu) >> 6);
        a[1] += wt * (float)(word >> 22);
    } else {
        a[0] += wt * byte_value<0>(word);
        a[1] += wt * byte_value<1>(word);
        a[2] += wt * byte_value<2>(word);
        a[3] += wt * byte_value<3>(word);
    }
}

__device__ __forceinline__ float span_weight(int j, const Span& s) {
    const float fj = (float)j;
    return (fminf(fj + 1.0f, s.f1) - fmaxf(fj, s.f0)) * s.inv;
}

template <int VEC>
__device__ __forceinline__ void load_words(const unsigned char* row, unsigned int* w) {
    if (VEC == 4) {
        const uint4 v = __ldg(reinterpret_cast<const uint4*>(row));
        w[0] = v.x; w[VEC > 1 ? 1 : 0] = v.y; w[VEC > 2 ? 2 : 0] = v.z; w[VEC > 3 ? 3 : 0] = v.w;
    } else {
        w[0] = __ldg(reinterpret_cast<const unsigned int*>(row));
    }
}

// Vertical half for one group of VEC 32-bit words (one 16-byte load per row
// when VEC == 4; coalesced across the warp): up to four rows' loads in flight,
// then their weighted sums, left as column sums in shared memory. (Adding the
// interior rows as 16-bit integer lanes cost more registers than it saved
// instructions: 39% of the roofline against 44% for 1080p YUYV -> 224.)
template <int FMT, int PLANE, int VEC>
__device__ __forceinline__ void area_group(const unsigned char* base, int stride, int word, int rel,
                                           const Span& sp, float* s0, float* s1, float* s2) {
    const unsigned char* src = base + 4LL * word + (long long)sp.i0 * stride;
    float a[VEC][4];
    #pragma unroll
    for (int k = 0; k < VEC; ++k) { a[k][0] = a[k][1] = a[k][2] = a[k][3] = 0.f; }
    for (int r = 0; r < sp.n; r += 4) {
        unsigned int w[4][VEC];
        #pragma unroll
        for (int q = 0; q < 4; ++q) {
            if (r + q < sp.n) load_words<VEC>(src + (long long)(r + q) * stride, w[q]);
        }
        #pragma unroll
        for (int q = 0; q < 4; ++q) {
            if (r + q < sp.n) {
                const float wt = span_weight(r + q, sp);
                #pragma unroll
                for (int k = 0; k < VEC; ++k) area_accumulate<FMT>(w[q][k], wt, a[k]);
            }
        }
    }
    #pragma unroll
    for (int k = 0; k < VEC; ++k) area_store_word<FMT, PLANE>(rel + k, a[k], s0, s1, s2);
}

// Horizontal half: box-filter the column sums (span i0 is relative to the
// first column in shared memory). Every sample but the two ends has weight 1:
// sum them all, then take off the parts of the end samples outside the
// footprint (f0 of the first, n - min(n, f1) of the last).
__device__ __forceinline__ float area_box(const float* s, const Span& c) {
    float acc = 0.f;
    for (int i = 0; i < c.n; ++i) acc += s[spad(c.i0 + i)];
    const float nf = (float)c.n;
    acc -= c.f0 * s[spad(c.i0)] + (nf - fminf(nf, c.f1)) * s[spad(c.i0 + c.n - 1)];
    return acc * c.inv;
}

// Area: grid (bands, N), 256 threads; each block converts a band of
// ceil(out_h / gridDim.x) consecutive output rows of one frame, one row after
// another, with two shared-memory row buffers (smem_row floats each) so that
// one barrier per row suffices: a row's horizontal pass overlaps the next
// row's loads. Threads take the column groups of both planes as one range.
// VEC == 4 needs 16-byte aligned rows (the host checks strides and frame
// addresses).
template <int FMT, int OUT, int VEC>
__global__ void __launch_bounds__(256)
area(const Params* __restrict__ P, const unsigned long long* __restrict__ T) {
    typedef typename OutType<OUT>::T OT;
    typedef Traits<FMT> Tr;
    SITS_SHARED_FLOATS(smem);
    const Params& p = *P;
    const Span* spans = reinterpret_cast<const Span*>(reinterpret_cast<const unsigned char*>(P) + p.span_offset);
    const int n = blockIdx.y;
    const int band = (p.out_h + gridDim.x - 1) / gridDim.x;
    const int y_begin = blockIdx.x * band;
    const int y_end = imin(y_begin + band, p.out_h);
    OT* out = reinterpret_cast<OT*>(T[0]) + (long long)n * p.out_stride_n;
    const unsigned char* p0 = reinterpret_cast<const unsigned char*>(T[1 + 2 * n]);
    const unsigned char* p1 = reinterpret_cast<const unsigned char*>(T[2 + 2 * n]);
    const int groups0 = p.word_count0 / VEC;  // the host rounds the word ranges to whole groups
    const int groups = groups0 + (Tr::planar ? p.word_count1 / VEC : 0);
    for (int y = y_begin; y < y_end; ++y) {
        OT* orow = out + (long long)y * p.out_stride_y;
        const int ly = y - p.content_y;
        if (ly < 0 || ly >= p.content_h) {  // letterbox band: uniform across the block
            for (int x = threadIdx.x; x < p.out_w; x += blockDim.x) write_pad<OUT>(p, orow + (long long)x * p.out_stride_x);
            continue;
        }
        float* s0 = smem + (y & 1) * p.smem_row;
        float* s1 = s0 + p.smem_off1;
        float* s2 = s0 + p.smem_off2;
        const Span rows0 = spans[ly];
        const Span rows1 = spans[Tr::planar ? p.span_rows1 + ly : ly];
        for (int g = threadIdx.x; g < groups; g += blockDim.x) {
            if (!Tr::planar || g < groups0) {
                area_group<FMT, 0, VEC>(p0, p.stride0, p.word_start0 + g * VEC, g * VEC, rows0, s0, s1, s2);
            } else {
                const int h = g - groups0;
                area_group<FMT, 1, VEC>(p1, p.stride1, p.word_start1 + h * VEC, h * VEC, rows1, s0, s1, s2);
            }
        }
        __syncthreads();
        for (int x = threadIdx.x; x < p.out_w; x += blockDim.x) {
            OT* o = orow + (long long)x * p.out_stride_x;
            const int lx = x - p.content_x;
            if (lx < 0 || lx >= p.content_w) {
                write_pad<OUT>(p, o);
                continue;
            }
            const Span c0 = spans[p.span_cols0 + lx];
            const float v0 = area_box(s0, c0);
            float v1, v2;
            if (Tr::rgb) {
                v1 = area_box(s1, c0);
                v2 = area_box(s2, c0);
            } else {
                const Span c1 = spans[p.span_cols1 + lx];
                v1 = area_box(s1, c1);
                v2 = area_box(s2, c1);
            }
            write_pixel<OUT>(p, o, v0, v1, v2);
        }
    }
}

}  // namespace sits
