/* cuda_codec.h — what the codec decoder's two CUDA files share: the device
 * form of its layers and the launch functions of cuda_codec_kernels.cu.
 * Nothing outside src/cuda/ includes this file. */
#ifndef GP_CUDA_CODEC_H
#define GP_CUDA_CODEC_H

#include <cuda_fp16.h>

#include "cuda/cuda_internal.h"

/* The arithmetic of a convolution: f32 FMAs (the exactness path), TF32
 * tensor cores over f32 windows, or FP16 tensor cores over FP16 windows and
 * weights; the sums are f32 in all three. */
typedef enum gp_cuda_codec_math {
    GP_CODEC_MATH_FMA = 0,
    GP_CODEC_MATH_TF32,
    GP_CODEC_MATH_F16,
} gp_cuda_codec_math;

/* An activation with its per-channel parameters on the device. */
typedef struct gp_cuda_codec_act {
    int kind, n_snake;
    float slope;
    const float *alpha, *inv_alpha; /* device [n_snake] */
} gp_cuda_codec_act;

/* A causal stride-1 convolution; weight [c_out][kernel][c_in] on the device
 * (taps outermost, so a window row is one contiguous slice of the reduction). */
typedef struct gp_cuda_codec_conv {
    int c_in, c_out, kernel, dilation, hist; /* hist = (kernel − 1) · dilation */
    int c_pad;      /* c_in rounded up to 8: the window's row stride (zeros beyond c_in) */
    int stride;     /* 1 in the decoder; the encoder's down-sampling convs */
    int splits, ks; /* the reduction cut into `splits` slices of ks (fixed per layer) */
    int tm;         /* output channels per tile: 32 or 64 (128 with FP16) */
    int slice;      /* FP16: (tap, channel) pairs staged per pass, 32 or 64 (the same sums) */
    const float *weight, *bias;
    const __half *weight_h; /* the weight in FP16 (GP_CODEC_MATH_F16 only), same layout */
    size_t st_off;          /* its history in a stream's state: [hist][c_in] */
} gp_cuda_codec_conv;

/* A grouped causal transposed convolution; weight [c_in][c_out/groups][kernel]. */
typedef struct gp_cuda_codec_convt {
    int c_in, c_out, kernel, stride, groups, hist; /* hist = (kernel − 1) / stride */
    const float *weight, *bias;
    size_t st_off;
} gp_cuda_codec_convt;

/* What a convolution does with each result v = Σ + bias. */
enum {
    GP_CODEC_EP_STORE = 0, /* out = v */
    GP_CODEC_EP_RESIDUAL,  /* out = res + v (res may be out) */
    GP_CODEC_EP_BRANCH,    /* out = (first ? res + v : out + (res + v)), then / divide if > 0 */
    GP_CODEC_EP_CLAMP,     /* out = clamp(v, −1, 1) */
    GP_CODEC_EP_TANH,      /* out = tanh(v) */
};
/* The window of the convolution that reads this one's output, written by
 * this one's epilogue: rows hist + t of win [n][hist + T][cp] = FP16(act(y))
 * for each stored output y (as the window kernel would read it back: FP16
 * signals rounded first), and the rows the next history keeps (those at or
 * past T) into st_out in f32, the window kernel's values bit for bit. The
 * window's older rows come from gp_cuda_codec_run_histories. win NULL: none.
 * For calls of few frame columns, where a window kernel's launch costs more
 * than its work (cuda_codec.cu: fused windows). */
typedef struct gp_cuda_codec_next_window {
    __half *win;
    int hist, cp, T;
    unsigned st_off;
    gp_cuda_codec_act act;
    float *const *st_out;
} gp_cuda_codec_next_window;

/* half: out and res hold FP16 values (the sums and the epilogue's arithmetic
 * stay f32; the result is rounded once, on its store). flat: a tile holding
 * every output channel stores as one contiguous run (codec_conv_store_flat). */
typedef struct gp_cuda_codec_epilogue {
    int mode;
    float *out;
    const float *res;
    int first;
    float divide;
    int half, flat;
    gp_cuda_codec_next_window nw;
} gp_cuda_codec_epilogue;
/* How epilogues store whole-channel tiles: 2 flat, reading the tile and the
 * bias 4 or 2 values at a time where C_out allows; 1 flat, one value at a
 * time (GEPARD_CUDA_CODEC_FLAT_VEC=0); 0 per channel (GEPARD_CUDA_CODEC_FLAT_STORE=0).
 * For measurements; cuda_codec.cu reads them when a codec is created. */
