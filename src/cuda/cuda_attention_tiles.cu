/* cuda_attention_tiles.cu — the decode attention for big batches: one block
 * per (row, kv head) walks the context in tiles of 32 positions. For each
 * tile every warp scores the 32 positions (one per lane) over its quarter of
 * the dims, the partial scores meet in shared memory, each warp takes the
 * same softmax weights and weighs the values of its quarter of the positions
 * (8 dims per lane), and the warps' sums are added, normalised and gated in
 * the block at the end. A tile costs each lane one round of 16 loads (eight
 * of keys, eight of values).
 *
 * Why: k_decode_attention (cuda_kernels.cu) gives each warp a span of
 * positions walked one at a time — a warp reduction and two exponentials per
 * head per position, ~200 registers, a partial per warp merged by a second
 * kernel. That suits a few rows with long contexts (it splits the context over
 * many blocks); with hundreds of rows it runs one split, two blocks per
 * multiprocessor, and each warp's chain of dependent positions is the step's
 * largest cost (128 µs a layer at 1024 rows and ~32 positions, more than the
 * layer's five GEMMs together). Here the softmax is taken per tile (one warp
 * max per head per 32 positions) and no partials leave the block.
 *
 * The arithmetic is the same f32 arithmetic as the unit kernel's, in another
 * order (a score is four partial sums of 64 dims; the online softmax rescales
 * per tile): results agree to rounding, not bit for bit. Queries and the new
 * key are normed and rotated by the same device functions
 * (cuda_attention.cuh), and the new key and value go into the cache before
 * any warp reads position `pos` back from it.
 *
 * The kernel is bound by issuing instructions while its loads are in flight
 * (ncu at 1024 rows and ~200 positions: issued IPC 1.41, 34 % of the DRAM
 * bandwidth, 4 warps per scheduler), so a tile's bookkeeping is kept lean: a
 * position's cache row from a shift (cache blocks are a power of two
 * positions), a warp's eight value rows from one block table entry, the
 * partial scores moved 16 bytes at a time, and the shared layouts free of
 * bank conflicts on the prologue's and epilogue's stores.
 * Measured slower on the H200 (GPU ms per 1024-row step over 215 frames):
 * loading tile t + 1's keys and values under tile t's softmax in the same
 * registers (4.60 against 4.06-4.08 before the bookkeeping was trimmed), and
 * copying each tile into shared memory by cp.async with the next one in
 * flight (4.01 against 3.67: 3 blocks of 4 warps per SM; docs/NOTES.md), and
 * a tile's values requested after its scores are shared (96 registers, 5
 * blocks per SM: 3.30-3.31 against 3.23-3.24 ms at 1024 rows in `gepard
 * bench`, 2026-12-05). */
#include <math.h>

#include "cuda/cuda_attention.cuh"
#include "cuda/cuda_internal.h"

