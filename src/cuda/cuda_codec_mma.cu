/* cuda_codec_mma.cu — the codec decoder's convolution on FP16 tensor cores,
 * the fast path for serving many streams (cuda_codec_kernels.cu has the TF32
 * and f32 ones, which this kernel shares its tiling, reduction cut and
 * epilogue with).
 *
 * The same implicit GEMM — out[col][co] = bias + Σ_(tap, c) W[co][tap][c] ·
 * window[col·stride + tap·dil][c] — over FP16 windows and weights with f32
 * sums (mma.sync m16n8k16): FP16 keeps TF32's 10-bit mantissa, so the
 * accuracy is TF32's, at twice the tensor rate and half the bytes moved.
 * Slices of 32 (tap, channel) pairs stream through a 4-stage cp.async
 * pipeline into shared memory (rows padded to 80 bytes, so the ldmatrix
 * loads that feed the MMAs hit distinct banks); a row of 8 channels is one
 * 16-byte copy because windows and weights are padded to 8 channels.
 * Every output is summed in an order fixed by the layer (MMA order inside a
 * slice, slices in order, the layer's fixed splits in order), never by the
 * batch: streaming in any chunking gives the same samples. Layers whose
 * 128-column tiles lie inside one stream (T a multiple of 128) run
 * k_codec_conv_f16_rows, which stages the tile's window rows once and runs
 * the same MMAs (below); calls too small to fill the GPU (one stream, a few)
 * run k_codec_conv_f16_narrow, one warp per 16 × 8 or 32 × 8 outputs, the
 * same MMAs again, letting the next kernel launch as soon as it starts.
 */
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "cuda/cuda_codec.h"
#include "cuda/cuda_launch.cuh"

#define H_TN 128 /* output columns (stream, time) per tile */
#define H_THREADS 256

/* A slice of KC (tap, channel) pairs: 32 (4 stages in flight) or 64 (3), rows
 * of KC + 8 halves (80 or 144 bytes: the 8 rows of an ldmatrix hit distinct
 * banks either way). The sums are the same for both: the MMAs run over k in
 * steps of 16 in order whatever the staging. */
template <int KC> struct h_slice {
    static constexpr int LDS = KC + 8;
    static constexpr int STAGES = KC == 32 ? 4 : 3;
    static constexpr int CPR = KC / 8;          /* 16-byte copies per row */
    static constexpr int RPP = H_THREADS / CPR; /* rows one sweep of the block copies */
};

template <int TM, int KC> constexpr size_t h_smem_bytes() {
    using S = h_slice<KC>;
    const size_t in = (size_t)S::STAGES * (TM + H_TN) * S::LDS * sizeof(__half);
    const size_t out = (size_t)H_TN * (TM + 4) * sizeof(float);
    return in > out ? in : out;
}

__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    const int bytes = valid ? 16 : 0; /* 0: fill with zeros, read nothing */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const void *p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
__device__ __forceinline__ void ldsm_x2(unsigned (&r)[2], const void *p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(a));
}
__device__ __forceinline__ void mma_f16(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                        unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* The window side of a slice's copies, shared by k_codec_conv_f16 and
 * k_codec_conv_f16_narrow: a thread's window columns g0, g0 + step, … (their
 * first rows' offsets, −1 past the call) and the (tap, channel) of its 8
 * pairs at k, advanced a slice at a time. */
template <int NB> struct h_window_rows {
    int cbase[NB];
    int tap, ch;
    __device__ __forceinline__ h_window_rows(int g0, int step, int cols, int T, int wrows,
                                             int stride, int C_in, int k) {
#pragma unroll
        for (int i = 0; i < NB; i++) {
            const int g = g0 + step * i;
            cbase[i] = g < cols ? ((g / T) * wrows + (g % T) * stride) * C_in : -1;
        }
        tap = k / C_in;
        ch = k - tap * C_in;
    }
    /* this slice's 8 pairs of each column into rows r, r + step, … of `rows`
     * (zeros where !kin or past the call) */
    template <int LDS>
    __device__ __forceinline__ void copy(__half (*rows)[LDS], int r, int step, int q,
                                         const __half *win, bool kin, int dil, int C_in) const {
        const int off = tap * dil * C_in + ch;
#pragma unroll
        for (int i = 0; i < NB; i++) {
            const bool ok = kin && cbase[i] >= 0;
            cp_async16(&rows[r + step * i][8 * q], ok ? win + cbase[i] + off : win, ok);
        }
    }
    __device__ __forceinline__ void advance(int KC, int C_in) {
        ch += KC;
        while (ch >= C_in) {
            ch -= C_in;
            tap++;
        }
    }
};

/* The first STAGES − 1 slices of a pipeline, one commit group each (empty
 * groups past the nk slices keep the wait counts of the loop). */
template <int STAGES, typename Load>
__device__ __forceinline__ void h_prologue(int nk, const Load &load) {
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < nk) load(s);
        cp_async_commit();
    }
}

/* One TM × 128 tile over the reduction slice of split blockIdx.z. 8 warps:
 * TM/32 along the channels × 8·32/TM along the columns, each 32 channels ×
 * WN columns. */
/* A warp's m16n8 accumulators into the block's result tile sc[col][co],
 * once every copy has landed (the staging buffers become the tile). */
