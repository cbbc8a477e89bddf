/* cuda_decode1c.cu — a single stream's decode step as one persistent kernel
 * of thread-block clusters: four grid-wide barriers per layer instead of six.
 *
 * The phase-per-layer kernel (cuda_decode1.cu) spends about half of each
 * layer in its six grid barriers and in the three short phases between q/k/v
 * and gate/up (attention units, their merge, o): each waits for the slowest
 * of 132 blocks and for a round trip through L2. Hopper's clusters give a
 * group of blocks a hardware barrier and each other's shared memory, so here
 * one cluster (4 or 8 blocks) owns one query head from attention to o:
 *
 *   q/k/v (rows over all blocks) | attention of the cluster's head over the
 *   context, merged inside each block and then across the cluster through
 *   distributed shared memory, gated, and the o projection of that head's
 *   256 columns for the cluster's share of the rows (a partial per head) |
 *   x += the heads' partials (every block, in head order), gate/up (rows over
 *   all blocks) | down (+ residual)
 *
 * When there are more clusters than heads, the clusters of one head each
 * compute its attention (the redundant key/value reads hit L2) and split
 * the o rows between them; only the first cluster of each kv head's first
 * query head writes the new key and value into the cache. The q/k/v,
 * gate/up and down phases, the weight prefetch and the heads are the other
 * kernel's (cuda_decode1.cuh). Additions happen in a fixed order, so the
 * step is deterministic; it differs from the other kernels only by rounding
 * (the o projection adds per head, the attention merges per block first).
 *
 * A block's o columns (a head's 256 columns of its rows) come as 2-D tensor
 * copies through a tensor map per layer: one bulk copy per row, the
 * fallback, measured 0.03 ms slower per step on the H200 (the copy thread
 * issues ~128 of them, and the q/k/v phase waits).
 *
 * Chosen by gp_cuda_decode1_prepare when enough clusters of 4 or 8 blocks
 * can be resident at once (at least one per query head);
 * GEPARD_CUDA_DECODE1=phase keeps the phase-per-layer kernel,
 * GEPARD_CUDA_DECODE1_CLUSTER=4|8 forces a cluster size and
 * GEPARD_CUDA_DECODE1_TMAP=0 copies the o columns row by row.
 *
 * The step's audio frame is embedded by the kernel's first two phases
 * (embed_frame) where the step is one decode row; GEPARD_CUDA_DECODE1_EMBED=0
 * leaves that to the seven launches before the kernel. */
#include <stdlib.h>
#include <string.h>

#include <cooperative_groups.h>
#include <cuda.h> /* CUtensorMap (types only: the driver is reached through the runtime) */

#include "cuda/cuda_decode1.cuh"

namespace cg = cooperative_groups;

#define D1C_MAX_H 1024    /* the residual stream's copy in shared memory */
#define D1C_MAX_I 3584    /* the down projection's input in shared memory */
#define D1C_D 256         /* head_dim: one thread per dim in the merges */
#define D1C_MAX_HEADS 8   /* query heads: their o partials are added in registers */
#define D1C_MAX_SLICE 512 /* a cluster's slice of the MLP's intermediate vector (fused MLP) */
#define D1C_MAX_LAYERS 16 /* tensor maps of the o projections, in the kernel's parameters */
#define D1C_O_BOX_ROWS 64 /* rows of one tensor copy of a head's o columns */
/* When the weight copies start. A phase's own loads wait behind copies
 * already in flight, so each copy starts after the loads of the phase it is
 * issued in, where that still leaves it time to land. These are
 * compile-time choices (-D for A/B builds) so each call appears once in the
 * code: the kernel's loop must stay inside the SM's 128 KB instruction cache
 * (a 128 KB build of this kernel measured 15 % slower than a 113 KB one).
 * Measured on the H200, GPU ms per single-row step, alternating in one call:
 * the o columns after the norm, the next q/k/v rows after the silu, the
 * cached keys and values prefetched into L2 and gate/up after the attention
 * together 0.516-0.518 -> 0.480-0.481; then gate/up at the attention phase's
 * start 0.489-0.494, after the attention 0.480-0.486, inside the cluster
 * barrier after the block merge 0.469-0.476. */
#ifndef D1C_GATE_UP_AFTER   /* gate/up's rows: 0 at the attention phase's start, 1 after */
#define D1C_GATE_UP_AFTER 2 /* the attention, 2 inside the cluster barrier after the merge */
#endif
#ifndef D1C_O_AFTER_NORM /* the o columns after the q/k/v phase's norm, not before */
#define D1C_O_AFTER_NORM 1
#endif
#ifndef D1C_QKV_AFTER_SILU /* the next layer's q/k/v rows after the down phase's silu */
#define D1C_QKV_AFTER_SILU 1
#endif
#ifndef D1C_KV_PREFETCH /* the block's cached keys and values into L2 at the layer's start */
#define D1C_KV_PREFETCH 1
#endif
/* The cluster's merge of a head's attention: every block reads all the
 * blocks' partials (CS remote loads a value, thread i dim i) and merges the
 * whole vector itself, then a block barrier — not block `rank` merging its
 * 256/CS dims and storing them into every block, then a cluster barrier
 * (the same additions in the same order; one row's step 0.435-0.439 ->
 * 0.409-0.418 ms of GPU on the H200, docs/NOTES.md). */