extern int gp_cuda_codec_flat_store;
static inline gp_cuda_codec_epilogue gp_cuda_codec_ep(int mode, void *out, const void *res,
                                                      int first, float divide, bool half) {
    gp_cuda_codec_epilogue e;
    e.mode = mode;
    e.out = (float *)out;
    e.res = (const float *)res;
    e.first = first;
    e.divide = divide;
    e.half = half;
    e.flat = gp_cuda_codec_flat_store;
    e.nw.win = NULL;
    return e;
}

/* win [n][hist + T][Cp] = [history | act(x)] per stream (channels C .. Cp − 1
 * zero), f32 or (half) rounded to FP16; the last hist rows become the
 * stream's next history in f32 (st_out, which must not be st_in; [hist][C]).
 * x is f32, or FP16 when x_half. */
void gp_cuda_codec_run_window(const void *x, bool x_half, int n, int T, int C, int Cp, int hist,
                              const gp_cuda_codec_act *act, const float *const *st_in,
                              float *const *st_out, size_t st_off, void *win, bool half,
                              cudaStream_t s);
/* The older rows of fused windows (gp_cuda_codec_next_window), which do not
 * depend on the call's signals, for many layers in one launch: rows r < hist
 * of each layer's window = FP16(st_in rows r) (channels C .. cp − 1 zero) and
 * the next history's rows that come from the old one (st_out row r − T =
 * st_in row r for T ≤ r < hist) — what the window kernel writes there. */
#define GP_CUDA_CODEC_MAX_FUSED 96
typedef struct gp_cuda_codec_history {
    __half *win;
    int hist, T, C, cp;
    unsigned st_off;
} gp_cuda_codec_history;
typedef struct gp_cuda_codec_histories {
    int n_layers;
    gp_cuda_codec_history l[GP_CUDA_CODEC_MAX_FUSED];
} gp_cuda_codec_histories;
void gp_cuda_codec_run_histories(const gp_cuda_codec_histories *h, int n, const float *const *st_in,
                                 float *const *st_out, cudaStream_t s);
/* Frame columns per decode piece (streams × frames). */
#define GP_CUDA_CODEC_MAX_COLS 512
/* The reduction advances CONV_KC (tap, channel) pairs per pass in every kernel. */
#define GP_CUDA_CODEC_KC 32
/* Reduction passes of 32 per split: a layer's reduction is cut into enough
 * slices that one stream's frame still spreads over the GPU (the cut is fixed
 * per layer, so every output is summed in the same order in any batch).
 * GEPARD_CUDA_CODEC_SPLIT_CHUNKS overrides it, GEPARD_CUDA_CODEC_TILE (32 or 64)
 * caps the output channels per tile — for measurements. */
#define GP_CUDA_CODEC_CHUNKS_PER_SPLIT 16
/* FP16: 128 passes per split (the widest layers cut in two, the rest whole)
 * and slices of 64 pairs: 25.2k frames/s at 256 streams against 17.1k with
 * 16 and 32, one stream 2.07 against 2.41 ms (H200, docs/NOTES.md). */
#define GP_CUDA_CODEC_CHUNKS_PER_SPLIT_F16 128
#define GP_CUDA_CODEC_SLICE_F16 64
#define GP_CUDA_CODEC_WIDEST_TILE 32
#define GP_CUDA_CODEC_WIDEST_TILE_F16 64
/* The FP16 path keeps each residual unit's inner signal (its first
 * convolution's output, read only by the window of its second, which rounds
 * it to FP16 after the activation anyway) in FP16 — half the bytes of the
 * tmp buffers. H200, 256 one-frame streams: 43.9-44.2k → 44.4-44.9k frames/s,
 * 1024: 45.0-45.2k → 45.7-46.4k; real size 69.1 → 68.9 dB against NeMo. Every
 * signal of the 27- and 54-channel stages in FP16 as well was slower (42.1-42.7k)
 * and 65.5 dB: those stages are bound by their memory instructions, not
 * bytes (docs/NOTES.md). GEPARD_CUDA_CODEC_HALF_SIGNALS=0: f32 (measurements). */
#define GP_CUDA_CODEC_HALF_TMP 1
/* Let the convolution kernels use more than 48 KB of shared memory (once). */
cudaError_t gp_cuda_codec_kernels_init(void);
/* Set cv->tm, cv->splits and cv->ks for its shape. */
void gp_cuda_codec_conv_split(gp_cuda_codec_conv *cv, int chunks_per_split, int widest_tile);
/* Workspace floats and tickets a conv over `cols` output columns needs. */
size_t gp_cuda_codec_conv_partial_floats(const gp_cuda_codec_conv *cv, int cols);
size_t gp_cuda_codec_conv_tiles(const gp_cuda_codec_conv *cv, int cols);
/* out [n][T][c_out] from the windows (FP16 windows for GP_CODEC_MATH_F16, else
 * f32). partial / tickets: the split workspace (tickets zero between
 * convolutions). */
