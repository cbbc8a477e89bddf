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
#include <mma.h>

#include "cuda/cuda_codec.h"

using namespace nvcuda;

__device__ __forceinline__ float codec_act(const gp_cuda_codec_act &a, float x, int c) {
    switch (a.kind) {
    case GP_DEV_ACT_IDENTITY: return x;
    case GP_DEV_ACT_SNAKE:
    case GP_DEV_ACT_HALF_SNAKE:
        if (c < a.n_snake) {
            const float v = sinf(a.alpha[c] * x);
            return x + a.inv_alpha[c] * (v * v);
        }
        return x > 0.0f ? x : a.slope * x;
    case GP_DEV_ACT_LRELU: return x > 0.0f ? x : a.slope * x;
    case GP_DEV_ACT_ELU: return x > 0.0f ? x : expm1f(x);
    default: return x;
    }
}

/* ---------------- window: [history | act(x)] and the next history ---------------- */

__global__ void k_codec_window(const float *__restrict__ x, int n, int T, int C, int hist,
                               gp_cuda_codec_act act, const float *const *st_in,
                               float *const *st_out, size_t st_off, float *__restrict__ win) {
    const size_t W = (size_t)hist + (size_t)T;
    const size_t total = (size_t)n * W * (size_t)C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(i % (size_t)C);
        const size_t r = (i / (size_t)C) % W;
        const int b = (int)(i / ((size_t)C * W));
        float v;
        if (r < (size_t)hist)
            v = st_in[b][st_off + r * (size_t)C + (size_t)c];
        else
            v = codec_act(act, x[((size_t)b * T + (r - hist)) * (size_t)C + (size_t)c], c);
        win[i] = v;
        if (r >= (size_t)T) st_out[b][st_off + (r - (size_t)T) * (size_t)C + (size_t)c] = v;
    }
}

void gp_cuda_codec_run_window(const float *x, int n, int T, int C, int hist,
                              const gp_cuda_codec_act *act, const float *const *st_in,
                              float *const *st_out, size_t st_off, float *win, cudaStream_t s) {
    const size_t total = (size_t)n * ((size_t)hist + (size_t)T) * (size_t)C;
    const int threads = 256;
    size_t blocks = (total + threads - 1) / threads;
    if (blocks > 65535u * 8u) blocks = 65535u * 8u;
    if (blocks == 0) return;
    k_codec_window<<<(unsigned)blocks, threads, 0, s>>>(x, n, T, C, hist, *act, st_in, st_out,
                                                        st_off, win);
}

/* ---------------- the convolution as an implicit GEMM ---------------- */

#define CONV_TM 64 /* output channels per tile */
#define CONV_TN 64 /* output columns (stream, time) per tile */
#define CONV_KC 32 /* reduction slice (tap, channel) per pass */
#define CONV_LDS (CONV_KC + 4)
#define CONV_LDC (CONV_TM + 4)

struct conv_smem {
    union {
        struct {
            float a[CONV_TM][CONV_LDS]; /* weights [co][k] */
            float b[CONV_TN][CONV_LDS]; /* window columns [col][k] */
        } in;
        float c[CONV_TN][CONV_LDC]; /* results [col][co] */
    };
};

