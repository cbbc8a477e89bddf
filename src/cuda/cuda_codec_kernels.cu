/* cuda_codec_kernels.cu — the kernels of the codec decoder on the GPU
 * (cuda_codec.cu drives them).
 *
 * Signals are time-major for a batch of streams: [stream][time][channel],
 * channels contiguous. Every causal convolution of the decoder becomes two
 * kernels:
 *   window  builds each stream's input window [history | act(x)] (the
 *           activation applied once per sample) and writes the last `hist`
 *           rows of it as the stream's next history (the state is double
 *           buffered per stream, so reading the old and writing the new
 *           history never race);
 *   conv    an implicit GEMM over that window: out[col][co] = bias +
 *           Σ_(tap, c) W[co][tap][c] · window[col + tap·d][c], 64×64 output
 *           tiles, on TF32 tensor cores (WMMA) or f32 FMAs, with the
 *           residual add, the branch sum/average of a residual layer and the
 *           output clamp fused into the store.
 * The grouped transposed (up-sampling) convolution applies its activation
 * on the fly and keeps its own history the same way.
 */
#include <stdlib.h>
#include <string.h>

#include <mma.h>

#include "cuda/cuda_codec.h"
#include "cuda/cuda_launch.cuh"

using namespace nvcuda;

/* ---------------- window: [history | act(x)] and the next history ---------------- */

/* 32-bit indices: a piece holds at most GP_CUDA_CODEC_MAX_COLS frame columns, so every
 * signal here has far fewer than 2^31 elements. A thread makes 8 channels of
 * one row (Cp is a multiple of 8) and stores them as one 16-byte (FP16) or two
 * 16-byte (f32) writes. */
__device__ __forceinline__ void win_store8(float *w, const float (&v)[8]) {
    reinterpret_cast<float4 *>(w)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4 *>(w)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
__device__ __forceinline__ void win_store8(__half *w, const float (&v)[8]) {
    __align__(16) __half2 h[4];
#pragma unroll
    for (int k = 0; k < 4; k++) h[k] = __floats2half2_rn(v[2 * k], v[2 * k + 1]);
    *reinterpret_cast<uint4 *>(w) = *reinterpret_cast<const uint4 *>(h);
}

__device__ __forceinline__ float sig_ld(const float *p) { return *p; }
__device__ __forceinline__ float sig_ld(const __half *p) { return __half2float(*p); }

template <typename XT, typename WinT>
__global__ void k_codec_window(const XT *__restrict__ x, unsigned n, unsigned T, unsigned C,
                               unsigned Cp, unsigned hist, gp_cuda_codec_act act,
                               const float *const *st_in, float *const *st_out, unsigned st_off,
                               WinT *__restrict__ win) {
    gp_pdl_enter();
    constexpr bool FAST = sizeof(WinT) == 2; /* FP16 windows: the hardware sine */
    const unsigned W = hist + T, groups = Cp / 8;
    const unsigned total = n * W * groups;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += gridDim.x * blockDim.x) {
        const unsigned c0 = (i % groups) * 8, rows = i / groups;
        const unsigned r = rows % W, b = rows / W;
        float v[8];
        if (r < hist) {
            const float *src = st_in[b] + st_off + r * C;
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = c0 + k < C ? src[c0 + k] : 0.0f;
        } else {
            const XT *src = x + (b * T + (r - hist)) * C;
#pragma unroll
            for (int k = 0; k < 8; k++)
                v[k] =
                    c0 + k < C ? codec_act<FAST>(act, sig_ld(src + c0 + k), (int)(c0 + k)) : 0.0f;
        }
        win_store8(win + (size_t)rows * Cp + c0, v);
        if (r >= T) {
            float *dst = st_out[b] + st_off + (r - T) * C;
#pragma unroll
            for (int k = 0; k < 8; k++)
                if (c0 + k < C) dst[c0 + k] = v[k];
        }
    }
}

/* q = n / d, r = n % d for n < 2^22 (GP_WIN_FAST_MAX): n is exact in f32, and
 * n · (1/d) rounded twice is within 2^-23 of n/d relatively, so under 0.5 in
 * absolute — the truncated quotient is off by at most one either way, which
 * the remainder's sign and size correct. ~8 instructions against ~20 for a
 * 32-bit division by a value known only at run time. */
