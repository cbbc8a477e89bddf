/* cuda_kernels.cu — the kernels of the CUDA backend that no library provides:
 * zero-centred RMSNorm into the next GEMM's input type, the per-head q/gate
 * split with q/k norm and rotate-half RoPE (writing keys and values straight
 * into the paged KV cache), grouped-query attention over the paged cache
 * split along the sequence with a combine that applies the sigmoid gate,
 * SwiGLU, and the audio-frame embedding's gather / GELU / LayerNorm. The
 * projections themselves are cuBLAS GEMMs (cuda_runner.cu).
 *
 * Every kernel follows the CPU reference (model/backbone.c, model/overlay.c)
 * operation by operation, in f32 with the same reductions in double where
 * the reference uses double, so the f32 path agrees with the CPU to
 * accumulation-order level. */
#include <math.h>

#include <type_traits>

#include "cuda/cuda_attention.cuh"
#include "cuda/cuda_internal.h"

namespace {

/* ---------------- conversion ---------------- */

__global__ void k_convert(const void *src, int src_type, void *dst, bool dst_f32, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v;
        if (src_type == GP_DEV_DT_F32)
            v = ((const float *)src)[i];
        else if (src_type == GP_DEV_DT_BF16)
            v = __bfloat162float(((const __nv_bfloat16 *)src)[i]);
        else
            v = __half2float(((const __half *)src)[i]);
        if (dst_f32)
            ((float *)dst)[i] = v;
        else
            ((__nv_bfloat16 *)dst)[i] = __float2bfloat16_rn(v);
    }
}

__global__ void k_add_delta(void *w, bool w_f32, const float *delta, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        if (w_f32) {
            ((float *)w)[i] += delta[i];
        } else {
            __nv_bfloat16 *p = (__nv_bfloat16 *)w + i;
            *p = __float2bfloat16_rn(__bfloat162float(*p) + delta[i]);
        }
    }
}

/* ---------------- norms ---------------- */

/* One block per output row: y = (x · 1/sqrt(mean(x²) + eps)) · gain. Rows
 * of up to 4 float4 per thread are loaded in one go (one memory latency,
 * not one per element); wider or unaligned rows take the plain loop. */
template <typename T>
__global__ void k_rmsnorm(const float *x, int ldx, const int *row_index, int width,
                          const float *gain, float eps, T *y, int ldy) {
    __shared__ double scratch[32];
    const int out_row = blockIdx.x;
    const int in_row = row_index ? row_index[out_row] : out_row;
    const float *xr = x + (size_t)in_row * ldx;
    T *yr = y + (size_t)out_row * ldy;
    const int w4 = width / 4;
    if (width % 4 == 0 && ldx % 4 == 0 && w4 <= 4 * (int)blockDim.x) {
        float4 v[4];
        double sum = 0;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int i = threadIdx.x + j * blockDim.x;
            if (i < w4) {
                v[j] = __ldg((const float4 *)xr + i);
                sum += (double)v[j].x * v[j].x + (double)v[j].y * v[j].y + (double)v[j].z * v[j].z +
                       (double)v[j].w * v[j].w;
            }
        }
        sum = block_sum(sum, scratch);
        const float inv = 1.0f / sqrtf((float)(sum / width) + eps);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int i = threadIdx.x + j * blockDim.x;
            if (i < w4) {
                const float4 g = __ldg((const float4 *)gain + i);
                store(&yr[4 * i], (v[j].x * inv) * g.x);
                store(&yr[4 * i + 1], (v[j].y * inv) * g.y);
                store(&yr[4 * i + 2], (v[j].z * inv) * g.z);
                store(&yr[4 * i + 3], (v[j].w * inv) * g.w);
            }
        }
        return;
    }
    double sum = 0;
    for (int i = threadIdx.x; i < width; i += blockDim.x) sum += (double)xr[i] * xr[i];
    sum = block_sum(sum, scratch);
    const float inv = 1.0f / sqrtf((float)(sum / width) + eps);
    for (int i = threadIdx.x; i < width; i += blockDim.x) store(&yr[i], (xr[i] * inv) * gain[i]);
}

/* One row's RoPE table per block (rope_entry). */
__global__ void k_rope_table(const int *row_pos, int rows, const float *inv_freq, int half,
                             float *rope) {
    const int r = blockIdx.x;
    for (int i = threadIdx.x; i < half; i += blockDim.x)
        rope_entry(row_pos[r], inv_freq, i, half, rope + (size_t)r * 2 * half);
}

/* ---------------- attention inputs ---------------- */

/* Block (row, head): heads 0..NH-1 are query heads (norm + RoPE into q),
 * NH..NH+NKV-1 key heads (norm + RoPE into the cache, value copied beside). */