namespace {

#define TILE_WARPS 4
#define TILE_POS 32
#define TILE_D 256 /* gp_cuda_decode_attention_fits: head_dim 256 */

/* Eight consecutive cache values of one lane, loaded at once, read as f32. */
template <typename KT> struct eight;
template <> struct eight<__nv_bfloat16> {
    uint4 raw;
    __device__ __forceinline__ void load(const __nv_bfloat16 *p) { raw = *(const uint4 *)p; }
    __device__ __forceinline__ float at(int j) const {
        return __bfloat162float(((const __nv_bfloat16 *)&raw)[j]);
    }
};
template <> struct eight<float> {
    float4 a, b;
    __device__ __forceinline__ void load(const float *p) {
        a = *(const float4 *)p;
        b = *(const float4 *)(p + 4);
    }
    __device__ __forceinline__ float at(int j) const {
        const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        return v[j];
    }
};

/* G consecutive floats of shared memory (16-byte aligned where G allows). */
template <int G> __device__ __forceinline__ void load_group(const float *p, float (&v)[G]) {
    if constexpr (G % 4 == 0) {
#pragma unroll
        for (int i = 0; i < G; i += 4) {
            const float4 f = *(const float4 *)(p + i);
            v[i] = f.x;
            v[i + 1] = f.y;
            v[i + 2] = f.z;
            v[i + 3] = f.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < G; i++) v[i] = p[i];
    }
}

/* G consecutive floats into shared memory (16 bytes at a time where G allows). */
template <int G> __device__ __forceinline__ void store_group(float *p, const float (&v)[G]) {
    if constexpr (G % 4 == 0) {
#pragma unroll
        for (int i = 0; i < G; i += 4)
            *(float4 *)(p + i) = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
    } else {
#pragma unroll
        for (int i = 0; i < G; i++) p[i] = v[i];
    }
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Cache rows of one (layer, kv head): position p's key or value row is
 * kv + bt[p / bs] · block_elems + off + (p % bs) · D, off the row of
 * position 0 inside a block (bs a power of two: a shift and a mask). */
template <typename KT> struct cache_rows {
    const KT *kv;
    const int *bt;
    attn_dims d;
    size_t off;
    __device__ __forceinline__ const KT *row(int p) const {
        return kv + (size_t)bt[kv_block_of(d, p)] * d.block_elems + off +
               (size_t)kv_in_block(d, p) * d.D;
    }
};
template <typename KT>
__device__ __forceinline__ cache_rows<KT> cache_rows_of(const attn_dims &d, const KT *kv,
                                                        const int *bt, int is_value, int g) {
    return cache_rows<KT>{kv, bt, d, kv_index(d, 0, is_value, g, 0)};
}

/* The queries' shared layout: dim-major (a dim's G values side by side, one
 * 16-byte read gives four heads' values of a dim), with 4 floats of padding
 * after every 8 dims so that a warp storing its lanes' 8 consecutive dims
 * spreads over the banks (4-way, not 32-way). */
template <int G> __device__ __forceinline__ int q_at(int dim) { return dim * G + (dim >> 3) * 4; }

/* Shared memory (floats): queries [D][G] (dim-major: one 16-byte read gives
 * four heads' values of a dim), two buffers of the warps' partial scores
 * [TILE_WARPS][TILE_POS][G], each warp's weighted values [G][D] and the
 * softmax sums [G]. */
template <int G> constexpr size_t tile_shared_floats() {
    return (size_t)TILE_D * G + TILE_D / 2 + 2 * (size_t)TILE_WARPS * TILE_POS * G +
           (size_t)TILE_WARPS * G * TILE_D + G;
}

/* Blocks a multiprocessor should hold: four for bf16 caches and up to four
 * query heads a group (128 registers, 16 warps: the values' loads beside the
 * keys' need the registers; five blocks of 96 registers with the values
 * loaded after the softmax measured 1-4 % slower on the H200), else what the
 * registers allow. */
template <typename KT, int G> constexpr int tile_min_blocks() {
    return sizeof(KT) == 2 && G <= 4 ? 4 : 1;
}

/* The group's queries (normed, rotated) into shared memory, and the new
 * position's key (normed, rotated) and value into the cache: the tiles read
 * them back as the cache holds them, as later steps will. The caller
 * synchronises the block after. */
template <typename KT, int G>
__device__ __forceinline__ void tiles_prologue(const attn_dims &d, const float *row,
                                               const float *q_norm, const float *k_norm,
                                               const float *rope_row, float eps, int rotary,
                                               int pos, const int *bt, KT *kv, int g, float *qs) {
    constexpr int D = TILE_D, DPL = D / 32;
    static_assert(DPL == 8, "a lane's eight dims move as two 16-byte accesses");
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float cs[DPL], sn[DPL];
    lane_rope<DPL>(rope_row, d.half, rotary, lane, cs, sn);
    for (int h = warp; h < G; h += TILE_WARPS) {
        float qv[DPL], gain[DPL];
        ld8_cg(row + (size_t)(g * G + h) * 2 * D + lane * DPL, qv);
        ld8_ro(q_norm + lane * DPL, gain);
        warp_norm_rope<DPL>(qv, gain, cs, sn, d.half, rotary, eps, lane);
#pragma unroll
        for (int j = 0; j < DPL; j++) qs[q_at<G>(lane * DPL + j) + h] = qv[j];
    }
    if (warp == TILE_WARPS - 1) {
        float kn[DPL], vn[DPL], gain[DPL];
        const float *ks = row + (size_t)2 * d.NH * D + (size_t)g * D + lane * DPL;
        ld8_cg(ks, kn);
        ld8_cg(ks + (size_t)d.NKV * D, vn);
        ld8_ro(k_norm + lane * DPL, gain);
        warp_norm_rope<DPL>(kn, gain, cs, sn, d.half, rotary, eps, lane);
        const int block = bt[kv_block_of(d, pos)], in = kv_in_block(d, pos);
        KT *kd = kv + kv_index(d, block, 0, g, in) + lane * DPL;
        KT *vd = kv + kv_index(d, block, 1, g, in) + lane * DPL;
#pragma unroll
        for (int j = 0; j < DPL; j++) {
            store(&kd[j], kn[j]);
            store(&vd[j], vn[j]);
        }
    }
}

/* One tile's softmax: the warps' partial scores of this lane's position
 * (written to `part` before the barrier the caller passed) added in warp
 * order, the running max and sum updated (the same in every warp), the
 * weighted values rescaled; e: this lane's position's weights. */
template <int G, int DPL>
__device__ __forceinline__ void tiles_softmax(const float *part, int lane, bool valid, float scale,
                                              float (&m)[G], float (&lsum)[G], float (&acc)[G][DPL],
                                              float (&e)[G]) {
    float sum[G];
    load_group<G>(part + lane * G, sum);
#pragma unroll
    for (int w = 1; w < TILE_WARPS; w++) {
        float pw[G];
        load_group<G>(part + (w * TILE_POS + lane) * G, pw);
#pragma unroll
        for (int h = 0; h < G; h++) sum[h] += pw[h];
    }
#pragma unroll
    for (int h = 0; h < G; h++) {
        const float sc = valid ? sum[h] * scale : -INFINITY;
        const float mn = fmaxf(m[h], warp_max(sc)); /* finite: lane 0 is valid */
        const float c = expf(m[h] - mn);
        e[h] = valid ? expf(sc - mn) : 0.0f;
        lsum[h] = lsum[h] * c + e[h];
        m[h] = mn;
#pragma unroll
        for (int j = 0; j < DPL; j++) acc[h][j] *= c;
    }
}

/* This warp's quarter of the dims of the scores of a tile's positions (one
 * per lane): key_at(i) gives the lane's key dims warp · 64 + 8i .. + 7. */
template <typename KT, int G, typename KeyAt>
__device__ __forceinline__ void tiles_score(const float *qs, int warp, float (&s)[G],
                                            KeyAt key_at) {
    constexpr int DW = TILE_D / TILE_WARPS;
#pragma unroll
    for (int i = 0; i < DW / 8; i++) {
        const eight<KT> k8 = key_at(i);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            float q[G];
            load_group<G>(qs + q_at<G>(warp * DW + i * 8 + j), q);
            const float k = k8.at(j);
#pragma unroll
            for (int h = 0; h < G; h++) s[h] = fmaf(q[h], k, s[h]);
        }
    }
}

/* This warp's 8 positions of a tile (first, first + 1, ...) weighed into
 * acc, this lane's 8 dims: value_at(i) gives position first + i's. */
template <typename KT, int G, int DPL, typename ValueAt>
__device__ __forceinline__ void tiles_weigh(const float (&e)[G], int warp, int first, int n,
                                            float (&acc)[G][DPL], ValueAt value_at) {
    constexpr int PW = TILE_POS / TILE_WARPS;
#pragma unroll
    for (int i = 0; i < PW; i++) {
        float w8[G];
#pragma unroll
        for (int h = 0; h < G; h++) w8[h] = __shfl_sync(0xffffffffu, e[h], warp * PW + i);
        if (first + i >= n) continue; /* (uniform: after every lane's shuffle) */
        const eight<KT> v8 = value_at(i);
#pragma unroll
        for (int h = 0; h < G; h++)
#pragma unroll
            for (int j = 0; j < DPL; j++) acc[h][j] = fmaf(w8[h], v8.at(j), acc[h][j]);
    }
}

/* The warps' weighted values summed, normalised and gated, one thread per
 * (head, dim), into out (accs: TILE_WARPS · G · D floats of shared memory,
 * ls: G; the caller made sure no warp still reads what accs overlays). */
template <typename KT, int G, int DPL>
__device__ __forceinline__ void tiles_epilogue(const attn_dims &d, const float *row,
                                               const float (&lsum)[G], const float (&acc)[G][DPL],
                                               float *accs, float *ls, int r, int g, KT *out) {
    constexpr int D = TILE_D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float L[G];
#pragma unroll
    for (int h = 0; h < G; h++) {
        L[h] = warp_sum(lsum[h]);
        st8(accs + ((size_t)warp * G + h) * D + lane * DPL, acc[h]);
    }
    if (warp == 0 && lane == 0)
        for (int h = 0; h < G; h++) ls[h] = L[h];
    __syncthreads();
    /* every gate value requested before the first is used */
    constexpr int PER_THREAD = G * D / (TILE_WARPS * 32);
    float gate[PER_THREAD];
#pragma unroll
    for (int k = 0; k < PER_THREAD; k++) {
        const int idx = (int)threadIdx.x + k * TILE_WARPS * 32, h = idx / D, i = idx % D;
        gate[k] = __ldcg(row + (size_t)(g * G + h) * 2 * D + D + i);
    }
#pragma unroll
    for (int k = 0; k < PER_THREAD; k++) {
        const int idx = (int)threadIdx.x + k * TILE_WARPS * 32, h = idx / D, i = idx % D;
        float A = 0;
#pragma unroll
        for (int w = 0; w < TILE_WARPS; w++) A += accs[((size_t)w * G + h) * D + i];
        store(&out[((size_t)r * d.NH + g * G + h) * D + i],
              (A * (1.0f / ls[h])) * (1.0f / (1.0f + expf(-gate[k]))));
    }
}

template <typename KT, int G>
__global__ void __launch_bounds__(TILE_WARPS * 32, tile_min_blocks<KT, G>())
    k_decode_attention_tiles(attn_dims d, const float *qkv, const float *q_norm,
                             const float *k_norm, const float *rope_tab, float eps, int rotary,
                             const int *row_seq, const int *row_pos, const int *block_table, KT *kv,
                             KT *out) {
    constexpr int D = TILE_D, DPL = D / 32;
    extern __shared__ float4 shared4[];
    float *qs = (float *)shared4;
    float *ps = qs + D * G + D / 2; /* the queries with their padding (q_at) */
    float *accs = ps + 2 * TILE_WARPS * TILE_POS * G;
    float *ls = accs + TILE_WARPS * G * D;
    const int r = blockIdx.x, g = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int pos = row_pos[r], n = pos + 1;
    const int *bt = block_table + (size_t)row_seq[r] * d.bt_stride;
    const float *row = qkv + (size_t)r * d.qkv_rows;
    tiles_prologue<KT, G>(d, row, q_norm, k_norm, rope_tab + (size_t)r * 2 * d.half, eps, rotary,
                          pos, bt, kv, g, qs);
    __syncthreads(); /* queries in shared memory, the new key and value in the cache */

    const float scale = 1.0f / sqrtf((float)D);
    /* Every warp sees the same scores (summed in the same order), so the
     * running max and sum are the same in every warp: only the weighted
     * values are split (each warp a quarter of each tile's positions). */
    float m[G], lsum[G], acc[G][DPL];
#pragma unroll
    for (int h = 0; h < G; h++) {
        m[h] = -INFINITY;
        lsum[h] = 0;
#pragma unroll
        for (int j = 0; j < DPL; j++) acc[h][j] = 0;
    }
    constexpr int DW = D / TILE_WARPS, PW = TILE_POS / TILE_WARPS; /* 64 dims, 8 positions */
    const int tiles = (n + TILE_POS - 1) / TILE_POS;
    const cache_rows<KT> keys = cache_rows_of(d, (const KT *)kv, bt, 0, g),
                         values = cache_rows_of(d, (const KT *)kv, bt, 1, g);
    /* a warp's PW positions of a tile lie in one cache block (its first is a
     * multiple of PW): one block table entry for the eight value rows */
    const bool one_block = d.bs % PW == 0;
    for (int t = 0; t < tiles; t++) {
        const int p = t * TILE_POS + lane;
        const bool valid = p < n;
        /* this warp's quarter of the dims of the scores of the tile's 32
         * positions (one per lane): eight loads per lane */
        float s[G];
#pragma unroll
        for (int h = 0; h < G; h++) s[h] = 0;
        /* the values this warp weighs (its 8 positions of the tile, 8 dims a
         * lane) are requested with the keys: one memory latency a tile */
        const int first = t * TILE_POS + warp * PW;
        eight<KT> v8[PW];
        eight<KT> k8[DW / 8];
        if (valid) {
            const KT *krow = keys.row(p) + warp * DW;
#pragma unroll
            for (int i = 0; i < DW / 8; i++) k8[i].load(krow + i * 8);
        }
        if (one_block) {
            if (first < n) {
                const KT *vrow = values.row(first) + lane * DPL;
#pragma unroll
                for (int i = 0; i < PW; i++)
                    if (first + i < n) v8[i].load(vrow + (size_t)i * D);
            }
        } else {
#pragma unroll
            for (int i = 0; i < PW; i++)
                if (first + i < n) v8[i].load(values.row(first + i) + lane * DPL);
        }
        if (valid) tiles_score<KT, G>(qs, warp, s, [&](int i) { return k8[i]; });
        float *part =
            ps + (t & 1) * TILE_WARPS * TILE_POS * G; /* two buffers: one barrier a tile */
        store_group<G>(part + (warp * TILE_POS + lane) * G, s);
        __syncthreads();
        float e[G];
        tiles_softmax<G, DPL>(part, lane, valid, scale, m, lsum, acc, e);
        /* this warp's 8 positions of the tile: their values, this lane's 8 dims
         * (loaded with the keys above) */
        tiles_weigh<KT, G, DPL>(e, warp, first, n, acc, [&](int i) { return v8[i]; });
    }
    tiles_epilogue<KT, G, DPL>(d, row, lsum, acc, accs, ls, r, g, out);
}

template <typename KT, int G>
void launch_tiles(const gp_cuda_attn_args *a, const attn_dims &d, const float *qkv,
                  const float *q_norm, const float *k_norm, const float *rope, void *out,
                  cudaStream_t s) {
    dim3 grid(a->rows, d.NKV);
    const size_t bytes = tile_shared_floats<G>() * sizeof(float);
    if (bytes > 48 * 1024) /* eight heads a group: opt in above 48 KB (on this device) */
        cudaFuncSetAttribute(k_decode_attention_tiles<KT, G>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    k_decode_attention_tiles<KT, G><<<grid, TILE_WARPS * 32, bytes, s>>>(
        d, qkv, q_norm, k_norm, rope, a->m->d.rms_eps, a->m->d.rotary_dim, a->row_seq, a->row_pos,
        a->block_table, (KT *)a->kv->data, (KT *)out);
}

template <typename KT>
void tiles_group(const gp_cuda_attn_args *a, const attn_dims &d, const float *qkv,
                 const float *q_norm, const float *k_norm, const float *rope, void *out,
                 cudaStream_t s) {
    switch (d.G) {
    case 1: launch_tiles<KT, 1>(a, d, qkv, q_norm, k_norm, rope, out, s); break;
    case 2: launch_tiles<KT, 2>(a, d, qkv, q_norm, k_norm, rope, out, s); break;
    case 4: launch_tiles<KT, 4>(a, d, qkv, q_norm, k_norm, rope, out, s); break;
    default: launch_tiles<KT, 8>(a, d, qkv, q_norm, k_norm, rope, out, s); break;
    }
}

} // namespace

void gp_cuda_decode_attention_tiles(const gp_cuda_attn_args *a, const float *qkv,
                                    const float *q_norm, const float *k_norm, const float *rope,
                                    void *out, cudaStream_t s) {
    attn_dims d = dims_of(a);
    if (a->m->wide)
        tiles_group<float>(a, d, qkv, q_norm, k_norm, rope, out, s);
    else
        tiles_group<__nv_bfloat16>(a, d, qkv, q_norm, k_norm, rope, out, s);
}