template <bool TENSOR>
__global__ void __launch_bounds__(128)
    k_codec_conv(const float *__restrict__ Wt, const float *__restrict__ bias,
                 const float *__restrict__ win, int n, int T, int hist, int C_in, int C_out,
                 int kernel, int dil, gp_cuda_codec_epilogue ep) {
    __shared__ __align__(128) conv_smem sm;
    const int tid = threadIdx.x;
    const int co0 = blockIdx.y * CONV_TM;
    const long col0 = (long)blockIdx.x * CONV_TN;
    const long cols = (long)n * T;
    const int K = kernel * C_in;
    const size_t Wlen = (size_t)hist + (size_t)T;

    /* FMA path: thread owns 4 output channels × 8 columns */
    const int fm = (tid % 16) * 4, fn = (tid / 16) * 8;
    float facc[4][8];
    /* tensor path: warp owns 32 × 32 */
    const int warp = tid / 32, wm = (warp / 2) * 32, wn = (warp % 2) * 32;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> tacc[2][2];
    if (TENSOR) {
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) wmma::fill_fragment(tacc[i][j], 0.0f);
    } else {
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 8; j++) facc[i][j] = 0.0f;
    }

    for (int k0 = 0; k0 < K; k0 += CONV_KC) {
        for (int e = tid; e < CONV_TM * CONV_KC; e += 128) {
            const int r = e / CONV_KC, kk = e % CONV_KC;
            const int co = co0 + r, k = k0 + kk;
            sm.in.a[r][kk] = (co < C_out && k < K) ? Wt[(size_t)co * K + k] : 0.0f;
        }
        for (int e = tid; e < CONV_TN * CONV_KC; e += 128) {
            const int j = e / CONV_KC, kk = e % CONV_KC;
            const long g = col0 + j;
            const int k = k0 + kk;
            float v = 0.0f;
            if (g < cols && k < K) {
                const long b = g / T, t = g % T;
                const int tap = k / C_in, c = k % C_in;
                v = win[((size_t)b * Wlen + (size_t)t + (size_t)tap * dil) * C_in + c];
            }
            sm.in.b[j][kk] = v;
        }
        __syncthreads();
        if (TENSOR) {
            for (int ks = 0; ks < CONV_KC; ks += 8) {
                wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>
                    fa[2];
                wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>
                    fb[2];
                for (int i = 0; i < 2; i++) {
                    wmma::load_matrix_sync(fa[i], &sm.in.a[wm + i * 16][ks], CONV_LDS);
                    for (int t = 0; t < fa[i].num_elements; t++)
                        fa[i].x[t] = wmma::__float_to_tf32(fa[i].x[t]);
                }
                for (int j = 0; j < 2; j++) {
                    wmma::load_matrix_sync(fb[j], &sm.in.b[wn + j * 16][ks], CONV_LDS);
                    for (int t = 0; t < fb[j].num_elements; t++)
                        fb[j].x[t] = wmma::__float_to_tf32(fb[j].x[t]);
                }
                for (int i = 0; i < 2; i++)
                    for (int j = 0; j < 2; j++)
                        wmma::mma_sync(tacc[i][j], fa[i], fb[j], tacc[i][j]);
            }
        } else {
            for (int kk = 0; kk < CONV_KC; kk++) {
                float a[4], bv[8];
                for (int i = 0; i < 4; i++) a[i] = sm.in.a[fm + i][kk];
                for (int j = 0; j < 8; j++) bv[j] = sm.in.b[fn + j][kk];
                for (int i = 0; i < 4; i++)
                    for (int j = 0; j < 8; j++) facc[i][j] = fmaf(a[i], bv[j], facc[i][j]);
            }
        }
        __syncthreads();
    }
    /* results to shared memory as [col][co] */
    if (TENSOR) {
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                wmma::store_matrix_sync(&sm.c[wn + j * 16][wm + i * 16], tacc[i][j], CONV_LDC,
                                        wmma::mem_col_major);
    } else {
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 8; j++) sm.c[fn + j][fm + i] = facc[i][j];
    }
    __syncthreads();
    for (int e = tid; e < CONV_TM * CONV_TN; e += 128) {
        const int j = e / CONV_TM, r = e % CONV_TM;
        const long g = col0 + j;
        const int co = co0 + r;
        if (g >= cols || co >= C_out) continue;
        const size_t o = (size_t)g * C_out + co;
        float v = sm.c[j][r] + bias[co];
        switch (ep.mode) {
        case GP_CODEC_EP_STORE: ep.out[o] = v; break;
        case GP_CODEC_EP_RESIDUAL: ep.out[o] = ep.res[o] + v; break;
        case GP_CODEC_EP_BRANCH: {
            float run = ep.res[o] + v;
            float acc = ep.first ? run : ep.out[o] + run;
            ep.out[o] = ep.divide > 0.0f ? acc / ep.divide : acc;
            break;
        }
        case GP_CODEC_EP_CLAMP: ep.out[o] = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v; break;
        case GP_CODEC_EP_TANH: ep.out[o] = tanhf(v); break;
        }
    }
}

