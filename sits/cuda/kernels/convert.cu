// Fused frame conversion: decode (YUV 4:2:x / P010 / XRGB / raw Bayer, demosaiced
// bilinearly) + resize (bilinear or area) + crop/letterbox + colour matrix + mean/std + layout, for a whole
// batch in one launch. Conventions are written in sits/cuda/formats.py; the
// numpy oracle is sits/cuda/reference.py.
//
// Compiled with NVRTC through CuPy, one template instantiation at a time
// (sits/cuda/convert.py `_kernel`); by nvcc for every target in
// tests/unit/test_cuda_arch_build.py; and on the CPU by
// tests/unit/test_cuda_kernel_emulated.py with SITS_EMULATE, which runs each
// thread as a host thread so the same text is checked in CI.
//
// Arguments: the Params block by value (kernel parameters are read from the
// constant bank, operands of the arithmetic, with no load in the loops), the
// same block in device memory (constant per plan; the area kernel's Span and
// column tables follow it, at offsets from its start) and a table
// of 64-bit device pointers written before every launch (so a captured CUDA
// graph replays on new frames): table[0] = output base, table[1 + 2n] and
// table[2 + 2n] = plane 0 and plane 1 of frame n.

#ifndef SITS_EMULATE
#include <cuda_fp16.h>
#define SITS_SHARED_FLOATS(name) extern __shared__ __align__(16) float name[]
#endif

// An instruction that only newer architectures have sits behind the macro
// of the first one that has it (CUTLASS's way), so that the same text
// builds for every target: a kernel is compiled for one architecture, and
// an instruction the target lacks fails it in ptxas. SITS_ARCH_SM90: Hopper
// and later (cp.async.bulk). Each use says what older targets do instead.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define SITS_ARCH_SM90 1
#endif

// Threads of a block: kernel.py writes them in front of this text from the
// launch shapes it uses (kernel_defines), so that each kernel's launch
// bounds and its launches are one number.
#if !defined(SITS_BILINEAR_THREADS) || !defined(SITS_AREA_THREADS) || !defined(SITS_INT_THREADS)
#error "block sizes come from sits/cuda/kernel.py (kernel_source, kernel_defines)"
#endif

// Blocks an SM that each kernel's register cap aims at (__launch_bounds__),
// measured on the H200 (docs/cuda.md); the benchmarks may define others
// (tools/bench/cuda_area_variants.py, cuda_sass.py --defines).
#ifndef SITS_AREA_MIN_BLOCKS
#define SITS_AREA_MIN_BLOCKS 5
#endif
#ifndef SITS_INT_MIN_BLOCKS
#define SITS_INT_MIN_BLOCKS 5
#endif
#ifndef SITS_INT_SHORT_MIN_BLOCKS
#define SITS_INT_SHORT_MIN_BLOCKS 5
#endif