template <int TM, int NT, int MT = 2>
__device__ __forceinline__ void acc_to_tile(const float (&acc)[MT][NT][4], float (*sc)[TM + 4],
                                            int wm, int wn, int lane) {
    cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const int co = wm + mt * 16 + (lane >> 2), col = wn + nt * 8 + (lane & 3) * 2;
            sc[col][co] = acc[mt][nt][0];
            sc[col + 1][co] = acc[mt][nt][1];
            sc[col][co + 8] = acc[mt][nt][2];
            sc[col + 1][co + 8] = acc[mt][nt][3];
        }
    __syncthreads();
}

template <int TM, int KC>
__global__ void __launch_bounds__(H_THREADS, TM <= 32 ? 3 : 2) /* TM 32: 3 blocks per SM */
    k_codec_conv_f16(const __half *__restrict__ Wt, const float *__restrict__ bias,
                     const __half *__restrict__ win, int n, int T, int wrows, int stride, int C_in,
                     int C_out, int kernel, int dil, int ks, int splits, float *partial,
                     unsigned *tickets, gp_cuda_codec_epilogue ep) {
    gp_pdl_enter();
    constexpr int WARPS_M = TM / 32, WARPS_N = 8 / WARPS_M, WN = H_TN / WARPS_N, NT = WN / 8;
    using S = h_slice<KC>;
    constexpr int LDS = S::LDS, STAGES = S::STAGES, RPP = S::RPP;
    constexpr int A_ROWS_PER_THREAD = (TM + RPP - 1) / RPP, B_ROWS_PER_THREAD = H_TN / RPP;
    extern __shared__ __align__(128) unsigned char hsm[];
    __half(*sa)[TM][LDS] = reinterpret_cast<__half(*)[TM][LDS]>(hsm);
    __half(*sb)[H_TN][LDS] =
        reinterpret_cast<__half(*)[H_TN][LDS]>(hsm + (size_t)STAGES * TM * LDS * 2);
    float(*sc)[TM + 4] = reinterpret_cast<float(*)[TM + 4]>(hsm);
    __shared__ int last;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int co0 = blockIdx.y * TM, col0 = blockIdx.x * H_TN;
    const int cols = n * T;
    const int K = kernel * C_in;
    const int kbeg = blockIdx.z * ks, kend = min(K, kbeg + ks);

    /* loader: this thread copies 8 halves at k = slice + 8q of rows r, r + RPP (…) */
    const int q = tid % S::CPR, r = tid / S::CPR;
    h_window_rows<B_ROWS_PER_THREAD> wr(col0 + r, RPP, cols, T, wrows, stride, C_in, kbeg + 8 * q);
    auto load = [&](int stage, int k0) {
        const int k = k0 + 8 * q;
        const bool kin = k < kend;
#pragma unroll
        for (int i = 0; i < A_ROWS_PER_THREAD; i++) {
            const int row = r + RPP * i;
            if (row < TM) {
                const int co = co0 + row;
                const bool ok = kin && co < C_out;
                cp_async16(&sa[stage][row][8 * q], ok ? Wt + (size_t)co * K + k : Wt, ok);
            }
        }
        wr.copy(sb[stage], r, RPP, q, win, kin, dil, C_in);
        wr.advance(KC, C_in);
    };

    const int nk = kend > kbeg ? (kend - kbeg + KC - 1) / KC : 0;
    h_prologue<STAGES>(nk, [&](int s) { load(s, kbeg + s * KC); });
    const int wm = (warp / WARPS_N) * 32, wn = (warp % WARPS_N) * WN;
    float acc[2][NT][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

    for (int it = 0; it < nk; it++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads(); /* slice `it` landed; everyone is done with slice it − 1 */
        const int next = it + STAGES - 1;
        if (next < nk) load(next % STAGES, kbeg + next * KC);
        cp_async_commit();
        const int st = it % STAGES;
#pragma unroll
        for (int kk = 0; kk < KC; kk += 16) {
            unsigned a[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
                ldsm_x4(a[mt], &sa[st][wm + mt * 16 + (lane & 15)][kk + (lane >> 4) * 8]);
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                unsigned b[4];
                ldsm_x4(b, &sb[st][wn + np * 16 + (lane & 7) + ((lane >> 4) << 3)]
                              [kk + ((lane >> 3) & 1) * 8]);
#pragma unroll
                for (int mt = 0; mt < 2; mt++) {
                    mma_f16(acc[mt][2 * np], a[mt], b[0], b[1]);
                    mma_f16(acc[mt][2 * np + 1], a[mt], b[2], b[3]);
                }
            }
        }
    }
    acc_to_tile<TM, NT>(acc, sc, wm, wn, lane);
    codec_conv_finish<TM, H_TN, H_THREADS>(sc, co0, col0, cols, C_out, bias, splits, partial,
                                           tickets, ep, &last);
}

/* ---- one-warp tiles of 16 or 32 channels × 8 columns, for calls that leave the GPU idle ---- */

/* A call of one or a few streams makes small grids: one frame of one stream
 * is 8 columns at the 432-channel stage and 64 at the 216-channel one, so a
 * 128-column tile computes 94 % (50 %) padding, and the staged-row stages
 * run 8 blocks of 32 × 128 outputs on 8 of 132 multiprocessors, each block
 * walking the whole reduction with 8 warps × 4 MMAs per k-step: the layer
 * takes as long as one multiprocessor needs for its tile (ncu, one stream:
 * 33 µs for a 432-channel k = 11 convolution, 11 µs for a 108-channel one).
 * k_codec_conv_f16_narrow gives each warp its own block of 32 channels × 8
 * columns (two m16n8k16 MMAs a k-step): the grid is 16 times wider for the
 * same outputs. Its MMAs are those of k_codec_conv_f16 and
 * k_codec_conv_f16_rows for the same output — the same weight and window
 * fragments, k-steps of 16 in order from the split's start in slices of the
 * layer's KC (a slice past the split's end multiplies zeros, as there), the
 * same splits summed in order by codec_conv_finish — so the samples are the
 * same bit for bit, and a stream may be decoded by either kernel in any call. */
#define N_TN 8       /* columns per narrow tile */
#define N_THREADS 32 /* one warp */
#define N_STAGES 6   /* slices in flight */

template <int KC, int TM> constexpr size_t narrow_smem_bytes() {
    const size_t in = (size_t)N_STAGES * (TM + N_TN) * (KC + 8) * sizeof(__half);
    const size_t out = (size_t)N_TN * (TM + 4) * sizeof(float);
    return in > out ? in : out;
}

/* TM: 32 output channels per warp (two m16n8k16 MMAs a k-step), or 16 (one:
 * half the weight copies and fragment loads per slice, the grid twice as
 * tall; an output's MMA has the same operands either way). */
template <int KC, int TM>
__global__ void __launch_bounds__(N_THREADS)
    k_codec_conv_f16_narrow(const __half *__restrict__ Wt, const float *__restrict__ bias,
                            const __half *__restrict__ win, int n, int T, int wrows, int stride,
                            int C_in, int C_out, int kernel, int dil, int ks, int splits,
                            float *partial, unsigned *tickets, gp_cuda_codec_epilogue ep,
                            int early) {
    /* early: the next grid may launch now, and this one's first weight slices
     * are requested before griddepcontrol.wait (the weights are constant;
     * everything the grid before writes is read after it) */
    if (early)
        gp_pdl_launch_dependents();
    else
        gp_pdl_enter();
    constexpr int MT = TM / 16, LDS = KC + 8, CPR = KC / 8, RPP = N_THREADS / CPR;
    constexpr int A_ROWS_PER_THREAD = TM / RPP, B_ROWS_PER_THREAD = N_TN / RPP;
    static_assert(N_TN % RPP == 0, "every thread copies whole window rows");
    extern __shared__ __align__(128) unsigned char hsm[];
    __half(*sa)[TM][LDS] = reinterpret_cast<__half(*)[TM][LDS]>(hsm);
    __half(*sb)[N_TN][LDS] =
        reinterpret_cast<__half(*)[N_TN][LDS]>(hsm + (size_t)N_STAGES * TM * LDS * 2);
    float(*sc)[TM + 4] = reinterpret_cast<float(*)[TM + 4]>(hsm);
    __shared__ int last;
    const int lane = threadIdx.x;
    const int co0 = blockIdx.y * TM, col0 = blockIdx.x * N_TN;
    const int cols = n * T;
    const int K = kernel * C_in;
    const int kbeg = blockIdx.z * ks, kend = min(K, kbeg + ks);

    /* loader: this lane copies 8 halves at k = kbeg + slice + 8q of rows r, r + RPP, …;
     * its weight rows' addresses are set once. One warp issues every copy of a
     * slice, and with one warp per scheduler nothing hides its latencies (ncu:
     * ~210 instructions a slice at 5.4 cycles each): computing the 8 row
     * addresses per slice cost one stream 0.58 against 0.49 ms per frame. */
    const int q = lane % CPR, r = lane / CPR;
    const __half *a_src[A_ROWS_PER_THREAD];
#pragma unroll
    for (int i = 0; i < A_ROWS_PER_THREAD; i++) {
        const int co = co0 + r + RPP * i;
        a_src[i] = co < C_out ? Wt + (size_t)co * K + kbeg + 8 * q : NULL;
    }
    h_window_rows<B_ROWS_PER_THREAD> wr(col0 + r, RPP, cols, T, wrows, stride, C_in, kbeg + 8 * q);
    auto load_weights = [&](int stage, int kofs) {
        const bool kin = kbeg + kofs + 8 * q < kend;
#pragma unroll
        for (int i = 0; i < A_ROWS_PER_THREAD; i++) {
            const bool ok = kin && a_src[i];
            cp_async16(&sa[stage][r + RPP * i][8 * q], ok ? a_src[i] + kofs : Wt, ok);
        }
    };
    auto load_window = [&](int stage, int kofs) {
        wr.copy(sb[stage], r, RPP, q, win, kbeg + kofs + 8 * q < kend, dil, C_in);
        wr.advance(KC, C_in);
    };
    auto load = [&](int stage, int kofs) {
        load_weights(stage, kofs);
        load_window(stage, kofs);
    };

    const int nk = kend > kbeg ? (kend - kbeg + KC - 1) / KC : 0;
    if (early) {
        /* the first group then holds every prologue weight copy: waiting for
         * slice 0 waits for them all, as their order of landing asks */
        for (int s = 0; s < N_STAGES - 1 && s < nk; s++) load_weights(s, s * KC);
        gp_pdl_wait();
        h_prologue<N_STAGES>(nk, [&](int s) { load_window(s, s * KC); });
    } else {
        h_prologue<N_STAGES>(nk, [&](int s) { load(s, s * KC); });
    }
    float acc[MT][1][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[i][0][e] = 0.0f;

    for (int it = 0; it < nk; it++) {
        cp_async_wait<N_STAGES - 2>();
        __syncwarp(); /* slice `it` landed for every lane; slice it − 1 is done */
        const int next = it + N_STAGES - 1;
        if (next < nk) load(next % N_STAGES, next * KC);
        cp_async_commit();
        const int st = it % N_STAGES;
#pragma unroll
        for (int kk = 0; kk < KC; kk += 16) {
            unsigned a[MT][4], b[2];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                ldsm_x4(a[mt], &sa[st][mt * 16 + (lane & 15)][kk + (lane >> 4) * 8]);
            ldsm_x2(b, &sb[st][lane & 7][kk + ((lane >> 3) & 1) * 8]);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) mma_f16(acc[mt][0], a[mt], b[0], b[1]);
        }
    }
    acc_to_tile<TM, 1, MT>(acc, sc, 0, 0, lane);
    codec_conv_finish<TM, N_TN, N_THREADS>(sc, co0, col0, cols, C_out, bias, splits, partial,
                                           tickets, ep, &last);
}

/* ---- tiles whose 128 columns lie in one stream's window ---- */

/* When a layer's columns per stream (T) are a multiple of 128 (the codec's
 * stages 2-4 and its post-conv, one frame per stream or more), a tile's
 * columns t0 .. t0 + 127 all read window rows t0 .. t0 + 127 + hist of one
 * stream. k_codec_conv_f16_rows copies those rows into shared memory once
 * and takes every tap's operand from them with ldmatrix at a row offset of
 * tap · dilation, instead of copying each (tap, channel) slice of the window
 * per pass as k_codec_conv_f16 does (the same window row is copied `kernel`
 * times there). Only the weights stream through the cp.async pipeline.
 * Every MMA — its operands and their order — is the one k_codec_conv_f16
 * runs for the same output (slices of 64 pairs, k-steps of 16 in order, one
 * split), so the two kernels give the same sums bit for bit and a layer may
 * use either for any call. Window rows are padded to an odd number of 16-byte
 * units, so the 8 rows of an ldmatrix hit distinct banks. */
#define R_KC 64
#define R_STAGES 3

/* The window row stride in halves for Cp channels: an odd number of 16-byte units. */
__host__ __device__ constexpr int rows_ldw(int cp) { return (cp / 8) % 2 ? cp : cp + 8; }

/* Wide tiles: with 128 columns a 32-row tile gives each warp 16 columns, so
 * every k-step loads the weight fragments (2 ldmatrix) and one window
 * fragment for 4 MMAs, and the 8 warps load the same weight fragments. A
 * tile of 64 columns per warp (512 columns for 32 rows, 256 for 64) runs 16
 * MMAs per 6 fragment loads and copies each window row's history once per
 * 512 columns. Measured on an H200 (ncu, 256 frames): the 27-channel
 * stage's convolutions 930 → 840 µs, the 54-channel stage's 978 → 838 µs —
 * shared-memory reads were part of their time, not most of it. Same MMAs per
 * output in the same order: only which block computes it changes. */
__host__ __device__ constexpr int rows_wide_tn(int tm) { return 64 * 8 / (tm / 32); }

template <int TM, int TN = H_TN> static size_t rows_smem_bytes(int cp, int hist) {
    const size_t a = (size_t)R_STAGES * TM * (R_KC + 8) * sizeof(__half);
    const size_t w = (size_t)(TN + hist) * rows_ldw(cp) * sizeof(__half);
    const size_t out = (size_t)TN * (TM + 4) * sizeof(float);
    return a + w > out ? a + w : out;
}
#define ROWS_SMEM_MAX (200 * 1024)

template <int TM, int TN>
__global__ void __launch_bounds__(H_THREADS, TM <= 32 && TN == H_TN ? 3 : 2)
    k_codec_conv_f16_rows(const __half *__restrict__ Wt, const float *__restrict__ bias,
                          const __half *__restrict__ win, int n, int T, int wrows, int C_in,
                          int C_out, int kernel, int dil, int hist, gp_cuda_codec_epilogue ep) {
    gp_pdl_enter();
    constexpr int WARPS_M = TM / 32, WARPS_N = 8 / WARPS_M, WN = TN / WARPS_N, NT = WN / 8;
    constexpr int LDS = R_KC + 8, CPR = R_KC / 8, RPP = H_THREADS / CPR;
    constexpr int A_ROWS_PER_THREAD = (TM + RPP - 1) / RPP;
    extern __shared__ __align__(128) unsigned char hsm[];
    __half(*sa)[TM][LDS] = reinterpret_cast<__half(*)[TM][LDS]>(hsm);
    __half *sw = reinterpret_cast<__half *>(hsm + (size_t)R_STAGES * TM * LDS * 2);
    float(*sc)[TM + 4] = reinterpret_cast<float(*)[TM + 4]>(hsm);
    __shared__ int last;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int co0 = blockIdx.y * TM, col0 = blockIdx.x * TN;
    const int cols = n * T; /* a multiple of 128: every tile is whole */
    const int K = kernel * C_in;
    const int ldw = rows_ldw(C_in), wr = TN + hist;

    /* the tile's window rows, once (the first cp.async group) */
    {
        const int b = col0 / T, t0 = col0 % T, pieces = C_in / 8;
        const __half *src = win + ((size_t)b * wrows + t0) * C_in;
        for (int i = tid; i < wr * pieces; i += H_THREADS) {
            const int row = i / pieces, pc = i - row * pieces;
            cp_async16(sw + (size_t)row * ldw + 8 * pc, src + (size_t)row * C_in + 8 * pc, true);
        }
        cp_async_commit();
    }

    /* the weights: this thread copies 8 halves at k = slice + 8q of rows r, r + RPP (…) */
    const int q = tid % CPR, r = tid / CPR;
    auto load = [&](int stage, int k0) {
        const int k = k0 + 8 * q;
        const bool kin = k < K;
#pragma unroll
        for (int i = 0; i < A_ROWS_PER_THREAD; i++) {
            const int row = r + RPP * i;
            if (row < TM) {
                const int co = co0 + row;
                const bool ok = kin && co < C_out;
                cp_async16(&sa[stage][row][8 * q], ok ? Wt + (size_t)co * K + k : Wt, ok);
            }
        }
    };
    const int nk = (K + R_KC - 1) / R_KC;
#pragma unroll
    for (int s = 0; s < R_STAGES - 1; s++) {
        if (s < nk) load(s, s * R_KC);
        cp_async_commit();
    }
    const int wm = (warp / WARPS_N) * 32, wn = (warp % WARPS_N) * WN;
    float acc[2][NT][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

    /* This lane's B rows (column n of the tile, before the tap's offset) and
     * the (tap, channel) of its half of each k-step, advanced 16 pairs a step. */
    const int half = (lane >> 3) & 1;
    const int nrow = wn + (lane & 7) + ((lane >> 4) << 3);
    int tap = (8 * half) / C_in, ch = 8 * half - tap * C_in;
    for (int it = 0; it < nk; it++) {
        cp_async_wait<R_STAGES - 2>();
        __syncthreads(); /* slice `it` (and the window) landed; slice it − 1 is done */
        const int next = it + R_STAGES - 1;
        if (next < nk) load(next % R_STAGES, next * R_KC);
        cp_async_commit();
        const int st = it % R_STAGES;
#pragma unroll
        for (int kk = 0; kk < R_KC; kk += 16) {
            unsigned a[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
                ldsm_x4(a[mt], &sa[st][wm + mt * 16 + (lane & 15)][kk + (lane >> 4) * 8]);
            /* pairs past K multiply zero weights: read any row of the tile */
            const int t_use = tap < kernel ? tap : kernel - 1;
            const __half *bp = sw + (size_t)(nrow + t_use * dil) * ldw + ch;
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                unsigned b[4];
                ldsm_x4(b, bp + (size_t)np * 16 * ldw);
#pragma unroll
                for (int mt = 0; mt < 2; mt++) {
                    mma_f16(acc[mt][2 * np], a[mt], b[0], b[1]);
                    mma_f16(acc[mt][2 * np + 1], a[mt], b[2], b[3]);
                }
            }
            ch += 16;
            while (ch >= C_in) {
                ch -= C_in;
                tap++;
            }
        }
    }
    acc_to_tile<TM, NT>(acc, sc, wm, wn, lane);
    codec_conv_finish<TM, TN, H_THREADS>(sc, co0, col0, cols, C_out, bias, 1, NULL, NULL, ep,
                                         &last);
}

/* Whether this call can run k_codec_conv_f16_rows: stride 1, one split,
 * slices of 64, whole 128-column tiles inside each stream, and the window
 * rows fitting in shared memory. GEPARD_CUDA_CODEC_ROWS=0 turns it off (for
 * measurements). */
static std::atomic<int> rows_on{1};
static std::atomic<int> tall_on{0}; /* 128-row tiles for 64-row layers in big calls */
/* 32-row tiles where a call's 64-row grid is under this percentage of the
 * multiprocessors (GEPARD_CUDA_CODEC_SMALL_GRID=P; 0: never; tile_rows) */
static std::atomic<int> small_grid_percent{50};
static std::atomic<int> wide_mode{-1}; /* GEPARD_CUDA_CODEC_WIDE: 0 never, 1 always, −1 by size */
static std::atomic<int> codec_sms{132}; /* the device's multiprocessors */
/* Narrow tiles where a call's 32 × 128 grid is under this percentage of the
 * multiprocessors (GEPARD_CUDA_CODEC_NARROW=P; 0: never) */
static std::atomic<int> narrow_percent{50};
/* 16-row narrow tiles where their grid needs at most a warp per multiprocessor
 * (GEPARD_CUDA_CODEC_NARROW16=0: 32-row ones always) */
static std::atomic<bool> narrow16_on{true};
/* 16-row narrow tiles' warps per multiprocessor at most (GEPARD_CUDA_CODEC_NARROW16_PER_SM):
 * 4 puts every stage of a lone stream on them. H200, `bench --codec-only`, alternating:
 * one stream 0.410-0.413 ms GPU per frame with 1, 0.383-0.384 with 4 or 8; 4 streams
 * 6.15k, 7.05-7.07k, 5.84-5.85k frames/s; 8 streams 9.8k, 11.0k, 10.8k; 16 streams
 * 16.7k, 16.2k, 17.1k. */
static std::atomic<int> narrow16_per_sm{4};
/* Narrow tiles let the next grid launch at their start and request their
 * first weight slices before waiting for the grid before
 * (GEPARD_CUDA_CODEC_NARROW_EARLY=0: the implicit trigger, as every kernel).
 * Only calls too small to fill the GPU run narrow tiles, so the blocks that
 * wait early take multiprocessors nobody needs (a global early trigger cost
 * 16 and 256 streams 3-12 %: cuda_launch.cuh). H200, alternating: one stream
 * 0.387-0.388 -> 0.366-0.370 ms GPU per frame, 2 streams 4.19-4.21k ->
 * 4.32-4.34k frames/s, 4-16 streams the same. */
static std::atomic<bool> narrow_early{true};

static bool rows_fit(const gp_cuda_codec_conv *cv, int T, int wrows, int tm) {
    if (!rows_on.load(std::memory_order_relaxed)) return false;
    if (cv->stride != 1 || cv->splits != 1 || cv->slice != 64 || T % H_TN != 0) return false;
    if (wrows != cv->hist + T) return false;
    const size_t bytes = tm == 32   ? rows_smem_bytes<32>(cv->c_pad, cv->hist)
                         : tm == 64 ? rows_smem_bytes<64>(cv->c_pad, cv->hist)
                                    : rows_smem_bytes<128>(cv->c_pad, cv->hist);
    return bytes <= ROWS_SMEM_MAX;
}

template <int TM, int TN>
static void rows_launch_tn(const gp_cuda_codec_conv *cv, const __half *win, int n, int T, int wrows,
                           const gp_cuda_codec_epilogue *ep, cudaStream_t s) {
    dim3 grid((unsigned)(n * T / TN), (unsigned)((cv->c_out + TM - 1) / TM), 1);
    gp_launch(k_codec_conv_f16_rows<TM, TN>, grid, H_THREADS,
              rows_smem_bytes<TM, TN>(cv->c_pad, cv->hist), s, (const __half *)cv->weight_h,
              (const float *)cv->bias, win, n, T, wrows, cv->c_pad, cv->c_out, cv->kernel,
              cv->dilation, cv->hist, *ep);
}

/* Wide tiles where the layer's columns per stream allow them, they fit, and
 * the call fills every multiprocessor twice over with them (or always /
 * never, GEPARD_CUDA_CODEC_WIDE=1 / 0). */
template <int TM> static bool rows_wide(const gp_cuda_codec_conv *cv, int n, int T) {
    constexpr int TN = rows_wide_tn(TM);
    const int mode = wide_mode.load(std::memory_order_relaxed);
    if (TN == H_TN || mode == 0 || T % TN != 0) return false;
    if (rows_smem_bytes<TM, TN>(cv->c_pad, cv->hist) > ROWS_SMEM_MAX) return false;
    const long tiles = (long)n * T / TN * ((cv->c_out + TM - 1) / TM);
    return mode == 1 || tiles >= 2L * codec_sms.load(std::memory_order_relaxed);
}

template <int TM>
static void rows_launch(const gp_cuda_codec_conv *cv, const __half *win, int n, int T, int wrows,
                        const gp_cuda_codec_epilogue *ep, cudaStream_t s) {
    if (rows_wide<TM>(cv, n, T))
        rows_launch_tn<TM, rows_wide_tn(TM)>(cv, win, n, T, wrows, ep, s);
    else
        rows_launch_tn<TM, H_TN>(cv, win, n, T, wrows, ep, s);
}

template <int KC, int TM> static cudaError_t narrow_allow_smem() {
    return cudaFuncSetAttribute(k_codec_conv_f16_narrow<KC, TM>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)narrow_smem_bytes<KC, TM>());
}

template <int TM, int KC> static cudaError_t mma_allow_smem() {
    return cudaFuncSetAttribute(k_codec_conv_f16<TM, KC>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)h_smem_bytes<TM, KC>());
}