void gp_cuda_codec_run_conv(const gp_cuda_codec_conv *cv, const void *win, int n, int T,
                            const gp_cuda_codec_epilogue *ep, gp_cuda_codec_math math,
                            float *partial, unsigned *tickets, cudaStream_t s);
/* The same over windows of `wrows` rows per stream (output t reads rows
 * t·stride + tap·dilation): the encoder's padded, strided convolutions. */
void gp_cuda_codec_run_conv_rows(const gp_cuda_codec_conv *cv, const void *win, int n, int T,
                                 int wrows, const gp_cuda_codec_epilogue *ep,
                                 gp_cuda_codec_math math, float *partial, unsigned *tickets,
                                 cudaStream_t s);
/* The FP16 tensor-core convolution (cuda_codec_mma.cu). */
void gp_cuda_codec_run_conv_f16(const gp_cuda_codec_conv *cv, const __half *win, int n, int T,
                                int wrows, const gp_cuda_codec_epilogue *ep, float *partial,
                                unsigned *tickets, cudaStream_t s);
cudaError_t gp_cuda_codec_mma_init(void);

#ifdef __CUDACC__
/* An activation's parameters for one channel, loaded once where a thread
 * activates many values of its channel. */
typedef struct codec_act_channel {
    int kind;
    bool snake; /* a snake channel (alpha, inv_alpha), else slope where leaky */
    float alpha, inv_alpha, slope;
} codec_act_channel;
__device__ __forceinline__ codec_act_channel codec_act_of(const gp_cuda_codec_act &a, int c) {
    codec_act_channel p;
    p.kind = a.kind;
    p.slope = a.slope;
    p.snake = (a.kind == GP_DEV_ACT_SNAKE || a.kind == GP_DEV_ACT_HALF_SNAKE) && c < a.n_snake;
    p.alpha = p.snake ? a.alpha[c] : 0.0f;
    p.inv_alpha = p.snake ? a.inv_alpha[c] : 0.0f;
    return p;
}
/* The activation of x in that channel. FAST: the hardware sine (__sinf)
 * instead of sinf, for values that are rounded to FP16 right after (its
 * error, ~2^-21 plus 2^-24 of the argument, is far below FP16's 2^-11; the
 * FP16 path's SNR against NeMo is tested). */
template <bool FAST = false>
__device__ __forceinline__ float codec_act_apply(const codec_act_channel &p, float x) {
    switch (p.kind) {
    case GP_DEV_ACT_IDENTITY: return x;
    case GP_DEV_ACT_SNAKE:
    case GP_DEV_ACT_HALF_SNAKE:
        if (p.snake) {
            const float v = FAST ? __sinf(p.alpha * x) : sinf(p.alpha * x);
            return x + p.inv_alpha * (v * v);
        }
        return x > 0.0f ? x : p.slope * x;
    case GP_DEV_ACT_LRELU: return x > 0.0f ? x : p.slope * x;
    case GP_DEV_ACT_ELU: return x > 0.0f ? x : expm1f(x);
    default: return x;
    }
}
/* An activation of channel c. */
template <bool FAST = false>
__device__ __forceinline__ float codec_act(const gp_cuda_codec_act &a, float x, int c) {
    return codec_act_apply<FAST>(codec_act_of(a, c), x);
}

/* A value as the signal holds it once stored (FP16 signals round it). */
__device__ __forceinline__ float codec_as_stored(float y, bool half) {
    return half ? __half2float(__float2half_rn(y)) : y;
}

/* VEC consecutive floats (16-, 8- or 4-byte aligned) in one read-only
 * access (ld.global.nc: the epilogue reads each residual and running-sum
 * element only before its own thread stores it, and no other thread writes
 * it, so the value is unchanged for the kernel's life — and the compiler may
 * move these loads ahead of other elements' stores). */
template <int VEC> __device__ __forceinline__ void codec_ldv(float (&d)[VEC], const float *p) {
    if constexpr (VEC == 4) {
        const float4 t = __ldg(reinterpret_cast<const float4 *>(p));
        d[0] = t.x, d[1] = t.y, d[2] = t.z, d[3] = t.w;
    } else if constexpr (VEC == 2) {
        const float2 t = __ldg(reinterpret_cast<const float2 *>(p));
        d[0] = t.x, d[1] = t.y;
    } else {
        d[0] = __ldg(p);
    }
}
template <int VEC> __device__ __forceinline__ void codec_stv(float *p, const float (&d)[VEC]) {
    if constexpr (VEC == 4)
        *reinterpret_cast<float4 *>(p) = make_float4(d[0], d[1], d[2], d[3]);
    else if constexpr (VEC == 2)
        *reinterpret_cast<float2 *>(p) = make_float2(d[0], d[1]);
    else
        *p = d[0];
}
/* The same for VEC consecutive FP16 values (8-, 4- or 2-byte aligned), widened
 * to f32 on the load and rounded to nearest on the store. */