namespace sits {

// The host reads these two enums, struct Params and struct Span from this
// text (sits/cuda/layout.py): a format's code is FMT_ and its name in
// sits/formats.py, an output's OUT_ and its dtype's name.
// Raw Bayer formats are coded by how a sample is stored (FMT_BAYER8: a
// byte; 16: a 16-bit word; 10P and 12P: MIPI CSI-2 packed); the colour
// pattern is Params.cfa. RGB888 and BGR888 (DRM's names: B, G, R and R, G, B
// in memory) are what image decoders hand back.
enum { FMT_YUYV = 0, FMT_UYVY = 1, FMT_NV12 = 2, FMT_NV16 = 3, FMT_P010 = 4, FMT_XRGB8888 = 5, FMT_XBGR8888 = 6,
       FMT_BAYER8 = 7, FMT_BAYER16 = 8, FMT_BAYER10P = 9, FMT_BAYER12P = 10, FMT_RGB888 = 11, FMT_BGR888 = 12 };
enum { OUT_UINT8 = 0, OUT_FLOAT16 = 1, OUT_FLOAT32 = 2, OUT_BFLOAT16 = 3 };

// Every field is 4 bytes: int or float, alone or an array (sits/cuda/layout.py
// reads it; kernel.py packs it).
struct Params {
    int stride0, stride1;               // bytes per row of plane 0 / plane 1
    int crop_x, crop_y, crop_w, crop_h; // source pixels
    int out_w, out_h;                   // output canvas
    int content_x, content_y, content_w, content_h;  // picture inside the canvas
    int out_stride_n, out_stride_c, out_stride_y, out_stride_x;  // elements
    int word_start0, word_count0, word_start1, word_count1;      // area: 32-bit words covering the crop
    int smem_off1, smem_row;            // area: where the c1, c2 pairs start in a row buffer, its floats
    int span_offset;                    // area: bytes from this block to the Span table
    int span_rows1;                     // area: first Span of chroma rows (rows0 is at 0)
    int cols0, cols1;                   // area: bytes from this block to the column tables (ColTable)
    int cols2;                          // area_int: bytes to its path's column table (DotCol / ShortCol; 0: none)
    float kz[4];                        // area_int: k0, -2^23 k0, k1, -2^23 k1 (kernel.py int_scales)
    float m[12];                        // 3x4 affine: code values -> RGB in [0,1], output channel order
    float norm_a[3], norm_b[3];         // out = clamp(rgb) * a + b
    float pad[3];                       // letterbox fill, already normalised
    int frame_w, frame_h;               // Bayer: the frame, at whose edges the demosaic reflects
    int cfa;                            // Bayer: where red is in a 2x2 tile, (x & 1) | (y & 1) << 1
    float inv_gamma;                    // Bayer: out = clamp(rgb) ^ inv_gamma before mean/std (1: none)
};

template <int FMT> struct Traits {
    static constexpr bool rgb24 = FMT == FMT_RGB888 || FMT == FMT_BGR888;
    static constexpr bool rgb = FMT == FMT_XRGB8888 || FMT == FMT_XBGR8888 || rgb24;
    static constexpr bool planar = FMT == FMT_NV12 || FMT == FMT_NV16 || FMT == FMT_P010;
    static constexpr int sub_y = (FMT == FMT_NV12 || FMT == FMT_P010) ? 2 : 1;
    static constexpr bool bayer = FMT >= FMT_BAYER8 && FMT <= FMT_BAYER12P;
    // read a pixel at a time (area_px), not in 32-bit word groups
    static constexpr bool pixelwise = bayer || rgb24;
};

template <int OUT> struct OutType;
template <> struct OutType<OUT_UINT8> { typedef unsigned char T; };
template <> struct OutType<OUT_FLOAT16> { typedef __half T; };
template <> struct OutType<OUT_FLOAT32> { typedef float T; };
template <> struct OutType<OUT_BFLOAT16> { typedef unsigned short T; };  // the bfloat16 bit pattern

// The bfloat16 bit pattern of v, rounded to nearest even (v is finite).
__device__ __forceinline__ unsigned short bf16_bits(float v) {
    unsigned int u = __float_as_uint(v);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

template <int OUT>
__device__ __forceinline__ void store(typename OutType<OUT>::T* dst, float v) {
    if (OUT == OUT_UINT8) {
        v = fminf(fmaxf(v, 0.0f), 255.0f);
        *reinterpret_cast<unsigned char*>(dst) = (unsigned char)__float2int_rn(v);
    } else if (OUT == OUT_FLOAT16) {
        *reinterpret_cast<__half*>(dst) = __float2half_rn(v);
    } else if (OUT == OUT_BFLOAT16) {
        *reinterpret_cast<unsigned short*>(dst) = bf16_bits(v);
    } else {
        *reinterpret_cast<float*>(dst) = v;
    }
}

// Colour matrix, clamp (and for raw formats, gamma) and mean/std: the three
// output values of a pixel.
template <bool GAMMA>
__device__ __forceinline__ void pixel_values(const Params& p, float c0, float c1, float c2, float* v) {
    #pragma unroll
    for (int c = 0; c < 3; ++c) {
        float x = __saturatef(fmaf(p.m[4 * c], c0, fmaf(p.m[4 * c + 1], c1, fmaf(p.m[4 * c + 2], c2, p.m[4 * c + 3]))));
        if (GAMMA && p.inv_gamma != 1.0f) x = x > 0.0f ? __powf(x, p.inv_gamma) : 0.0f;
        v[c] = x * p.norm_a[c] + p.norm_b[c];
    }
}

template <int OUT, bool GAMMA = false>
__device__ __forceinline__ void write_pixel(const Params& p, typename OutType<OUT>::T* o,
                                            float c0, float c1, float c2) {
    float v[3];
    pixel_values<GAMMA>(p, c0, c1, c2, v);
    #pragma unroll
    for (int c = 0; c < 3; ++c) store<OUT>(o + (long long)c * p.out_stride_c, v[c]);
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
    const unsigned char* px = p0 + (long long)y * stride0 + (Traits<FMT>::rgb24 ? 3 : 4) * x;
    const bool bgr = FMT == FMT_XRGB8888 || FMT == FMT_RGB888;   // B, G, R in memory
    r = u8at(px + (bgr ? 2 : 0));
    g = u8at(px + 1);
    b = u8at(px + (bgr ? 0 : 2));
}

// One raw Bayer sample.
template <int FMT>
__device__ __forceinline__ float raw_at(const unsigned char* p0, int stride0, int x, int y) {
    const unsigned char* row = p0 + (long long)y * stride0;
    if (FMT == FMT_BAYER8) return u8at(row + x);
    if (FMT == FMT_BAYER16) return (float)*reinterpret_cast<const unsigned short*>(row + 2 * x);
    if (FMT == FMT_BAYER10P) {  // 4 samples' high 8 bits, then a byte of their low 2 bits (first in bits 1-0)
        const unsigned char* g = row + 5 * (x >> 2);
        return (float)(((unsigned)g[x & 3] << 2) | ((g[4] >> (2 * (x & 3))) & 3u));
    }
    const unsigned char* g = row + 3 * (x >> 1);  // 12P: 2 samples' high bits, then their low 4 (first in 3-0)
    return (float)(((unsigned)g[x & 1] << 4) | ((g[2] >> (4 * (x & 1))) & 15u));
}

// A coordinate reflected into [0, n) about the edge samples (reflect-101),
// which keeps a Bayer tile's phase.
__device__ __forceinline__ int reflect101(int i, int n) {
    i = i < 0 ? -i : i;
    return i >= n ? 2 * (n - 1) - i : i;
}

// Bilinear demosaic: R, G, B at sample (x, y), each missing colour the mean of
// its nearest samples of that colour (2 or 4; across the frame's edges,
// reflected).
template <int FMT>
__device__ __forceinline__ void demosaic(const Params& p, const unsigned char* p0, int x, int y,
                                         float& r, float& g, float& b) {
    const int xm = reflect101(x - 1, p.frame_w), xp = reflect101(x + 1, p.frame_w);
    const int ym = reflect101(y - 1, p.frame_h), yp = reflect101(y + 1, p.frame_h);
    const int s = p.stride0;
    const float c = raw_at<FMT>(p0, s, x, y);
    const float n = raw_at<FMT>(p0, s, x, ym), so = raw_at<FMT>(p0, s, x, yp);
    const float w = raw_at<FMT>(p0, s, xm, y), e = raw_at<FMT>(p0, s, xp, y);
    const bool red_row = (y & 1) == (p.cfa >> 1), red_col = (x & 1) == (p.cfa & 1);
    if (red_row == red_col) {  // a red sample (both) or a blue one (neither)
        const float cross = 0.25f * ((n + so) + (w + e));
        const float diag = 0.25f * ((raw_at<FMT>(p0, s, xm, ym) + raw_at<FMT>(p0, s, xp, ym))
                                    + (raw_at<FMT>(p0, s, xm, yp) + raw_at<FMT>(p0, s, xp, yp)));
        g = cross;
        r = red_row ? c : diag;
        b = red_row ? diag : c;
    } else {                   // a green sample: red and blue beside it, the other above and below
        const float across = 0.5f * (w + e), up_down = 0.5f * (n + so);
        g = c;
        r = red_row ? across : up_down;
        b = red_row ? up_down : across;
    }
}

__device__ __forceinline__ float lerp4(float a, float b, float c, float d, float fx, float fy) {
    return (a * (1.0f - fx) + b * fx) * (1.0f - fy) + (c * (1.0f - fx) + d * fx) * fy;
}

// The kernels of one thread per output pixel (bilinear, area_px), grid
// (ceil(W/32), ceil(H/8), N): this thread's output element `o`, its frame
// `n` and its place in the picture (lx, ly); false where there is nothing
// more to do (outside the canvas, or the letterbox's pad, written here).
template <int OUT>
__device__ __forceinline__ bool picture_pixel(const Params& p, const unsigned long long* __restrict__ T,
                                              typename OutType<OUT>::T*& o, int& lx, int& ly, int& n) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    n = blockIdx.z;
    if (x >= p.out_w || y >= p.out_h) return false;
    o = reinterpret_cast<typename OutType<OUT>::T*>(T[0]) + (long long)n * p.out_stride_n
        + (long long)y * p.out_stride_y + (long long)x * p.out_stride_x;
    lx = x - p.content_x;
    ly = y - p.content_y;
    if (lx < 0 || ly < 0 || lx >= p.content_w || ly >= p.content_h) {
        write_pad<OUT>(p, o);
        return false;
    }
    return true;
}

// Bilinear: one thread per output pixel; block (32, 8), grid (ceil(W/32), ceil(H/8), N).
template <int FMT, int OUT>
__global__ void __launch_bounds__(SITS_BILINEAR_THREADS)
bilinear(const Params p, const unsigned char* __restrict__ tables, const unsigned long long* __restrict__ T) {
    typedef Traits<FMT> Tr;
    typename OutType<OUT>::T* o;
    int lx, ly, n;
    if (!picture_pixel<OUT>(p, T, o, lx, ly, n)) return;
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
    if (Tr::bayer) {
        float r00, g00, b00, r01, g01, b01, r10, g10, b10, r11, g11, b11;
        demosaic<FMT>(p, p0, x0, y0, r00, g00, b00);
        demosaic<FMT>(p, p0, x1, y0, r01, g01, b01);
        demosaic<FMT>(p, p0, x0, y1, r10, g10, b10);
        demosaic<FMT>(p, p0, x1, y1, r11, g11, b11);
        c0 = lerp4(r00, r01, r10, r11, fx, fy);
        c1 = lerp4(g00, g01, g10, g11, fx, fy);
        c2 = lerp4(b00, b01, b10, b11, fx, fy);
    } else if (Tr::rgb) {
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
    write_pixel<OUT, Tr::bayer>(p, o, c0, c1, c2);
}

// R, G, B of pixel (x, y) of a format read a pixel at a time.
template <int FMT>
__device__ __forceinline__ void pixel_rgb(const Params& p, const unsigned char* p0, int x, int y,
                                          float& r, float& g, float& b) {
    if (Traits<FMT>::bayer) demosaic<FMT>(p, p0, x, y, r, g, b);
    else rgb_at<FMT>(p0, p.stride0, x, y, r, g, b);
}

// Area for formats read a pixel at a time (raw Bayer, 24-bit RGB): one thread
// per output pixel, the exact box filter over the (demosaiced) pixels of its
// footprint (the footprint's edges in the same double arithmetic as the
// oracle's), launched as bilinear is.
template <int FMT, int OUT>
__global__ void __launch_bounds__(SITS_BILINEAR_THREADS)
area_px(const Params p, const unsigned char* __restrict__ tables, const unsigned long long* __restrict__ T) {
    typename OutType<OUT>::T* o;
    int lx, ly, n;
    if (!picture_pixel<OUT>(p, T, o, lx, ly, n)) return;
    const unsigned char* p0 = reinterpret_cast<const unsigned char*>(T[1 + 2 * n]);
    const double sx = (double)p.crop_w / p.content_w, sy = (double)p.crop_h / p.content_h;
    const double bx0 = p.crop_x + lx * sx, bx1 = p.crop_x + (lx + 1) * sx;
    const double by0 = p.crop_y + ly * sy, by1 = p.crop_y + (ly + 1) * sy;
    const int xs = (int)floor(bx0), xe = imin((int)ceil(bx1), p.crop_x + p.crop_w);
    const int ys = (int)floor(by0), ye = imin((int)ceil(by1), p.crop_y + p.crop_h);
    float r = 0.0f, g = 0.0f, b = 0.0f;
    for (int sy_ = ys; sy_ < ye; ++sy_) {
        const float wy = (float)(fmin(sy_ + 1.0, by1) - fmax((double)sy_, by0));
        float rr = 0.0f, gg = 0.0f, bb = 0.0f;
        for (int sx_ = xs; sx_ < xe; ++sx_) {
            const float wx = (float)(fmin(sx_ + 1.0, bx1) - fmax((double)sx_, bx0));
            float pr, pg, pb;
            pixel_rgb<FMT>(p, p0, sx_, sy_, pr, pg, pb);
            rr = fmaf(wx, pr, rr); gg = fmaf(wx, pg, gg); bb = fmaf(wx, pb, bb);
        }
        r = fmaf(wy, rr, r); g = fmaf(wy, gg, g); b = fmaf(wy, bb, b);
    }
    const float inv = (float)(1.0 / ((bx1 - bx0) * (by1 - by0)));
    write_pixel<OUT, Traits<FMT>::bayer>(p, o, r * inv, g * inv, b * inv);
}

// Area. Host-computed spans (kernel.py `area_spans`, the same double
// arithmetic the oracle uses) give, for each content row and column, the first
// source sample, how many samples it covers, the overlaps of the two end
// samples (w0, and w1 when n > 1, else 0; every sample between overlaps by 1)
// and 1 / footprint. The integer kernel (area_int, below) reads its own
// exact spans in the same struct: i0, n, the end weights as integers W
// (W0 | W1 << 16) out of q per sample, q, and 1 / (footprint * q).
struct alignas(16) Span { int i0, n; float w0, w1, inv; unsigned int W; int q; float scale; };

// Byte I of `w` as a float: the byte in the mantissa of 2^23, minus 2^23 (a
// byte permute and an add, where a conversion instruction runs at quarter rate).
template <int I>
__device__ __forceinline__ float byte_value(unsigned int w) {
    return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | I)) - 8388608.0f;
}

