/* cuda_decode1.cuh — the device pieces both single-row step kernels share:
 * the phase-per-layer kernel (cuda_decode1.cu) and the cluster kernel
 * (cuda_decode1c.cu). Weight slices stream into shared memory by bulk copies
 * counted on mbarriers, blocks meet at a self-resetting grid barrier, input
 * vectors are staged the way k_gemv stages them and each row's dot product
 * adds in k_gemv's order. Included by .cu files only; everything is internal
 * to the including file. */
#ifndef GP_CUDA_DECODE1_CUH
#define GP_CUDA_DECODE1_CUH

#include "cuda/cuda_attention.cuh"
#include "cuda/cuda_internal.h"

#define D1_THREADS 256
#define D1_WARPS (D1_THREADS / 32)
#define D1_MAX_BLOCK_TABLE 1024 /* block-table entries staged in shared memory */

namespace {

struct d1_layer {
    const __nv_bfloat16 *qkv, *o, *gu, *down;
    const float *norms; /* input, post, q, k gains */
};

__device__ __forceinline__ unsigned smem_addr(const void *p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

/* The weight slices arrive by bulk copies (the tensor memory accelerator),
 * issued by one thread and counted on an mbarrier per buffer: the other
 * threads' loads do not queue behind them. */
__device__ __forceinline__ void mbar_init(unsigned long long *bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long *bar, unsigned parity) {
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "D1_WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra D1_WAIT_%=;\n"
                 "}" ::"r"(smem_addr(bar)),
                 "r"(parity)
                 : "memory");
}
#define D1_BULK_CHUNK 32768u
/* One thread: copy `bytes` (a multiple of 16) from src to dst, counted on
 * the barrier's current phase. The last piece of a buffer's copy (`last`)
 * also arrives, so the phase completes when every piece has landed. */
__device__ __forceinline__ void bulk_load(void *dst, const void *src, unsigned bytes,
                                          unsigned long long *bar, bool last) {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* after the generic reads */
    if (last)
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
                     "r"(bytes)
                     : "memory");
    else
        asm volatile("mbarrier.expect_tx.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)),
                     "r"(bytes)
                     : "memory");
    for (unsigned off = 0; off < bytes; off += D1_BULK_CHUNK) {
        const unsigned n = bytes - off < D1_BULK_CHUNK ? bytes - off : D1_BULK_CHUNK;
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
            "%2, [%3];" ::"r"(smem_addr((char *)dst + off)),
            "l"((const char *)src + off), "r"(n), "r"(smem_addr(bar))
            : "memory");
    }
}

/* Every block waits here until all have arrived; what any block wrote
 * before is visible to all after. bar[0..1] is one 64-bit word (count,
 * generation), cudaMalloc'd so aligned. A block's thread 0 adds 1 and learns
 * its generation and place from the same release-acquire atomic; the last
 * block of a generation adds 2^32 − blocks (the next generation, the count
 * back by the blocks: arrivals at the next barrier that came before it are
 * kept), and the others wait until their generation is complete — the
 * generation past it, or at it with the count at the blocks. They are
 * released by the last arrival's own atomic, not by a store the last block
 * issues after its atomic returns: one trip through L2 fewer on each of a
 * step's ~58 barriers (one row's step 0.435-0.439 -> 0.408-0.409 ms of GPU
 * on the H200, docs/NOTES.md). A block that arrives at the next barrier
 * before that reset lands finds the count at or past the blocks (under
 * twice: the last block resets before it arrives again). Every barrier
 * brings the count back to 0, so kernels of different grids can share the
 * word one after another. */
__device__ __forceinline__ void grid_barrier(unsigned *bar) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long *word = (unsigned long long *)bar;
        const unsigned blocks = gridDim.x * gridDim.y * gridDim.z;
        unsigned long long old;
        asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], 1;"
                     : "=l"(old)
                     : "l"(word)
                     : "memory");
        unsigned gen = (unsigned)(old >> 32), place = (unsigned)old;
        if (place >= blocks) { /* the previous generation's reset is still on its way */
            gen++;
            place -= blocks;
        }
        if (place == blocks - 1) {
            const unsigned long long step = (1ull << 32) - blocks;
            asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(word), "l"(step)
                         : "memory");
        } else {
            for (;;) {
                unsigned long long now;
                asm volatile("ld.acquire.gpu.global.u64 %0, [%1];"
                             : "=l"(now)
                             : "l"(word)
                             : "memory");
                const int ahead = (int)((unsigned)(now >> 32) - gen);
                if (ahead > 0 || (ahead == 0 && (unsigned)now >= blocks)) break;
            }
        }
    }
    __syncthreads();
}