template <typename KT>
__global__ void k_qkv_post(attn_dims d, const float *qkv, const float *q_norm, const float *k_norm,
                           const float *rope, float eps, const int *row_seq, const int *row_pos,
                           const int *block_table, float *q_out, KT *kv) {
    extern __shared__ float z[];
    __shared__ double scratch[32];
    const int r = blockIdx.x, hh = blockIdx.y;
    const bool is_q = hh < d.NH;
    const int g = hh - d.NH;
    const float *src = qkv + (size_t)r * d.qkv_rows +
                       (is_q ? (size_t)hh * 2 * d.D : (size_t)2 * d.NH * d.D + (size_t)g * d.D);
    const float *gain = is_q ? q_norm : k_norm;
    double sum = 0;
    for (int i = threadIdx.x; i < d.D; i += blockDim.x) {
        float v = src[i];
        z[i] = v;
        sum += (double)v * v;
    }
    sum = block_sum(sum, scratch);
    const float inv = 1.0f / sqrtf((float)(sum / d.D) + eps);
    for (int i = threadIdx.x; i < d.D; i += blockDim.x) z[i] = (z[i] * inv) * gain[i];
    __syncthreads();
    const float *cosv = rope + (size_t)r * 2 * d.half, *sinv = cosv + d.half;
    for (int i = threadIdx.x; i < d.half; i += blockDim.x) {
        float a = z[i], b = z[i + d.half];
        z[i] = a * cosv[i] - b * sinv[i];
        z[i + d.half] = b * cosv[i] + a * sinv[i];
    }
    __syncthreads();
    if (is_q) {
        float *dst = q_out + ((size_t)r * d.NH + hh) * d.D;
        for (int i = threadIdx.x; i < d.D; i += blockDim.x) dst[i] = z[i];
        return;
    }
    const int seq = row_seq[r], pos = row_pos[r];
    const int block = block_table[(size_t)seq * d.bt_stride + kv_block_of(d, pos)];
    KT *kdst = kv + kv_index(d, block, 0, g, kv_in_block(d, pos));
    KT *vdst = kv + kv_index(d, block, 1, g, kv_in_block(d, pos));
    const float *vsrc = qkv + (size_t)r * d.qkv_rows + (size_t)2 * d.NH * d.D +
                        (size_t)d.NKV * d.D + (size_t)g * d.D;
    for (int i = threadIdx.x; i < d.D; i += blockDim.x) {
        store(&kdst[i], z[i]);
        store(&vdst[i], vsrc[i]);
    }
}

/* ---------------- attention ---------------- */

/* Merge `splits` partials (max, sum, weighted values per query head) of one
 * (row, kv head), normalise, apply the sigmoid gate and write the o_proj
 * input of the group's G heads. The per-split weights exp(m_s − M) / L go
 * to shared memory first, so each output element then reads its splits'
 * values independently. Reads with __ldcg: other blocks wrote them. */
template <typename T, int G>
__device__ void combine_group(const attn_dims &d, const float *base, int splits, const float *qkv,
                              int r, int g, T *out) {
    __shared__ float ms[ATTN_MAX_SPLITS * G], factor[ATTN_MAX_SPLITS * G];
    const size_t stride = (size_t)G * (d.D + 2);
    for (int idx = threadIdx.x; idx < splits * G; idx += blockDim.x) {
        const int s = idx / G, gg = idx % G;
        ms[idx] = __ldcg(base + s * stride + gg);
        factor[idx] = __ldcg(base + s * stride + G + gg); /* l_s for now */
    }
    __syncthreads();
    if (threadIdx.x < G) {
        const int gg = threadIdx.x;
        float M = -INFINITY, L = 0;
        for (int s = 0; s < splits; s++) M = fmaxf(M, ms[s * G + gg]);
        for (int s = 0; s < splits; s++)
            if (ms[s * G + gg] != -INFINITY) L += factor[s * G + gg] * expf(ms[s * G + gg] - M);
        for (int s = 0; s < splits; s++)
            factor[s * G + gg] = ms[s * G + gg] == -INFINITY ? 0.0f : expf(ms[s * G + gg] - M) / L;
    }
    __syncthreads();
    /* Each thread owns up to EPT output elements and walks the splits with
     * all its elements' loads of one split in flight together. */
    constexpr int EPT = (G * 256 + ATTN_WARPS * 32 - 1) / (ATTN_WARPS * 32);
    float A[EPT];
#pragma unroll
    for (int j = 0; j < EPT; j++) A[j] = 0;
    for (int s = 0; s < splits; s++) {
        const float *src = base + s * stride + 2 * G;
#pragma unroll
        for (int j = 0; j < EPT; j++) {
            const int idx = threadIdx.x + j * blockDim.x;
            if (idx < G * d.D) A[j] += __ldcg(src + idx) * factor[s * G + idx / d.D];
        }
    }
#pragma unroll
    for (int j = 0; j < EPT; j++) {
        const int idx = threadIdx.x + j * blockDim.x;
        if (idx >= G * d.D) continue;
        const int gg = idx / d.D, i = idx % d.D, h = g * G + gg;
        const float gate = qkv[(size_t)r * d.qkv_rows + (size_t)h * 2 * d.D + d.D + i];
        store(&out[((size_t)r * d.NH + h) * d.D + i], A[j] * (1.0f / (1.0f + expf(-gate))));
    }
}

/* Block (row, kv head, split): the G query heads of the group attend over
 * the split's share of positions 0..pos; each warp keeps an online softmax
 * over every 4th position (the next position's keys and values load while
 * the current one is used), the warps merge into one partial per query head,
 * and the last split to finish merges all splits and writes the gated
 * output (a counter per (row, kv head), reset for the next step). */