template <int VEC> __device__ __forceinline__ void codec_ldv(float (&d)[VEC], const __half *p) {
    if constexpr (VEC == 4) {
        const uint2 t = __ldg(reinterpret_cast<const uint2 *>(p));
        const float2 a = __half22float2(*reinterpret_cast<const __half2 *>(&t.x));
        const float2 b = __half22float2(*reinterpret_cast<const __half2 *>(&t.y));
        d[0] = a.x, d[1] = a.y, d[2] = b.x, d[3] = b.y;
    } else if constexpr (VEC == 2) {
        const float2 a = __half22float2(__ldg(reinterpret_cast<const __half2 *>(p)));
        d[0] = a.x, d[1] = a.y;
    } else {
        d[0] = __half2float(__ldg(p));
    }
}
template <int VEC> __device__ __forceinline__ void codec_stv(__half *p, const float (&d)[VEC]) {
    if constexpr (VEC == 4) {
        __align__(8) __half2 h[2] = {__floats2half2_rn(d[0], d[1]), __floats2half2_rn(d[2], d[3])};
        *reinterpret_cast<uint2 *>(p) = *reinterpret_cast<const uint2 *>(h);
    } else if constexpr (VEC == 2) {
        *reinterpret_cast<__half2 *>(p) = __floats2half2_rn(d[0], d[1]);
    } else {
        *p = __float2half_rn(d[0]);
    }
}

/* One output of ep.mode from x = sum + bias, the residual and the running
 * branch sum. */
__device__ __forceinline__ float codec_ep_apply(const gp_cuda_codec_epilogue &ep, float x,
                                                float res, float prev) {
    switch (ep.mode) {
    case GP_CODEC_EP_STORE: return x;
    case GP_CODEC_EP_RESIDUAL: return res + x;
    case GP_CODEC_EP_BRANCH: {
        const float run = res + x;
        const float acc = ep.first ? run : prev + run;
        return ep.divide > 0.0f ? acc / ep.divide : acc;
    }
    case GP_CODEC_EP_CLAMP: return x < -1.0f ? -1.0f : x > 1.0f ? 1.0f : x;
    case GP_CODEC_EP_TANH: return tanhf(x);
    default: return x;
    }
}

/* The store of a finished tile: v = sum + bias, then ep.mode, VEC channels
 * at a time (C_out a multiple of VEC, so a thread's channels are one aligned
 * access). The loads of a group of G units (residual, running branch sum) are
 * all issued before any of its stores — one memory latency per group, not
 * per element (out and res may alias, so the compiler cannot hoist them
 * itself). The arithmetic of every element is the same whatever VEC. */
template <int TM, int TN, int THREADS, int VEC, typename SigT>
__device__ __forceinline__ void codec_conv_store(float (*sc)[TM + 4], int co0, int col0, int cols,
                                                 int C_out, const float *__restrict__ bias,
                                                 const gp_cuda_codec_epilogue &ep) {
    SigT *const out = reinterpret_cast<SigT *>(ep.out);
    const SigT *const resp = reinterpret_cast<const SigT *>(ep.res);
    constexpr int UNITS_PER_ROW = TM / VEC, PER = TM * TN / VEC / THREADS;
    constexpr int G = 8 / VEC < PER ? 8 / VEC : PER;
    static_assert(PER % G == 0, "tile units must split into whole groups");
    const int tid = threadIdx.x;
    const bool reads_res = ep.mode == GP_CODEC_EP_RESIDUAL || ep.mode == GP_CODEC_EP_BRANCH;
    const bool reads_out = ep.mode == GP_CODEC_EP_BRANCH && !ep.first;
#pragma unroll 1
    for (int u0 = 0; u0 < PER; u0 += G) {
        float v[G][VEC], res[G][VEC], prev[G][VEC];
        size_t o[G];
        bool ok[G];
        int jq[G], rq[G];
#pragma unroll
        for (int q = 0; q < G; q++) {
            const int unit = tid + (u0 + q) * THREADS;
            const int j = unit / UNITS_PER_ROW, r = (unit % UNITS_PER_ROW) * VEC;
            jq[q] = j;
            rq[q] = r;
            const int g = col0 + j, co = co0 + r;
            ok[q] = g < cols && co < C_out;
            o[q] = ok[q] ? (size_t)g * C_out + co : 0;
            float b[VEC];
#pragma unroll
            for (int k = 0; k < VEC; k++) b[k] = res[q][k] = prev[q][k] = 0.0f;
            if (ok[q]) codec_ldv<VEC>(b, bias + co);
#pragma unroll
            for (int k = 0; k < VEC; k++) v[q][k] = ok[q] ? sc[j][r + k] + b[k] : 0.0f;
            if (ok[q] && reads_res) codec_ldv<VEC>(res[q], resp + o[q]);
            if (ok[q] && reads_out) codec_ldv<VEC>(prev[q], out + o[q]);
        }
#pragma unroll
        for (int q = 0; q < G; q++) {
            if (!ok[q]) continue;
            float y[VEC];
#pragma unroll
            for (int k = 0; k < VEC; k++) y[k] = codec_ep_apply(ep, v[q][k], res[q][k], prev[q][k]);
            codec_stv<VEC>(out + o[q], y);
            if (ep.nw.win) /* for codec_conv_next_window: the tile becomes the outputs */
#pragma unroll
                for (int k = 0; k < VEC; k++)
                    sc[jq[q]][rq[q] + k] = codec_as_stored(y[k], sizeof(SigT) == 2);
        }
    }
}