static_assert(D1_THREADS == D1C_D, "the cluster's merge takes a dim per thread");

namespace {

struct d1c_args : d1_step_args {
    int NH, clusters;
    float *opart, *dpart; /* the heads' o partials [NH][H], the clusters' down partials */
    bool o_tmap; /* the o columns by 2-D tensor copies (o_map), else one bulk copy per row */
    CUtensorMap o_map[D1C_MAX_LAYERS];
    /* the audio frame's embedding as the kernel's first phases (embed_frame) */
    bool embed;
    int C, E, half; /* channels, embedding width, rotary_dim / 2 */
    float embed_scale;
    const int32_t *codes; /* the frame's C codes */
    const int *channel_offset;
    const float *tables, *proj0, *proj0_b, *proj2, *proj2_b, *inv_freq;
    float *emb_t, *emb, *rope_out; /* the MLP's hidden and output vectors, the RoPE row */
};

/* out[n] = Σ_k in[k] · W[n][k] + bias[n] (then GELU when `gelu`) for this
 * block's rows of W [N][K] (f32, K a multiple of 4, `in` in shared
 * memory): one warp per row. */
__device__ __forceinline__ void f32_rows(const float *W, const float *bias, int N, int K,
                                         const float *in, float *out, bool gelu) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int r0, r1;
    block_rows(N, r0, r1);
    auto finish = [&](int n, float acc) {
        float v = acc + bias[n];
        if (gelu) v = 0.5f * v * (1.0f + erff(v * (float)M_SQRT1_2));
        out[n] = v;
    };
    /* two rows per warp at a time (a block's 9th row otherwise costs a
     * second round of loads from memory), each summed as alone; with the
     * rows in L2 from the step before (prefetch_embed_l2) the embedding
     * measured 14.8 -> 13.5 us per step */
    for (int n = r0 + warp; n < r1; n += 2 * D1_WARPS) {
        const int n2 = n + D1_WARPS < r1 ? n + D1_WARPS : n;
        const float4 *w = (const float4 *)(W + (size_t)n * K),
                     *w2 = (const float4 *)(W + (size_t)n2 * K);
        float acc = 0, acc2 = 0;
#pragma unroll 8
        for (int k = lane; k < K / 4; k += 32) {
            const float4 wv = __ldg(w + k), wv2 = __ldg(w2 + k), iv = ((const float4 *)in)[k];
            acc += wv.x * iv.x + wv.y * iv.y + wv.z * iv.z + wv.w * iv.w;
            acc2 += wv2.x * iv.x + wv2.y * iv.y + wv2.z * iv.z + wv2.w * iv.w;
        }
        acc = warp_sum(acc);
        acc2 = warp_sum(acc2);
        if (lane == 0) {
            finish(n, acc);
            if (n2 != n) finish(n2, acc2);
        }
    }
}

/* The copy thread brings this block's rows of both embedding products into
 * L2 after the step's heads, for the next step's embedding (unless the
 * codec's work between the steps evicts them). */
__device__ __forceinline__ void prefetch_embed_l2(const d1c_args &p) {
    if (threadIdx.x != D1_COPY_THREAD) return;
    int r0, r1;
    block_rows(p.H, r0, r1);
    const int CE = p.C * p.E;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p.proj0 + (size_t)r0 * CE),
                 "r"((unsigned)((r1 - r0) * CE * 4))
                 : "memory");
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p.proj2 + (size_t)r0 * p.H),
                 "r"((unsigned)((r1 - r0) * p.H * 4))
                 : "memory");
}

/* The audio frame's embedding (MODEL.md: the codes' table rows side by
 * side, Linear + GELU, Linear, LayerNorm × scale) as two phases over all
 * blocks, each ending at a grid barrier, instead of seven launches before
 * the kernel: every block gathers the codes' rows, computes its rows of
 * the first product, then of the second, and after the second barrier the
 * LayerNorm of the whole vector itself, into xs (its residual stream for
 * layer 0's norm); each block writes its rows of x for the o phase. Block
 * 0 writes the row's RoPE table. The same operations as the kernels it
 * replaces (k_embed_gather, cuBLAS f32, k_bias_gelu, k_bias_layernorm,
 * k_rope_table); the products add in another order. */
__device__ __forceinline__ void embed_frame(const d1c_args &p, float *in, float *xs,
                                            double *scratch) {
    const int H = p.H, CE = p.C * p.E;
    int r0, r1;
    block_rows(H, r0, r1);
    if (threadIdx.x == D1_COPY_THREAD) /* the second product's rows into L2 meanwhile */
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p.proj2 + (size_t)r0 * H),
                     "r"((unsigned)((r1 - r0) * H * 4))
                     : "memory");
    for (int i = threadIdx.x; i < CE; i += blockDim.x) {
        const int c = i / p.E, e = i % p.E;
        in[i] = __ldg(p.tables + (size_t)(p.channel_offset[c] + p.codes[c]) * p.E + e);
    }
    if (blockIdx.x == 0)
        for (int i = threadIdx.x; i < p.half; i += blockDim.x)
            rope_entry(p.row_pos[0], p.inv_freq, i, p.half, p.rope_out);
    __syncthreads();
    f32_rows(p.proj0, p.proj0_b, H, CE, in, p.emb_t, true);
    grid_barrier(p.barrier);
    for (int i = threadIdx.x; i < H / 4; i += blockDim.x)
        ((float4 *)in)[i] = __ldcg((const float4 *)p.emb_t + i);
    __syncthreads();
    f32_rows(p.proj2, p.proj2_b, H, H, in, p.emb, false);
    grid_barrier(p.barrier);
    for (int i = threadIdx.x; i < H; i += blockDim.x) xs[i] = __ldcg(p.emb + i);
    block_layernorm(xs, H, p.embed_scale, scratch); /* k_bias_layernorm's sums */
    __syncthreads();
    for (int i = r0 + (int)threadIdx.x; i < r1; i += blockDim.x) p.x[i] = xs[i];
}