#define GP_WIN_FAST_MAX (1u << 22)
struct win_divisor {
    unsigned d;
    float inv;
};
__device__ __forceinline__ unsigned win_divmod(unsigned n, win_divisor dv, unsigned &r) {
    unsigned q = (unsigned)((float)n * dv.inv);
    int rem = (int)n - (int)(q * dv.d);
    if (rem < 0) {
        q--;
        rem += (int)dv.d;
    } else if (rem >= (int)dv.d) {
        q++;
        rem -= (int)dv.d;
    }
    r = (unsigned)rem;
    return q;
}

/* act over 8 channels c0 .. c0 + 7 with the kind's branch taken once for the
 * group, not once per value (the same arithmetic as codec_act); channels from
 * C on are zero. */
template <bool FAST>
__device__ __forceinline__ void win_act8(const gp_cuda_codec_act &a, unsigned c0, unsigned C,
                                         float (&v)[8]) {
    switch (a.kind) {
    case GP_DEV_ACT_SNAKE:
    case GP_DEV_ACT_HALF_SNAKE: {
        const unsigned ns = (unsigned)a.n_snake;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const unsigned c = c0 + k;
            if (c < ns) {
                const float t = FAST ? __sinf(a.alpha[c] * v[k]) : sinf(a.alpha[c] * v[k]);
                v[k] = v[k] + a.inv_alpha[c] * (t * t);
            } else {
                v[k] = v[k] > 0.0f ? v[k] : a.slope * v[k];
            }
        }
        break;
    }
    case GP_DEV_ACT_LRELU:
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = v[k] > 0.0f ? v[k] : a.slope * v[k];
        break;
    case GP_DEV_ACT_ELU:
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = v[k] > 0.0f ? v[k] : expm1f(v[k]);
        break;
    default: break;
    }
    if (c0 + 8 > C) {
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (c0 + k >= C) v[k] = 0.0f;
    }
}

/* k_codec_window with fewer instructions per group (it is bound by issuing
 * them: 3 per cycle on an H200, ncu): the indices by win_divmod, the
 * activation's kind branched once per group of 8, the inputs loaded without a
 * test per value when the group lies inside C. The same values, bit for bit;
 * for n · (hist + T) · Cp / 8 < GP_WIN_FAST_MAX. */
template <typename XT, typename WinT>
__global__ void k_codec_window_fast(const XT *__restrict__ x, unsigned n, unsigned T, unsigned C,
                                    unsigned Cp, unsigned hist, win_divisor groups, win_divisor W,
                                    gp_cuda_codec_act act, const float *const *st_in,
                                    float *const *st_out, unsigned st_off, WinT *__restrict__ win) {
    gp_pdl_enter();
    constexpr bool FAST = sizeof(WinT) == 2; /* FP16 windows: the hardware sine */
    const unsigned total = n * W.d * groups.d;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += gridDim.x * blockDim.x) {
        unsigned g, r;
        const unsigned rows = win_divmod(i, groups, g);
        const unsigned b = win_divmod(rows, W, r);
        const unsigned c0 = g * 8;
        const bool whole = c0 + 8 <= C;
        float v[8];
        if (r < hist) {
            const float *src = st_in[b] + st_off + r * C + c0;
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = whole || c0 + k < C ? src[k] : 0.0f;
        } else {
            const XT *src = x + (b * T + (r - hist)) * C + c0;
            if (whole) {
#pragma unroll
                for (int k = 0; k < 8; k++) v[k] = sig_ld(src + k);
            } else {
#pragma unroll
                for (int k = 0; k < 8; k++) v[k] = c0 + k < C ? sig_ld(src + k) : 0.0f;
            }
            win_act8<FAST>(act, c0, C, v);
        }
        win_store8(win + (size_t)rows * Cp + c0, v);
        if (r >= T) {
            float *dst = st_out[b] + st_off + (r - T) * C + c0;
#pragma unroll
            for (int k = 0; k < 8; k++)
                if (whole || c0 + k < C) dst[k] = v[k];
        }
    }
}

/* GEPARD_CUDA_CODEC_WINDOW_FAST=0: k_codec_window everywhere (for measurements) */
static bool window_fast = true;

