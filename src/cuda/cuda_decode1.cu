/* cuda_decode1.cu — a single stream's decode step as one persistent kernel.
 *
 * Launched one kernel per operation, a one-row step is ~90 kernels of 5-13 µs
 * each although each moves at most 15 MB: every kernel pays a launch, a ramp
 * and a drain, and the weights of the next projection cannot start loading
 * before the previous kernel ends. Here one block per multiprocessor runs the
 * 14 layers and the heads as phases separated by grid-wide barriers, and the
 * weights — which do not depend on the activations — stream into shared
 * memory a phase or more ahead of their use (cp.async into two buffers), so
 * the memory system stays busy across the barriers.
 *
 * Per layer: q/gate/k/v (RMSNorm in front) | attention units | merge + gate |
 * o (+ residual) | gate/up (RMSNorm in front) | down (SwiGLU in front,
 * + residual); then the final norm and the heads. Each block owns a
 * contiguous range of every matrix's rows (so its slice of the weights is
 * one contiguous copy), stages the phase's input vector in shared memory the
 * way k_gemv does (same rounding to bf16, same reductions), and computes its
 * rows with the same per-lane order of additions as k_gemv: the layers give
 * the multi-kernel path's values. The attention phases run the same device
 * functions as k_decode_attention / k_attn_merge (cuda_attention.cuh) with
 * the same units. The heads (f32 weights) are a plain per-warp dot product,
 * not cuBLAS, so the logits agree with the multi-kernel path to rounding.
 *
 * Only for bf16 weights, one row (one stream, decode), head_dim 256, no
 * biases and no run-time LoRA; anything else takes the multi-kernel path.
 * GEPARD_CUDA_DECODE1=0 turns it off (for comparisons). Where Hopper's
 * thread-block clusters fit, the cluster form of this kernel
 * (cuda_decode1c.cu: four grid barriers per layer instead of six) runs
 * instead; GEPARD_CUDA_DECODE1=phase keeps this one. */
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cuda/cuda_decode1.cuh"