/* Cluster c's query head and this block's rows [r0, r1) of that head's o
 * partial: clusters c, c + NH, c + 2·NH, ... share head c % NH and split the
 * H rows between them, then between their blocks. */
__device__ __forceinline__ void cluster_o_rows(int c, int clusters, int NH, int H, int rank, int CS,
                                               int &h, int &r0, int &r1) {
    h = c % NH;
    const int part = c / NH, parts = (clusters - h + NH - 1) / NH;
    const int c0 = H * part / parts, c1 = H * (part + 1) / parts;
    r0 = c0 + (c1 - c0) * rank / CS;
    r1 = c0 + (c1 - c0) * (rank + 1) / CS;
}

/* The cluster barrier in two halves, so one thread can issue copies between. */
__device__ __forceinline__ void cluster_arrive() {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/* The copy thread asks for the cached keys and values of positions [p0, p1)
 * (kv head g, layer d.layer) to be brought into L2, one bulk prefetch per
 * run of positions inside one cache block, so the attention's loads later in
 * the layer find them there instead of in device memory. */
__device__ __forceinline__ void prefetch_kv_l2(const attn_dims &d, const __nv_bfloat16 *kv,
                                               const int *bt, int g, int p0, int p1) {
    if (threadIdx.x != D1_COPY_THREAD) return;
    for (int p = p0; p < p1;) {
        const int in_block = kv_in_block(d, p), n = min(p1 - p, d.bs - in_block);
        const int block = bt[kv_block_of(d, p)];
        const unsigned bytes = (unsigned)(n * d.D * 2);
#pragma unroll
        for (int is_value = 0; is_value < 2; is_value++)
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(
                             kv + kv_index(d, block, is_value, g, in_block)),
                         "r"(bytes)
                         : "memory");
        p += n;
    }
}

/* The copy warp starts copying columns [col0, col0 + cols) of rows [r0, r1)
 * of W [.][K] into the buffer, one bulk copy per row (cols·2 a multiple of
 * 16 bytes), all counted on the buffer's mbarrier. */
__device__ __forceinline__ void prefetch_cols(const d1_buf &b, const __nv_bfloat16 *W, int K,
                                              int col0, int cols, int r0, int r1) {
    if (threadIdx.x / 32 != D1_COPY_THREAD / 32) return;
    const int lane = threadIdx.x % 32;
    const unsigned row_bytes = (unsigned)cols * 2;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    if (lane == 0)
        asm volatile(
            "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(b.bar)),
            "r"(row_bytes * (unsigned)(r1 - r0))
            : "memory");
    __syncwarp();
    for (int n = r0 + lane; n < r1; n += 32)
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
            "%2, [%3];" ::"r"(smem_addr(b.data + (size_t)(n - r0) * cols)),
            "l"(W + (size_t)n * K + col0), "r"(row_bytes), "r"(smem_addr(b.bar))
            : "memory");
}

/* The copy thread starts copying columns [col0, col0 + D1C_D) of rows
 * [r0, r1) of the matrix behind `map` into the buffer as 2-D tensor copies
 * of D1C_O_BOX_ROWS rows each (the last may bring rows past r1, or zeros
 * past the matrix: the buffer has room), all counted on its mbarrier. */
__device__ __forceinline__ void prefetch_box_rows(const d1_buf &b, const CUtensorMap *map, int col0,
                                                  int r0, int r1) {
    if (threadIdx.x != D1_COPY_THREAD) return;
    const int boxes = (r1 - r0 + D1C_O_BOX_ROWS - 1) / D1C_O_BOX_ROWS;
    const unsigned box_bytes = D1C_O_BOX_ROWS * D1C_D * 2;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(b.bar)),
                 "r"(box_bytes * (unsigned)boxes)
                 : "memory");
    for (int k = 0; k < boxes; k++)
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                     "[%0], [%1, {%2, %3}], [%4];" ::"r"(
                         smem_addr(b.data + (size_t)k * D1C_O_BOX_ROWS * D1C_D)),
                     "l"(map), "r"(col0), "r"(r0 + k * D1C_O_BOX_ROWS), "r"(smem_addr(b.bar))
                     : "memory");
}

/* Cluster c's share of the MLP's intermediate vector when gate/up and
 * down run in one phase: [i0, i0 + n) in whole 8-element units, and this
 * block's part of it, [b0, b1). */