/* Phase timing (GEPARD_CUDA_DECODE1_PROFILE=1): block 0 adds each phase's
 * nanoseconds, barrier included, to prof[phase] (0-5 per layer: q/k/v,
 * attention, merge, o, gate/up, down), the time its threads waited for the
 * weights to prof[7 + i] (q/k/v, o, gate/up, down), the time it spent in
 * each phase's grid barrier (waiting for the slowest block, and the
 * barrier's own latency) to prof[12 + phase], and counts the steps. */
#define D1_PROF_STEPS 11
#define D1_PROF_SLOTS 23 /* + 12..17: the time block 0 spent in each phase's barrier */
#define D1_PROF_BARRIER 12
#define D1_PROF_INSIDE 18 /* + 0..3: the cluster kernel's points inside its attention phase */
#define D1_PROF_EMBED 22  /* the cluster kernel's embedding phases */
__device__ __forceinline__ unsigned long long d1_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ void d1_mark(unsigned long long *prof, int phase,
                                        unsigned long long &t0) {
    if (!prof || blockIdx.x != 0 || threadIdx.x != 0) return;
    const unsigned long long t = d1_now();
    prof[phase] += t - t0;
    t0 = t;
}
/* prof[slot] += the time since `start` (a point inside a phase). */
__device__ __forceinline__ void d1_since(unsigned long long *prof, int slot,
                                         unsigned long long start) {
    if (prof && blockIdx.x == 0 && threadIdx.x == 0) prof[slot] += d1_now() - start;
}
template <typename F>
__device__ __forceinline__ void d1_wait(unsigned long long *prof, int slot, F wait) {
    const unsigned long long t = prof ? d1_now() : 0;
    wait();
    if (prof && blockIdx.x == 0 && threadIdx.x == 0) prof[slot] += d1_now() - t;
}

/* This block's rows [r0, r1) of a matrix of N rows. */
__device__ __forceinline__ void block_rows(int N, int &r0, int &r1) {
    r0 = (int)((long long)N * blockIdx.x / gridDim.x);
    r1 = (int)((long long)N * (blockIdx.x + 1) / gridDim.x);
}

/* A weight buffer: its mbarrier and the parity of its next completion. */
struct d1_buf {
    __nv_bfloat16 *data;
    unsigned long long *bar;
    unsigned parity;
};

/* The thread that issues the bulk copies: not thread 0, whose release at
 * the grid barrier must not wait for copies still in flight. */
#define D1_COPY_THREAD 32

/* One thread starts copying piece `piece` of `pieces` of this block's rows
 * of W [N][K] into the buffer (pieces of whole 16-byte units). */
__device__ __forceinline__ void prefetch_rows(const d1_buf &b, const __nv_bfloat16 *W, int N, int K,
                                              int piece = 0, int pieces = 1) {
    if (threadIdx.x != D1_COPY_THREAD) return;
    int r0, r1;
    block_rows(N, r0, r1);
    const size_t units = (size_t)(r1 - r0) * K / 8; /* 16-byte units */
    const size_t u0 = units * piece / pieces, u1 = units * (piece + 1) / pieces;
    bulk_load((char *)b.data + 16 * u0, (const char *)(W + (size_t)r0 * K) + 16 * u0,
              (unsigned)(16 * (u1 - u0)), b.bar, piece == pieces - 1);
}

/* The two weight buffers in the dynamic shared memory (A first, a_elems
 * long; B after it), their mbarriers initialised by thread 0. */