/* codec_conv_store with the widest access C_out allows. */
template <int TM, int TN, int THREADS, typename SigT>
__device__ __forceinline__ void
codec_conv_store_vec(float (*sc)[TM + 4], int co0, int col0, int cols, int C_out,
                     const float *__restrict__ bias, const gp_cuda_codec_epilogue &ep) {
    if (C_out % 4 == 0)
        codec_conv_store<TM, TN, THREADS, 4, SigT>(sc, co0, col0, cols, C_out, bias, ep);
    else if (C_out % 2 == 0)
        codec_conv_store<TM, TN, THREADS, 2, SigT>(sc, co0, col0, cols, C_out, bias, ep);
    else
        codec_conv_store<TM, TN, THREADS, 1, SigT>(sc, co0, col0, cols, C_out, bias, ep);
}

/* The store of a finished tile that holds every output channel (co0 = 0,
 * C_out ≤ TM): its outputs are one contiguous run, columns col0 .. col0 + m − 1
 * of C_out values each, so it is stored as that flat run, 4 values per
 * access (16 bytes f32, 8 FP16) whatever C_out — a 27-channel tile stores in
 * 128 values per warp instruction, not 27. Element e is sc[e / C_out][e % C_out]
 * with the same arithmetic as codec_conv_store, so the results are the same
 * bits. The run starts 4-value aligned (col0 is a multiple of 4); its last
 * m · C_out mod 4 values go one at a time. Loads of a group of G vectors
 * precede their stores, as there. */
template <int TM, int TN, int THREADS, typename SigT, int FV>
__device__ __forceinline__ void codec_conv_store_flat(float (*sc)[TM + 4], int col0, int cols,
                                                      int C_out, const float *__restrict__ bias,
                                                      const gp_cuda_codec_epilogue &ep) {
    constexpr int G = 2;
    const int m = cols - col0 < TN ? cols - col0 : TN, total = m * C_out, nv = total / 4;
    SigT *const out = reinterpret_cast<SigT *>(ep.out) + (size_t)col0 * C_out;
    const SigT *const resp = reinterpret_cast<const SigT *>(ep.res) + (size_t)col0 * C_out;
    const bool reads_res = ep.mode == GP_CODEC_EP_RESIDUAL || ep.mode == GP_CODEC_EP_BRANCH;
    const bool reads_out = ep.mode == GP_CODEC_EP_BRANCH && !ep.first;
    /* vectors tid, tid + THREADS, …, G at a time; then the tail, one value per thread */
#pragma unroll 1
    for (int v0 = threadIdx.x; v0 < nv; v0 += G * THREADS) {
        float v[G][4], res[G][4], prev[G][4];
        bool ok[G];
#pragma unroll
        for (int q = 0; q < G; q++) {
            const int vi = v0 + q * THREADS;
            ok[q] = vi < nv;
            int e = ok[q] ? 4 * vi : 0, j = e / C_out, r = e - j * C_out;
#pragma unroll
            for (int k = 0; k < 4; k++) res[q][k] = prev[q][k] = 0.0f;
            if constexpr (FV == 4) { /* C_out % 4 == 0: r too, and r + 3 < C_out */
                const float4 t = *reinterpret_cast<const float4 *>(&sc[j][r]);
                const float4 b = __ldg(reinterpret_cast<const float4 *>(bias + r));
                v[q][0] = t.x + b.x, v[q][1] = t.y + b.y, v[q][2] = t.z + b.z, v[q][3] = t.w + b.w;
            } else if constexpr (FV == 2) { /* C_out even: pairs never straddle a column */
#pragma unroll
                for (int k = 0; k < 4; k += 2) {
                    const float2 t = *reinterpret_cast<const float2 *>(&sc[j][r]);
                    const float2 b = __ldg(reinterpret_cast<const float2 *>(bias + r));
                    v[q][k] = t.x + b.x, v[q][k + 1] = t.y + b.y;
                    r += 2;
                    if (r == C_out) r = 0, j++;
                }
            } else {
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    v[q][k] = sc[j][r] + __ldg(bias + r);
                    if (++r == C_out) r = 0, j++;
                }
            }
            if (!ok[q])
#pragma unroll
                for (int k = 0; k < 4; k++) v[q][k] = 0.0f;
            if (ok[q] && reads_res) codec_ldv<4>(res[q], resp + 4 * (size_t)vi);
            if (ok[q] && reads_out) codec_ldv<4>(prev[q], out + 4 * (size_t)vi);
        }
#pragma unroll
        for (int q = 0; q < G; q++) {
            if (!ok[q]) continue;
            float y[4];
#pragma unroll
            for (int k = 0; k < 4; k++) y[k] = codec_ep_apply(ep, v[q][k], res[q][k], prev[q][k]);
            codec_stv<4>(out + 4 * (size_t)(v0 + q * THREADS), y);
            if (ep.nw.win) { /* for codec_conv_next_window: the tile becomes the outputs */
                const int e = 4 * (v0 + q * THREADS);
                int j = e / C_out, r = e - j * C_out;
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    sc[j][r] = codec_as_stored(y[k], sizeof(SigT) == 2);
                    if (++r == C_out) r = 0, j++;
                }
            }
        }
    }
    const int e = 4 * nv + (int)threadIdx.x;
    if (e < total) {
        const int j = e / C_out, r = e - j * C_out;
        float res1[1] = {0.0f}, prev1[1] = {0.0f}, y[1];
        if (reads_res) codec_ldv<1>(res1, resp + e);
        if (reads_out) codec_ldv<1>(prev1, out + e);
        y[0] = codec_ep_apply(ep, sc[j][r] + __ldg(bias + r), res1[0], prev1[0]);
        codec_stv<1>(out + e, y);
        if (ep.nw.win) sc[j][r] = codec_as_stored(y[0], sizeof(SigT) == 2);
    }
}