__device__ __forceinline__ void cluster_mlp_slice(int c, int clusters, int I, int rank, int CS,
                                                  int &i0, int &n, int &b0, int &b1) {
    const int units = I / 8;
    const int u0 = units * c / clusters, u1 = units * (c + 1) / clusters;
    i0 = 8 * u0;
    n = 8 * (u1 - u0);
    b0 = i0 + n * rank / CS;
    b1 = i0 + n * (rank + 1) / CS;
}

/* xs += Σ_c dpart[c] (the clusters' down partials, in cluster order): block
 * `rank` adds its share of the dims and hands them to every block of its
 * cluster. */
template <int CS>
__device__ __forceinline__ void add_down_partials(cg::cluster_group &cluster, float *xs,
                                                  const float *dpart, int clusters, int H,
                                                  int rank) {
    const int d0 = H * rank / CS, d1 = H * (rank + 1) / CS;
    for (int i = d0 + (int)threadIdx.x; i < d1; i += blockDim.x) {
        float s = 0;
        for (int c = 0; c < clusters; c++) s += __ldcg(dpart + (size_t)c * H + i);
        const float v = xs[i] + s;
#pragma unroll
        for (int b = 0; b < CS; b++) *cluster.map_shared_rank(&xs[i], b) = v;
    }
    cluster.sync();
}

/* FUSED_MLP: gate/up and down in one phase (the cluster owns a slice of the
 * intermediate vector and writes a partial of down's output; three grid
 * barriers per layer), the residual stream kept in every block's shared
 * memory. Otherwise gate/up and down are phases of their own, as in the
 * phase-per-layer kernel (four barriers). */