namespace {

struct d1_args : d1_step_args {
    int NHD, units;
    float *part;
    __nv_bfloat16 *a; /* the o projection's input */
    int pieces;       /* each o and gate/up copy in 1-3 pieces over the phases */
    bool regs;        /* K = 1024 projections keep their inputs in registers */
};

/* The attention output of query head h, dims c0 .. c0 + 31: the units'
 * partials (max, sum, weighted values) merged with exp(m_u - M) / L, then
 * the sigmoid gate; the block's warps split the units (each lane one dim)
 * and add their sums in shared memory, so a block waits for two or three
 * memory latencies, not one per eight units. */
__device__ void merge_chunk(const attn_dims &d, const float *part, int units, const float *qkv,
                            __nv_bfloat16 *out, int h, int c0, float *factor, float (*sums)[32],
                            float *red) {
    const int g = h / d.G, gg = h % d.G, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t stride = (size_t)d.G * (d.D + 2);
    const float *base = part + (size_t)g * units * stride;
    const int u = threadIdx.x;
    const float mu = u < units ? __ldcg(base + u * stride + gg) : -INFINITY;
    const float lu = u < units ? __ldcg(base + u * stride + d.G + gg) : 0.0f;
    float M = mu;
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    if (lane == 0) red[warp] = M;
    __syncthreads();
    M = red[0];
    for (int w = 1; w < D1_WARPS; w++) M = fmaxf(M, red[w]);
    const float f = mu == -INFINITY ? 0.0f : expf(mu - M);
    if (u < units) factor[u] = f;
    const float L = warp_sum(lu * f);
    __syncthreads();
    if (lane == 0) red[warp] = L;
    __syncthreads();
    float total = 0;
    for (int w = 0; w < D1_WARPS; w++) total += red[w];
    float acc = 0;
    for (int v = warp; v < units; v += D1_WARPS)
        acc += __ldcg(base + v * stride + 2 * d.G + (size_t)gg * d.D + c0 + lane) * factor[v];
    sums[warp][lane] = acc;
    __syncthreads();
    if (warp == 0) {
        float A = 0;
        for (int w = 0; w < D1_WARPS; w++) A += sums[w][lane];
        const int i = c0 + lane;
        const float gate = __ldcg(qkv + (size_t)h * 2 * d.D + d.D + i);
        out[(size_t)h * d.D + i] = __float2bfloat16_rn((A / total) * (1.0f / (1.0f + expf(-gate))));
    }
    __syncthreads();
}

template <int G> __global__ void __launch_bounds__(D1_THREADS, 1) k_decode1(const d1_args p) {
    extern __shared__ __align__(128) unsigned char d1_smem[];
    __shared__ __align__(16) float in[4096];
    __shared__ double scratch[32];
    __shared__ float factor[4 * ATTN_MAX_SPLITS], sums[D1_WARPS][32], red[D1_WARPS];
    __shared__ unsigned long long bars[2];
    __shared__ int s_pos, s_seq, s_bt[D1_MAX_BLOCK_TABLE];
    const int H = p.H, I = p.I, NHD = p.NHD;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    attn_dims d = p.d;
    d1_buf buf_a, buf_b;
    init_weight_buffers(d1_smem, bars, p.buf_a_elems, buf_a, buf_b);
    /* the row's position and block table, once for all layers */
    if (threadIdx.x == 0) {
        s_pos = p.row_pos[0];
        s_seq = 0;
    }
    const int *bt_src = p.block_table + (size_t)p.row_seq[0] * d.bt_stride;
    for (int i = threadIdx.x; i < d.bt_stride; i += blockDim.x) s_bt[i] = bt_src[i];
    __syncthreads();
    prefetch_rows(buf_a, p.layers[0].qkv, p.qkv_rows, H);
    unsigned long long t0 = d1_now();
    for (int l = 0; l < p.n_layers; l++) {
        const d1_layer L = p.layers[l];
        const float *q_norm = L.norms + 2 * H, *k_norm = q_norm + d.D;
        d.layer = l;
        /* q/gate/k/v; the o slice starts loading (its first of P pieces:
         * o's go out in the q/k/v, attention and merge phases, gate/up's in
         * the merge, o (P >= 2) and attention (P = 3) phases) */
        const int P = p.pieces;
        prefetch_rows(buf_b, L.o, H, NHD, 0, P);
        stage_norm(in, p.x, L.norms, H, p.eps, true, scratch);
        d1_wait(p.prof, 7, [&] { wait_rows(buf_a); });
        gemv_any(p.regs, buf_a.data, p.qkv_rows, H, in, p.qkv, false);
        d1_wait(p.prof, D1_PROF_BARRIER + 0, [&] { grid_barrier(p.barrier); });
        d1_mark(p.prof, 0, t0);
        /* attention units */
        if (P >= 2) prefetch_rows(buf_b, L.o, H, NHD, 1, P);
        if (P == 3) prefetch_rows(buf_a, L.gu, 2 * I, H, 0, 3);
        const int tasks = d.NKV * p.units;
        for (int t = warp * gridDim.x + blockIdx.x; t < tasks; t += gridDim.x * D1_WARPS)
            decode_attention_unit<__nv_bfloat16, G, 8>(
                d, p.qkv, q_norm, k_norm, p.rope, p.eps, p.rotary, &s_seq, &s_pos, s_bt, p.kv,
                p.units, p.part, 0, t / p.units, t % p.units, lane);
        d1_wait(p.prof, D1_PROF_BARRIER + 1, [&] { grid_barrier(p.barrier); });
        d1_mark(p.prof, 1, t0);
        /* merge + gate, 32 dims of one head per block; the gate/up slice
         * starts loading into A */
        if (P == 3) prefetch_rows(buf_b, L.o, H, NHD, 2, 3);
        prefetch_rows(buf_a, L.gu, 2 * I, H, P == 3 ? 1 : 0, P);
        for (int c = blockIdx.x; c < NHD / 32; c += gridDim.x)
            merge_chunk(d, p.part, p.units, p.qkv, p.a, c / (d.D / 32), (c % (d.D / 32)) * 32,
                        factor, sums, red);
        d1_wait(p.prof, D1_PROF_BARRIER + 2, [&] { grid_barrier(p.barrier); });
        d1_mark(p.prof, 2, t0);
        /* o + residual */
        if (P >= 2) prefetch_rows(buf_a, L.gu, 2 * I, H, P - 1, P);
        stage_plain(in, p.a, NHD);
        d1_wait(p.prof, 8, [&] { wait_rows(buf_b); });
        gemv_any(p.regs, buf_b.data, H, NHD, in, p.x, true);
        d1_wait(p.prof, D1_PROF_BARRIER + 3, [&] { grid_barrier(p.barrier); });
        d1_mark(p.prof, 3, t0);
        /* gate/up; the down slice starts loading into B */
        prefetch_rows(buf_b, L.down, H, I);
        stage_norm(in, p.x, L.norms + H, H, p.eps, true, scratch);
        d1_wait(p.prof, 9, [&] { wait_rows(buf_a); });
        gemv_any(p.regs, buf_a.data, 2 * I, H, in, p.gu, false);
        d1_wait(p.prof, D1_PROF_BARRIER + 4, [&] { grid_barrier(p.barrier); });
        d1_mark(p.prof, 4, t0);
        /* down + residual; the next layer's q/k/v slice starts loading into A */
        if (l + 1 < p.n_layers) prefetch_rows(buf_a, p.layers[l + 1].qkv, p.qkv_rows, H);
        stage_silu(in, p.gu, I);
        d1_wait(p.prof, 10, [&] { wait_rows(buf_b); });
        gemv_any(p.regs, buf_b.data, H, I, in, p.x, true);
        d1_wait(p.prof, D1_PROF_BARRIER + 5, [&] { grid_barrier(p.barrier); });
        d1_mark(p.prof, 5, t0);
    }
    if (p.prof && blockIdx.x == 0 && threadIdx.x == 0) p.prof[D1_PROF_STEPS]++;
    /* final norm (f32) and the heads: one warp per logit */
    stage_norm(in, p.x, p.final_norm, H, p.eps, false, scratch);
    heads_logits(in, H, p.heads, p.heads_b, p.total_logits, p.hidden, p.logits);
    d1_mark(p.prof, 6, t0);
}

/* Shared-memory bytes of the weight buffers for `blocks` blocks. */
struct d1_plan {
    size_t a_elems, b_elems;
};
d1_plan plan_for(const gp_dev_model *m, int blocks) {
    const gp_dev_model_desc &d = m->d;
    const size_t H = d.hidden, I = d.intermediate, NHD = (size_t)d.heads * d.head_dim;
    auto most = [blocks](size_t n) { return (n + blocks - 1) / blocks + 1; };
    d1_plan p;
    const size_t qkv = most(m->qkv_rows) * H, gu = most(2 * I) * H;
    const size_t o = most(H) * NHD, down = most(H) * I;
    p.a_elems = qkv > gu ? qkv : gu;
    p.b_elems = o > down ? o : down;
    return p;
}

template <int G> cudaError_t allow_smem(size_t bytes) {
    return cudaFuncSetAttribute(k_decode1<G>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)bytes);
}

} // namespace