// 16-bit lane L (0: bits 0-15, 1: bits 16-31) of a packed integer sum, as a float.
template <int L>
__device__ __forceinline__ float lane_value(unsigned int acc) {
    return __uint_as_float(__byte_perm(acc, 0x4B000000u, L ? 0x7432u : 0x7410u)) - 8388608.0f;
}

// The samples of one 32-bit word, in memory order: 4 bytes, or 2 P010 samples.
template <int FMT>
__device__ __forceinline__ void word_values(unsigned int w, float* v) {
    if (FMT == FMT_P010) {
        v[0] = (float)((w & 0xffffu) >> 6);
        v[1] = (float)(w >> 22);
    } else {
        v[0] = byte_value<0>(w); v[1] = byte_value<1>(w); v[2] = byte_value<2>(w); v[3] = byte_value<3>(w);
    }
}

template <int FMT> struct WordSamples { static constexpr int n = FMT == FMT_P010 ? 2 : 4; };

// Interior rows (weight 1) are summed as integers, two 16-bit lanes to a
// register: bytes 0 and 2 in `lo`, bytes 1 and 3 in `hi` (P010: the two
// 10-bit samples in `lo`). A lane holds CHUNK rows without overflow.
template <int FMT> struct Packed { static constexpr int chunk = FMT == FMT_P010 ? 64 : 256; };

template <int FMT>
__device__ __forceinline__ void packed_add(unsigned int w, unsigned int& lo, unsigned int& hi) {
    if (FMT == FMT_P010) {
        lo += (w >> 6) & 0x03ff03ffu;
    } else {
        lo += w & 0x00ff00ffu;
        hi += __byte_perm(w, 0u, 0x4341u);
    }
}