template <typename XT, typename WinT>
static void launch_window(unsigned blocks, size_t total, const XT *x, unsigned n, unsigned T,
                          unsigned C, unsigned Cp, unsigned hist, const gp_cuda_codec_act *act,
                          const float *const *st_in, float *const *st_out, unsigned st_off,
                          WinT *win, cudaStream_t s) {
    if (window_fast && total < GP_WIN_FAST_MAX) {
        const win_divisor groups = {Cp / 8, 1.0f / (float)(Cp / 8)};
        const win_divisor W = {hist + T, 1.0f / (float)(hist + T)};
        gp_launch(k_codec_window_fast<XT, WinT>, blocks, 256, 0, s, x, n, T, C, Cp, hist, groups, W,
                  *act, st_in, st_out, st_off, win);
    } else {
        gp_launch(k_codec_window<XT, WinT>, blocks, 256, 0, s, x, n, T, C, Cp, hist, *act, st_in,
                  st_out, st_off, win);
    }
}

void gp_cuda_codec_run_window(const void *x, bool x_half, int n, int T, int C, int Cp, int hist,
                              const gp_cuda_codec_act *act, const float *const *st_in,
                              float *const *st_out, size_t st_off, void *win, bool half,
                              cudaStream_t s) {
    const size_t total = (size_t)n * ((size_t)hist + (size_t)T) * (size_t)(Cp / 8);
    const int threads = 256;
    size_t blocks = (total + threads - 1) / threads;
    if (blocks > 65535u * 8u) blocks = 65535u * 8u;
    if (blocks == 0) return;
    const unsigned nb = (unsigned)blocks, un = (unsigned)n, uT = (unsigned)T, uC = (unsigned)C,
                   uCp = (unsigned)Cp, uh = (unsigned)hist, uo = (unsigned)st_off;
    if (half && x_half) /* FP16 signals exist only beside FP16 windows */
        launch_window(nb, total, (const __half *)x, un, uT, uC, uCp, uh, act, st_in, st_out, uo,
                      (__half *)win, s);
    else if (half)
        launch_window(nb, total, (const float *)x, un, uT, uC, uCp, uh, act, st_in, st_out, uo,
                      (__half *)win, s);
    else
        launch_window(nb, total, (const float *)x, un, uT, uC, uCp, uh, act, st_in, st_out, uo,
                      (float *)win, s);
}

/* ---------------- the older rows of fused windows ---------------- */

/* Layer blockIdx.y of h; a thread per 8 channels of one history row of one
 * stream (the values and roundings of k_codec_window's rows r < hist). */
__global__ void k_codec_histories(const gp_cuda_codec_histories h, unsigned n,
                                  const float *const *st_in, float *const *st_out) {
    gp_pdl_enter();
    const gp_cuda_codec_history &L = h.l[blockIdx.y];
    const unsigned hist = (unsigned)L.hist, T = (unsigned)L.T, C = (unsigned)L.C;
    const unsigned groups = (unsigned)L.cp / 8, W = hist + T;
    const unsigned total = n * hist * groups;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += gridDim.x * blockDim.x) {
        const unsigned c0 = (i % groups) * 8, rows = i / groups;
        const unsigned r = rows % hist, b = rows / hist;
        const float *src = st_in[b] + L.st_off + r * C;
        float v[8];
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = c0 + k < C ? src[c0 + k] : 0.0f;
        win_store8(L.win + ((size_t)b * W + r) * (unsigned)L.cp + c0, v);
        if (r >= T) {
            float *dst = st_out[b] + L.st_off + (r - T) * C;
#pragma unroll
            for (int k = 0; k < 8; k++)
                if (c0 + k < C) dst[c0 + k] = v[k];
        }
    }
}

void gp_cuda_codec_run_histories(const gp_cuda_codec_histories *h, int n, const float *const *st_in,
                                 float *const *st_out, cudaStream_t s) {
    size_t most = 0;
    for (int i = 0; i < h->n_layers; i++) {
        const size_t t = (size_t)n * (size_t)h->l[i].hist * (size_t)(h->l[i].cp / 8);
        if (t > most) most = t;
    }
    const int threads = 128;
    size_t blocks = (most + threads - 1) / threads;
    if (blocks > 1024) blocks = 1024;
    if (blocks == 0 || h->n_layers == 0) return;
    gp_launch(k_codec_histories, dim3((unsigned)blocks, (unsigned)h->n_layers), threads, 0, s, *h,
              (unsigned)n, st_in, st_out);
}