/* codec_conv_store_flat reading fv values of the tile at a time. */
template <int TM, int TN, int THREADS, typename SigT>
__device__ __forceinline__ void
codec_conv_store_flat_fv(int fv, float (*sc)[TM + 4], int col0, int cols, int C_out,
                         const float *__restrict__ bias, const gp_cuda_codec_epilogue &ep) {
    if (fv == 4)
        codec_conv_store_flat<TM, TN, THREADS, SigT, 4>(sc, col0, cols, C_out, bias, ep);
    else if (fv == 2)
        codec_conv_store_flat<TM, TN, THREADS, SigT, 2>(sc, col0, cols, C_out, bias, ep);
    else
        codec_conv_store_flat<TM, TN, THREADS, SigT, 1>(sc, col0, cols, C_out, bias, ep);
}

/* The next convolution's window rows for this tile's outputs (ep.nw), from
 * the tile, which the store left holding each output as stored: activated as
 * the window kernel does (FP16 windows: the fast sine) and rounded to FP16;
 * the rows the next history keeps also go to st_out in f32. A thread keeps
 * one channel (its activation's parameters loaded once) and walks columns. */
template <int TM, int TN, int THREADS>
__device__ __forceinline__ void codec_conv_next_window(const float (*sc)[TM + 4], int co0, int col0,
                                                       int cols, int C_out,
                                                       const gp_cuda_codec_epilogue &ep) {
    static_assert(THREADS % TM == 0, "a thread keeps one channel");
    const gp_cuda_codec_next_window &w = ep.nw;
    const int r = threadIdx.x % TM, co = co0 + r, W = w.hist + w.T;
    __syncthreads(); /* every thread's outputs are in the tile */
    if (co >= C_out) return;
    const codec_act_channel act = codec_act_of(w.act, co);
    constexpr int STEP = THREADS / TM;
    const int jend = cols - col0 < TN ? cols - col0 : TN;
    int j = threadIdx.x / TM, b = (col0 + j) / w.T, t = col0 + j - b * w.T, cur = -1;
    float *st = NULL;
    for (; j < jend; j += STEP) { /* column col0 + j is time t of stream b */
        const int row = w.hist + t;
        const float a = codec_act_apply<true>(act, sc[j][r]);
        w.win[((size_t)b * W + row) * w.cp + co] = __float2half_rn(a);
        if (row >= w.T) {
            if (b != cur) {
                st = w.st_out[b] + w.st_off;
                cur = b;
            }
            st[(size_t)(row - w.T) * C_out + co] = a;
        }
        for (t += STEP; t >= w.T; t -= w.T) b++;
    }
}

/* The end of every convolution tile, whatever computed it: `sc` holds the
 * tile's sums [col][co] for the reduction slice of split blockIdx.z. With
 * several splits every split stores its partial tile; the split that finishes
 * last (a ticket per tile) sums them in split order — the same order for any
 * batch or chunking — and applies the epilogue (bias, then ep.mode). */