template <int TM, int TN> static cudaError_t rows_allow_smem() {
    return cudaFuncSetAttribute(k_codec_conv_f16_rows<TM, TN>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, ROWS_SMEM_MAX);
}

template <int KC> static cudaError_t mma_allow_all() {
    cudaError_t e = mma_allow_smem<32, KC>();
    if (e == cudaSuccess) e = mma_allow_smem<64, KC>();
    return e == cudaSuccess ? mma_allow_smem<128, KC>() : e;
}

cudaError_t gp_cuda_codec_mma_init(void) {
    cudaError_t e = gp_pdl_set_trigger();
    if (e == cudaSuccess) e = mma_allow_all<32>();
    if (e == cudaSuccess) e = mma_allow_all<64>();
    if (e == cudaSuccess) e = narrow_allow_smem<32, 32>();
    if (e == cudaSuccess) e = narrow_allow_smem<64, 32>();
    if (e == cudaSuccess) e = narrow_allow_smem<32, 16>();
    if (e == cudaSuccess) e = narrow_allow_smem<64, 16>();
    if (e == cudaSuccess) e = rows_allow_smem<32, H_TN>();
    if (e == cudaSuccess) e = rows_allow_smem<64, H_TN>();
    if (e == cudaSuccess) e = rows_allow_smem<128, H_TN>();
    if (e == cudaSuccess) e = rows_allow_smem<32, rows_wide_tn(32)>();
    if (e == cudaSuccess) e = rows_allow_smem<64, rows_wide_tn(64)>();
    const char *off = getenv("GEPARD_CUDA_CODEC_ROWS");
    rows_on.store(!(off && !strcmp(off, "0")));
    const char *wide = getenv("GEPARD_CUDA_CODEC_WIDE");
    wide_mode.store(wide && !strcmp(wide, "0") ? 0 : wide && !strcmp(wide, "1") ? 1 : -1);
    int dev = 0, sms = 0;
    if (e == cudaSuccess) e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    const char *small = getenv("GEPARD_CUDA_CODEC_SMALL_GRID");
    if (small && *small) small_grid_percent.store(atoi(small) < 0 ? 0 : atoi(small));
    const char *no_tall = getenv("GEPARD_CUDA_CODEC_TALL");
    const char *narrow = getenv("GEPARD_CUDA_CODEC_NARROW");
    if (narrow && *narrow) narrow_percent.store(atoi(narrow) < 0 ? 0 : atoi(narrow));
    const char *n16 = getenv("GEPARD_CUDA_CODEC_NARROW16");
    narrow16_on.store(!(n16 && !strcmp(n16, "0")));
    const char *ne = getenv("GEPARD_CUDA_CODEC_NARROW_EARLY");
    narrow_early.store(!(ne && !strcmp(ne, "0")));
    const char *n16s = getenv("GEPARD_CUDA_CODEC_NARROW16_PER_SM");
    if (n16s && atoi(n16s) > 0) narrow16_per_sm.store(atoi(n16s));
    if (e == cudaSuccess && sms > 0) codec_sms.store(sms);
    tall_on.store(e == cudaSuccess && sms > 0 && !(no_tall && !strcmp(no_tall, "0")));
    return e;
}