template <typename KT, typename OT, int G, int DPL>
__global__ void __launch_bounds__(ATTN_WARPS * 32)
    k_attention(attn_dims d, const float *q, const int *row_seq, const int *row_pos,
                const int *block_table, const KT *kv, int splits, float *part, unsigned *counters,
                const float *qkv, OT *out) {
    extern __shared__ float sm[]; /* [warps][G][D] acc, then [warps][G] m, l */
    __shared__ unsigned ticket;
    const int r = blockIdx.x, g = blockIdx.y, split = blockIdx.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int n = row_pos[r] + 1, seq = row_seq[r];
    const int per = (n + splits - 1) / splits;
    const int begin = split * per, end = min(n, begin + per);
    const int *bt = block_table + (size_t)seq * d.bt_stride;
    const float scale = 1.0f / sqrtf((float)d.D);
    float qv[G][DPL], acc[G][DPL], m[G], l[G];
#pragma unroll
    for (int gg = 0; gg < G; gg++) {
        load_vec<float, DPL>(q + ((size_t)r * d.NH + (size_t)g * G + gg) * d.D, lane, d.D, qv[gg]);
        m[gg] = -INFINITY;
        l[gg] = 0;
#pragma unroll
        for (int j = 0; j < DPL; j++) acc[gg][j] = 0;
    }
    float kk[DPL], vv[DPL];
    int p = begin + warp;
    if (p < end) load_kv<KT, DPL>(d, d.D, kv, bt, p, g, lane, kk, vv);
    for (; p < end; p += ATTN_WARPS) {
        float kn[DPL], vn[DPL];
        if (p + ATTN_WARPS < end) load_kv<KT, DPL>(d, d.D, kv, bt, p + ATTN_WARPS, g, lane, kn, vn);
        attend_position<G, DPL>(qv, kk, vv, scale, m, l, acc);
#pragma unroll
        for (int j = 0; j < DPL; j++) {
            kk[j] = kn[j];
            vv[j] = vn[j];
        }
    }
    float *sm_acc = sm, *sm_m = sm + (size_t)ATTN_WARPS * G * d.D, *sm_l = sm_m + ATTN_WARPS * G;
#pragma unroll
    for (int gg = 0; gg < G; gg++) {
#pragma unroll
        for (int j = 0; j < DPL; j++) {
            int i = lane * DPL + j;
            if (i < d.D) sm_acc[((size_t)warp * G + gg) * d.D + i] = acc[gg][j];
        }
        if (lane == 0) {
            sm_m[warp * G + gg] = m[gg];
            sm_l[warp * G + gg] = l[gg];
        }
    }
    __syncthreads();
    const size_t stride = (size_t)G * (d.D + 2);
    float *base = part + ((size_t)r * d.NKV + g) * splits * stride;
    float *outp = base + (size_t)split * stride;
    for (int idx = threadIdx.x; idx < G * d.D; idx += blockDim.x) {
        const int gg = idx / d.D, i = idx % d.D;
        float M = -INFINITY;
        for (int w = 0; w < ATTN_WARPS; w++) M = fmaxf(M, sm_m[w * G + gg]);
        float L = 0, A = 0;
        if (M != -INFINITY)
            for (int w = 0; w < ATTN_WARPS; w++) {
                float f = expf(sm_m[w * G + gg] - M);
                L += sm_l[w * G + gg] * f;
                A += sm_acc[((size_t)w * G + gg) * d.D + i] * f;
            }
        outp[2 * G + (size_t)gg * d.D + i] = A;
        if (i == 0) {
            outp[gg] = M;
            outp[G + gg] = L;
        }
    }
    /* The last split of this (row, kv head) to get here merges them all. */
    __threadfence();
    __syncthreads();
    unsigned *counter = counters + (size_t)r * d.NKV + g;
    if (threadIdx.x == 0) ticket = atomicAdd(counter, 1u);
    __syncthreads();
    if (ticket != (unsigned)splits - 1) return;
    __threadfence();
    combine_group<OT, G>(d, base, splits, qkv, r, g, out);
    if (threadIdx.x == 0) *counter = 0;
}

/* ---------------- run-time LoRA ---------------- */

/* Block per row: t = scale · A x (a warp per rank entry), then y += B t. */
template <typename T>
__global__ void k_lora(const T *x, int ldx, int row0, const float *A, const float *B, int rank,
                       int in, int out, float scale, float *y, int ldy) {
    __shared__ float t[256];
    const int row = row0 + blockIdx.x;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    const T *xr = x + (size_t)row * ldx;
    for (int k = warp; k < rank; k += warps) {
        float acc = 0;
        for (int i = lane; i < in; i += 32) acc += A[(size_t)k * in + i] * load(xr + i);
        acc = warp_sum(acc);
        if (lane == 0) t[k] = acc * scale;
    }
    __syncthreads();
    float *yr = y + (size_t)row * ldy;
    for (int o = threadIdx.x; o < out; o += blockDim.x) {
        float acc = 0;
        for (int k = 0; k < rank; k++) acc += B[(size_t)o * rank + k] * t[k];
        yr[o] += acc;
    }
}

/* ---------------- MLP and overlay ---------------- */

template <typename T> __global__ void k_silu_mul(const float *gu, int rows, int inter, T *out) {
    size_t n = (size_t)rows * inter;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n;
         idx += (size_t)gridDim.x * blockDim.x) {
        size_t r = idx / inter, i = idx % inter;
        float g = gu[r * 2 * inter + i], u = gu[r * 2 * inter + inter + i];
        store(&out[idx], g / (1.0f + expf(-g)) * u);
    }
}

__global__ void k_add_bias(float *y, int rows, int width, const float *bias) {
    size_t n = (size_t)rows * width;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n;
         idx += (size_t)gridDim.x * blockDim.x)
        y[idx] += bias[idx % width];
}

