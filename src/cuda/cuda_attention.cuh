/* cuda_attention.cuh — the device functions of the decode attention that
 * three kernels share: k_decode_attention / k_attn_merge (cuda_kernels.cu,
 * one launch each per layer), the single-row step kernel (cuda_decode1.cu,
 * one phase each of one persistent kernel) and its cluster form
 * (cuda_decode1c.cu: attention_span per query head). Keys and values live in the
 * paged cache (block tables), queries and keys are normed and rotated from
 * the fused q/gate/k/v projection, and the sigmoid gate is applied when the
 * partials are merged. Included by .cu files only; everything is internal
 * to the including file. */
#ifndef GP_CUDA_ATTENTION_CUH
#define GP_CUDA_ATTENTION_CUH

#include <math.h>

#include "cuda/cuda_internal.h"

namespace {

__device__ __forceinline__ void store(float *p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ float load(const float *p) { return *p; }
__device__ __forceinline__ float load(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
/* v as a store to p's type gives it back (without reading p). */
__device__ __forceinline__ float as_stored(const float *, float v) { return v; }
__device__ __forceinline__ float as_stored(const __nv_bfloat16 *, float v) {
    return __bfloat162float(__float2bfloat16_rn(v));
}

__device__ double block_sum(double v, double *scratch) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    double t = 0;
    for (int w = 0; w < warps; w++) t += scratch[w];
    return t;
}

/* row = LayerNorm(row) · scale over `width` values (no affine, biased
 * variance, eps 1e-5; sums in double, thread i taking i, i + blockDim, ...),
 * every thread of the block taking part; the audio embedding's last step. */
__device__ __forceinline__ void block_layernorm(float *row, int width, float scale,
                                                double *scratch) {
    double s = 0;
    for (int i = threadIdx.x; i < width; i += blockDim.x) s += row[i];
    const double mean = block_sum(s, scratch) / width;
    double var = 0;
    for (int i = threadIdx.x; i < width; i += blockDim.x)
        var += ((double)row[i] - mean) * ((double)row[i] - mean);
    var = block_sum(var, scratch) / width;
    const float inv = 1.0f / sqrtf((float)var + 1e-5f), mu = (float)mean;
    for (int i = threadIdx.x; i < width; i += blockDim.x) row[i] = ((row[i] - mu) * inv) * scale;
}

/* Entry i of a row's RoPE table (out: cos then sin, `half` each) for
 * position `pos`: cos and sin of (float)pos · inv_freq[i], computed in
 * double like the CPU reference. */
__device__ __forceinline__ void rope_entry(int pos, const float *inv_freq, int i, int half,
                                           float *out) {
    const float angle = (float)pos * inv_freq[i];
    out[i] = (float)cos((double)angle);
    out[half + i] = (float)sin((double)angle);
}

struct attn_dims {
    int D, NH, NKV, G, qkv_rows, half, bs, layer, bt_stride;
    int bs_shift; /* log2(bs): cache blocks are a power of two positions (kv_create) */
    size_t block_elems;
};

/* Eight consecutive floats (32-byte aligned) in two 16-byte accesses: through
 * L2 (values other kernels wrote: __ldcg), read-only, or a store. */
__device__ __forceinline__ void ld8_cg(const float *p, float (&v)[8]) {
    const float4 a = __ldcg((const float4 *)p), b = __ldcg((const float4 *)p + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void ld8_ro(const float *p, float (&v)[8]) {
    const float4 a = __ldg((const float4 *)p), b = __ldg((const float4 *)p + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void st8(float *p, const float (&v)[8]) {
    *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);
    *((float4 *)p + 1) = make_float4(v[4], v[5], v[6], v[7]);
}

/* Position p's cache block (an index into the block table) and its place in
 * it: a shift and a mask (a division by a run-time value is ~20 dependent
 * instructions, on the path of every cache read). */
__device__ __forceinline__ int kv_block_of(const attn_dims &d, int p) { return p >> d.bs_shift; }
__device__ __forceinline__ int kv_in_block(const attn_dims &d, int p) { return p & (d.bs - 1); }

__device__ __forceinline__ size_t kv_index(const attn_dims &d, int block, int is_value, int g,
                                           int pos_in_block) {
    return (size_t)block * d.block_elems +
           ((((size_t)d.layer * 2 + is_value) * d.NKV + g) * d.bs + pos_in_block) * d.D;
}

#define ATTN_WARPS 4

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <typename KT, int DPL>
__device__ __forceinline__ void load_vec(const KT *p, int lane, int D, float *out) {
#pragma unroll
    for (int j = 0; j < DPL; j++) {
        int i = lane * DPL + j;
        out[j] = i < D ? load(p + i) : 0.0f;
    }
}

template <>
__device__ __forceinline__ void load_vec<__nv_bfloat16, 8>(const __nv_bfloat16 *p, int lane, int D,
                                                           float *out) {
    if (D == 256) {
        uint4 raw = *(const uint4 *)(p + lane * 8);
        const __nv_bfloat162 *h = (const __nv_bfloat162 *)&raw;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float2 f = __bfloat1622float2(h[j]);
            out[2 * j] = f.x;
            out[2 * j + 1] = f.y;
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        int i = lane * 8 + j;
        out[j] = i < D ? load(p + i) : 0.0f;
    }
}

/* One position of the online softmax for the G query heads of a warp:
 * scores from the lane's key dims (reduced over the warp), then the running
 * max, sum and weighted values. */
template <int G, int DPL>
__device__ __forceinline__ void attend_position(const float (&qv)[G][DPL], const float *kk,
                                                const float *vv, float scale, float (&m)[G],
                                                float (&l)[G], float (&acc)[G][DPL]) {
#pragma unroll
    for (int gg = 0; gg < G; gg++) {
        float dot = 0;
#pragma unroll
        for (int j = 0; j < DPL; j++) dot += qv[gg][j] * kk[j];
        const float sc = warp_sum(dot) * scale;
        const float mn = fmaxf(m[gg], sc);
        const float c = expf(m[gg] - mn), e = expf(sc - mn);
        l[gg] = l[gg] * c + e;
        m[gg] = mn;
#pragma unroll
        for (int j = 0; j < DPL; j++) acc[gg][j] = acc[gg][j] * c + e * vv[j];
    }
}

/* Keys and values of one position for one lane (DPL dims of D: d.D, or a
 * constant where the caller knows it, so the loads need no bounds). */
template <typename KT, int DPL>
__device__ __forceinline__ void load_kv(const attn_dims &d, int D, const KT *kv, const int *bt,
                                        int p, int g, int lane, float *k, float *v) {
    const int block = bt[kv_block_of(d, p)]; /* global or shared (the single-row kernel) */
    const int in = kv_in_block(d, p);
    load_vec<KT, DPL>(kv + kv_index(d, block, 0, g, in), lane, D, k);
    load_vec<KT, DPL>(kv + kv_index(d, block, 1, g, in), lane, D, v);
}

/* RMSNorm (double sum over the warp) and rotate-half RoPE of one head held
 * by a warp, DPL consecutive dims per lane (D = 32·DPL); the partner of
 * dim i < half is dim i + half, in lane ± half / DPL at the same j. */
template <int DPL>
__device__ __forceinline__ void warp_norm_rope(float *z, const float *gain, const float *cs,
                                               const float *sn, int half, int rotary, float eps,
                                               int lane) {
    double ss = 0;
#pragma unroll
    for (int j = 0; j < DPL; j++) ss += (double)z[j] * z[j];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float inv = 1.0f / sqrtf((float)(ss / (32 * DPL)) + eps);
#pragma unroll
    for (int j = 0; j < DPL; j++) z[j] = (z[j] * inv) * gain[j];
    const int shift = half / DPL;
#pragma unroll
    for (int j = 0; j < DPL; j++) {
        const int i = lane * DPL + j;
        const float up = __shfl_down_sync(0xffffffffu, z[j], shift);
        const float dn = __shfl_up_sync(0xffffffffu, z[j], shift);
        if (i < half)
            z[j] = z[j] * cs[j] - up * sn[j];
        else if (i < rotary)
            z[j] = z[j] * cs[j] + dn * sn[j];
    }
}

/* This lane's RoPE factors (cos, sin of the pair its dims belong to) and
 * norm gains, loaded once and shared by every head the warp rotates. */
template <int DPL>
__device__ __forceinline__ void lane_rope(const float *rope, int half, int rotary, int lane,
                                          float *cs, float *sn) {
#pragma unroll
    for (int j = 0; j < DPL; j++) {
        const int i = lane * DPL + j;
        const int p = i < half ? i : i - half;
        const bool rotated = i < rotary;
        cs[j] = rotated ? rope[p] : 1.0f;
        sn[j] = rotated ? rope[half + p] : 0.0f;
    }
}

#define ATTN_MAX_SPLITS 32

/* One warp's share [begin, end) of positions 0..pos of the attention of
 * query heads q0 .. q0 + G - 1 (kv head g) of one projection row: the
 * queries and the new position's key and value are normed and rotated from
 * the projection output (no qkv_post kernel), the unit holding the newest
 * position uses that key and value as the cache holds them and, with
 * `write_new`, stores them in the cache. Returns the online softmax's max,
 * sum and weighted values per head. Activations come through L2 (__ldcg): in
 * the persistent kernels other blocks wrote them earlier in the same launch.
 * FULL_D: the head has exactly 32·DPL dims, so the loads need no bounds
 * (and no code for them: the cluster kernel must stay inside the
 * instruction cache). */
template <typename KT, int G, int DPL, bool FULL_D = false, int AHEAD = 1>
__device__ __forceinline__ void
attention_span(const attn_dims &d, const float *row, const float *q_norm, const float *k_norm,
               const float *rope, float eps, int rotary, int pos, const int *bt, KT *kv, int q0,
               int g, int begin, int end, bool write_new, int lane, float (&m)[G], float (&l)[G],
               float (&acc)[G][DPL]) {
    const bool owns_new = begin <= pos && pos < end;
    const int last = owns_new ? end - 1 : end; /* cached positions [begin, last) */
    /* Every independent load first — the unit's first cached key and value,
     * the new key and value, the gains, the RoPE factors and the queries —
     * so the unit waits for one memory latency before it computes, not four. */
    const int Dk = FULL_D ? 32 * DPL : d.D;
    float kk[DPL], vv[DPL];
    int p = begin;
    if (p < last) load_kv<KT, DPL>(d, Dk, kv, bt, p, g, lane, kk, vv);
    /* FULL_D with 8 dims a lane: each lane's dims are 32-byte aligned rows
     * of the projections and norms, read 16 bytes at a time */
    constexpr bool VEC = FULL_D && DPL == 8;
    float knew[DPL], vnew[DPL], kgain[DPL];
    if (owns_new) {
        const float *ks = row + (size_t)2 * d.NH * d.D + (size_t)g * d.D + lane * DPL;
        const float *vs = ks + (size_t)d.NKV * d.D;
        if constexpr (VEC) {
            ld8_cg(ks, knew);
            ld8_cg(vs, vnew);
            ld8_ro(k_norm + lane * DPL, kgain);
        } else {
#pragma unroll
            for (int j = 0; j < DPL; j++) {
                knew[j] = __ldcg(ks + j);
                vnew[j] = __ldcg(vs + j);
                kgain[j] = k_norm[lane * DPL + j];
            }
        }
    }
    float qv[G][DPL];
    float cs[DPL], sn[DPL], qgain[DPL];
    lane_rope<DPL>(rope, d.half, rotary, lane, cs, sn);
    if constexpr (VEC) {
        ld8_ro(q_norm + lane * DPL, qgain);
    } else {
#pragma unroll
        for (int j = 0; j < DPL; j++) qgain[j] = q_norm[lane * DPL + j];
    }
#pragma unroll
    for (int gg = 0; gg < G; gg++) {
        const float *src = row + (size_t)(q0 + gg) * 2 * d.D + lane * DPL;
        if constexpr (VEC) {
            ld8_cg(src, qv[gg]);
        } else {
#pragma unroll
            for (int j = 0; j < DPL; j++) qv[gg][j] = __ldcg(src + j);
        }
    }
#pragma unroll
    for (int gg = 0; gg < G; gg++) {
        warp_norm_rope<DPL>(qv[gg], qgain, cs, sn, d.half, rotary, eps, lane);
        m[gg] = -INFINITY;
        l[gg] = 0;
#pragma unroll
        for (int j = 0; j < DPL; j++) acc[gg][j] = 0;
    }
    /* the newest position: key and value from this step's projections, into
     * the cache and used as the cache holds them (rounded to its type), as
     * later steps will */
    if (owns_new) {
        warp_norm_rope<DPL>(knew, kgain, cs, sn, d.half, rotary, eps, lane);
        const int block = bt[kv_block_of(d, pos)], in = kv_in_block(d, pos);
        KT *kd = kv + kv_index(d, block, 0, g, in) + lane * DPL;
        KT *vd = kv + kv_index(d, block, 1, g, in) + lane * DPL;
#pragma unroll
        for (int j = 0; j < DPL; j++) {
            if (write_new) {
                store(&kd[j], knew[j]);
                store(&vd[j], vnew[j]);
            }
            knew[j] = as_stored(kd, knew[j]);
            vnew[j] = as_stored(vd, vnew[j]);
        }
    }
    const float scale = 1.0f / sqrtf((float)d.D);
    if constexpr (AHEAD > 1) {
        /* AHEAD positions' keys and values in flight at once (the first
         * group's beside the queries' loads above): a unit that walks many
         * positions waits for one memory latency per group, not per position.
         * The same positions in the same order: the same sums. */
        float kb[AHEAD][DPL], vb[AHEAD][DPL];
#pragma unroll
        for (int j = 0; j < DPL; j++) {
            kb[0][j] = kk[j];
            vb[0][j] = vv[j];
        }
#pragma unroll
        for (int i = 1; i < AHEAD; i++)
            if (p + i < last) load_kv<KT, DPL>(d, Dk, kv, bt, p + i, g, lane, kb[i], vb[i]);
        for (int p0 = p; p0 < end; p0 += AHEAD) {
            if (p0 > p) {
#pragma unroll
                for (int i = 0; i < AHEAD; i++)
                    if (p0 + i < last)
                        load_kv<KT, DPL>(d, Dk, kv, bt, p0 + i, g, lane, kb[i], vb[i]);
            }
#pragma unroll
            for (int i = 0; i < AHEAD; i++) {
                const int q = p0 + i;
                if (q >= end) break;
                float ku[DPL], vu[DPL]; /* the newest position's from this step's projections */
#pragma unroll
                for (int j = 0; j < DPL; j++) {
                    ku[j] = q == pos ? knew[j] : kb[i][j];
                    vu[j] = q == pos ? vnew[j] : vb[i][j];
                }
                attend_position<G, DPL>(qv, ku, vu, scale, m, l, acc);
            }
        }
    } else { /* one position ahead: the next loads while the current is attended */
        for (; p < end; p++) {
            float kn[DPL], vn[DPL];
            if (p + 1 < last) load_kv<KT, DPL>(d, Dk, kv, bt, p + 1, g, lane, kn, vn);
            if (p == pos) {
#pragma unroll
                for (int j = 0; j < DPL; j++) {
                    kk[j] = knew[j];
                    vv[j] = vnew[j];
                }
            }
            attend_position<G, DPL>(qv, kk, vv, scale, m, l, acc);
#pragma unroll
            for (int j = 0; j < DPL; j++) {
                kk[j] = kn[j];
                vv[j] = vn[j];
            }
        }
    }
}

/* One unit (a warp) of the decode attention of row r and kv head g: the
 * unit's share of consecutive positions 0..pos for the group's query heads
 * (attention_span), written as its own partial (no merge here). Only for
 * steps where every sequence has one row. Used by k_decode_attention
 * (cuda_kernels.cu) and the single-row step kernel (cuda_decode1.cu). */
template <typename KT, int G, int DPL, int AHEAD = 1>
__device__ __forceinline__ void
decode_attention_unit(const attn_dims &d, const float *qkv, const float *q_norm,
                      const float *k_norm, const float *rope_tab, float eps, int rotary,
                      const int *row_seq, const int *row_pos, const int *block_table, KT *kv,
                      int units, float *part, int r, int g, int unit, int lane) {
    const int pos = row_pos[r], n = pos + 1, seq = row_seq[r];
    const int per = (n + units - 1) / units;
    const int begin = unit * per, end = min(n, begin + per);
    float acc[G][DPL], m[G], l[G];
    attention_span<KT, G, DPL, false, AHEAD>(d, qkv + (size_t)r * d.qkv_rows, q_norm, k_norm,
                                             rope_tab + (size_t)r * 2 * d.half, eps, rotary, pos,
                                             block_table + (size_t)seq * d.bt_stride, kv, g * G, g,
                                             begin, end, true, lane, m, l, acc);
    float *out = part + (((size_t)r * d.NKV + g) * units + unit) * (size_t)G * (d.D + 2);
#pragma unroll
    for (int gg = 0; gg < G; gg++) {
#pragma unroll
        for (int j = 0; j < DPL; j++) out[2 * G + (size_t)gg * d.D + lane * DPL + j] = acc[gg][j];
        if (lane == 0) {
            out[gg] = m[gg];
            out[G + gg] = l[gg];
        }
    }
}

/* The attention dimensions of a step (host side). */
inline attn_dims dims_of(const gp_cuda_attn_args *a) {
    const gp_dev_model_desc &md = a->m->d;
    attn_dims d;
    d.D = md.head_dim;
    d.NH = md.heads;
    d.NKV = md.kv_heads;
    d.G = md.heads / md.kv_heads;
    d.qkv_rows = a->m->qkv_rows;
    d.half = md.rotary_dim / 2;
    d.bs = a->kv->block_size;
    d.bs_shift = 0;
    while ((1 << d.bs_shift) < d.bs) d.bs_shift++;
    d.layer = a->layer;
    d.bt_stride = a->bt_stride;
    d.block_elems = a->kv->block_elems;
    return d;
}

/* Merge the units' partials of query head h of row r, normalise, gate and
 * write the o_proj input; the whole block works on the head (one thread per
 * dim or more), factor[4 * ATTN_MAX_SPLITS] and inv_l in shared memory. */
template <typename OT>
__device__ __forceinline__ void attn_merge_head(const attn_dims &d, const float *part, int units,
                                                const float *qkv, OT *out, int r, int h,
                                                float *factor, float *inv_l) {
    const int g = h / d.G, gg = h % d.G;
    const size_t stride = (size_t)d.G * (d.D + 2);
    const float *base = part + ((size_t)r * d.NKV + g) * units * stride;
    /* the first warp: every unit's max and sum loaded at once, then warp
     * reductions (units <= 128: 4 per lane) */
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        float mu[4], lu[4], M = -INFINITY;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int u = lane + 32 * k;
            mu[k] = u < units ? __ldcg(base + u * stride + gg) : -INFINITY;
            lu[k] = u < units ? __ldcg(base + u * stride + d.G + gg) : 0.0f;
            M = fmaxf(M, mu[k]);
        }
        for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        float L = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int u = lane + 32 * k;
            const float f = mu[k] == -INFINITY ? 0.0f : expf(mu[k] - M);
            L += lu[k] * f;
            if (u < units) factor[u] = f;
        }
        L = warp_sum(L);
        if (lane == 0) *inv_l = 1.0f / L;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < d.D; i += blockDim.x) {
        float A = 0;
#pragma unroll 8
        for (int u = 0; u < units; u++)
            A += __ldcg(base + u * stride + 2 * d.G + (size_t)gg * d.D + i) * factor[u];
        const float gate = __ldcg(qkv + (size_t)r * d.qkv_rows + (size_t)h * 2 * d.D + d.D + i);
        store(&out[((size_t)r * d.NH + h) * d.D + i], (A * *inv_l) * (1.0f / (1.0f + expf(-gate))));
    }
}

} // namespace

#endif