void gp_cuda_codec_run_conv(const gp_cuda_codec_conv *cv, const float *win, int n, int T,
                            const gp_cuda_codec_epilogue *ep, bool tensor, cudaStream_t s) {
    const long cols = (long)n * T;
    dim3 grid((unsigned)((cols + CONV_TN - 1) / CONV_TN),
              (unsigned)((cv->c_out + CONV_TM - 1) / CONV_TM));
    if (tensor)
        k_codec_conv<true><<<grid, 128, 0, s>>>(cv->weight, cv->bias, win, n, T, cv->hist, cv->c_in,
                                                cv->c_out, cv->kernel, cv->dilation, *ep);
    else
        k_codec_conv<false><<<grid, 128, 0, s>>>(cv->weight, cv->bias, win, n, T, cv->hist,
                                                 cv->c_in, cv->c_out, cv->kernel, cv->dilation,
                                                 *ep);
}

/* ---------------- grouped causal transposed convolution ---------------- */

/* y[b][q·s + u][o] = bias[o] + Σ_(c in o's group) Σ_m a[c][q − m] · W[c][o_local][u + m·s],
 * a = act(x), a[c][j < 0] from the history (the last `hist` inputs, oldest first). */
__global__ void k_codec_convt(const float *__restrict__ x, int n, int T, gp_cuda_codec_convt cv,
                              gp_cuda_codec_act act, const float *const *st_in,
                              float *const *st_out, size_t st_off, float *__restrict__ y) {
    const int s = cv.stride, k = cv.kernel, hist = cv.hist;
    const int ci_g = cv.c_in / cv.groups, co_g = cv.c_out / cv.groups;
    const size_t outs = (size_t)n * T * s * cv.c_out;
    const size_t states = (size_t)n * hist * cv.c_in;
    const size_t total = outs > states ? outs : states;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        if (i < outs) {
            const int o = (int)(i % cv.c_out);
            const size_t p = (i / cv.c_out) % ((size_t)T * s);
            const int b = (int)(i / ((size_t)cv.c_out * T * s));
            const int q = (int)(p / s), u = (int)(p % s);
            const int g = o / co_g, ol = o % co_g;
            float acc = cv.bias[o];
            for (int c = g * ci_g; c < (g + 1) * ci_g; c++) {
                const float *w = cv.weight + ((size_t)c * co_g + ol) * k;
                for (int m = 0; m <= hist && u + m * s < k; m++) {
                    const int j = q - m;
                    const float a = j >= 0 ? codec_act(act, x[((size_t)b * T + j) * cv.c_in + c], c)
                                           : st_in[b][st_off + (size_t)(hist + j) * cv.c_in + c];
                    acc += a * w[u + m * s];
                }
            }
            y[i] = acc;
        }
        if (i < states) { /* next history: window rows T .. T + hist − 1 */
            const int c = (int)(i % cv.c_in);
            const int r = (int)((i / cv.c_in) % hist);
            const int b = (int)(i / ((size_t)cv.c_in * hist));
            const int wi = T + r; /* index in [history | x] */
            const float v = wi < hist
                                ? st_in[b][st_off + (size_t)wi * cv.c_in + c]
                                : codec_act(act, x[((size_t)b * T + (wi - hist)) * cv.c_in + c], c);
            st_out[b][st_off + (size_t)r * cv.c_in + c] = v;
        }
    }
}

void gp_cuda_codec_run_convt(const float *x, int n, int T, const gp_cuda_codec_convt *cv,
                             const gp_cuda_codec_act *act, const float *const *st_in,
                             float *const *st_out, size_t st_off, float *y, cudaStream_t s) {
    const size_t outs = (size_t)n * T * cv->stride * cv->c_out;
    const size_t states = (size_t)n * cv->hist * cv->c_in;
    const size_t total = outs > states ? outs : states;
    const int threads = 256;
    size_t blocks = (total + threads - 1) / threads;
    if (blocks > 65535u * 8u) blocks = 65535u * 8u;
    if (blocks == 0) return;
    k_codec_convt<<<(unsigned)blocks, threads, 0, s>>>(x, n, T, *cv, *act, st_in, st_out, st_off,
                                                       y);
}