template <int CS, bool FUSED_MLP>
__global__ void __launch_bounds__(D1_THREADS, 1) k_decode1c(const __grid_constant__ d1c_args p) {
    extern __shared__ __align__(128) unsigned char d1_smem[];
    /* `in` holds the phase's input vector, and the warps' attention partials
     * ([warp][256]) in the attention phase */
    __shared__ __align__(16) float in[D1C_MAX_I > D1_WARPS * D1C_D ? D1C_MAX_I : D1_WARPS * D1C_D];
    __shared__ __align__(16) float xs[D1C_MAX_H];
    __shared__ __align__(16) float bacc[D1C_D], a_full[D1C_D];
    __shared__ __align__(16) float islice[FUSED_MLP ? D1C_MAX_SLICE : 1];
    __shared__ double scratch[32];
    __shared__ float wm[D1_WARPS], wl[D1_WARPS], bm, bl;
    __shared__ unsigned long long bars[2];
    __shared__ int s_bt[D1_MAX_BLOCK_TABLE];
    cg::cluster_group cluster = cg::this_cluster();
    const int H = p.H, I = p.I, D = D1C_D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int rank = (int)cluster.block_rank(), c = blockIdx.x / CS;
    attn_dims d = p.d;
    d1_buf buf_a, buf_b;
    init_weight_buffers(d1_smem, bars, p.buf_a_elems, buf_a, buf_b);
    const int pos = p.row_pos[0];
    const int *bt_src = p.block_table + (size_t)p.row_seq[0] * d.bt_stride;
    for (int i = threadIdx.x; i < d.bt_stride; i += blockDim.x) s_bt[i] = bt_src[i];
    if constexpr (FUSED_MLP)
        for (int i = threadIdx.x; i < H; i += blockDim.x) xs[i] = __ldcg(p.x + i);
    int h, o0, o1;
    cluster_o_rows(c, p.clusters, p.NH, H, rank, CS, h, o0, o1);
    const int g = h / d.G;
    const bool write_new = c < p.NH && h % d.G == 0;
    /* this warp's positions of 0..pos: the cluster's 8·CS units in order */
    const int units = CS * D1_WARPS, unit = rank * D1_WARPS + warp;
    const int per = (pos + 1 + units - 1) / units;
    const int begin = unit * per, end = min(pos + 1, begin + per);
    /* the block's cached positions (its warps' spans, without the new one) */
    const int block_p0 = min(pos, rank * D1_WARPS * per),
              block_p1 = min(pos, (rank + 1) * D1_WARPS * per);
    int i0 = 0, ni = 0, b0 = 0, b1 = 0; /* the fused MLP's slices */
    if constexpr (FUSED_MLP) cluster_mlp_slice(c, p.clusters, I, rank, CS, i0, ni, b0, b1);
    const int n0 = H * rank / CS, n1 = H * (rank + 1) / CS; /* its down rows */
    __syncthreads();
    prefetch_rows(buf_a, p.layers[0].qkv, p.qkv_rows, H);
    unsigned long long t0 = d1_now();
    if (p.embed) {
        embed_frame(p, in, xs, scratch);
        d1_mark(p.prof, D1_PROF_EMBED, t0);
    }
    for (int l = 0; l < p.n_layers; l++) {
        const d1_layer L = p.layers[l];
        const float *q_norm = L.norms + 2 * H, *k_norm = q_norm + D;
        d.layer = l;
        /* q/gate/k/v; the head's o columns start loading into B */
        auto load_o = [&] {
            if (p.o_tmap)
                prefetch_box_rows(buf_b, &p.o_map[l], h * D, o0, o1);
            else
                prefetch_cols(buf_b, L.o, p.NH * D, h * D, D, o0, o1);
        };
        if (!D1C_O_AFTER_NORM) load_o();
        if constexpr (FUSED_MLP) {
            if (l > 0) add_down_partials<CS>(cluster, xs, p.dpart, p.clusters, H, rank);
            stage_norm(in, xs, L.norms, H, p.eps, true, scratch, true);
        } else {
            const bool x_here = l == 0 && p.embed; /* the embedding left x in xs */
            stage_norm(in, x_here ? xs : p.x, L.norms, H, p.eps, true, scratch, x_here);
        }
        if (D1C_O_AFTER_NORM) load_o();
        if (D1C_KV_PREFETCH) prefetch_kv_l2(d, p.kv, s_bt, g, block_p0, block_p1);
        d1_wait(p.prof, 7, [&] { wait_rows(buf_a); });
        gemv_any(true, buf_a.data, p.qkv_rows, H, in, p.qkv, false);
        d1_wait(p.prof, D1_PROF_BARRIER + 0, [&] { grid_barrier(p.barrier); });
        d1_mark(p.prof, 0, t0);
        /* attention of head h, merged, gated, and its o partial; gate/up's
         * rows start loading into A */
        auto load_gate_up = [&] {
            if constexpr (FUSED_MLP) {
                if (threadIdx.x == D1_COPY_THREAD) {
                    bulk_load(buf_a.data, L.gu + (size_t)b0 * H, (unsigned)((b1 - b0) * H * 2),
                              buf_a.bar, false);
                    bulk_load(buf_a.data + (size_t)(b1 - b0) * H, L.gu + (size_t)(I + b0) * H,
                              (unsigned)((b1 - b0) * H * 2), buf_a.bar, true);
                }
            } else {
                prefetch_rows(buf_a, L.gu, 2 * I, H);
            }
        };
        if (D1C_GATE_UP_AFTER == 0) load_gate_up();
        /* the merging threads' gate values, loaded now so their latency
         * passes under the attention's (with the merge's remote loads all
         * first, below: 0.450-0.451 -> 0.447-0.448 ms GPU per step) */
        const float gate = __ldcg(p.qkv + (size_t)h * 2 * D + D + threadIdx.x);
        {
            float m[1], lsum[1], acc[1][8];
            attention_span<__nv_bfloat16, 1, 8, true>(d, p.qkv, q_norm, k_norm, p.rope, p.eps,
                                                      p.rotary, pos, s_bt, p.kv, h, g, begin, end,
                                                      write_new, lane, m, lsum, acc);
#pragma unroll
            for (int j = 0; j < 8; j++) in[warp * D + lane * 8 + j] = acc[0][j];
            if (lane == 0) {
                wm[warp] = m[0];
                wl[warp] = lsum[0];
            }
        }
        __syncthreads();
        d1_since(p.prof, D1_PROF_INSIDE + 0, t0);
        if (D1C_GATE_UP_AFTER == 1) load_gate_up();
        { /* the block's partial: thread i merges dim i over the warps */
            float M = -INFINITY;
            for (int w = 0; w < D1_WARPS; w++) M = fmaxf(M, wm[w]);
            float A = 0, Ls = 0;
            for (int w = 0; w < D1_WARPS; w++) {
                const float f = wm[w] == -INFINITY ? 0.0f : expf(wm[w] - M);
                A += f * in[w * D + threadIdx.x];
                Ls += f * wl[w];
            }
            bacc[threadIdx.x] = A;
            if (threadIdx.x == 0) {
                bm = M;
                bl = Ls;
            }
        }
        cluster_arrive();
        if (D1C_GATE_UP_AFTER == 2) load_gate_up();
        cluster_wait();
        d1_since(p.prof, D1_PROF_INSIDE + 1, t0);
        /* the cluster's merge: thread i merges and gates dim i from every
         * block's partial */
        {
            const int i = (int)threadIdx.x;
            /* every remote value first: one round trip, not one per block */
            float mb[CS], lb[CS], ab[CS], M = -INFINITY, A = 0, Ls = 0;
#pragma unroll
            for (int b = 0; b < CS; b++) {
                mb[b] = *cluster.map_shared_rank(&bm, b);
                lb[b] = *cluster.map_shared_rank(&bl, b);
                ab[b] = *cluster.map_shared_rank(&bacc[i], b);
            }
#pragma unroll
            for (int b = 0; b < CS; b++) M = fmaxf(M, mb[b]);
#pragma unroll
            for (int b = 0; b < CS; b++) {
                const float f = mb[b] == -INFINITY ? 0.0f : expf(mb[b] - M);
                Ls += f * lb[b];
                A += f * ab[b];
            }
            a_full[i] = bf16_round((A / Ls) * (1.0f / (1.0f + expf(-gate))));
        }
        /* the partials read here are next written in the next layer's
         * attention phase, three grid barriers later */
        __syncthreads();
        d1_since(p.prof, D1_PROF_INSIDE + 2, t0);
        d1_wait(p.prof, 8, [&] { wait_rows(buf_b); });
        gemv_span<1>(buf_b.data, o0, o1, D, a_full, p.opart + (size_t)h * H, false);
        d1_since(p.prof, D1_PROF_INSIDE + 3, t0);
        /* B is free: the down weights start loading (the fused MLP's columns
         * of the cluster's slice; or this block's rows) */
        __syncthreads();
        if constexpr (FUSED_MLP)
            prefetch_cols(buf_b, L.down, I, i0, ni, n0, n1);
        else
            prefetch_rows(buf_b, L.down, H, I);
        d1_wait(p.prof, D1_PROF_BARRIER + 1, [&] { grid_barrier(p.barrier); });
        d1_mark(p.prof, 1, t0);
        /* x += the heads' o partials (every block the whole vector, in head
         * order), then gate/up */
        if ((int)threadIdx.x < H / 4) { /* H <= 4 · D1_THREADS: one float4 per thread */
            const int i = threadIdx.x;
            float4 part[D1C_MAX_HEADS];
            const float4 xv = FUSED_MLP ? ((const float4 *)xs)[i] : __ldcg((const float4 *)p.x + i);
#pragma unroll
            for (int hh = 0; hh < D1C_MAX_HEADS; hh++)
                if (hh < p.NH) part[hh] = __ldcg((const float4 *)(p.opart + (size_t)hh * H) + i);
            float4 s = part[0];
#pragma unroll
            for (int hh = 1; hh < D1C_MAX_HEADS; hh++)
                if (hh < p.NH) {
                    s.x += part[hh].x;
                    s.y += part[hh].y;
                    s.z += part[hh].z;
                    s.w += part[hh].w;
                }
            ((float4 *)xs)[i] = make_float4(xv.x + s.x, xv.y + s.y, xv.z + s.z, xv.w + s.w);
        }
        __syncthreads();
        stage_norm(in, xs, L.norms + H, H, p.eps, true, scratch, true);
        d1_wait(p.prof, 9, [&] { wait_rows(buf_a); });
        if constexpr (FUSED_MLP) {
            /* gate and up rows of this block's part of the slice, silu·up
             * (rounded to bf16) to every block of the cluster, then the down
             * partial over the slice for this block's rows */
            const int nb = b1 - b0;
            float *gu_local = in + D1C_MAX_H; /* beyond the staged input */
            gemv_span<4>(buf_a.data, 0, 2 * nb, H, in, gu_local, false);
            __syncthreads();
            for (int j = threadIdx.x; j < nb; j += blockDim.x) {
                const float gt = gu_local[j], up = gu_local[nb + j];
                const float v = bf16_round(gt / (1.0f + expf(-gt)) * up);
#pragma unroll
                for (int b = 0; b < CS; b++) *cluster.map_shared_rank(&islice[b0 - i0 + j], b) = v;
            }
            cluster.sync();
            /* the next layer's q/k/v rows start loading into A */
            __syncthreads();
            if (l + 1 < p.n_layers) prefetch_rows(buf_a, p.layers[l + 1].qkv, p.qkv_rows, H);
            d1_wait(p.prof, 10, [&] { wait_rows(buf_b); });
            gemv_span<0>(buf_b.data, n0, n1, ni, islice, p.dpart + (size_t)c * H, false);
            d1_wait(p.prof, D1_PROF_BARRIER + 5, [&] { grid_barrier(p.barrier); });
            d1_mark(p.prof, 5, t0);
        } else {
            gemv_any(true, buf_a.data, 2 * I, H, in, p.gu, false);
            d1_wait(p.prof, D1_PROF_BARRIER + 4, [&] { grid_barrier(p.barrier); });
            d1_mark(p.prof, 4, t0);
            /* down + residual: x = xs + the rows' sums for this block's rows
             * (x in memory is written only here: other blocks read all of it
             * in the gate/up phase); the next layer's q/k/v slice starts
             * loading into A */
            if (l + 1 < p.n_layers && !D1C_QKV_AFTER_SILU)
                prefetch_rows(buf_a, p.layers[l + 1].qkv, p.qkv_rows, H);
            stage_silu(in, p.gu, I);
            if (l + 1 < p.n_layers && D1C_QKV_AFTER_SILU)
                prefetch_rows(buf_a, p.layers[l + 1].qkv, p.qkv_rows, H);
            d1_wait(p.prof, 10, [&] { wait_rows(buf_b); });
            gemv_any(true, buf_b.data, H, I, in, p.x, false, xs);
            d1_wait(p.prof, D1_PROF_BARRIER + 5, [&] { grid_barrier(p.barrier); });
            d1_mark(p.prof, 5, t0);
        }
    }
    if (p.prof && blockIdx.x == 0 && threadIdx.x == 0) p.prof[D1_PROF_STEPS]++;
    /* final norm (f32) and the heads: one warp per logit */
    if constexpr (FUSED_MLP) {
        add_down_partials<CS>(cluster, xs, p.dpart, p.clusters, H, rank);
        stage_norm(in, xs, p.final_norm, H, p.eps, false, scratch, true);
    } else {
        stage_norm(in, p.x, p.final_norm, H, p.eps, false, scratch);
    }
    heads_logits(in, H, p.heads, p.heads_b, p.total_logits, p.hidden, p.logits);
    if (p.embed) prefetch_embed_l2(p);
    d1_mark(p.prof, 6, t0);
}