template <int FMT>
__device__ __forceinline__ void packed_values(unsigned int lo, unsigned int hi, float* a) {
    if (FMT == FMT_P010) {
        a[0] = lane_value<0>(lo); a[1] = lane_value<1>(lo); a[2] = a[3] = 0.f;
    } else {
        a[0] = lane_value<0>(lo); a[2] = lane_value<1>(lo);
        a[1] = lane_value<0>(hi); a[3] = lane_value<1>(hi);
    }
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

// Four consecutive floats to shared memory (16-byte aligned when VEC == 4).
template <int VEC>
__device__ __forceinline__ void put4(float* d, float a, float b, float c, float e) {
    if (VEC == 4) {
        *reinterpret_cast<float4*>(d) = make_float4(a, b, c, e);
    } else {
        d[0] = a; d[1] = b; d[2] = c; d[3] = e;
    }
}

template <int VEC>
__device__ __forceinline__ void put2(float* d, float a, float b) {
    d[0] = a; d[1] = b;
}

// Column sums of VEC words to the row buffer: component 0 in s0, components 1
// and 2 interleaved in s12 (c1, c2, c1, c2, ...: the horizontal pass reads
// both of a column with one 8-byte load). Word k of the group is at word
// index rel + k.
template <int FMT, int PLANE, int VEC>
__device__ __forceinline__ void area_store(int rel, const float (*a)[4], float* s0, float* s12) {
    if (FMT == FMT_YUYV || FMT == FMT_UYVY) {
        const int y0 = FMT == FMT_YUYV ? 0 : 1, c0 = 1 - y0;
        if (VEC == 4) {
            put4<4>(s0 + 2 * rel, a[0][y0], a[0][y0 + 2], a[1][y0], a[1][y0 + 2]);
            put4<4>(s0 + 2 * rel + 4, a[2][y0], a[2][y0 + 2], a[3][y0], a[3][y0 + 2]);
            put4<4>(s12 + 2 * rel, a[0][c0], a[0][c0 + 2], a[1][c0], a[1][c0 + 2]);
            put4<4>(s12 + 2 * rel + 4, a[2][c0], a[2][c0 + 2], a[3][c0], a[3][c0 + 2]);
        } else {
            put2<1>(s0 + 2 * rel, a[0][y0], a[0][y0 + 2]);
            put2<1>(s12 + 2 * rel, a[0][c0], a[0][c0 + 2]);
        }
    } else if (FMT == FMT_XRGB8888 || FMT == FMT_XBGR8888) {
        const int b0 = FMT == FMT_XRGB8888 ? 2 : 0, b2 = 2 - b0;  // XRGB8888 is B,G,R,X in memory
        if (VEC == 4) {
            put4<4>(s0 + rel, a[0][b0], a[1][b0], a[2][b0], a[3][b0]);
            put4<4>(s12 + 2 * rel, a[0][1], a[0][b2], a[1][1], a[1][b2]);
            put4<4>(s12 + 2 * rel + 4, a[2][1], a[2][b2], a[3][1], a[3][b2]);
        } else {
            s0[rel] = a[0][b0];
            put2<1>(s12 + 2 * rel, a[0][1], a[0][b2]);
        }
    } else if (FMT == FMT_P010) {
        #pragma unroll
        for (int k = 0; k < VEC; k += 2) {  // two samples a word: Y Y, or U V
            if (VEC == 4) put4<4>((PLANE == 0 ? s0 : s12) + 2 * (rel + k), a[k][0], a[k][1], a[k + 1][0], a[k + 1][1]);
            else put2<1>((PLANE == 0 ? s0 : s12) + 2 * rel, a[0][0], a[0][1]);
        }
    } else {  // NV12, NV16: four samples a word, Y Y Y Y or U V U V
        #pragma unroll
        for (int k = 0; k < VEC; ++k) put4<VEC>((PLANE == 0 ? s0 : s12) + 4 * (rel + k), a[k][0], a[k][1], a[k][2], a[k][3]);
    }
}

// Vertical half for one group of VEC 32-bit words (one 16-byte load per row
// when VEC == 4; coalesced across the warp): the rows between the first and
// the last of the footprint are summed as packed integers (four rows' loads in
// flight, with the two end rows' loads), the end rows are weighted in floats,
// and the column sums are left in shared memory unnormalised (the horizontal
// pass multiplies by both 1 / footprint). Footprints taller than a packed
// lane holds take a plain float loop.
template <int FMT, int PLANE, int VEC>
__device__ __forceinline__ void area_group(const unsigned char* base, int stride, int word, int rel,
                                           const Span& sp, float* s0, float* s12) {
    constexpr int S = WordSamples<FMT>::n;
    const unsigned char* src = base + 4LL * word + (long long)sp.i0 * stride;
    const int n = sp.n;
    unsigned int first[VEC], last[VEC];
    load_words<VEC>(src, first);
    if (n > 1) {
        load_words<VEC>(src + (long long)(n - 1) * stride, last);
    } else {
        #pragma unroll
        for (int k = 0; k < VEC; ++k) last[k] = 0u;  // weight w1 is 0
    }
    float a[VEC][4];
    const unsigned char* row = src + stride;
    if (n - 2 <= Packed<FMT>::chunk) {
        unsigned int lo[VEC], hi[VEC];
        #pragma unroll
        for (int k = 0; k < VEC; ++k) lo[k] = hi[k] = 0u;
        int r = 1;
        #pragma unroll 1
        for (; r + 4 <= n - 1; r += 4) {
            unsigned int w[4][VEC];
            #pragma unroll
            for (int q = 0; q < 4; ++q) load_words<VEC>(row + (long long)q * stride, w[q]);
            row += 4LL * stride;
            #pragma unroll
            for (int q = 0; q < 4; ++q) {
                #pragma unroll
                for (int k = 0; k < VEC; ++k) packed_add<FMT>(w[q][k], lo[k], hi[k]);
            }
        }
        if (r < n - 1) {  // the last 1 to 3 rows, loads in flight together (a zero word adds nothing)
            unsigned int w[3][VEC];
            #pragma unroll
            for (int q = 0; q < 3; ++q) {
                if (r + q < n - 1) {
                    load_words<VEC>(row + (long long)q * stride, w[q]);
                } else {
                    #pragma unroll
                    for (int k = 0; k < VEC; ++k) w[q][k] = 0u;
                }
            }
            #pragma unroll
            for (int q = 0; q < 3; ++q) {
                #pragma unroll
                for (int k = 0; k < VEC; ++k) packed_add<FMT>(w[q][k], lo[k], hi[k]);
            }
        }
        #pragma unroll
        for (int k = 0; k < VEC; ++k) packed_values<FMT>(lo[k], hi[k], a[k]);
    } else {
        #pragma unroll
        for (int k = 0; k < VEC; ++k) a[k][0] = a[k][1] = a[k][2] = a[k][3] = 0.f;
        #pragma unroll 1
        for (int r = 1; r < n - 1; ++r) {
            unsigned int w[VEC];
            load_words<VEC>(row, w);
            row += stride;
            #pragma unroll
            for (int k = 0; k < VEC; ++k) {
                float v[4];
                word_values<FMT>(w[k], v);
                #pragma unroll
                for (int j = 0; j < S; ++j) a[k][j] += v[j];
            }
        }
    }
    #pragma unroll
    for (int k = 0; k < VEC; ++k) {
        float u[4], v[4];
        word_values<FMT>(first[k], u);
        word_values<FMT>(last[k], v);
        #pragma unroll
        for (int j = 0; j < S; ++j) a[k][j] = fmaf(sp.w0, u[j], fmaf(sp.w1, v[j], a[k][j]));
    }
    area_store<FMT, PLANE, VEC>(rel, a, s0, s12);
}

// Horizontal half. The columns' spans are also laid out as a ColTable: one
// 16-byte entry per content column (i0 | n << 16, w0, w1, inv), read with one
// 16-byte load (a warp's 32 columns are 512 contiguous bytes).
struct Col { int i0, n; float w0, w1, inv; };

__device__ __forceinline__ Col load_col(const unsigned char* tables, int offset, int x) {
    const uint4 e = __ldg(reinterpret_cast<const uint4*>(tables + offset) + x);
    Col c;
    c.i0 = (int)(e.x & 0xffffu);
    c.n = (int)(e.x >> 16);
    c.w0 = __uint_as_float(e.y);
    c.w1 = __uint_as_float(e.z);
    c.inv = __uint_as_float(e.w);
    return c;
}

// Box-filter column sums: the end samples weighted by w0, w1 (w1 is 0 when
// n == 1), the samples between them by 1. Two components with the same
// columns (chroma, or G and B) share the loop.
__device__ __forceinline__ float area_box(const float* s, const Col& c) {
    const float* q = s + c.i0;
    const int n = c.n;
    float acc = 0.f, acc2 = 0.f;
    int i = 1;
    #pragma unroll 1
    for (; i + 2 <= n - 1; i += 2) { acc += q[i]; acc2 += q[i + 1]; }
    if (i < n - 1) acc += q[i];
    return fmaf(c.w0, q[0], fmaf(c.w1, q[n - 1], acc + acc2));
}

__device__ __forceinline__ void area_box2(const float* s12, const Col& c, float& u, float& v) {
    const float2* q = reinterpret_cast<const float2*>(s12) + c.i0;
    const int n = c.n;
    float a = 0.f, b = 0.f;
    #pragma unroll 1
    for (int i = 1; i < n - 1; ++i) { const float2 e = q[i]; a += e.x; b += e.y; }
    const float2 first = q[0], last = q[n - 1];
    u = fmaf(c.w0, first.x, fmaf(c.w1, last.x, a));
    v = fmaf(c.w0, first.y, fmaf(c.w1, last.y, b));
}

// Horizontal pass of output pixel x of a row whose column sums are in s0 and
// s12: its three output values (the letterbox fill outside the content).
template <int FMT>
__device__ __forceinline__ void area_pixel(const Params& p, const unsigned char* tables, const float* s0,
                                           const float* s12, const Span& rows0, const Span& rows1, int x, float* v) {
    typedef Traits<FMT> Tr;
    const int lx = x - p.content_x;
    if (lx < 0 || lx >= p.content_w) {
        v[0] = p.pad[0]; v[1] = p.pad[1]; v[2] = p.pad[2];
        return;
    }
    const Col c0 = load_col(tables, p.cols0, lx);
    const float v0 = area_box(s0, c0) * (c0.inv * rows0.inv);
    float v1, v2;
    if (Tr::rgb) {
        area_box2(s12, c0, v1, v2);
        v1 *= c0.inv * rows0.inv;
        v2 *= c0.inv * rows0.inv;
    } else {
        const Col c1 = load_col(tables, p.cols1, lx);
        area_box2(s12, c1, v1, v2);
        const float k = c1.inv * rows1.inv;
        v1 *= k;
        v2 *= k;
    }
    pixel_values<false>(p, v0, v1, v2, v);
}

// One block converts a band of output rows of one frame: the rows
// [out_h * bx / gx, out_h * (bx + 1) / gx) of frame blockIdx.y, so the host
// may pick any band count (kernel.py: one wave of resident blocks).
template <int FMT, int OUT, int VEC>
__global__ void __launch_bounds__(SITS_AREA_THREADS, SITS_AREA_MIN_BLOCKS)
area(const Params p, const unsigned char* __restrict__ tables, const unsigned long long* __restrict__ T) {
    typedef typename OutType<OUT>::T OT;
    typedef Traits<FMT> Tr;
    SITS_SHARED_FLOATS(smem);
    const Span* spans = reinterpret_cast<const Span*>(tables + p.span_offset);
    const int n = blockIdx.y;
    const int y_begin = (int)((long long)p.out_h * blockIdx.x / gridDim.x);
    const int y_end = (int)((long long)p.out_h * (blockIdx.x + 1) / gridDim.x);
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
        float* s0 = smem + (ly & 1) * p.smem_row;  // content rows alternate buffers
        float* s12 = s0 + p.smem_off1;
        const Span rows0 = spans[ly];
        const Span rows1 = spans[Tr::planar ? p.span_rows1 + ly : ly];
        for (int g = threadIdx.x; g < groups; g += blockDim.x) {
            if (!Tr::planar || g < groups0) {
                area_group<FMT, 0, VEC>(p0, p.stride0, p.word_start0 + g * VEC, g * VEC, rows0, s0, s12);
            } else {
                const int h = g - groups0;
                area_group<FMT, 1, VEC>(p1, p.stride1, p.word_start1 + h * VEC, h * VEC, rows1, s0, s12);
            }
        }
        __syncthreads();
        for (int x = threadIdx.x; x < p.out_w; x += blockDim.x) {
            float v[3];
            area_pixel<FMT>(p, tables, s0, s12, rows0, rows1, x, v);
            OT* o = orow + (long long)x * p.out_stride_x;
            #pragma unroll
            for (int c = 0; c < 3; ++c) store<OUT>(o + (long long)c * p.out_stride_c, v[c]);
        }
    }
}