/* ---------------- the convolution as an implicit GEMM ---------------- */

#define CONV_TN 128              /* output columns (stream, time) per tile */
#define CONV_KC GP_CUDA_CODEC_KC /* reduction slice (tap, channel) per pass */
#define CONV_THREADS 256         /* 8 warps: 2 along the channels × 4 along the columns */
#define CONV_LDS (CONV_KC + 4)

/* Dynamic shared memory of one tile: two buffers of the weight and window
 * slices, reused for the results [col][co] (TM + 4 apart) after the loop. */
template <int TM> constexpr size_t conv_smem_bytes() {
    const size_t in = 2 * (size_t)(TM + CONV_TN) * CONV_LDS * sizeof(float);
    const size_t out = (size_t)CONV_TN * (TM + 4) * sizeof(float);
    return in > out ? in : out;
}

/* One TM × 128 output tile over the reduction slice of split blockIdx.z. With
 * several splits every split stores its partial tile; the split that finishes
 * last (a ticket per tile) sums them in split order — the same order for any
 * batch or chunking — and applies the epilogue. */
template <bool TENSOR, int TM>
__global__ void __launch_bounds__(CONV_THREADS, TM <= 64 ? 3 : 1)
    k_codec_conv(const float *__restrict__ Wt, const float *__restrict__ bias,
                 const float *__restrict__ win, int n, int T, int wrows, int stride, int C_in,
                 int C_out, int kernel, int dil, int ks, int splits, float *partial,
                 unsigned *tickets, gp_cuda_codec_epilogue ep) {
    gp_pdl_enter();
    extern __shared__ __align__(128) float dsm[];
    float(*sa)[TM][CONV_LDS] = reinterpret_cast<float(*)[TM][CONV_LDS]>(dsm);
    float(*sb)[CONV_TN][CONV_LDS] =
        reinterpret_cast<float(*)[CONV_TN][CONV_LDS]>(dsm + 2 * TM * CONV_LDS);
    float(*sc)[TM + 4] = reinterpret_cast<float(*)[TM + 4]>(dsm);
    __shared__ long long colbase[CONV_TN]; /* each column's first window element, or −1 */
    __shared__ int last;
    const int tid = threadIdx.x;
    const int co0 = blockIdx.y * TM;
    const int col0 = blockIdx.x * CONV_TN;
    const int cols = n * T;
    const int K = kernel * C_in;
    const int kbeg = blockIdx.z * ks, kend = min(K, kbeg + ks);
    if (tid < CONV_TN) {
        const int g = col0 + tid;
        colbase[tid] =
            g < cols ? ((long long)(g / T) * wrows + (long long)(g % T) * stride) * (long long)C_in
                     : -1;
    }
    __syncthreads();

    /* FMA path: thread owns TM/16 output channels × 8 columns */
    constexpr int FM = TM / 16;
    const int fm = (tid % 16) * FM, fn = (tid / 16) * 8;
    float facc[FM][8];
    /* tensor path: warp owns (TM/2) × 32 */
    constexpr int FA = TM / 32;
    const int warp = tid / 32, wm = (warp / 4) * (TM / 2), wn = (warp % 4) * 32;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> tacc[FA][2];
    if (TENSOR) {
        for (int i = 0; i < FA; i++)
            for (int j = 0; j < 2; j++) wmma::fill_fragment(tacc[i][j], 0.0f);
    } else {
        for (int i = 0; i < FM; i++)
            for (int j = 0; j < 8; j++) facc[i][j] = 0.0f;
    }

    /* Each pass's slice is staged through registers: the next slice's loads
     * are issued before this one is multiplied, so their latency overlaps. */
    /* 16-byte loads: window rows and weights are padded to 4 channels. */
    constexpr int TPR = CONV_KC / 4;        /* threads along a slice row */
    constexpr int RPP = CONV_THREADS / TPR; /* rows per sweep of the block */
    constexpr int RA = TM / RPP, RB = CONV_TN / RPP;
    const int kq = (tid % TPR) * 4, rg = tid / TPR;
    float4 ra[RA], rb[RB];
    auto fetch = [&](int k0) {
        const int k = k0 + kq;
        const bool kin = k < kend;
        int off = 0;
        if (kin) {
            const int tap = k / C_in;
            off = tap * dil * C_in + (k - tap * C_in);
        }
        const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int i = 0; i < RA; i++) {
            const int co = co0 + rg + i * RPP;
            ra[i] = kin && co < C_out
                        ? __ldg(reinterpret_cast<const float4 *>(Wt + (size_t)co * K + k))
                        : zero;
        }
#pragma unroll
        for (int i = 0; i < RB; i++) {
            const long long cb = colbase[rg + i * RPP];
            rb[i] = kin && cb >= 0 ? __ldg(reinterpret_cast<const float4 *>(win + cb + off)) : zero;
        }
    };
    /* Tensor path: values are rounded to TF32 once here, not per fragment load. */
    auto cvt = [&](float4 v) {
        return TENSOR ? make_float4(wmma::__float_to_tf32(v.x), wmma::__float_to_tf32(v.y),
                                    wmma::__float_to_tf32(v.z), wmma::__float_to_tf32(v.w))
                      : v;
    };
    auto stage = [&](int buf) {
#pragma unroll
        for (int i = 0; i < RA; i++)
            *reinterpret_cast<float4 *>(&sa[buf][rg + i * RPP][kq]) = cvt(ra[i]);
#pragma unroll
        for (int i = 0; i < RB; i++)
            *reinterpret_cast<float4 *>(&sb[buf][rg + i * RPP][kq]) = cvt(rb[i]);
    };
    if (kbeg < kend) {
        fetch(kbeg);
        stage(0);
    }
    __syncthreads();
    /* one barrier per pass: pass i multiplies buffer i % 2 while pass i + 1's
     * slice is loaded into registers and then stored into the other buffer */
    for (int k0 = kbeg, buf = 0; k0 < kend; k0 += CONV_KC, buf ^= 1) {
        const bool more = k0 + CONV_KC < kend;
        if (more) fetch(k0 + CONV_KC);
        if (TENSOR) {
#pragma unroll
            for (int q = 0; q < CONV_KC; q += 8) {
                wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>
                    fa[FA];
                wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>
                    fb[2];
                for (int i = 0; i < FA; i++)
                    wmma::load_matrix_sync(fa[i], &sa[buf][wm + i * 16][q], CONV_LDS);
                for (int j = 0; j < 2; j++)
                    wmma::load_matrix_sync(fb[j], &sb[buf][wn + j * 16][q], CONV_LDS);
                for (int i = 0; i < FA; i++)
                    for (int j = 0; j < 2; j++)
                        wmma::mma_sync(tacc[i][j], fa[i], fb[j], tacc[i][j]);
            }
        } else {
            for (int q = 0; q < CONV_KC; q++) {
                float a[FM], bv[8];
                for (int i = 0; i < FM; i++) a[i] = sa[buf][fm + i][q];
                for (int j = 0; j < 8; j++) bv[j] = sb[buf][fn + j][q];
                for (int i = 0; i < FM; i++)
                    for (int j = 0; j < 8; j++) facc[i][j] = fmaf(a[i], bv[j], facc[i][j]);
            }
        }
        if (more) stage(buf ^ 1);
        __syncthreads();
    }
    /* results to shared memory as [col][co] */
    if (TENSOR) {
        for (int i = 0; i < FA; i++)
            for (int j = 0; j < 2; j++)
                wmma::store_matrix_sync(&sc[wn + j * 16][wm + i * 16], tacc[i][j], TM + 4,
                                        wmma::mem_col_major);
    } else {
        for (int i = 0; i < FM; i++)
            for (int j = 0; j < 8; j++) sc[fn + j][fm + i] = facc[i][j];
    }
    __syncthreads();
    codec_conv_finish<TM, CONV_TN, CONV_THREADS>(sc, co0, col0, cols, C_out, bias, splits, partial,
                                                 tickets, ep, &last);
}