__global__ void k_embed_gather(const int32_t *codes, int C, int E, const int *channel_offset,
                               const float *tables, float *z) {
    const int t = blockIdx.x;
    for (int idx = threadIdx.x; idx < C * E; idx += blockDim.x) {
        int c = idx / E, e = idx % E;
        int row = channel_offset[c] + codes[(size_t)t * C + c];
        z[(size_t)t * C * E + idx] = tables[(size_t)row * E + e];
    }
}

__global__ void k_bias_gelu(float *y, int rows, int width, const float *bias) {
    size_t n = (size_t)rows * width;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n;
         idx += (size_t)gridDim.x * blockDim.x) {
        float v = y[idx] + bias[idx % width];
        y[idx] = 0.5f * v * (1.0f + erff(v * (float)M_SQRT1_2));
    }
}

/* LayerNorm without affine (biased variance, eps 1e-5) after adding the
 * bias, times `scale`; one block per row. */
__global__ void k_bias_layernorm(float *y, int width, const float *bias, float scale) {
    __shared__ double scratch[32];
    float *row = y + (size_t)blockIdx.x * width;
    for (int i = threadIdx.x; i < width; i += blockDim.x) row[i] += bias[i];
    block_layernorm(row, width, scale, scratch);
}

__global__ void k_build_rows(const float *emb, const int *decode_row_frame, int n_decode_rows,
                             const float *prefill, int width, float *x) {
    const int r = blockIdx.x;
    const float *src = r < n_decode_rows ? emb + (size_t)decode_row_frame[r] * width
                                         : prefill + (size_t)(r - n_decode_rows) * width;
    for (int i = threadIdx.x; i < width; i += blockDim.x) x[(size_t)r * width + i] = src[i];
}

int grid_for(size_t n) {
    size_t blocks = (n + 255) / 256;
    return (int)(blocks > 65535 ? 65535 : blocks < 1 ? 1 : blocks);
}

/* ---------------- decode attention (one row per sequence) ---------------- */

/* Block (row, kv head, split) of 4 warps, each warp its own unit. Big
 * batches run one split (decode_splits_for), so a unit walks a quarter of
 * its row's context: DECODE_AHEAD positions' keys and values load at once. */
#ifndef DECODE_AHEAD
#define DECODE_AHEAD 4
#endif
template <typename KT, int G, int DPL>
__global__ void __launch_bounds__(ATTN_WARPS * 32)
    k_decode_attention(attn_dims d, const float *qkv, const float *q_norm, const float *k_norm,
                       const float *rope_tab, float eps, int rotary, const int *row_seq,
                       const int *row_pos, const int *block_table, KT *kv, int units, float *part) {
    /* (8 query heads a warp: 2 at once, or the registers spill) */
    decode_attention_unit<KT, G, DPL, G >= 8 ? 2 : DECODE_AHEAD>(
        d, qkv, q_norm, k_norm, rope_tab, eps, rotary, row_seq, row_pos, block_table, kv, units,
        part, blockIdx.x, blockIdx.y, blockIdx.z * ATTN_WARPS + threadIdx.x / 32, threadIdx.x % 32);
}

/* Block (row, query head). */
template <typename OT>
__global__ void k_attn_merge(attn_dims d, const float *part, int units, const float *qkv, OT *out) {
    __shared__ float factor[4 * ATTN_MAX_SPLITS];
    __shared__ float inv_l;
    attn_merge_head<OT>(d, part, units, qkv, out, blockIdx.x, blockIdx.y, factor, &inv_l);
}

template <typename KT, int G>
void launch_decode_attention(const gp_cuda_attn_args *a, const attn_dims &d, const float *qkv,
                             const float *q_norm, const float *k_norm, const float *rope,
                             float *part, void *out, cudaStream_t s) {
    const int units = a->splits * ATTN_WARPS;
    dim3 grid(a->rows, d.NKV, a->splits);
    k_decode_attention<KT, G, 8><<<grid, ATTN_WARPS * 32, 0, s>>>(
        d, qkv, q_norm, k_norm, rope, a->m->d.rms_eps, a->m->d.rotary_dim, a->row_seq, a->row_pos,
        a->block_table, (KT *)a->kv->data, units, part);
    dim3 mgrid(a->rows, d.NH);
    k_attn_merge<KT><<<mgrid, d.D, 0, s>>>(d, part, units, qkv, (KT *)out);
}

template <typename KT>
void decode_attention_group(const gp_cuda_attn_args *a, const attn_dims &d, const float *qkv,
                            const float *q_norm, const float *k_norm, const float *rope,
                            float *part, void *out, cudaStream_t s) {
    switch (d.G) {
    case 1: launch_decode_attention<KT, 1>(a, d, qkv, q_norm, k_norm, rope, part, out, s); break;
    case 2: launch_decode_attention<KT, 2>(a, d, qkv, q_norm, k_norm, rope, part, out, s); break;
    case 4: launch_decode_attention<KT, 4>(a, d, qkv, q_norm, k_norm, rope, part, out, s); break;
    default: launch_decode_attention<KT, 8>(a, d, qkv, q_norm, k_norm, rope, part, out, s); break;
    }
}

template <typename KT, typename OT, int G, int DPL>
void launch_attention(const gp_cuda_attn_args *a, const attn_dims &d, const float *q,
                      const float *qkv, float *part, void *out, cudaStream_t s) {
    size_t shared = ((size_t)ATTN_WARPS * G * d.D + 2 * ATTN_WARPS * G) * sizeof(float);
    dim3 grid(a->rows, d.NKV, a->splits);
    k_attention<KT, OT, G, DPL><<<grid, ATTN_WARPS * 32, shared, s>>>(
        d, q, a->row_seq, a->row_pos, a->block_table, (const KT *)a->kv->data, a->splits, part,
        a->counters, qkv, (OT *)out);
}