/* The tile height for a call with this many output columns. A call whose
 * 64-row grid would fill under half the multiprocessors (any stage of a lone
 * stream or of 16 streams) runs 32-row tiles: twice the blocks, three per
 * multiprocessor (and 216 channels padded to 224 rows, not 256). Below one
 * tile per multiprocessor but above half (the 432-channel stage at 256
 * streams: 16 x 7 = 112 tiles for 132) the 64-row tiles measured faster: 256
 * streams 50.5k frames/s against 49.6k with 32-row tiles below 100 %, while
 * one stream went 0.86 -> 0.68 ms per frame (GEPARD_CUDA_CODEC_SMALL_GRID=P
 * sets the percentage). Layers planned
 * with 64-row tiles run 128-row tiles instead where that adds no padded rows
 * (108 and 216 channels: 2 x 64 = 128) and the call still gives every
 * multiprocessor one and a half tiles or more: each window column is then
 * read by half as many blocks. A tile's height changes no output's order of
 * addition, so batches of any size still give the same samples.
 * GEPARD_CUDA_CODEC_TALL=0 turns it off (for measurements). */
static int tile_rows(const gp_cuda_codec_conv *cv, int cols) {
    if (cv->tm != 64) return cv->tm;
    const int sms = codec_sms.load(std::memory_order_relaxed);
    const int rows128 = (cv->c_out + 127) / 128, rows64 = (cv->c_out + 63) / 64;
    const long col_tiles = (cols + H_TN - 1) / H_TN;
    if (col_tiles * rows64 * cv->splits * 100 <
        (long)sms * small_grid_percent.load(std::memory_order_relaxed))
        return 32;
    if (!tall_on.load(std::memory_order_relaxed)) return cv->tm;
    if (rows128 * 128 > rows64 * 64) return cv->tm;
    const long tiles = col_tiles * rows128 * cv->splits;
    return tiles * 2 >= 3L * sms ? 128 : cv->tm;
}