/* Rows of output channels per tile for a layer: 32, or 64 (128) for layers
 * wider than 32 (64) when `widest` allows (128-row tiles only on FP16: on
 * TF32 they measured slower on an H200 and are not built). */
static int conv_tm(int c_out, int widest) {
    return c_out > 64 && widest >= 128 ? 128 : c_out > 32 && widest >= 64 ? 64 : 32;
}

void gp_cuda_codec_conv_split(gp_cuda_codec_conv *cv, int chunks_per_split, int widest_tile) {
    cv->tm = conv_tm(cv->c_out, widest_tile);
    const int K = cv->kernel * cv->c_pad;
    const int chunks = (K + CONV_KC - 1) / CONV_KC;
    int splits = (chunks + chunks_per_split - 1) / chunks_per_split;
    if (splits > 16) splits = 16;
    if (splits < 1) splits = 1;
    cv->ks = (chunks + splits - 1) / splits * CONV_KC;
    cv->splits = (K + cv->ks - 1) / cv->ks;
}

size_t gp_cuda_codec_conv_tiles(const gp_cuda_codec_conv *cv, int cols) {
    return (size_t)((cols + CONV_TN - 1) / CONV_TN) * (size_t)((cv->c_out + cv->tm - 1) / cv->tm);
}

size_t gp_cuda_codec_conv_partial_floats(const gp_cuda_codec_conv *cv, int cols) {
    if (cv->splits <= 1) return 0;
    return gp_cuda_codec_conv_tiles(cv, cols) * (size_t)cv->splits * (size_t)cv->tm * CONV_TN;
}