template <typename KT, typename OT, int G>
void attention_dpl(const gp_cuda_attn_args *a, const attn_dims &d, const float *q, const float *qkv,
                   float *part, void *out, cudaStream_t s) {
    int need = (d.D + 31) / 32;
    if (need <= 1)
        launch_attention<KT, OT, G, 1>(a, d, q, qkv, part, out, s);
    else if (need <= 2)
        launch_attention<KT, OT, G, 2>(a, d, q, qkv, part, out, s);
    else if (need <= 4)
        launch_attention<KT, OT, G, 4>(a, d, q, qkv, part, out, s);
    else
        launch_attention<KT, OT, G, 8>(a, d, q, qkv, part, out, s);
}

template <typename KT>
void attention_group(const gp_cuda_attn_args *a, const attn_dims &d, const float *q,
                     const float *qkv, float *part, void *out, cudaStream_t s) {
    switch (d.G) {
    case 1: attention_dpl<KT, KT, 1>(a, d, q, qkv, part, out, s); break;
    case 2: attention_dpl<KT, KT, 2>(a, d, q, qkv, part, out, s); break;
    case 3: attention_dpl<KT, KT, 3>(a, d, q, qkv, part, out, s); break;
    case 4: attention_dpl<KT, KT, 4>(a, d, q, qkv, part, out, s); break;
    case 6: attention_dpl<KT, KT, 6>(a, d, q, qkv, part, out, s); break;
    default: attention_dpl<KT, KT, 8>(a, d, q, qkv, part, out, s); break;
    }
}

} // namespace

/* ---------------- launchers ---------------- */

void gp_cuda_convert(const void *src, gp_dev_dtype src_type, void *dst, bool dst_f32, size_t n,
                     cudaStream_t s) {
    k_convert<<<grid_for(n), 256, 0, s>>>(src, (int)src_type, dst, dst_f32, n);
}

void gp_cuda_add_scaled_f32_to_weight(void *w, bool w_f32, const float *delta, size_t n,
                                      cudaStream_t s) {
    k_add_delta<<<grid_for(n), 256, 0, s>>>(w, w_f32, delta, n);
}

void gp_cuda_rmsnorm(const float *x, int ldx, const int *row_index, int rows, int width,
                     const float *gain, float eps, void *y, bool y_f32, int ldy, cudaStream_t s) {
    if (rows <= 0) return;
    if (y_f32)
        k_rmsnorm<float><<<rows, 256, 0, s>>>(x, ldx, row_index, width, gain, eps, (float *)y, ldy);
    else
        k_rmsnorm<__nv_bfloat16>
            <<<rows, 256, 0, s>>>(x, ldx, row_index, width, gain, eps, (__nv_bfloat16 *)y, ldy);
}

void gp_cuda_rope_table(const int *row_pos, int rows, const float *inv_freq, int half, float *rope,
                        cudaStream_t s) {
    if (rows > 0 && half > 0)
        k_rope_table<<<rows, 128, 0, s>>>(row_pos, rows, inv_freq, half, rope);
}

void gp_cuda_qkv_post(const gp_cuda_attn_args *a, float *qkv, const float *qkv_bias,
                      const float *q_norm, const float *k_norm, const float *rope, float *q,
                      cudaStream_t s) {
    const gp_dev_model *m = a->m;
    attn_dims d = dims_of(a);
    if (qkv_bias)
        k_add_bias<<<grid_for((size_t)a->rows * d.qkv_rows), 256, 0, s>>>(qkv, a->rows, d.qkv_rows,
                                                                          qkv_bias);
    dim3 grid(a->rows, d.NH + d.NKV);
    size_t shared = (size_t)d.D * sizeof(float);
    if (m->wide)
        k_qkv_post<float><<<grid, 128, shared, s>>>(d, qkv, q_norm, k_norm, rope, m->d.rms_eps,
                                                    a->row_seq, a->row_pos, a->block_table, q,
                                                    (float *)a->kv->data);
    else
        k_qkv_post<__nv_bfloat16>
            <<<grid, 128, shared, s>>>(d, qkv, q_norm, k_norm, rope, m->d.rms_eps, a->row_seq,
                                       a->row_pos, a->block_table, q, (__nv_bfloat16 *)a->kv->data);
}

void gp_cuda_attention(const gp_cuda_attn_args *a, const float *q, const float *qkv, float *part,
                       void *out, cudaStream_t s) {
    attn_dims d = dims_of(a);
    /* The output (the o_proj input) has the weights' type, like the keys. */
    if (a->m->wide)
        attention_group<float>(a, d, q, qkv, part, out, s);
    else
        attention_group<__nv_bfloat16>(a, d, q, qkv, part, out, s);
}

void gp_cuda_silu_mul(const float *gu, int rows, int inter, void *out, bool out_f32,
                      cudaStream_t s) {
    size_t n = (size_t)rows * inter;
    if (out_f32)
        k_silu_mul<float><<<grid_for(n), 256, 0, s>>>(gu, rows, inter, (float *)out);
    else
        k_silu_mul<__nv_bfloat16>
            <<<grid_for(n), 256, 0, s>>>(gu, rows, inter, (__nv_bfloat16 *)out);
}