template <int TM, int KC>
static void mma_launch(const gp_cuda_codec_conv *cv, const __half *win, int n, int T, int wrows,
                       const gp_cuda_codec_epilogue *ep, float *partial, unsigned *tickets,
                       cudaStream_t s) {
    const int cols = n * T;
    dim3 grid((unsigned)((cols + H_TN - 1) / H_TN), (unsigned)((cv->c_out + TM - 1) / TM),
              (unsigned)cv->splits);
    gp_launch(k_codec_conv_f16<TM, KC>, grid, H_THREADS, h_smem_bytes<TM, KC>(), s,
              (const __half *)cv->weight_h, (const float *)cv->bias, win, n, T, wrows, cv->stride,
              cv->c_pad, cv->c_out, cv->kernel, cv->dilation, cv->ks, cv->splits, partial, tickets,
              *ep);
}

template <int KC>
static void mma_dispatch(const gp_cuda_codec_conv *cv, const __half *win, int n, int T, int wrows,
                         const gp_cuda_codec_epilogue *ep, float *partial, unsigned *tickets,
                         int tm, cudaStream_t s) {
    if (tm == 32)
        mma_launch<32, KC>(cv, win, n, T, wrows, ep, partial, tickets, s);
    else if (tm == 64)
        mma_launch<64, KC>(cv, win, n, T, wrows, ep, partial, tickets, s);
    else
        mma_launch<128, KC>(cv, win, n, T, wrows, ep, partial, tickets, s);
}