__device__ __forceinline__ void init_weight_buffers(unsigned char *smem, unsigned long long *bars,
                                                    int a_elems, d1_buf &a, d1_buf &b) {
    a = {(__nv_bfloat16 *)smem, &bars[0], 0};
    b = {(__nv_bfloat16 *)smem + a_elems, &bars[1], 0};
    if (threadIdx.x == 0) {
        mbar_init(&bars[0]);
        mbar_init(&bars[1]);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
}

/* Every thread waits for the buffer's copy. */
__device__ __forceinline__ void wait_rows(d1_buf &b) {
    mbar_wait(b.bar, b.parity);
    b.parity ^= 1u;
}

__device__ __forceinline__ float bf16_round(float v) {
    return __bfloat162float(__float2bfloat16_rn(v));
}

/* in = RMSNorm(x) · gain over K <= 4096 (rounded to bf16 when `round`), as
 * k_gemv and k_rmsnorm stage it: a thread's float4s i = tid + j·blockDim;
 * the gains load together with x (one memory latency, not two); x is in
 * global memory, or in shared memory when `x_shared`. */
__device__ void stage_norm(float *in, const float *x, const float *gain, int K, float eps,
                           bool round, double *scratch, bool x_shared = false) {
    float4 v[4], g[4];
    double sum = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int i = threadIdx.x + j * D1_THREADS;
        if (i < K / 4) {
            v[j] = x_shared ? ((const float4 *)x)[i] : __ldcg((const float4 *)x + i);
            g[j] = __ldg((const float4 *)gain + i);
        }
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int i = threadIdx.x + j * D1_THREADS;
        if (i < K / 4)
            sum += (double)v[j].x * v[j].x + (double)v[j].y * v[j].y + (double)v[j].z * v[j].z +
                   (double)v[j].w * v[j].w;
    }
    sum = block_sum(sum, scratch);
    const float inv = 1.0f / sqrtf((float)(sum / K) + eps);
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int i = threadIdx.x + j * D1_THREADS;
        if (i >= K / 4) continue;
        float4 y = make_float4((v[j].x * inv) * g[j].x, (v[j].y * inv) * g[j].y,
                               (v[j].z * inv) * g[j].z, (v[j].w * inv) * g[j].w);
        if (round)
            y = make_float4(bf16_round(y.x), bf16_round(y.y), bf16_round(y.z), bf16_round(y.w));
        ((float4 *)in)[i] = y;
    }
    __syncthreads();
}

/* in = silu(gate) · up, rounded to bf16 (gu: [2K] gate then up). */
__device__ void stage_silu(float *in, const float *gu, int K) {
    for (int i = threadIdx.x; i < K / 4; i += blockDim.x) {
        const float4 g = __ldcg((const float4 *)gu + i), u = __ldcg((const float4 *)(gu + K) + i);
        ((float4 *)in)[i] = make_float4(bf16_round(g.x / (1.0f + expf(-g.x)) * u.x),
                                        bf16_round(g.y / (1.0f + expf(-g.y)) * u.y),
                                        bf16_round(g.z / (1.0f + expf(-g.z)) * u.z),
                                        bf16_round(g.w / (1.0f + expf(-g.w)) * u.w));
    }
    __syncthreads();
}

/* in = a (bf16, K a multiple of 8). */
__device__ void stage_plain(float *in, const __nv_bfloat16 *a, int K) {
    for (int i = threadIdx.x; i < K / 8; i += blockDim.x) {
        const uint4 raw = __ldcg((const uint4 *)a + i);
        const __nv_bfloat162 *h = (const __nv_bfloat162 *)&raw;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const float2 f = __bfloat1622float2(h[j]);
            in[8 * i + 2 * j] = f.x;
            in[8 * i + 2 * j + 1] = f.y;
        }
    }
    __syncthreads();
}

/* One row's sum: the lane's chunks ch = lane + 32c, each an 8-term dot in
 * k_gemv's order. */
__device__ __forceinline__ float row_chunk(const __nv_bfloat16 *wr, int ch, const float4 &a,
                                           const float4 &b, float acc) {
    const uint4 raw = *(const uint4 *)(wr + ch * 8);
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&raw;
    float w[8];
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const float2 f = __bfloat1622float2(h[q]);
        w[2 * q] = f.x;
        w[2 * q + 1] = f.y;
    }
    return acc + (w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x + w[5] * b.y +
                  w[6] * b.z + w[7] * b.w);
}

/* out[n] (+)= Σ_k in[k] · W[n][k] for rows n in [r0, r1), the weights in
 * shared memory (wbuf: those rows, contiguous, K each); k_gemv's order.
 * With CPL > 0 (K = 256·CPL) each lane keeps its CPL input chunks in
 * registers for all its rows instead of re-reading them per row (the same
 * values). */
template <int CPL>
__device__ void gemv_span(const __nv_bfloat16 *wbuf, int r0, int r1, int K, const float *in,
                          float *out, bool add, const float *base = nullptr) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, chunks = K / 8;
    float4 ia[CPL > 0 ? CPL : 1], ib[CPL > 0 ? CPL : 1];
    if constexpr (CPL > 0) {
#pragma unroll
        for (int c = 0; c < CPL; c++) {
            ia[c] = *(const float4 *)(in + (lane + 32 * c) * 8);
            ib[c] = *(const float4 *)(in + (lane + 32 * c) * 8 + 4);
        }
    }
    for (int n = r0 + warp; n < r1; n += D1_WARPS) {
        const __nv_bfloat16 *wr = wbuf + (size_t)(n - r0) * K;
        float acc = 0;
        if constexpr (CPL > 0) {
#pragma unroll
            for (int c = 0; c < CPL; c++) acc = row_chunk(wr, lane + 32 * c, ia[c], ib[c], acc);
        } else {
            for (int ch = lane; ch < chunks; ch += 32)
                acc = row_chunk(wr, ch, *(const float4 *)(in + ch * 8),
                                *(const float4 *)(in + ch * 8 + 4), acc);
        }
        acc = warp_sum(acc);
        if (lane == 0) out[n] = base ? base[n] + acc : add ? __ldcg(out + n) + acc : acc;
    }
}