/* Shared-memory elements of the two weight buffers for `clusters` clusters
 * of CS blocks: A holds q/k/v or gate/up rows, B a head's o columns or down
 * rows (or, with the fused MLP, down's columns of the cluster's slice). */
struct d1c_plan {
    size_t a_elems, b_elems;
};
d1c_plan plan_for(const gp_dev_model *m, int CS, int clusters, bool fused) {
    const gp_dev_model_desc &d = m->d;
    const size_t H = d.hidden, I = d.intermediate, blocks = (size_t)CS * clusters;
    auto most = [](size_t n, size_t k) { return (n + k - 1) / k + 1; };
    const size_t fewest_parts = (size_t)clusters / d.heads;       /* clusters per head, at least */
    const size_t slice = 8 * ((I / 8 + clusters - 1) / clusters); /* the fused MLP's, at most */
    const size_t qkv = most(m->qkv_rows, blocks) * H;
    const size_t gu = fused ? 2 * most(slice, CS) * H : most(2 * I, blocks) * H;
    const size_t o_rows = ((H + fewest_parts - 1) / fewest_parts + CS - 1) / CS; /* per block */
    const size_t o = (o_rows + D1C_O_BOX_ROWS - 1) / D1C_O_BOX_ROWS * D1C_O_BOX_ROWS * D1C_D;
    const size_t down = fused ? most(H, CS) * slice : most(H, blocks) * I;
    d1c_plan p;
    p.a_elems = qkv > gu ? qkv : gu;
    p.b_elems = o > down ? o : down;
    return p;
}