void gp_cuda_add_bias(float *y, int rows, int width, const float *bias, cudaStream_t s) {
    if (rows > 0) k_add_bias<<<grid_for((size_t)rows * width), 256, 0, s>>>(y, rows, width, bias);
}

void gp_cuda_embed_gather(const int32_t *codes, int frames, const gp_dev_model *m, float *z,
                          cudaStream_t s) {
    if (frames > 0)
        k_embed_gather<<<frames, 256, 0, s>>>(codes, m->d.channels, m->d.embed_dim,
                                              m->channel_offset, m->audio_tables, z);
}

void gp_cuda_bias_gelu(float *y, int rows, int width, const float *bias, cudaStream_t s) {
    if (rows > 0) k_bias_gelu<<<grid_for((size_t)rows * width), 256, 0, s>>>(y, rows, width, bias);
}

void gp_cuda_bias_layernorm(float *y, int rows, int width, const float *bias, float scale,
                            cudaStream_t s) {
    if (rows > 0) k_bias_layernorm<<<rows, 256, 0, s>>>(y, width, bias, scale);
}

void gp_cuda_build_rows(const float *emb, const int *decode_row_frame, int n_decode_rows,
                        const float *prefill, int rows, int width, float *x, cudaStream_t s) {
    if (rows > 0)
        k_build_rows<<<rows, 256, 0, s>>>(emb, decode_row_frame, n_decode_rows, prefill, width, x);
}

/* ---------------- skinny GEMV for decode steps ---------------- */

namespace {

template <typename WT> __device__ __forceinline__ float round_to(float v);
template <> __device__ __forceinline__ float round_to<float>(float v) { return v; }
template <> __device__ __forceinline__ float round_to<__nv_bfloat16>(float v) {
    return __bfloat162float(__float2bfloat16_rn(v));
}

/* 8 consecutive weights as floats (one 16-byte load for bf16, two for f32). */
__device__ __forceinline__ void load8(const __nv_bfloat16 *p, float *w) {
    uint4 raw = __ldg((const uint4 *)p);
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&raw;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float2 f = __bfloat1622float2(h[j]);
        w[2 * j] = f.x;
        w[2 * j + 1] = f.y;
    }
}
__device__ __forceinline__ void load8(const float *p, float *w) {
    float4 a = __ldg((const float4 *)p), b = __ldg((const float4 *)p + 1);
    w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
}

#define GEMV_WARPS 8
#define GEMV_ROWS_PER_WARP 2
/* rows a warp computes: 1 when each row fills 16 registers of 16 bytes (4 rows for short
 * rows measured the same as 2: 0.75 vs 0.72 ms a single-stream step, within run noise) */
#define GEMV_RPW(MAXC) ((MAXC) > 8 ? 1 : GEMV_ROWS_PER_WARP)

/* out[r][n] (+)= Σ_k in[r][k] · W[n][k] for r < rows (≤ R), where the
 * block first stages in[][] in shared memory, rounded to the weight type
 * exactly as the GEMM path rounds its inputs:
 *   GP_GEMV_NORM  in = RMSNorm(x[r]) · gain
 *   GP_GEMV_SILU  in = silu(gu[r][k]) · gu[r][K + k]
 *   GP_GEMV_PLAIN in = src[r][k] (already of the weight type). */
/* The weight chunks of RPW rows starting at n0, MAXC per lane. */
template <int RPW, int MAXC>
__device__ __forceinline__ void gemv_load(const __nv_bfloat16 *W, int N, int K, int n0, int lane,
                                          uint4 (&raw)[RPW][MAXC]) {
    const int chunks = K / 8;
#pragma unroll
    for (int j = 0; j < RPW; j++) {
        const int n = n0 + j;
#pragma unroll
        for (int c = 0; c < MAXC; c++) {
            const int ch = lane + c * 32;
            if (n < N && ch < chunks) raw[j][c] = __ldg((const uint4 *)(W + (size_t)n * K) + ch);
        }
    }
}
template <int RPW, int MAXC>
__device__ __forceinline__ void gemv_load(const float *, int, int, int, int, uint4 (&)[RPW][MAXC]) {
}