template <int TM, int TN, int THREADS>
__device__ __forceinline__ void codec_conv_finish(float (*sc)[TM + 4], int co0, int col0, int cols,
                                                  int C_out, const float *__restrict__ bias,
                                                  int splits, float *partial, unsigned *tickets,
                                                  const gp_cuda_codec_epilogue &ep, int *last) {
    constexpr int TILE = TM * TN;
    const int tid = threadIdx.x;
    if (splits > 1) {
        const size_t tile = (size_t)blockIdx.y * gridDim.x + blockIdx.x;
        float *mine = partial + (tile * splits + blockIdx.z) * TILE;
        for (int e = tid; e < TILE; e += THREADS) mine[e] = sc[e / TM][e % TM];
        __threadfence();
        __syncthreads();
        if (tid == 0) *last = atomicAdd(&tickets[tile], 1u) == (unsigned)(splits - 1);
        __syncthreads();
        if (!*last) return;
        if (tid == 0) tickets[tile] = 0; /* ready for the next convolution */
        __threadfence();
        const float *all = partial + tile * splits * TILE;
        for (int e = tid; e < TILE; e += THREADS) {
            float v = 0.0f;
            for (int z = 0; z < splits; z++) v += __ldcg(all + (size_t)z * TILE + e);
            sc[e / TM][e % TM] = v;
        }
        __syncthreads();
    }
    const bool flat = ep.flat && co0 == 0 && C_out <= TM;
    const int fv = ep.flat < 2 ? 1 : C_out % 4 == 0 ? 4 : C_out % 2 == 0 ? 2 : 1;
    if (flat && ep.half)
        codec_conv_store_flat_fv<TM, TN, THREADS, __half>(fv, sc, col0, cols, C_out, bias, ep);
    else if (flat)
        codec_conv_store_flat_fv<TM, TN, THREADS, float>(fv, sc, col0, cols, C_out, bias, ep);
    else if (ep.half)
        codec_conv_store_vec<TM, TN, THREADS, __half>(sc, co0, col0, cols, C_out, bias, ep);
    else
        codec_conv_store_vec<TM, TN, THREADS, float>(sc, co0, col0, cols, C_out, bias, ep);
    if (ep.nw.win) codec_conv_next_window<TM, TN, THREADS>(sc, co0, col0, cols, C_out, ep);
}
#endif
/* win [left + n + right][Cp] = pad(act(x [n][C])) for the encoder (mode: 0 zeros,
 * 1 replicate, 2 reflect). */
void gp_cuda_codec_run_window_pad(const float *x, int n, int C, int Cp, int left, int right,
                                  int mode, const gp_cuda_codec_act *act, float *win,
                                  cudaStream_t s);
/* y [n][T·stride][c_out] = convt(act(x [n][T][c_in])) with the history in the state;
 * a group's input channels × (hist + 1) taps must not exceed GP_CUDA_CODEC_CONVT_CACHE
 * (NanoCodec: 2 × 2). */
#define GP_CUDA_CODEC_CONVT_CACHE 8
void gp_cuda_codec_run_convt(const float *x, int n, int T, const gp_cuda_codec_convt *cv,
                             const gp_cuda_codec_act *act, const float *const *st_in,
                             float *const *st_out, size_t st_off, float *y, cudaStream_t s);

/* ---- the codec object (cuda_codec.cu; the encoder in cuda_codec_encoder.cu) ---- */

#include <pthread.h>

#define CODEC_MAX_COLS GP_CUDA_CODEC_MAX_COLS
/* A queued decode runs as up to this many pieces of CODEC_MAX_COLS columns
 * (1024 streams of two frames), each with pinned staging of its own. */
#define CODEC_QUEUE_PIECES 4
#define CODEC_QUEUE_COLS (CODEC_QUEUE_PIECES * CODEC_MAX_COLS)
typedef struct codec_queued_piece {
    int g, n, f0, T; /* streams g .. g + n − 1 of the call, frames f0 .. f0 + T − 1 */
} codec_queued_piece;
/* Captured one-frame batches: 1, 2, 4, 8, then steps of 8 to 128, 16 to 256
 * and 32 to 512 (35 sizes; codec_graph_cols): a call pads at most 1/8 of its
 * streams, not up to the next power of two. */
#define CODEC_GRAPHS 40

/* The residual blocks of a stage (one per kernel size) are independent up
 * to their sum, so each runs on a CUDA stream of its own with its own work
 * buffers (branch 0 on the codec's stream, with its buffers); the sums into
 * the stage's output stay in block order (each block's last convolution
 * waits for the previous block's: `done`). */