/* The rows of a call's narrow tiles (k_codec_conv_f16_narrow), or 0 where it
 * runs the 128-column kernels: narrow where its grid of 32 × 128 tiles would
 * fill under narrow_percent of the multiprocessors and its narrow tiles fit
 * the multiprocessors — 16 rows where their grid needs at most
 * narrow16_per_sm warps per multiprocessor, else 32 rows where theirs needs
 * at most one. Beyond that the narrow tiles lose: each reads its rows of
 * weights for 8 columns, so L2 carries the weights cols / 8 times (16 streams
 * at the 216-channel stage: 896 warps, 136 MB per convolution; 16 streams
 * 17.2k → 14.6k frames/s with narrow tiles up to 50 % of the multiprocessors,
 * H200). One stream, a frame per call: every layer narrow, 0.67 → 0.49 ms of
 * GPU time per frame with 32-row tiles; 2 streams 2.8k → 3.7k frames/s, 4
 * streams 5.4k → 6.2k, 8 and more unchanged. A layer with several splits
 * keeps its partial sums in buffers sized for 128-column tiles of the largest
 * call; narrow tiles of up to 128 columns fit in them. */
static int narrow_rows(const gp_cuda_codec_conv *cv, int cols) {
    const long sms = codec_sms.load(std::memory_order_relaxed);
    const long rows = (cv->c_out + 31) / 32;
    const long tiles = (long)((cols + H_TN - 1) / H_TN) * rows * cv->splits;
    const long col_tiles = (long)((cols + N_TN - 1) / N_TN) * cv->splits;
    if (tiles * 100 >= sms * narrow_percent.load(std::memory_order_relaxed)) return 0;
    if (cv->splits > 1 && cols > H_TN) return 0;
    if (narrow16_on.load(std::memory_order_relaxed) &&
        col_tiles * ((cv->c_out + 15) / 16) <=
            sms * narrow16_per_sm.load(std::memory_order_relaxed))
        return 16;
    return col_tiles * rows <= sms ? 32 : 0;
}