template <bool TENSOR, int TM> static cudaError_t conv_allow_smem() {
    return cudaFuncSetAttribute(k_codec_conv<TENSOR, TM>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)conv_smem_bytes<TM>());
}

template <bool TENSOR> static cudaError_t conv_allow_all() {
    cudaError_t e = conv_allow_smem<TENSOR, 32>();
    if (e == cudaSuccess) e = conv_allow_smem<TENSOR, 64>();
    return e;
}

/* GEPARD_CUDA_CODEC_CONVT_FIXED=0: every transposed conv through the run-time
 * shaped kernel (for measurements). */
static bool convt_fixed = true;

cudaError_t gp_cuda_codec_kernels_init(void) {
    gp_cuda_pdl_init();
    const cudaError_t pe = gp_pdl_set_trigger();
    if (pe != cudaSuccess) return pe;
    const char *cf = getenv("GEPARD_CUDA_CODEC_CONVT_FIXED");
    convt_fixed = !(cf && !strcmp(cf, "0"));
    const char *wf = getenv("GEPARD_CUDA_CODEC_WINDOW_FAST");
    window_fast = !(wf && !strcmp(wf, "0"));
    cudaError_t e = conv_allow_all<true>();
    if (e == cudaSuccess) e = conv_allow_all<false>();
    return e == cudaSuccess ? gp_cuda_codec_mma_init() : e;
}

template <bool TENSOR, int TM>
static void conv_launch(const gp_cuda_codec_conv *cv, const float *win, int n, int T, int wrows,
                        const gp_cuda_codec_epilogue *ep, float *partial, unsigned *tickets,
                        cudaStream_t s) {
    const int cols = n * T;
    dim3 grid((unsigned)((cols + CONV_TN - 1) / CONV_TN), (unsigned)((cv->c_out + TM - 1) / TM),
              (unsigned)cv->splits);
    gp_launch(k_codec_conv<TENSOR, TM>, grid, CONV_THREADS, conv_smem_bytes<TM>(), s,
              (const float *)cv->weight, (const float *)cv->bias, win, n, T, wrows, cv->stride,
              cv->c_pad, cv->c_out, cv->kernel, cv->dilation, cv->ks, cv->splits, partial, tickets,
              *ep);
}

template <bool TENSOR>
static void conv_dispatch(const gp_cuda_codec_conv *cv, const float *win, int n, int T, int wrows,
                          const gp_cuda_codec_epilogue *ep, float *partial, unsigned *tickets,
                          cudaStream_t s) {
    if (cv->tm == 32)
        conv_launch<TENSOR, 32>(cv, win, n, T, wrows, ep, partial, tickets, s);
    else
        conv_launch<TENSOR, 64>(cv, win, n, T, wrows, ep, partial, tickets, s);
}

void gp_cuda_codec_run_conv_rows(const gp_cuda_codec_conv *cv, const void *win, int n, int T,
                                 int wrows, const gp_cuda_codec_epilogue *ep,
                                 gp_cuda_codec_math math, float *partial, unsigned *tickets,
                                 cudaStream_t s) {
    if (math == GP_CODEC_MATH_F16)
        gp_cuda_codec_run_conv_f16(cv, (const __half *)win, n, T, wrows, ep, partial, tickets, s);
    else if (math == GP_CODEC_MATH_TF32)
        conv_dispatch<true>(cv, (const float *)win, n, T, wrows, ep, partial, tickets, s);
    else
        conv_dispatch<false>(cv, (const float *)win, n, T, wrows, ep, partial, tickets, s);
}