#define CODEC_MAX_BRANCHES 4
typedef struct codec_branch {
    cudaStream_t stream;
    float *run, *tmp, *win, *partial;
    unsigned *tickets;
    cudaEvent_t done;
} codec_branch;

typedef struct codec_block {
    gp_cuda_codec_act in_act, skip_act;
    gp_cuda_codec_conv in_conv, skip_conv;
    /* fused windows (inside gp_dev_codec.fw): the convolution before writes
     * them; NULL where a window kernel does (a stage's first block's in_win) */
    __half *in_win, *skip_win;
} codec_block;

typedef struct codec_stage {
    int c_in, c_out, rate;
    gp_cuda_codec_act act;
    gp_cuda_codec_convt up;
    codec_block *blocks; /* host array of device descriptions */
} codec_stage;

typedef struct codec_enc_stage {
    codec_block *blocks;
    gp_cuda_codec_act act;
    gp_cuda_codec_conv down;
} codec_enc_stage;

/* The encoder on the device (f32 FMA path: the same codes as the CPU). */
typedef struct codec_encoder {
    bool present, causal;
    int pad_mode, encoded_dim, n_stages;
    gp_cuda_codec_conv pre, post;
    gp_cuda_codec_act post_act;
    codec_enc_stage stages[GP_DEV_CODEC_MAX_STAGES];
} codec_encoder;

struct gp_dev_codec {
    int device;
    gp_cuda_codec_math math;
    int input_dim, spf, n_stages, nk, nd, clamp;
    /* FP16 (math F16 only) residual units' inner signals (GP_CUDA_CODEC_HALF_TMP) */
    bool half_tmp;
    gp_cuda_codec_conv pre, post;
    gp_cuda_codec_act post_act;
    codec_stage stages[GP_DEV_CODEC_MAX_STAGES];
    codec_encoder enc;
    void *params; /* every weight, bias and alpha */
    size_t bytes;
    size_t state_floats; /* one copy of a slot's state */
    /* slots */
    pthread_mutex_t lock;
    int cap_slots;
    float **slot_state; /* [cap] device: 2 · state_floats */
    unsigned char *parity, *used;
    void **chunks;
    int n_chunks;
    /* work */
    cudaStream_t stream;
    cudaEvent_t t0, t1;
    float *sig, *acc, *run, *tmp, *win, *pcm, *lat;
    float **ptrs;      /* device [2][CODEC_MAX_COLS] state pointers */
    float *partial;    /* split-reduction workspace */
    unsigned *tickets; /* per output tile, zero between convolutions */
    size_t partial_floats, n_tickets;
    float *dummy; /* state of the padding streams of a graph's batch (2 copies) */
    codec_branch br[CODEC_MAX_BRANCHES]; /* [1 .. n_br − 1] owned; 1: the blocks in turn */
    int n_br;
    cudaEvent_t fork; /* a stage's up-sampled input is ready for every branch */
    bool use_graphs, graph_pow2;
    bool graphs_ahead;                    /* every size captured with the first batch's (=0: off) */
    bool graphs_ahead_done;               /* that capture happened */
    cudaGraphExec_t graphs[CODEC_GRAPHS]; /* one frame for graph_cols[i] streams */
    int graph_cols[CODEC_GRAPHS];
    /* Fused windows: calls of at most fuse_cols frame columns (streams ×
     * frames; GEPARD_CUDA_CODEC_FUSED_WINDOWS, 0: never) have each residual
     * unit's windows but a stage's first written by the convolution before
     * (gp_cuda_codec_next_window) into a buffer per layer, whose older rows
     * one launch fills at the call's start (gp_cuda_codec_run_histories). */
    int fuse_cols;
    __half *fw;
    /* pinned staging per piece of a call: pointers then latent, samples (a
     * waited-for call uses [0]; a queued one one per piece) */
    char *h_in[CODEC_QUEUE_PIECES];
    float *h_pcm[CODEC_QUEUE_PIECES];
    /* A decode queued by gp_cuda_codec_decode_submit: its pieces' samples
     * wait in h_pcm[i] (t1 recorded after the last download) until a collect
     * copies them to queued_pcm (an entry is NULL once its slot closed). */
    bool queued;
    int queued_n, queued_pieces;
    codec_queued_piece queued_piece[CODEC_QUEUE_PIECES];
    int queued_slots[CODEC_QUEUE_COLS];
    float *queued_pcm[CODEC_QUEUE_COLS];
    size_t x_floats, win_floats;
    double last_ms;
};

/* cuda_codec.cu: the layers for n streams of T frames whose latent is in
 * c->lat and state pointers in c->ptrs (queued on c->stream and its
 * branches); samples land in c->pcm [n][T·spf]. */
void gp_cuda_codec_run_layers(gp_dev_codec *c, int n, int T);

#endif