/* Whether the phase-per-layer kernel's buffers fit and every block can be
 * resident at once (the grid barrier waits for all): 0 and r->d1_smem,
 * d1_a_elems set when they do, -1 when they do not. */
static int phase_kernel_fits(gp_dev_runner *r, int G) {
    const gp_dev_model *m = r->m;
    const int blocks = m->multiprocessors;
    const d1_plan plan = plan_for(m, blocks);
    const size_t bytes = (plan.a_elems + plan.b_elems) * sizeof(__nv_bfloat16);
    int optin = 0;
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, m->device) !=
        cudaSuccess)
        return -1;
    /* the static arrays (input vector, block table, scratch) take ~22 KB beside */
    if (bytes + 24 * 1024 > (size_t)optin) return -1;
    cudaError_t e = G == 1   ? allow_smem<1>(bytes)
                    : G == 2 ? allow_smem<2>(bytes)
                    : G == 4 ? allow_smem<4>(bytes)
                             : allow_smem<8>(bytes);
    if (e != cudaSuccess) return -1;
    /* every block must be resident at once (the grid barrier waits for all) */
    int per_sm = 0;
    e = G == 1   ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_decode1<1>, D1_THREADS,
                                                                 bytes)
        : G == 2 ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_decode1<2>, D1_THREADS,
                                                                 bytes)
        : G == 4 ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_decode1<4>, D1_THREADS,
                                                                 bytes)
                 : cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_decode1<8>, D1_THREADS,
                                                                 bytes);
    if (e != cudaSuccess || per_sm < 1) return -1;
    r->d1_smem = bytes;
    r->d1_a_elems = plan.a_elems;
    return 0;
}