void gp_cuda_codec_run_conv(const gp_cuda_codec_conv *cv, const void *win, int n, int T,
                            const gp_cuda_codec_epilogue *ep, gp_cuda_codec_math math,
                            float *partial, unsigned *tickets, cudaStream_t s) {
    gp_cuda_codec_run_conv_rows(cv, win, n, T, cv->hist + T, ep, math, partial, tickets, s);
}

/* ---------------- the encoder's padded windows ---------------- */

/* win [left + n + right][Cp] from x [n][C] (one signal): act(x) in the middle,
 * the edges by `mode` (0 zeros, 1 replicate, 2 reflect; as gp_pad1d_fill, on
 * the activated values), channels C .. Cp − 1 zero. */
__global__ void k_codec_window_pad(const float *__restrict__ x, unsigned n, unsigned C, unsigned Cp,
                                   unsigned left, unsigned right, int mode, gp_cuda_codec_act act,
                                   float *__restrict__ win) {
    gp_pdl_enter();
    const unsigned W = left + n + right, total = W * Cp;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += gridDim.x * blockDim.x) {
        const unsigned c = i % Cp, r = i / Cp;
        if (c >= C) {
            win[i] = 0.0f;
            continue;
        }
        long long j = (long long)r - left; /* index into x */
        if (j < 0 || j >= (long long)n) {
            if (mode == 0) {
                win[i] = 0.0f;
                continue;
            }
            if (mode == 1)
                j = j < 0 ? 0 : (long long)n - 1;
            else
                j = j < 0 ? -j : 2 * (long long)n - 2 - j;
        }
        win[i] = codec_act(act, x[(size_t)j * C + c], (int)c);
    }
}

void gp_cuda_codec_run_window_pad(const float *x, int n, int C, int Cp, int left, int right,
                                  int mode, const gp_cuda_codec_act *act, float *win,
                                  cudaStream_t s) {
    const size_t total = ((size_t)left + (size_t)n + (size_t)right) * (size_t)Cp;
    const int threads = 256;
    size_t blocks = (total + threads - 1) / threads;
    if (blocks > 65535u * 8u) blocks = 65535u * 8u;
    if (blocks == 0) return;
    gp_launch(k_codec_window_pad, (unsigned)blocks, threads, 0, s, x, (unsigned)n, (unsigned)C,
              (unsigned)Cp, (unsigned)left, (unsigned)right, mode, *act, win);
}

/* ---------------- grouped causal transposed convolution ---------------- */

/* y[b][q·s + u][o] = bias[o] + Σ_(c in o's group) Σ_m a[c][q − m] · W[c][o_local][u + m·s],
 * a = act(x), a[c][j < 0] from the history (the last `hist` inputs, oldest first).
 * A thread per input position (stream, q, output channel o) makes all
 * `stride` outputs of o at that position: the activated inputs it needs (the
 * group's channels at q, q − 1, …, q − hist; GP_CUDA_CODEC_CONVT_CACHE at
 * most, which cuda_codec.cu checks at load) are computed once, not once per
 * output phase. Sums run over the channels, then the taps. */
#define CONVT_CACHE GP_CUDA_CODEC_CONVT_CACHE
/* CIG, H1: the group's input channels and hist + 1 as constants (NanoCodec's
 * 2 and 2), so the cache of activated inputs lives in registers; 0 reads them
 * from cv at run time (the cache indexed at run time sits in local memory:
 * the four up-sampling convs of a 256-frame decode took 604 µs that way,
 * 294 µs with the constants, H200). The same sums in the same order. */