template <typename WT, int R, int MAXC, int MODE>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
    k_gemv(const WT *W, int N, int K, int rows, int mode_arg, const float *x, const float *gain,
           float eps, const void *src, float *out, int ldo, bool add) {
    extern __shared__ float in[]; /* [R][K] */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    constexpr int RPW = GEMV_RPW(MAXC);
    const int n0 = (blockIdx.x * GEMV_WARPS + warp) * (MAXC > 0 ? RPW : GEMV_ROWS_PER_WARP);
    const int chunks = K / 8;
    /* bf16: warps walk groups of RPW rows over the grid; each group's weight
     * loads go out one group ahead (the first before the input staging), so
     * the memory system is busy while the block stages and computes. */
    const int group_stride = gridDim.x * GEMV_WARPS * (MAXC > 0 ? RPW : 1);
    uint4 raw[MAXC > 0 ? RPW : 1][MAXC > 0 ? MAXC : 1];
    if constexpr (MAXC > 0) gemv_load<RPW, MAXC>(W, N, K, n0, lane, raw);
    __shared__ double scratch[32];
    /* Stage the inputs: every load of a row is issued before any is used
     * (K ≤ 8·4·blockDim: registers hold a row), one memory latency a row. */
    const int K4 = K / 4;
    /* float4s of one input row per thread: K/4/blockDim at most */
    constexpr int MAXV = MAXC > 0 ? (MAXC + 1) / 2 : 8;
    (void)mode_arg;
    for (int r = 0; r < R; r++) {
        float4 *dst = (float4 *)(in + (size_t)r * K);
        if (r >= rows) {
            for (int i = threadIdx.x; i < K4; i += blockDim.x) dst[i] = make_float4(0, 0, 0, 0);
            continue;
        }
        if constexpr (MODE == GP_GEMV_NORM) {
            const float4 *x4 = (const float4 *)(x + (size_t)r * K);
            float4 v[MAXV];
            double sum = 0;
#pragma unroll
            for (int j = 0; j < MAXV; j++) {
                const int i = threadIdx.x + j * blockDim.x;
                if (i < K4) {
                    v[j] = __ldg(x4 + i);
                    sum += (double)v[j].x * v[j].x + (double)v[j].y * v[j].y +
                           (double)v[j].z * v[j].z + (double)v[j].w * v[j].w;
                }
            }
            sum = block_sum(sum, scratch);
            const float inv = 1.0f / sqrtf((float)(sum / K) + eps);
#pragma unroll
            for (int j = 0; j < MAXV; j++) {
                const int i = threadIdx.x + j * blockDim.x;
                if (i < K4) {
                    const float4 gv = __ldg((const float4 *)gain + i);
                    dst[i] = make_float4(
                        round_to<WT>((v[j].x * inv) * gv.x), round_to<WT>((v[j].y * inv) * gv.y),
                        round_to<WT>((v[j].z * inv) * gv.z), round_to<WT>((v[j].w * inv) * gv.w));
                }
            }
        } else if constexpr (MODE == GP_GEMV_SILU) {
            const float4 *g4 = (const float4 *)((const float *)src + (size_t)r * 2 * K);
            float4 gv[MAXV], uv[MAXV];
#pragma unroll
            for (int j = 0; j < MAXV; j++) {
                const int i = threadIdx.x + j * blockDim.x;
                if (i < K4) {
                    gv[j] = __ldg(g4 + i);
                    uv[j] = __ldg(g4 + K4 + i);
                }
            }
#pragma unroll
            for (int j = 0; j < MAXV; j++) {
                const int i = threadIdx.x + j * blockDim.x;
                if (i < K4)
                    dst[i] = make_float4(round_to<WT>(gv[j].x / (1.0f + expf(-gv[j].x)) * uv[j].x),
                                         round_to<WT>(gv[j].y / (1.0f + expf(-gv[j].y)) * uv[j].y),
                                         round_to<WT>(gv[j].z / (1.0f + expf(-gv[j].z)) * uv[j].z),
                                         round_to<WT>(gv[j].w / (1.0f + expf(-gv[j].w)) * uv[j].w));
            }
        } else {
            const WT *sr = (const WT *)src + (size_t)r * K;
            float w8[MAXV][8];
#pragma unroll
            for (int j = 0; j < MAXV; j++) {
                const int i = threadIdx.x + j * blockDim.x;
                if (i < K / 8) load8(sr + (size_t)i * 8, w8[j]);
            }
#pragma unroll
            for (int j = 0; j < MAXV; j++) {
                const int i = threadIdx.x + j * blockDim.x;
                if (i < K / 8) {
                    dst[2 * i] = make_float4(w8[j][0], w8[j][1], w8[j][2], w8[j][3]);
                    dst[2 * i + 1] = make_float4(w8[j][4], w8[j][5], w8[j][6], w8[j][7]);
                }
            }
        }
    }
    __syncthreads();
    if constexpr (MAXC > 0) {
        for (int base = n0; base < N; base += group_stride) {
            uint4 next[RPW][MAXC];
            if (base + group_stride < N)
                gemv_load<RPW, MAXC>(W, N, K, base + group_stride, lane, next);
#pragma unroll
            for (int j = 0; j < RPW; j++) {
                const int n = base + j;
                float acc[R];
#pragma unroll
                for (int r = 0; r < R; r++) acc[r] = 0;
#pragma unroll
                for (int c = 0; c < MAXC; c++) {
                    const int ch = lane + c * 32;
                    if (ch >= chunks) continue;
                    float w[8];
                    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&raw[j][c];
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        float2 f = __bfloat1622float2(h[q]);
                        w[2 * q] = f.x;
                        w[2 * q + 1] = f.y;
                    }
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        const float4 a = *(const float4 *)(in + (size_t)r * K + ch * 8);
                        const float4 b = *(const float4 *)(in + (size_t)r * K + ch * 8 + 4);
                        acc[r] += w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x +
                                  w[5] * b.y + w[6] * b.z + w[7] * b.w;
                    }
                }
#pragma unroll
                for (int r = 0; r < R; r++) acc[r] = warp_sum(acc[r]);
                if (lane == 0 && n < N)
                    for (int r = 0; r < rows; r++) {
                        float *o = out + (size_t)r * ldo + n;
                        *o = add ? *o + acc[r] : acc[r];
                    }
            }
#pragma unroll
            for (int j = 0; j < RPW; j++)
#pragma unroll
                for (int c = 0; c < MAXC; c++) raw[j][c] = next[j][c];
        }
    } else {
#pragma unroll
        for (int j = 0; j < GEMV_ROWS_PER_WARP; j++) {
            const int n = n0 + j;
            if (n >= N) break;
            const WT *wr = W + (size_t)n * K;
            float acc[R];
#pragma unroll
            for (int r = 0; r < R; r++) acc[r] = 0;
#pragma unroll 4
            for (int c = lane; c < chunks; c += 32) {
                float w[8];
                load8(wr + (size_t)c * 8, w);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const float4 a = *(const float4 *)(in + (size_t)r * K + c * 8);
                    const float4 b = *(const float4 *)(in + (size_t)r * K + c * 8 + 4);
                    acc[r] += w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x +
                              w[5] * b.y + w[6] * b.z + w[7] * b.w;
                }
            }
#pragma unroll
            for (int r = 0; r < R; r++) acc[r] = warp_sum(acc[r]);
            if (lane == 0)
                for (int r = 0; r < rows; r++) {
                    float *o = out + (size_t)r * ldo + n;
                    *o = add ? *o + acc[r] : acc[r];
                }
        }
    }
}