/* A launch of `clusters` clusters of CS blocks (attr: its one attribute). */
cudaLaunchConfig_t cluster_launch(int CS, int clusters, size_t dyn_bytes, cudaStream_t s,
                                  cudaLaunchAttribute *attr) {
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = (unsigned)CS;
    attr->val.clusterDim.y = 1;
    attr->val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(CS * clusters));
    cfg.blockDim = dim3(D1_THREADS);
    cfg.dynamicSmemBytes = dyn_bytes;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
}

/* Sets the kernel's shared-memory size and asks how many of its clusters
 * can be resident at once. */
template <int CS, bool F> cudaError_t configure(size_t dyn_bytes, int clusters, int *fit) {
    cudaError_t e = cudaFuncSetAttribute(
        k_decode1c<CS, F>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn_bytes);
    if (e != cudaSuccess) return e;
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = cluster_launch(CS, clusters, dyn_bytes, 0, &attr);
    return cudaOccupancyMaxActiveClusters(fit, k_decode1c<CS, F>, &cfg);
}

template <int CS, bool F> size_t static_smem() {
    cudaFuncAttributes a;
    return cudaFuncGetAttributes(&a, k_decode1c<CS, F>) == cudaSuccess ? a.sharedSizeBytes
                                                                       : (size_t)64 << 10;
}

/* The most clusters of CS blocks that can be resident at once with their
 * weight buffers, or 0; *dyn_bytes, *a_elems: that plan's. */
template <int CS, bool F>
int clusters_that_fit(const gp_dev_model *m, int optin, size_t *dyn_bytes, size_t *a_elems) {
    int clusters = m->multiprocessors / CS;
    const size_t fixed = static_smem<CS, F>();
    while (clusters >= m->d.heads) {
        const d1c_plan plan = plan_for(m, CS, clusters, F);
        const size_t bytes = (plan.a_elems + plan.b_elems) * sizeof(__nv_bfloat16);
        int fit = 0;
        if (bytes + fixed <= (size_t)optin &&
            configure<CS, F>(bytes, clusters, &fit) == cudaSuccess && fit >= clusters) {
            *dyn_bytes = bytes;
            *a_elems = plan.a_elems;
            return clusters;
        }
        cudaGetLastError(); /* a refused configuration is not an error of the step */
        clusters = fit >= m->d.heads && fit < clusters ? fit : clusters - 1;
    }
    return 0;
}

} // namespace

/* Tensor maps of every layer's o projection ([H][heads · head_dim], bf16),
 * boxes of D1C_O_BOX_ROWS rows × one head's columns, into a new host array
 * (runner-owned), or NULL where the driver has no tensor maps or
 * GEPARD_CUDA_DECODE1_TMAP=0 asks for one bulk copy per row. */
static void *o_tensor_maps(const gp_dev_model *m) {
    const char *env = getenv("GEPARD_CUDA_DECODE1_TMAP");
    if ((env && !strcmp(env, "0")) || m->d.layers > D1C_MAX_LAYERS) return NULL;
    void *fn = NULL;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess || !fn) {
        cudaGetLastError();
        return NULL;
    }
    typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                  const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                  const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                  CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
    const encode_fn encode = (encode_fn)fn;
    const gp_dev_model_desc &d = m->d;
    CUtensorMap *maps = (CUtensorMap *)calloc((size_t)d.layers, sizeof(CUtensorMap));
    if (!maps) return NULL;
    const cuuint64_t dims[2] = {(cuuint64_t)d.heads * d.head_dim, (cuuint64_t)d.hidden};
    const cuuint64_t strides[1] = {(cuuint64_t)d.heads * d.head_dim * 2};
    const cuuint32_t box[2] = {D1C_D, D1C_O_BOX_ROWS}, unit[2] = {1, 1};
    for (int l = 0; l < d.layers; l++)
        if (encode(&maps[l], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)m->layers[l].o, dims,
                   strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
            free(maps);
            return NULL;
        }
    return maps;
}