// Integer area kernel, for 8-bit YUV (YUYV, UYVY, NV12, NV16) with 16-byte
// groups, used when the host finds exact integer weights (kernel.py
// `area_integer`): every footprint boundary is a multiple of 1/q of a sample,
// so a sample's weight is W/q with W an integer (the end samples W0, W1,
// the samples between them q). Sums are then exact integers: vertically in
// two 16-bit lanes a register (the host checks 255 * sum(W) < 2^16), so
// every row costs a byte mask or permute and a multiply-add a word, where
// float weights cost a conversion and an FMA a byte; horizontally in 32
// bits. One multiply by 1 / (footprint_x * q_x * footprint_y * q_y) at the end.
//
// A block converts a band of output rows (as `area`), in two phases split
// by one barrier: (1) each thread takes 16-byte groups of a plane and, for
// every output row of the band, sums the group's footprint rows into that
// row's buffer in shared memory, as 16-bit integers (luma samples, then
// chroma (U, V) pairs as 32-bit words); (2) each thread takes output
// columns, reads its two column entries once, and writes the column's pixels
// in every row of the band.
//
// SHORT (kernel.py `area_int_short`): footprints of at most 3 rows, 3 luma
// columns and 2 chroma columns (downscales up to 3x horizontally, 2x
// vertically, as 1080p to 640): fixed-count code; a column's taps from one
// 16-byte entry of a host-built table (kernel.py `short_columns`): its luma
// weights as bytes of two `__dp2a` dot products (0 past the footprint), and
// a chroma pair's U and V summed in one 32-bit multiply-add (the host checks
// that neither lane can overflow). Otherwise footprint rows are loaded 8 at
// a time and columns summed in dot products (kernel.py `dot_columns`) or
// loops.

// A group's 4 words as 16-bit lanes: lo = bytes 0 and 2, hi = bytes 1 and 3
// (YUYV: a luma pair and a chroma pair, as the row buffers hold them); or
// INORDER (NV12/NV16): lo = bytes 0 and 1, hi = bytes 2 and 3, which are
// already the row buffers' order (luma samples in turn, (U, V) pairs),
// where lo/hi as for YUYV took 8 byte permutes to reorder.
template <bool INORDER>
__device__ __forceinline__ void int_split(const uint4& v, unsigned int* lo, unsigned int* hi) {
    if (INORDER) {
        lo[0] = __byte_perm(v.x, 0u, 0x4140u); hi[0] = __byte_perm(v.x, 0u, 0x4342u);
        lo[1] = __byte_perm(v.y, 0u, 0x4140u); hi[1] = __byte_perm(v.y, 0u, 0x4342u);
        lo[2] = __byte_perm(v.z, 0u, 0x4140u); hi[2] = __byte_perm(v.z, 0u, 0x4342u);
        lo[3] = __byte_perm(v.w, 0u, 0x4140u); hi[3] = __byte_perm(v.w, 0u, 0x4342u);
        return;
    }
    lo[0] = v.x & 0x00ff00ffu; hi[0] = __byte_perm(v.x, 0u, 0x4341u);
    lo[1] = v.y & 0x00ff00ffu; hi[1] = __byte_perm(v.y, 0u, 0x4341u);
    lo[2] = v.z & 0x00ff00ffu; hi[2] = __byte_perm(v.z, 0u, 0x4341u);
    lo[3] = v.w & 0x00ff00ffu; hi[3] = __byte_perm(v.w, 0u, 0x4341u);
}

// 16 bytes through the read-only path when `pred`, else zeros.
__device__ __forceinline__ uint4 int_load(const unsigned char* p, bool pred) {
    return pred ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0u, 0u, 0u, 0u);
}

// Tap j of a footprint of n samples: W0, then q, then W1 for the last, 0 past it.
__device__ __forceinline__ unsigned int int_tap(int j, int n, unsigned int W0, unsigned int W1, unsigned int q) {
    return j == 0 ? W0 : (j == n - 1 ? W1 : (j < n ? q : 0u));
}

// Rows 0..K-1 of a footprint of exactly K rows, all loads in flight
// together: weights W0, q between, W1 last (W0 alone when K is 1).
template <int K, bool INORDER>
__device__ __forceinline__ void int_rows(const unsigned char* row, int stride, unsigned int W0, unsigned int W1,
                                         unsigned int q, unsigned int* lo, unsigned int* hi) {
    uint4 v[K];
    #pragma unroll
    for (int j = 0; j < K; ++j) v[j] = __ldg(reinterpret_cast<const uint4*>(row + (long long)j * stride));
    #pragma unroll
    for (int j = 0; j < K; ++j) {
        const unsigned int w = j == 0 ? W0 : (j == K - 1 ? W1 : q);
        unsigned int a[4], b[4];
        int_split<INORDER>(v[j], a, b);
        #pragma unroll
        for (int k = 0; k < 4; ++k) {
            lo[k] = j == 0 ? a[k] * w : lo[k] + a[k] * w;
            hi[k] = j == 0 ? b[k] * w : hi[k] + b[k] * w;
        }
    }
}

// A footprint row span's integer fields (area_int): its first row, rows,
// end weights and the weight between. (Read as the Span's two 16-byte
// halves: the compiler then loads i0 and n together, W and q together.)
struct IntSpan {
    int i0, n;
    unsigned int W0, W1, q;
};

__device__ __forceinline__ IntSpan int_span(const Span* s) {
    const uint4 a = __ldg(reinterpret_cast<const uint4*>(s)), b = __ldg(reinterpret_cast<const uint4*>(s) + 1);
    return {(int)a.x, (int)a.y, b.y & 0xffffu, b.y >> 16, b.z};  // i0, n | W, q (struct Span)
}