template <typename WT, int R, int MAXC, int MODE>
void launch_gemv_m(const gp_cuda_gemv *g, cudaStream_t s) {
    const size_t shared = (size_t)R * g->K * sizeof(float);
    if (shared > 48 * 1024)
        cudaFuncSetAttribute(k_gemv<WT, R, MAXC, MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)shared);
    const int per_block = GEMV_WARPS * (MAXC > 0 ? GEMV_RPW(MAXC) : GEMV_ROWS_PER_WARP);
    int blocks = (g->N + per_block - 1) / per_block;
    /* bf16: one resident block per multiprocessor walks the rows (register
     * use allows one), instead of waves of blocks each paying the latency. */
    if (MAXC > 0 && g->max_blocks > 0 && blocks > g->max_blocks) blocks = g->max_blocks;
    k_gemv<WT, R, MAXC, MODE><<<blocks, GEMV_WARPS * 32, shared, s>>>(
        (const WT *)g->W, g->N, g->K, g->rows, g->mode, g->x, g->gain, g->eps, g->src, g->out,
        g->ldo, g->add);
}

/* The input staging is a template argument: each kernel holds only its own
 * registers (occupancy decides how many loads are in flight). */
template <typename WT, int R, int MAXC> void launch_gemv_c(const gp_cuda_gemv *g, cudaStream_t s) {
    if (g->mode == GP_GEMV_NORM)
        launch_gemv_m<WT, R, MAXC, GP_GEMV_NORM>(g, s);
    else if (g->mode == GP_GEMV_SILU)
        launch_gemv_m<WT, R, MAXC, GP_GEMV_SILU>(g, s);
    else
        launch_gemv_m<WT, R, MAXC, GP_GEMV_PLAIN>(g, s);
}

/* bf16 weights: MAXC chunks of 8 per lane held in registers (K ≤ 4096);
 * f32 weights (the exactness path): the plain loop. */
template <typename WT, int R> void launch_gemv(const gp_cuda_gemv *g, cudaStream_t s) {
    if constexpr (std::is_same<WT, float>::value) {
        launch_gemv_c<WT, R, 0>(g, s);
    } else {
        const int per_lane = (g->K / 8 + 31) / 32;
        if (per_lane <= 4)
            launch_gemv_c<WT, R, 4>(g, s);
        else if (per_lane <= 8)
            launch_gemv_c<WT, R, 8>(g, s);
        else
            launch_gemv_c<WT, R, 16>(g, s);
    }
}

template <typename WT> void gemv_rows(const gp_cuda_gemv *g, cudaStream_t s) {
    if (g->rows <= 1)
        launch_gemv<WT, 1>(g, s);
    else if (g->rows <= 2)
        launch_gemv<WT, 2>(g, s);
    else if (g->rows <= 4)
        launch_gemv<WT, 4>(g, s);
    else
        launch_gemv<WT, 8>(g, s);
}

} // namespace

void gp_cuda_gemv_run(const gp_cuda_gemv *g, bool f32_weights, cudaStream_t s) {
    if (f32_weights)
        gemv_rows<float>(g, s);
    else
        gemv_rows<__nv_bfloat16>(g, s);
}

bool gp_cuda_decode_attention_fits(const gp_dev_model *m) {
    const int G = m->d.heads / m->d.kv_heads, half = m->d.rotary_dim / 2;
    return m->d.head_dim == 256 && (G == 1 || G == 2 || G == 4 || G == 8) && half % 8 == 0 &&
           m->d.rotary_dim <= m->d.head_dim;
}

void gp_cuda_decode_attention(const gp_cuda_attn_args *a, const float *qkv, const float *q_norm,
                              const float *k_norm, const float *rope, float *part, void *out,
                              cudaStream_t s) {
    attn_dims d = dims_of(a);
    if (a->m->wide)
        decode_attention_group<float>(a, d, qkv, q_norm, k_norm, rope, part, out, s);
    else
        decode_attention_group<__nv_bfloat16>(a, d, qkv, q_norm, k_norm, rope, part, out, s);
}

void gp_cuda_lora_apply(const void *x, bool x_f32, int ldx, int row0, int rows,
                        const gp_cuda_lora_module *mod, float *y, int ldy, cudaStream_t s) {
    if (rows <= 0) return;
    if (x_f32)
        k_lora<float><<<rows, 256, 0, s>>>((const float *)x, ldx, row0, mod->A, mod->B, mod->rank,
                                           mod->in, mod->out, mod->scale, y, ldy);
    else
        k_lora<__nv_bfloat16><<<rows, 256, 0, s>>>((const __nv_bfloat16 *)x, ldx, row0, mod->A,
                                                   mod->B, mod->rank, mod->in, mod->out, mod->scale,
                                                   y, ldy);
}