/* Whether this model can take the single-row kernel, and if so its layer
 * table and barrier on the device (runner-owned). */
int gp_cuda_decode1_prepare(gp_dev_runner *r, gp_dev_status *st) {
    r->d1_ok = false;
    const gp_dev_model *m = r->m;
    const gp_dev_model_desc &d = m->d;
    const char *env = getenv("GEPARD_CUDA_DECODE1");
    if (env && !strcmp(env, "0")) return 0;
    const int G = d.kv_heads > 0 ? d.heads / d.kv_heads : 0;
    const int NHD = d.heads * d.head_dim;
    if (m->wide || !gp_cuda_decode_attention_fits(m) || m->layers[0].qkv_bias ||
        m->layers[0].o_bias || d.hidden % 8 || NHD % 8 || d.intermediate % 8 || d.hidden > 4096 ||
        NHD > 4096 || d.intermediate > 4096 || !(G == 1 || G == 2 || G == 4 || G == 8))
        return 0;
    /* the cluster kernel (cuda_decode1c.cu) where it fits, unless
     * GEPARD_CUDA_DECODE1=phase asks for this file's kernel */
    const bool cluster = !(env && !strcmp(env, "phase")) && gp_cuda_decode1c_plan(r);
    if (!cluster && phase_kernel_fits(r, G) != 0) return 0;
    std::vector<d1_layer> layers((size_t)d.layers);
    for (int l = 0; l < d.layers; l++) {
        const gp_cuda_layer &L = m->layers[l];
        layers[(size_t)l] = {(const __nv_bfloat16 *)L.qkv, (const __nv_bfloat16 *)L.o,
                             (const __nv_bfloat16 *)L.gu, (const __nv_bfloat16 *)L.down, L.norms};
    }
    GP_CUDA_TRY(cudaMalloc(&r->d1_layers, layers.size() * sizeof(d1_layer)), "layer table");
    GP_CUDA_TRY(cudaMemcpy(r->d1_layers, layers.data(), layers.size() * sizeof(d1_layer),
                           cudaMemcpyHostToDevice),
                "layer table");
    GP_CUDA_TRY(cudaMalloc(&r->d1_barrier, 2 * sizeof(unsigned)), "grid barrier");
    GP_CUDA_TRY(cudaMemset(r->d1_barrier, 0, 2 * sizeof(unsigned)), "grid barrier");
    const char *prof = getenv("GEPARD_CUDA_DECODE1_PROFILE");
    if (prof && !strcmp(prof, "1")) {
        GP_CUDA_TRY(cudaMalloc(&r->d1_prof, D1_PROF_SLOTS * sizeof(unsigned long long)),
                    "phase times");
        GP_CUDA_TRY(cudaMemset(r->d1_prof, 0, D1_PROF_SLOTS * sizeof(unsigned long long)),
                    "phase times");
    }
    /* GEPARD_CUDA_DECODE1_UNITS=N: at most N attention units per kv head
     * (default: the kernel-by-kernel path's, one per ~2 positions, <= 128) */
    const char *units = getenv("GEPARD_CUDA_DECODE1_UNITS");
    r->d1_units = units ? atoi(units) : 0;
    /* GEPARD_CUDA_DECODE1_PIECES=1|2|3: the o and gate/up weight copies in
     * that many pieces spread over the phases before their use (default 1:
     * 2 and 3 measured the same on the H200, 0.59-0.60 ms per step);
     * GEPARD_CUDA_DECODE1_REGS=0: re-read the inputs per row (for A/B: 0.63
     * against 0.60 ms with the inputs in registers) */
    const char *pieces = getenv("GEPARD_CUDA_DECODE1_PIECES");
    r->d1_pieces = pieces ? atoi(pieces) : 1;
    if (r->d1_pieces < 1 || r->d1_pieces > 3) r->d1_pieces = 1;
    const char *regs = getenv("GEPARD_CUDA_DECODE1_REGS");
    r->d1_regs = !(regs && !strcmp(regs, "0"));
    r->d1_ok = true;
    return 0;
}