// A group's vertical sums (int_split lanes) to the row buffer at d: luma
// at d, chroma at d + off.
template <int FMT, int PLANE>
__device__ __forceinline__ void int_store(unsigned int* d, int off, const unsigned int* lo, const unsigned int* hi) {
    if (FMT == FMT_YUYV || FMT == FMT_UYVY) {
        // lo holds Y0, Y1 of each word (YUYV) and hi U, V: already a luma
        // pair and a chroma pair a word (UYVY the other way round).
        const unsigned int* y = FMT == FMT_YUYV ? lo : hi;
        const unsigned int* c = FMT == FMT_YUYV ? hi : lo;
        *reinterpret_cast<uint4*>(d) = make_uint4(y[0], y[1], y[2], y[3]);
        *reinterpret_cast<uint4*>(d + off) = make_uint4(c[0], c[1], c[2], c[3]);
    } else {
        // NV12/NV16 (int_split in order): luma Y0 Y1 | Y2 Y3 ..., chroma U V | U V ...
        unsigned int* o = d + (PLANE == 0 ? 0 : off);
        const uint4 first = make_uint4(lo[0], hi[0], lo[1], hi[1]);
        const uint4 second = make_uint4(lo[2], hi[2], lo[3], hi[3]);
        // (32 bytes a thread: a quarter warp's 16-byte stores take two
        // shared-memory wavefronts; storing lanes 4-7's halves the other
        // way round avoids it but costs 8 selects: 640 outputs 2% slower.)
        *reinterpret_cast<uint4*>(o) = first;
        *reinterpret_cast<uint4*>(o + 4) = second;
    }
}

// Vertical sums of one 16-byte group for the content rows [ly0, ly1) of a
// band, to the row buffers (row r at s + r * row_words). A footprint's
// row count is the same for the whole block, so it picks straight code for
// exactly that many rows (up to MAXN), all loads in flight together (these
// loads are what the kernel waits for); taller footprints go 8 rows at a
// time with per-row weights.
template <int FMT, int PLANE, int MAXN>
__device__ __forceinline__ void int_group(const unsigned char* src, int stride, const Span* rows, int ly0, int ly1,
                                          unsigned int* s, int off, int row_words) {
    constexpr bool IN = FMT == FMT_NV12 || FMT == FMT_NV16;
    // (running pointers to the span and the destination; a footprint's first
    // row at a 32-bit offset: kernel.area_integer keeps planes under 4 GiB)
    unsigned int* d = s;
    const Span* span = rows + ly0;
    #pragma unroll 1
    for (int ly = ly0; ly < ly1; ++ly, d += row_words, ++span) {
        const IntSpan sp = int_span(span);
        const unsigned int W0 = sp.W0, W1 = sp.W1, q = sp.q;
        const int n = sp.n;
        const unsigned char* row = src + (unsigned int)sp.i0 * (unsigned int)stride;
        unsigned int lo[4], hi[4];
        switch (n) {
            case 1: int_rows<1, IN>(row, stride, W0, W1, q, lo, hi); break;
            case 2: int_rows<2, IN>(row, stride, W0, W1, q, lo, hi); break;
            case 3: int_rows<3, IN>(row, stride, W0, W1, q, lo, hi); break;
#define SITS_INT_ROWS_CASE(K) case K: if (MAXN >= K) { int_rows<K, IN>(row, stride, W0, W1, q, lo, hi); break; }
            SITS_INT_ROWS_CASE(4) SITS_INT_ROWS_CASE(5) SITS_INT_ROWS_CASE(6) SITS_INT_ROWS_CASE(7)
            SITS_INT_ROWS_CASE(8)
#undef SITS_INT_ROWS_CASE
            default: {
                #pragma unroll
                for (int k = 0; k < 4; ++k) lo[k] = hi[k] = 0u;
                #pragma unroll 1
                for (int c = 0; c < n; c += 8) {
                    uint4 v[8];
                    #pragma unroll
                    for (int j = 0; j < 8; ++j) v[j] = int_load(row + (long long)j * stride, c + j < n);
                    row += 8LL * stride;
                    #pragma unroll
                    for (int j = 0; j < 8; ++j) {
                        const unsigned int w = int_tap(c + j, n, W0, W1, q);
                        unsigned int a[4], b[4];
                        int_split<IN>(v[j], a, b);
                        #pragma unroll
                        for (int k = 0; k < 4; ++k) { lo[k] += a[k] * w; hi[k] += b[k] * w; }
                    }
                }
            }
        }
        int_store<FMT, PLANE>(d, off, lo, hi);
    }
}

// A column entry of the integer kernel: i0 | n << 16, W0 | W1 << 16, q, scale.
__device__ __forceinline__ uint4 int_col(const unsigned char* tables, int offset, int x) {
    return __ldg(reinterpret_cast<const uint4*>(tables + offset) + x);
}

// Words w[k0..k1) as (sum of their low halves, sum of their high halves):
// S sums whole words (mod 2^32) and T their high halves, two words a step
// (one 3-input add and two shift-adds); the low halves' sum is then
// S - (T << 16), exact while it is under 2^32 (the host checks
// 65535 * a column's weights < 2^32).
__device__ __forceinline__ void int_word_sums(const unsigned int* w, int k0, int k1, unsigned int& lo, unsigned int& hi) {
    unsigned int S = 0u, T = 0u;
    int k = k0;
    #pragma unroll 1
    for (; k + 2 <= k1; k += 2) {
        const unsigned int x0 = w[k], x1 = w[k + 1];
        S += x0 + x1;
        T += (x0 >> 16) + (x1 >> 16);
    }
    if (k < k1) { const unsigned int x = w[k]; S += x; T += x >> 16; }
    hi = T;
    lo = S - (T << 16);
}

// Weighted sum of 16-bit column sums: W0 * first + q * (between) + W1 * last,
// the samples between read as 32-bit words (two samples each,
// int_word_sums), an odd one at either end alone.
__device__ __forceinline__ unsigned int int_box(const unsigned short* s, const uint4& e) {
    const int i0 = (int)(e.x & 0xffffu), n = (int)(e.x >> 16);
    const unsigned short* q = s + i0;
    int a = i0 + 1, b = i0 + n - 1;  // the samples between: s[a..b)
    unsigned int mid = 0u;
    if (a < b && (a & 1)) mid = s[a++];
    if (a < b && (b & 1)) mid += s[--b];
    unsigned int lo, hi;
    int_word_sums(reinterpret_cast<const unsigned int*>(s), a >> 1, b >> 1, lo, hi);
    return (e.y & 0xffffu) * q[0] + (e.y >> 16) * q[n - 1] + (mid + lo + hi) * e.z;
}

// The same for (U, V) pairs packed in 32-bit words.
__device__ __forceinline__ void int_box2(const unsigned int* s, const uint4& e, unsigned int& u, unsigned int& v) {
    const int i0 = (int)(e.x & 0xffffu), n = (int)(e.x >> 16);
    const unsigned int* q = s + i0;
    unsigned int mu, mv;
    int_word_sums(q, 1, n - 1, mu, mv);
    const unsigned int f = q[0], l = q[n - 1], W0 = e.y & 0xffffu, W1 = e.y >> 16;
    u = W0 * (f & 0xffffu) + W1 * (l & 0xffffu) + mu * e.z;
    v = W0 * (f >> 16) + W1 * (l >> 16) + mv * e.z;
}

// SHORT's column (kernel.py `short_columns`): the row-buffer word of its
// first luma sample (l) and of its first (U, V) pair (c, from the row's
// start), the luma weights as bytes from word l on, the chroma taps.
struct ShortCol {
    unsigned int l, c, w, c0, c1;
};

__device__ __forceinline__ ShortCol short_column(const unsigned char* tables, const Params& p, int lx) {
    const uint4 e = __ldg(reinterpret_cast<const uint4*>(tables + p.cols2) + lx);
    ShortCol col;
    col.l = e.x & 0xffffu;
    col.c = (e.x >> 16) + (unsigned int)p.smem_off1;
    col.w = e.y;
    col.c0 = e.z & 0xffffu;
    col.c1 = e.z >> 16;
    return col;
}