/* The same for this block's rows of a matrix of N rows (block_rows). */
template <int CPL>
__device__ void gemv_rows(const __nv_bfloat16 *wbuf, int N, int K, const float *in, float *out,
                          bool add, const float *base = nullptr) {
    int r0, r1;
    block_rows(N, r0, r1);
    gemv_span<CPL>(wbuf, r0, r1, K, in, out, add, base);
}

/* The projection of this block's rows, input chunks in registers where K
 * is 1024 (q/k/v, gate/up) and p.regs allows; with `base`, out[n] =
 * base[n] + the row's sum (the residual from elsewhere than out). */
__device__ __forceinline__ void gemv_any(bool regs, const __nv_bfloat16 *wbuf, int N, int K,
                                         const float *in, float *out, bool add,
                                         const float *base = nullptr) {
    if (regs && K == 1024)
        gemv_rows<4>(wbuf, N, K, in, out, add, base);
    else
        gemv_rows<0>(wbuf, N, K, in, out, add, base);
}

/* After the final norm (`in`: the normed hidden vector in shared memory):
 * block 0 writes the hidden vector, and every logit is one warp's dot
 * product with the heads' f32 rows, plus its bias. */
__device__ void heads_logits(const float *in, int H, const float *heads, const float *heads_b,
                             int total, float *hidden, float *logits) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (blockIdx.x == 0)
        for (int i = threadIdx.x; i < H; i += blockDim.x) hidden[i] = in[i];
    for (int n = warp * gridDim.x + blockIdx.x; n < total; n += gridDim.x * D1_WARPS) {
        const float4 *w = (const float4 *)(heads + (size_t)n * H);
        float acc = 0;
        for (int k = lane; k < H / 4; k += 32) {
            const float4 wv = __ldg(w + k), iv = ((const float4 *)in)[k];
            acc += wv.x * iv.x + wv.y * iv.y + wv.z * iv.z + wv.w * iv.w;
        }
        acc = warp_sum(acc);
        if (lane == 0) logits[n] = acc + heads_b[n];
    }
    __syncthreads();
}

/* What both single-row kernels read: the layers, the row's metadata and
 * cache, the step's buffers and the grid barrier. */
struct d1_step_args {
    const d1_layer *layers;
    int n_layers, H, I, qkv_rows, total_logits, rotary;
    float eps;
    attn_dims d; /* d.layer is set per layer */
    const int *row_seq, *row_pos, *block_table;
    __nv_bfloat16 *kv;
    const float *rope, *final_norm, *heads, *heads_b;
    float *x, *qkv, *gu, *hidden, *logits;
    unsigned *barrier;        /* [2]: blocks arrived, generation */
    int buf_a_elems;          /* bf16 elements of buffer A (q/k/v and gate/up slices) */
    unsigned long long *prof; /* phase times (GEPARD_CUDA_DECODE1_PROFILE=1) or NULL */
};

/* Those of this runner's one-row step (host side). */
inline void fill_step_args(d1_step_args &p, const gp_dev_runner *r, const gp_cuda_attn_args *args) {
    const gp_dev_model *m = r->m;
    const gp_dev_model_desc &md = m->d;
    const gp_cuda_meta_layout L = gp_cuda_meta_layout_for(r);
    p.layers = (const d1_layer *)r->d1_layers;
    p.n_layers = md.layers;
    p.H = md.hidden;
    p.I = md.intermediate;
    p.qkv_rows = m->qkv_rows;
    p.total_logits = md.total_logits;
    p.rotary = md.rotary_dim;
    p.eps = md.rms_eps;
    p.d = dims_of(args);
    p.row_seq = r->meta + L.row_seq;
    p.row_pos = r->meta + L.row_pos;
    p.block_table = r->meta + L.block_table;
    p.kv = (__nv_bfloat16 *)args->kv->data;
    p.rope = r->rope;
    p.final_norm = m->final_norm;
    p.heads = m->heads;
    p.heads_b = m->heads_b;
    p.x = r->x;
    p.qkv = r->qkv;
    p.gu = r->gu;
    p.hidden = r->hidden;
    p.logits = r->logits;
    p.barrier = r->d1_barrier;
    p.buf_a_elems = (int)r->d1_a_elems;
    p.prof = r->d1_prof;
}

} // namespace

#endif