void gp_cuda_decode1_release(gp_dev_runner *r) {
    unsigned long long t[D1_PROF_SLOTS];
    if (r->d1_prof && cudaMemcpy(t, r->d1_prof, sizeof t, cudaMemcpyDeviceToHost) == cudaSuccess &&
        t[D1_PROF_STEPS] > 0) {
        const double k = 1e-3 / (double)t[D1_PROF_STEPS];
        char kind[64] = "phase per layer";
        if (r->d1c_size)
            snprintf(kind, sizeof kind, "%d clusters of %d; attention = attention + merge + o",
                     r->d1c_clusters, r->d1c_size);
        fprintf(stderr,
                "single-row kernel (%s), %llu steps, us per step (block 0; in parentheses the "
                "time in the barrier, then waiting for weights): q/k/v %.1f (%.1f, %.1f), "
                "attention %.1f (%.1f), merge %.1f (%.1f), o %.1f (%.1f, %.1f), gate/up %.1f "
                "(%.1f, %.1f), down %.1f (%.1f, %.1f), heads %.1f\n",
                kind, t[D1_PROF_STEPS], t[0] * k, t[12] * k, t[7] * k, t[1] * k, t[13] * k,
                t[2] * k, t[14] * k, t[3] * k, t[15] * k, t[8] * k, t[4] * k, t[16] * k, t[9] * k,
                t[5] * k, t[17] * k, t[10] * k, t[6] * k);
        if (r->d1c_size)
            fprintf(stderr,
                    "cluster kernel's attention phase, us per step from its start: attention "
                    "%.1f, block merge and cluster barrier %.1f, cluster merge and barrier %.1f, "
                    "o %.1f\n",
                    t[D1_PROF_INSIDE] * k, t[D1_PROF_INSIDE + 1] * k, t[D1_PROF_INSIDE + 2] * k,
                    t[D1_PROF_INSIDE + 3] * k);
        if (r->d1c_embed)
            fprintf(stderr, "embedding in the kernel: %.1f us per step\n", t[D1_PROF_EMBED] * k);
    }
    cudaFree(r->d1_prof);
    r->d1_prof = NULL;
    cudaFree(r->d1_layers);
    cudaFree(r->d1_barrier);
    r->d1_layers = NULL;
    r->d1_barrier = NULL;
    r->d1_ok = false;
    r->d1c_size = 0;
    free(r->d1c_omaps);
    r->d1c_omaps = NULL;
}

bool gp_cuda_decode1_embeds(const gp_dev_runner *r) {
    return r->d1_ok && r->bt_stride <= D1_MAX_BLOCK_TABLE && r->d1c_size && r->d1c_embed;
}

bool gp_cuda_decode1_launch(gp_dev_runner *r, const gp_cuda_attn_args *args, bool embed,
                            cudaStream_t s) {
    if (!r->d1_ok || r->bt_stride > D1_MAX_BLOCK_TABLE) return false;
    if (r->d1c_size) return gp_cuda_decode1c_launch(r, args, embed, s);
    if (embed) return false;
    const gp_dev_model *m = r->m;
    const gp_dev_model_desc &md = m->d;
    d1_args p{};
    fill_step_args(p, r, args);
    p.NHD = md.heads * md.head_dim;
    p.units = args->splits * ATTN_WARPS;
    if (r->d1_units > 0) p.units = r->d1_units < p.units ? r->d1_units : p.units;
    p.part = r->part;
    p.a = (__nv_bfloat16 *)r->a;
    p.pieces = r->d1_pieces;
    p.regs = r->d1_regs;
    const int blocks = m->multiprocessors;
    switch (p.d.G) {
    case 1: k_decode1<1><<<blocks, D1_THREADS, r->d1_smem, s>>>(p); break;
    case 2: k_decode1<2><<<blocks, D1_THREADS, r->d1_smem, s>>>(p); break;
    case 4: k_decode1<4><<<blocks, D1_THREADS, r->d1_smem, s>>>(p); break;
    default: k_decode1<8><<<blocks, D1_THREADS, r->d1_smem, s>>>(p); break;
    }
    return true;
}