// The general path's horizontal sums as 2-way dot products (`__dp2a`: two
// 16-bit column sums of a row buffer word against two weight bytes), when
// the host built the column table at cols2 (kernel.py `dot_columns`: every
// column weight under 256, a footprint within 6 words of each part of a row
// buffer). A column's entry (12 words): the first luma word, 3 luma weight
// words (bytes: the weights of samples 0..11 from that word on, 0 outside
// the footprint), the first (U, V) word, 3 U and 3 V weight words (U's on
// bytes 0 and 2, V's on bytes 1 and 3: pair k takes the low or high half of
// word k / 2), one word unused. 6 loads and 6 dot products for luma and 6
// and 12 for chroma, where the loops read each sample alone.
struct DotCol {
    unsigned int l0, c0, wl[3], wu[3], wv[3];
};

__device__ __forceinline__ DotCol dot_column(const unsigned char* tables, const Params& p, int lx) {
    const uint4* e = reinterpret_cast<const uint4*>(tables + p.cols2) + 3 * lx;
    const uint4 a = __ldg(e), b = __ldg(e + 1), c = __ldg(e + 2);
    DotCol col;
    col.l0 = a.x; col.wl[0] = a.y; col.wl[1] = a.z; col.wl[2] = a.w;
    col.c0 = b.x; col.wu[0] = b.y; col.wu[1] = b.z; col.wu[2] = b.w;
    col.wv[0] = c.x; col.wv[1] = c.y; col.wv[2] = c.z;
    return col;
}

// Luma sum and (U, V) sums of a column in one row buffer.
__device__ __forceinline__ void dot_sums(const unsigned int* row, int off1, const DotCol& col, unsigned int& a,
                                         unsigned int& u, unsigned int& v) {
    const unsigned int* l = row + col.l0;
    const unsigned int* c = row + off1 + col.c0;
    unsigned int x[6], y[6];
    #pragma unroll
    for (int k = 0; k < 6; ++k) { x[k] = l[k]; y[k] = c[k]; }
    a = 0u; u = 0u; v = 0u;
    #pragma unroll
    for (int k = 0; k < 6; k += 2) {
        a = __dp2a_lo(x[k], col.wl[k / 2], a);
        a = __dp2a_hi(x[k + 1], col.wl[k / 2], a);
        u = __dp2a_lo(y[k], col.wu[k / 2], u);
        u = __dp2a_hi(y[k + 1], col.wu[k / 2], u);
        v = __dp2a_lo(y[k], col.wv[k / 2], v);
        v = __dp2a_hi(y[k + 1], col.wv[k / 2], v);
    }
}

// SHORT: a column's luma and (U, V) means from its luma words l[0..1] and
// (U, V) words c[0..1] in one row buffer. The luma sum is two dot
// products (a footprint of up to 3 samples in two words, weight 0 outside
// it; a tap past a footprint reads what follows it: the buffer has slack at
// its end). The sums become floats by OR-ing them into 2^23's mantissa:
// (2^23 + a) * k - 2^23 * k is a * k rounded once (2^23 * k is exact).
__device__ __forceinline__ void int_short_yuv(const Params& p, const ShortCol& col, const unsigned int* l,
                                              const unsigned int* c, float& y, float& u, float& v) {
    const unsigned int a = __dp2a_hi(l[1], col.w, __dp2a_lo(l[0], col.w, 0u));
    const unsigned int uv = col.c0 * c[0] + col.c1 * c[1];
    y = fmaf(__uint_as_float(a | 0x4B000000u), p.kz[0], p.kz[1]);
    u = fmaf(__uint_as_float((uv & 0xffffu) | 0x4B000000u), p.kz[2], p.kz[3]);
    v = fmaf(__uint_as_float(__byte_perm(uv, 0x4B000000u, 0x7432u)), p.kz[2], p.kz[3]);
}

// Two 16-bit output values as one word, the first in the low half.
template <int OUT>
__device__ __forceinline__ unsigned int pack2(float a, float b) {
    if (OUT == OUT_BFLOAT16) return (unsigned int)bf16_bits(a) | ((unsigned int)bf16_bits(b) << 16);
    return (unsigned int)__half_as_ushort(__float2half_rn(a)) | ((unsigned int)__half_as_ushort(__float2half_rn(b)) << 16);
}

// Output rows [y0, y1) of band bx of gx: out_h / gx rows each, the first
// out_h % gx bands one more (one 32-bit division, which the compiler makes a
// reciprocal multiply; the quotient is the same for every block).
__device__ __forceinline__ void int_band(int out_h, unsigned int bx, unsigned int gx, int& y0, int& y1) {
    const unsigned int q = (unsigned int)out_h / gx, r = (unsigned int)out_h - q * gx;
    y0 = (int)(bx * q + (bx < r ? bx : r));
    y1 = y0 + (int)q + (bx < r ? 1 : 0);
}

// The rows the footprints of content rows [a, b) cover, from `plane` (at the
// first word of the crop) to the same column of the row after the last:
// into L2 with one bulk prefetch (16-byte aligned rows: the area_int case).
// Before sm_90 there is no bulk prefetch, and one thread issuing
// `prefetch.global.L2` for each 128-byte line of the rows was never timed:
// no prefetch there (the emulator still runs the address arithmetic).
__device__ __forceinline__ void int_prefetch_rows(const unsigned char* plane, int stride, const Span* rows, int a,
                                                  int b) {
    const int r0 = rows[a].i0, r1 = rows[b - 1].i0 + rows[b - 1].n;
#ifdef SITS_ARCH_SM90
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;"
                 :: "l"(plane + (long long)r0 * stride), "r"((unsigned int)((r1 - r0) * stride)) : "memory");
#else
    (void)plane; (void)stride; (void)r0; (void)r1;
#endif
}

// The block about one wave of resident blocks (`per_sm` an SM) after this
// one, as blocks start in launch order: its footprint rows into L2, so that
// its loads hit L2 rather than wait for DRAM.
__device__ __forceinline__ void int_prefetch_ahead(const Params& p, const Span* spans, const unsigned long long* T,
                                                   bool planar, int per_sm) {
    unsigned int nsm = 132;
#ifndef SITS_EMULATE
    asm("mov.u32 %0, %%nsmid;" : "=r"(nsm));
#endif
    const unsigned int L = blockIdx.y * gridDim.x + blockIdx.x + nsm * per_sm;  // (launches < 2^32 blocks)
    if (L >= gridDim.x * gridDim.y) return;
    const int bn = (int)(L / gridDim.x), bx = (int)(L - bn * gridDim.x);
    int y0, y1;
    int_band(p.out_h, bx, gridDim.x, y0, y1);
    const int a = imax(y0 - p.content_y, 0), b = imin(y1 - p.content_y, p.content_h);
    if (a >= b) return;
    int_prefetch_rows(reinterpret_cast<const unsigned char*>(T[1 + 2 * bn]) + 4LL * p.word_start0, p.stride0, spans, a, b);
    if (planar) {
        int_prefetch_rows(reinterpret_cast<const unsigned char*>(T[2 + 2 * bn]) + 4LL * p.word_start1, p.stride1,
                          spans + p.span_rows1, a, b);
    }
}