template <int KC, int TM>
static void narrow_launch(const gp_cuda_codec_conv *cv, const __half *win, int n, int T, int wrows,
                          const gp_cuda_codec_epilogue *ep, float *partial, unsigned *tickets,
                          cudaStream_t s) {
    const int cols = n * T;
    dim3 grid((unsigned)((cols + N_TN - 1) / N_TN), (unsigned)((cv->c_out + TM - 1) / TM),
              (unsigned)cv->splits);
    gp_launch(k_codec_conv_f16_narrow<KC, TM>, grid, N_THREADS, narrow_smem_bytes<KC, TM>(), s,
              (const __half *)cv->weight_h, (const float *)cv->bias, win, n, T, wrows, cv->stride,
              cv->c_pad, cv->c_out, cv->kernel, cv->dilation, cv->ks, cv->splits, partial, tickets,
              *ep, narrow_early.load(std::memory_order_relaxed) && gp_cuda_pdl ? 1 : 0);
}

void gp_cuda_codec_run_conv_f16(const gp_cuda_codec_conv *cv, const __half *win, int n, int T,
                                int wrows, const gp_cuda_codec_epilogue *ep, float *partial,
                                unsigned *tickets, cudaStream_t s) {
    const int nr = narrow_rows(cv, n * T);
    if (nr) {
        if (cv->slice == 64 && nr == 16)
            narrow_launch<64, 16>(cv, win, n, T, wrows, ep, partial, tickets, s);
        else if (cv->slice == 64)
            narrow_launch<64, 32>(cv, win, n, T, wrows, ep, partial, tickets, s);
        else if (nr == 16)
            narrow_launch<32, 16>(cv, win, n, T, wrows, ep, partial, tickets, s);
        else
            narrow_launch<32, 32>(cv, win, n, T, wrows, ep, partial, tickets, s);
        return;
    }
    const int tm = tile_rows(cv, n * T);
    if (rows_fit(cv, T, wrows, tm)) {
        if (tm == 32)
            rows_launch<32>(cv, win, n, T, wrows, ep, s);
        else if (tm == 64)
            rows_launch<64>(cv, win, n, T, wrows, ep, s);
        else
            rows_launch<128>(cv, win, n, T, wrows, ep, s);
        return;
    }
    if (cv->slice == 64)
        mma_dispatch<64>(cv, win, n, T, wrows, ep, partial, tickets, tm, s);
    else
        mma_dispatch<32>(cv, win, n, T, wrows, ep, partial, tickets, tm, s);
}