/* Whether the cluster kernel fits this model and device; sets r->d1c_size,
 * d1c_clusters, d1c_fused, d1_smem and d1_a_elems when it does.
 * GEPARD_CUDA_DECODE1_FUSED_MLP=1 runs gate/up and down as one phase (three
 * grid barriers per layer instead of four; measured slower on the H200:
 * each block's down columns arrive by one small bulk copy per row). */
bool gp_cuda_decode1c_plan(gp_dev_runner *r) {
    r->d1c_size = 0;
    const gp_dev_model *m = r->m;
    const gp_dev_model_desc &d = m->d;
    int cc_major = 0, optin = 0;
    if (cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, m->device) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, m->device) !=
            cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    if (cc_major < 9 || d.head_dim != D1C_D || d.hidden > D1C_MAX_H || d.hidden % 4 ||
        d.intermediate > D1C_MAX_I || d.heads > D1C_MAX_HEADS)
        return false;
    const char *force = getenv("GEPARD_CUDA_DECODE1_CLUSTER");
    const int want = force ? atoi(force) : 0;
    const char *mlp = getenv("GEPARD_CUDA_DECODE1_FUSED_MLP");
    const bool fused = mlp && !strcmp(mlp, "1");
    size_t bytes8 = 0, a8 = 0, bytes4 = 0, a4 = 0;
    int n8 = 0, n4 = 0;
    if (want == 0 || want == 8)
        n8 = fused ? clusters_that_fit<8, true>(m, optin, &bytes8, &a8)
                   : clusters_that_fit<8, false>(m, optin, &bytes8, &a8);
    if (want == 0 || want == 4)
        n4 = fused ? clusters_that_fit<4, true>(m, optin, &bytes4, &a4)
                   : clusters_that_fit<4, false>(m, optin, &bytes4, &a4);
    if (n8 == 0 && n4 == 0) return false;
    /* the size that keeps the most blocks busy (8 on a tie: fewer redundant attentions) */
    const bool eight = 8 * n8 >= 4 * n4;
    r->d1c_size = eight ? 8 : 4;
    r->d1c_clusters = eight ? n8 : n4;
    r->d1c_fused = fused;
    r->d1_smem = eight ? bytes8 : bytes4;
    r->d1_a_elems = eight ? a8 : a4;
    r->d1c_omaps = o_tensor_maps(m);
    /* the audio frame's embedding inside the kernel (embed_frame) instead
     * of seven launches before it: 0.471-0.473 -> 0.448 ms GPU per step on
     * the H200; GEPARD_CUDA_DECODE1_EMBED=0 keeps the launches */
    const char *embed = getenv("GEPARD_CUDA_DECODE1_EMBED");
    const int CE = d.channels * d.embed_dim;
    r->d1c_embed =
        !(embed && !strcmp(embed, "0")) && CE <= D1C_MAX_I && CE % 4 == 0 && d.rotary_dim % 2 == 0;
    return true;
}

bool gp_cuda_decode1c_launch(gp_dev_runner *r, const gp_cuda_attn_args *args, bool embed,
                             cudaStream_t s) {
    const gp_dev_model *m = r->m;
    const gp_dev_model_desc &md = m->d;
    d1c_args p{};
    fill_step_args(p, r, args);
    if (embed) {
        const gp_cuda_meta_layout L = gp_cuda_meta_layout_for(r);
        p.embed = true;
        p.C = md.channels;
        p.E = md.embed_dim;
        p.half = md.rotary_dim / 2;
        p.embed_scale = md.audio_embed_scale;
        p.codes = (const int32_t *)(r->meta + L.codes);
        p.channel_offset = m->channel_offset;
        p.tables = m->audio_tables;
        p.proj0 = m->proj0;
        p.proj0_b = m->proj0_b;
        p.proj2 = m->proj2;
        p.proj2_b = m->proj2_b;
        p.inv_freq = m->rope_inv_freq;
        p.emb_t = r->emb_t;
        p.emb = r->emb;
        p.rope_out = r->rope;
    }
    p.NH = md.heads;
    p.clusters = r->d1c_clusters;
    /* [NH][H] and [clusters][H]: far smaller than the attention partials
     * the buffer holds otherwise */
    p.opart = r->part;
    p.dpart = r->part + (size_t)md.heads * md.hidden;
    if (r->d1c_omaps) {
        p.o_tmap = true;
        memcpy(p.o_map, r->d1c_omaps, (size_t)md.layers * sizeof(CUtensorMap));
    }
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg =
        cluster_launch(r->d1c_size, r->d1c_clusters, r->d1_smem, s, &attr);
    cudaError_t e;
    if (r->d1c_size == 8)
        e = r->d1c_fused ? cudaLaunchKernelEx(&cfg, k_decode1c<8, true>, p)
                         : cudaLaunchKernelEx(&cfg, k_decode1c<8, false>, p);
    else
        e = r->d1c_fused ? cudaLaunchKernelEx(&cfg, k_decode1c<4, true>, p)
                         : cudaLaunchKernelEx(&cfg, k_decode1c<4, false>, p);
    return e == cudaSuccess;
}