template <int FMT, int OUT, int SHORT>
__global__ void __launch_bounds__(SITS_INT_THREADS, SHORT ? SITS_INT_SHORT_MIN_BLOCKS : SITS_INT_MIN_BLOCKS)
area_int(const Params p, const unsigned char* __restrict__ tables, const unsigned long long* __restrict__ T) {
    typedef typename OutType<OUT>::T OT;
    typedef Traits<FMT> Tr;
    SITS_SHARED_FLOATS(smem);
    unsigned int* s = reinterpret_cast<unsigned int*>(smem);
    const Span* spans = reinterpret_cast<const Span*>(tables + p.span_offset);
    const int n = blockIdx.y;
    int y_begin, y_end;
    int_band(p.out_h, blockIdx.x, gridDim.x, y_begin, y_end);
    const int ly0 = imax(y_begin - p.content_y, 0), ly1 = imin(y_end - p.content_y, p.content_h);
    OT* out = reinterpret_cast<OT*>(T[0]) + (long long)n * p.out_stride_n;
    if (ly0 < ly1) {
        constexpr int MAXN = SHORT ? 3 : 8;
        const unsigned char* p0 = reinterpret_cast<const unsigned char*>(T[1 + 2 * n]);
        const unsigned char* p1 = reinterpret_cast<const unsigned char*>(T[2 + 2 * n]);
        const int groups0 = p.word_count0 / 4, groups1 = Tr::planar ? p.word_count1 / 4 : 0;
        // Chroma groups start on a warp boundary when that costs no extra
        // pass, so that no warp runs both planes' code one after the other.
        // (bd is the launch's block size, kernel.py Variant.int_threads: a
        // constant, so these divisions are shifts.)
        constexpr int bd = SITS_INT_THREADS;
        const int aligned = (groups0 + 31) & ~31;
        const int start1 = (aligned + groups1 + bd - 1) / bd == (groups0 + groups1 + bd - 1) / bd ? aligned : groups0;
        const int groups = Tr::planar ? start1 + groups1 : groups0;
        for (int g = threadIdx.x; g < groups; g += bd) {
            if (!Tr::planar || g < groups0) {
                int_group<FMT, 0, MAXN>(p0 + 4LL * (p.word_start0 + 4 * g), p.stride0, spans, ly0, ly1,
                                         s + (Tr::planar ? 8 : 4) * g, p.smem_off1, p.smem_row);
            } else if (g >= start1) {
                const int h = g - start1;
                int_group<FMT, 1, MAXN>(p1 + 4LL * (p.word_start1 + 4 * h), p.stride1, spans + p.span_rows1,
                                         ly0, ly1, s + 8 * h, p.smem_off1, p.smem_row);
            }
        }
        __syncthreads();
    }
    // SHORT: once this block's own loads are done, the footprint rows of the
    // block about one wave of resident blocks later go into L2 (measured:
    // 640 outputs 12% faster; for the taller footprints of 224 outputs
    // slower or no better, and at the kernel's start slower everywhere).
    if (SHORT && threadIdx.x == 0) int_prefetch_ahead(p, spans, T, Tr::planar, SITS_INT_SHORT_MIN_BLOCKS);
    // Rows [yc0, yc1) of the band are content; the rest letterbox fill.
    const int yc0 = imax(y_begin, p.content_y), yc1 = imax(imin(y_end, p.content_y + p.content_h), yc0);
    const unsigned int* rows0 = s + (yc0 - p.content_y - ly0) * p.smem_row;
    // SHORT with 16-bit NCHW outputs: two neighbouring pixels a thread, stored
    // as one 32-bit word a channel (when the output's rows and planes keep
    // the pair 4-byte aligned); otherwise one pixel a thread.
    constexpr bool PAIRS = SHORT && (OUT == OUT_FLOAT16 || OUT == OUT_BFLOAT16);
    const bool pairs = PAIRS && p.out_stride_x == 1 && ((p.out_stride_c | p.out_stride_y) & 1) == 0
                       && ((reinterpret_cast<unsigned long long>(out) & 3) == 0);
    const int step = pairs ? 2 : 1;
    for (int x = step * threadIdx.x; x < p.out_w; x += step * blockDim.x) {
        const int xn = imin(x + step, p.out_w);  // this thread's pixels: [x, xn)
        for (int xi = x; xi < xn; ++xi) {
            OT* o = out + (long long)xi * p.out_stride_x;
            for (int y = y_begin; y < yc0; ++y) write_pad<OUT>(p, o + (long long)y * p.out_stride_y);
            for (int y = yc1; y < y_end; ++y) write_pad<OUT>(p, o + (long long)y * p.out_stride_y);
        }
        const bool in0 = x >= p.content_x && x < p.content_x + p.content_w;
        if (PAIRS && pairs && xn == x + 2 && in0 && x + 1 < p.content_x + p.content_w) {
            const ShortCol a = short_column(tables, p, x - p.content_x);
            const ShortCol b = short_column(tables, p, x + 1 - p.content_x);
            // running pointers: one add a row each, the loads at fixed offsets
            const unsigned int *la = rows0 + a.l, *ca = rows0 + a.c, *lb = rows0 + b.l, *cb = rows0 + b.c;
            OT* o0 = out + x + (long long)yc0 * p.out_stride_y;
            OT* o1 = o0 + p.out_stride_c;
            OT* o2 = o1 + p.out_stride_c;
            #pragma unroll 1
            for (int y = yc1 - yc0; y > 0; --y) {
                float cy, cu, cv, va[3], vb[3];
                int_short_yuv(p, a, la, ca, cy, cu, cv);
                pixel_values<false>(p, cy, cu, cv, va);
                int_short_yuv(p, b, lb, cb, cy, cu, cv);
                pixel_values<false>(p, cy, cu, cv, vb);
                *reinterpret_cast<unsigned int*>(o0) = pack2<OUT>(va[0], vb[0]);
                *reinterpret_cast<unsigned int*>(o1) = pack2<OUT>(va[1], vb[1]);
                *reinterpret_cast<unsigned int*>(o2) = pack2<OUT>(va[2], vb[2]);
                la += p.smem_row; ca += p.smem_row; lb += p.smem_row; cb += p.smem_row;
                o0 += p.out_stride_y; o1 += p.out_stride_y; o2 += p.out_stride_y;
            }
            continue;
        }
        for (int xi = x; xi < xn; ++xi) {
            OT* o = out + (long long)xi * p.out_stride_x;
            const int lx = xi - p.content_x;
            if (lx < 0 || lx >= p.content_w) {
                for (int y = yc0; y < yc1; ++y) write_pad<OUT>(p, o + (long long)y * p.out_stride_y);
                continue;
            }
            if (!SHORT && p.cols2) {
                const DotCol col = dot_column(tables, p, lx);
                OT* oy = o + (long long)yc0 * p.out_stride_y;
                for (int y = yc0, r = 0; y < yc1; ++y, r += p.smem_row) {
                    unsigned int a, u, v;
                    dot_sums(rows0 + r, p.smem_off1, col, a, u, v);
                    write_pixel<OUT>(p, oy, (float)a * p.kz[0], (float)u * p.kz[2], (float)v * p.kz[2]);
                    oy += p.out_stride_y;
                }
                continue;
            }
            if (SHORT) {
                const ShortCol col = short_column(tables, p, lx);
                OT* oy = o + (long long)yc0 * p.out_stride_y;
                for (int y = yc0, r = 0; y < yc1; ++y, r += p.smem_row) {
                    float cy, cu, cv;
                    int_short_yuv(p, col, rows0 + r + col.l, rows0 + r + col.c, cy, cu, cv);
                    write_pixel<OUT>(p, oy, cy, cu, cv);
                    oy += p.out_stride_y;
                }
                continue;
            }
            // the loops: the column's two entries, set up once for the band
            const uint4 e0 = int_col(tables, p.cols0, lx), e1 = int_col(tables, p.cols1, lx);
            OT* oy = o + (long long)yc0 * p.out_stride_y;
            for (int y = yc0, r = 0; y < yc1; ++y, r += p.smem_row) {
                const unsigned int* row = rows0 + r;
                const unsigned int a = int_box(reinterpret_cast<const unsigned short*>(row), e0);
                unsigned int u, v;
                int_box2(row + p.smem_off1, e1, u, v);
                write_pixel<OUT>(p, oy, (float)a * p.kz[0], (float)u * p.kz[2], (float)v * p.kz[2]);
                oy += p.out_stride_y;
            }
        }
    }
}

}  // namespace sits