template <int CIG, int H1>
__global__ void k_codec_convt(const float *__restrict__ x, unsigned n, unsigned T,
                              gp_cuda_codec_convt cv, gp_cuda_codec_act act,
                              const float *const *st_in, float *const *st_out, unsigned st_off,
                              float *__restrict__ y) {
    gp_pdl_enter();
    const int s = cv.stride, k = cv.kernel, hist = cv.hist;
    const unsigned cin = (unsigned)cv.c_in, cout = (unsigned)cv.c_out;
    const int ci_g = CIG ? CIG : cv.c_in / cv.groups, co_g = cv.c_out / cv.groups;
    const int h1 = H1 ? H1 : hist + 1;
    const unsigned items = n * T * cout;
    const unsigned states = n * (unsigned)hist * cin;
    const unsigned total = items > states ? items : states;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += gridDim.x * blockDim.x) {
        if (i < items) {
            const int o = (int)(i % cout);
            const unsigned rows = i / cout;
            const int q = (int)(rows % T);
            const unsigned b = rows / T;
            const int g = o / co_g, ol = o % co_g;
            float a[CONVT_CACHE];
#pragma unroll
            for (int ci = 0; ci < (CIG ? CIG : CONVT_CACHE); ci++) {
                if (ci >= ci_g) break;
                const int c = g * ci_g + ci;
#pragma unroll
                for (int m = 0; m < (H1 ? H1 : CONVT_CACHE); m++) {
                    if (m >= h1 || ci * h1 + m >= CONVT_CACHE) break;
                    const int j = q - m;
                    a[ci * h1 + m] = j >= 0 ? codec_act(act, x[(b * T + (unsigned)j) * cin + c], c)
                                            : st_in[b][st_off + (unsigned)(hist + j) * cin + c];
                }
            }
            const float bo = cv.bias[o];
            float *out = y + ((size_t)(b * T + (unsigned)q) * s) * cout + o;
            for (int u = 0; u < s; u++) {
                float acc = bo;
#pragma unroll
                for (int ci = 0; ci < (CIG ? CIG : CONVT_CACHE); ci++) {
                    if (ci >= ci_g) break;
                    const float *w = cv.weight + ((size_t)(g * ci_g + ci) * co_g + ol) * k;
#pragma unroll
                    for (int m = 0; m < (H1 ? H1 : CONVT_CACHE); m++) {
                        if (m >= h1 || ci * h1 + m >= CONVT_CACHE) break;
                        if (u + m * s < k) acc += a[ci * h1 + m] * w[u + m * s];
                    }
                }
                out[(size_t)u * cout] = acc;
            }
        }
        if (i < states) { /* next history: window rows T .. T + hist − 1 */
            const unsigned c = i % cin, rows = i / cin;
            const unsigned r = rows % (unsigned)hist, b = rows / (unsigned)hist;
            const unsigned wi = T + r; /* index in [history | x] */
            const float v = wi < (unsigned)hist
                                ? st_in[b][st_off + wi * cin + c]
                                : codec_act(act, x[(b * T + (wi - hist)) * cin + c], (int)c);
            st_out[b][st_off + r * cin + c] = v;
        }
    }
}

void gp_cuda_codec_run_convt(const float *x, int n, int T, const gp_cuda_codec_convt *cv,
                             const gp_cuda_codec_act *act, const float *const *st_in,
                             float *const *st_out, size_t st_off, float *y, cudaStream_t s) {
    const size_t outs = (size_t)n * T * cv->c_out;
    const size_t states = (size_t)n * cv->hist * cv->c_in;
    const size_t total = outs > states ? outs : states;
    const int threads = 256;
    size_t blocks = (total + threads - 1) / threads;
    if (blocks > 65535u * 8u) blocks = 65535u * 8u;
    if (blocks == 0) return;
    const bool fixed = convt_fixed && cv->c_in / cv->groups == 2 && cv->hist == 1;
    if (fixed)
        gp_launch(k_codec_convt<2, 2>, (unsigned)blocks, threads, 0, s, x, (unsigned)n, (unsigned)T,
                  *cv, *act, st_in, st_out, (unsigned)st_off, y);
    else
        gp_launch(k_codec_convt<0, 0>, (unsigned)blocks, threads, 0, s, x, (unsigned)n, (unsigned)T,
                  *cv, *act, st_in, st_out, (unsigned)st_off, y);
}

/* ---------------- programmatic dependent launch (cuda_launch.cuh) ---------------- */

bool gp_cuda_pdl = true, gp_cuda_pdl_early = false;

void gp_cuda_pdl_init(void) {
    const char *off = getenv("GEPARD_CUDA_PDL");
    gp_cuda_pdl = !(off && !strcmp(off, "0"));
    const char *early = getenv("GEPARD_CUDA_PDL_EARLY");
    gp_cuda_pdl_early = early && !strcmp(early, "1");
}
