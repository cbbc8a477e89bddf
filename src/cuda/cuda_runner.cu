/* cuda_runner.cu — one batched step of the backbone on the GPU: the step's
 * metadata (rows → sequence and position, block tables, frame codes) goes up
 * in one copy, then the audio-frame embedding, 14 decoder layers (cuBLAS
 * GEMMs with f32 accumulation around the kernels of cuda_kernels.cu), the
 * final norm of each sequence's last row and the heads run on the runner's
 * stream, and the hidden states and logits come back in one copy each into
 * pinned memory. Pure decode steps are captured as CUDA graphs, one per
 * padded batch size (powers of two), attention split count and block-table
 * width, so a single stream's step is one graph launch instead of ~150
 * kernel launches. Padded rows write their keys into a spare KV block and
 * their outputs are ignored. */
#include <cuda_profiler_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <chrono>

#include "cuda/cuda_internal.h"

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* The metadata of a step of `rows` rows (its padded size: a graph's kernels
 * hold these offsets), packed at the start of the buffer, so a step uploads
 * only its own rows' — not the reservation's (a server's lone stream moved
 * ~400 KB a step for a 1024-row reservation). */
static gp_cuda_meta_layout meta_layout(const gp_dev_runner *r, int rows) {
    gp_cuda_meta_layout L;
    const size_t R = (size_t)rows, C = (size_t)r->m->d.channels;
    L.row_seq = 0;
    L.row_pos = L.row_seq + R;
    L.seq_last = L.row_pos + R;
    L.decode_row_frame = L.seq_last + R;
    L.codes = L.decode_row_frame + R;
    L.block_table = L.codes + R * C;
    L.total = L.block_table + R * (size_t)r->bt_stride;
    return L;
}

gp_cuda_meta_layout gp_cuda_meta_layout_for(const gp_dev_runner *r) {
    return meta_layout(r, r->meta_rows);
}

static void free_graphs(gp_dev_runner *r) {
    for (int i = 0; i < r->n_graphs; i++) cudaGraphExecDestroy(r->graphs[i].exec);
    r->n_graphs = 0;
}

static void free_buffers(gp_dev_runner *r) {
    void *dev[] = {r->x,      r->a,      r->qkv,   r->q,       r->gu,
                   r->rope,   r->part,   r->emb_z, r->emb_t,   r->emb,
                   r->hidden, r->logits, r->meta,  r->prefill, r->counters};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cudaFree(dev[i]);
    void *host[] = {r->h_meta, r->h_prefill, r->h_hidden, r->h_logits};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) cudaFreeHost(host[i]);
    r->x = r->qkv = r->q = r->gu = r->rope = r->part = NULL;
    r->emb_z = r->emb_t = r->emb = r->hidden = r->logits = r->prefill = NULL;
    r->a = NULL;
    r->counters = NULL;
    r->meta = r->h_meta = NULL;
    r->h_prefill = r->h_hidden = r->h_logits = NULL;
    r->cap_rows = 0;
}

void gp_cuda_runner_free(gp_dev_runner *r) {
    if (!r) return;
    /* with the graph log: whether GEPARD_CUDA_MIXED_TILES's path ran at all
     * (it needs a step with tile_rows decode rows beside prefill rows) */
    const char *log = getenv("GEPARD_CUDA_GRAPH_LOG");
    if (log && strcmp(log, "1") == 0 && r->mixed_steps > 0)
        fprintf(stderr,
                "gepard cuda: %ld steps had decode and prefill rows, %ld of them attended their "
                "decode rows by tiles\n",
                r->mixed_steps, r->mixed_tiled_steps);
    cudaSetDevice(r->m->device);
    if (r->launched) cudaStreamSynchronize(r->stream);
    free_graphs(r);
    free_buffers(r);
    for (int i = 0; i < r->n_loras; i++) {
        for (int k = 0; k < r->loras[i].n; k++) {
            cudaFree(r->loras[i].mods[k].A);
            cudaFree(r->loras[i].mods[k].B);
        }
        free(r->loras[i].mods);
        free(r->loras[i].index);
    }
    free(r->loras);
    free(r->uses);
    gp_cuda_decode1_release(r);
    cudaFree(r->blas_workspace);
    if (r->blas) cublasDestroy(r->blas);
    if (r->done) cudaEventDestroy(r->done);
    if (r->t_start) cudaEventDestroy(r->t_start);
    if (r->t_end) cudaEventDestroy(r->t_end);
    if (r->stream) cudaStreamDestroy(r->stream);
    free(r);
}

int gp_cuda_runner_create(gp_dev_model *m, gp_dev_runner **out, gp_dev_status *st) {
    *out = NULL;
    GP_CUDA_TRY(cudaSetDevice(m->device), "cudaSetDevice");
    gp_dev_runner *r = (gp_dev_runner *)calloc(1, sizeof *r);
    if (!r) return gp_cuda_fail(st, GEPARD_ERR_NOMEM, "out of host memory");
    r->m = m;
    r->blas_workspace_bytes = 32u << 20;
    /* GEPARD_CUDA_SKINNY=0: every product through cuBLAS (for comparisons). */
    const char *skinny = getenv("GEPARD_CUDA_SKINNY");
    r->no_skinny = skinny && strcmp(skinny, "0") == 0;
    /* GEPARD_CUDA_FUSED_ATTENTION=0: decode steps use the general attention. */
    const char *fused = getenv("GEPARD_CUDA_FUSED_ATTENTION");
    r->no_fused = fused && strcmp(fused, "0") == 0;
    /* GEPARD_CUDA_ATTN_TILE_ROWS=N: decode steps of N rows or more attend by
     * tiles (0: never); below, the units split the context over blocks */
    const char *tile_rows = getenv("GEPARD_CUDA_ATTN_TILE_ROWS");
    r->tile_rows = tile_rows ? atoi(tile_rows) : GP_CUDA_ATTN_TILE_ROWS;
    const char *buckets = getenv("GEPARD_CUDA_GRAPH_BUCKETS");
    r->pow2_buckets = buckets && strcmp(buckets, "pow2") == 0;
    /* Every tile size's graph is captured with the first one a step needs
     * (launch_graph): 2-15 ms each on the H200, ~0.2 s for the 24 sizes of a
     * 1024-row reservation, paid in a server's warm-up rather than one by one
     * in service, where each stalls every stream's next frame (serve12: 21
     * step and 14 codec captures after /ready without, none of the tile sizes
     * with). GEPARD_CUDA_GRAPHS_AHEAD=0: each size at its first use. */
    const char *ahead = getenv("GEPARD_CUDA_GRAPHS_AHEAD");
    r->graphs_ahead = !(ahead && strcmp(ahead, "0") == 0);
    /* GEPARD_CUDA_MIXED_TILES=1: a mixed step's decode rows attend by tiles
     * (attention_mixed; opt-in until measured) */
    const char *mixed = getenv("GEPARD_CUDA_MIXED_TILES");
    r->mixed_tiles = mixed && strcmp(mixed, "1") == 0;
    /* GEPARD_CUDA_GRAPH_CACHE=N: hold at most N step graphs (tests) */
    const char *cache = getenv("GEPARD_CUDA_GRAPH_CACHE");
    r->max_graphs = GP_CUDA_MAX_GRAPHS;
    if (cache && atoi(cache) >= 1 && atoi(cache) < GP_CUDA_MAX_GRAPHS) r->max_graphs = atoi(cache);
    int rc = gp_cuda_check(gp_cuda_stream_create(&r->stream, GP_CUDA_STREAM_STEP),
                           "cudaStreamCreate", st);
    if (!rc)
        rc = gp_cuda_check(cudaEventCreateWithFlags(&r->done, cudaEventDisableTiming),
                           "cudaEventCreate", st);
    if (!rc) rc = gp_cuda_check(cudaEventCreate(&r->t_start), "cudaEventCreate", st);
    if (!rc) rc = gp_cuda_check(cudaEventCreate(&r->t_end), "cudaEventCreate", st);
    if (!rc) rc = gp_cuda_blas_check(cublasCreate(&r->blas), "cublasCreate", st);
    if (!rc) rc = gp_cuda_blas_check(cublasSetStream(r->blas, r->stream), "cublasSetStream", st);
    if (!rc)
        rc = gp_cuda_check(cudaMalloc(&r->blas_workspace, r->blas_workspace_bytes),
                           "cuBLAS workspace", st);
    if (!rc)
        rc = gp_cuda_blas_check(
            cublasSetWorkspace(r->blas, r->blas_workspace, r->blas_workspace_bytes),
            "cublasSetWorkspace", st);
    if (!rc && m->wide)
        rc = gp_cuda_blas_check(cublasSetMathMode(r->blas, CUBLAS_PEDANTIC_MATH),
                                "cublasSetMathMode", st);
    if (!rc) rc = gp_cuda_decode1_prepare(r, st);
    if (rc) {
        gp_cuda_runner_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

/* Attention splits per row and KV head: one per 16 positions (each warp of
 * a split then walks ~4 positions, so latency, not bandwidth, is short), at
 * most 32, and no more than ~4000 blocks in all. */
#define ATTN_MAX_BLOCKS 4224
static int splits_for(const gp_dev_runner *r, int rows, int max_len) {
    const int nkv = r->m->d.kv_heads;
    int s = (max_len + 15) / 16;
    int by_blocks = ATTN_MAX_BLOCKS / (rows * nkv);
    if (s > by_blocks) s = by_blocks;
    if (s > 32) s = 32;
    return s < 1 ? 1 : s;
}

/* Decode attention: a block of 4 single-warp units per 8 positions, so each
 * warp walks about 2 positions, but no more than ~264 blocks (each unit
 * recomputes its group's queries; big batches need no splitting). */
static int decode_splits_for(const gp_dev_runner *r, int rows, int max_len) {
    const int nkv = r->m->d.kv_heads;
    int s = (max_len + 7) / 8;
    /* each unit recomputes its group's queries: no more blocks than ~2 per SM */
    int by_blocks = 264 / (rows * nkv);
    if (s > by_blocks) s = by_blocks;
    if (s > 32) s = 32;
    return s < 1 ? 1 : s;
}

/* Step buffers for `rows` rows and block tables of bt_stride blocks. Growing
 * frees every captured graph, so a runner that must grow takes at once the
 * caller's most rows, `hint_rows` (at most GP_CUDA_RESERVE_ROWS_MAX; beyond
 * that, as steps need). */
static int reserve(gp_dev_runner *r, int rows, int hint_rows, int bt_stride, gp_dev_status *st) {
    if (rows <= r->cap_rows && bt_stride <= r->bt_stride) return 0;
    const gp_dev_model_desc *d = &r->m->d;
    if (hint_rows > GP_CUDA_RESERVE_ROWS_MAX) hint_rows = GP_CUDA_RESERVE_ROWS_MAX;
    if (hint_rows > rows) rows = hint_rows;
    int cap = r->cap_rows > 16 ? r->cap_rows : 16;
    while (cap < rows) cap *= 2;
    int bts = r->bt_stride > 64 ? r->bt_stride : 64;
    while (bts < bt_stride) bts *= 2;
    if (r->launched) cudaStreamSynchronize(r->stream);
    r->launched = false;
    free_graphs(r);
    free_buffers(r);
    r->cap_rows = cap;
    r->bt_stride = bts;
    const size_t R = (size_t)cap, H = d->hidden, D = d->head_dim, NH = d->heads;
    const size_t NKV = d->kv_heads, I = d->intermediate, G = NH / NKV;
    const size_t T = d->total_logits, CE = (size_t)d->channels * d->embed_dim;
    const size_t widest = max_sz(max_sz(H, NH * D), I);
    /* decode attention writes one partial per warp: 4 per block */
    const size_t part = 4 * max_sz(R * NKV, ATTN_MAX_BLOCKS) * G * (D + 2);
    gp_cuda_meta_layout L = meta_layout(r, cap);
    struct {
        void **p;
        size_t bytes;
    } dev[] = {
        {(void **)&r->x, R * H * 4},
        {&r->a, R * widest * r->m->welem},
        {(void **)&r->qkv, R * r->m->qkv_rows * 4},
        {(void **)&r->q, R * NH * D * 4},
        {(void **)&r->gu, R * 2 * I * 4},
        {(void **)&r->rope, R * (d->rotary_dim + 2) * 4},
        {(void **)&r->part, part * 4},
        {(void **)&r->emb_z, R * CE * 4},
        {(void **)&r->emb_t, R * H * 4},
        {(void **)&r->emb, R * H * 4},
        {(void **)&r->hidden, R * H * 4},
        {(void **)&r->logits, R * T * 4},
        {(void **)&r->meta, L.total * 4},
        {(void **)&r->prefill, R * H * 4},
        {(void **)&r->counters, R * NKV * sizeof(unsigned)},
    };
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) {
        cudaError_t e = cudaMalloc(dev[i].p, dev[i].bytes);
        if (e != cudaSuccess) {
            free_buffers(r);
            return gp_cuda_check(e, "step buffers", st);
        }
    }
    cudaError_t ze = cudaMemset(r->counters, 0, R * NKV * sizeof(unsigned));
    if (ze != cudaSuccess) {
        free_buffers(r);
        return gp_cuda_check(ze, "attention counters", st);
    }
    struct {
        void **p;
        size_t bytes;
    } host[] = {{(void **)&r->h_meta, L.total * 4},
                {(void **)&r->h_prefill, R * H * 4},
                {(void **)&r->h_hidden, R * H * 4},
                {(void **)&r->h_logits, R * T * 4}};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) {
        cudaError_t e = cudaMallocHost(host[i].p, host[i].bytes);
        if (e != cudaSuccess) {
            free_buffers(r);
            return gp_cuda_check(e, "pinned step buffers", st);
        }
    }
    return 0;
}

/* Y[rows][N] (+)= X[rows][K] · W[N][K]ᵀ with f32 accumulation and output. */
static int gemm(gp_dev_runner *r, const void *W, cudaDataType_t type, const void *X, int N,
                int rows, int K, float *Y, float beta, gp_dev_status *st) {
    const float one = 1;
    return gp_cuda_blas_check(cublasGemmEx(r->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, rows, K, &one, W,
                                           type, K, X, type, K, &beta, Y, CUDA_R_32F, N,
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                              "GEMM", st);
}

int gp_cuda_lora_upload(gp_dev_runner *r, uint64_t id, const gp_dev_lora_module *mods, int n,
                        gp_dev_status *st) {
    for (int i = 0; i < r->n_loras; i++)
        if (r->loras[i].id == id) return 0;
    const int layers = r->m->d.layers;
    gp_cuda_lora *grown =
        (gp_cuda_lora *)realloc(r->loras, (size_t)(r->n_loras + 1) * sizeof *r->loras);
    if (!grown) return gp_cuda_fail(st, GEPARD_ERR_NOMEM, "out of host memory");
    r->loras = grown;
    gp_cuda_lora *e = &r->loras[r->n_loras];
    memset(e, 0, sizeof *e);
    e->id = id;
    e->mods = (gp_cuda_lora_module *)calloc((size_t)(n > 0 ? n : 1), sizeof *e->mods);
    e->index = (int *)malloc((size_t)layers * GP_DEV_MATRICES * sizeof(int));
    if (!e->mods || !e->index) {
        free(e->mods);
        free(e->index);
        return gp_cuda_fail(st, GEPARD_ERR_NOMEM, "out of host memory");
    }
    for (int i = 0; i < layers * GP_DEV_MATRICES; i++) e->index[i] = -1;
    r->n_loras++; /* owned from here: freed with the runner even on failure below */
    GP_CUDA_TRY(cudaSetDevice(r->m->device), "cudaSetDevice");
    for (int k = 0; k < n; k++) {
        const gp_dev_lora_module *src = &mods[k];
        if (src->rank < 1 || src->rank > 256 || src->layer < 0 || src->layer >= layers ||
            (int)src->which < 0 || src->which >= GP_DEV_MATRICES)
            return gp_cuda_fail(st, GEPARD_ERR_UNSUPPORTED,
                                "LoRA module of layer %d has rank %d; the GPU applies ranks "
                                "1..256 at run time (merge larger adapters)",
                                src->layer, src->rank);
        gp_cuda_lora_module *dst = &e->mods[e->n];
        *dst = (gp_cuda_lora_module){src->layer, (int)src->which, src->rank, src->in,
                                     src->out,   src->scale,      NULL,      NULL};
        const size_t na = (size_t)src->rank * src->in, nb = (size_t)src->out * src->rank;
        e->n++;
        GP_CUDA_TRY(cudaMalloc((void **)&dst->A, na * 4), "LoRA weights");
        GP_CUDA_TRY(cudaMalloc((void **)&dst->B, nb * 4), "LoRA weights");
        GP_CUDA_TRY(cudaMemcpy(dst->A, src->A, na * 4, cudaMemcpyHostToDevice), "LoRA upload");
        GP_CUDA_TRY(cudaMemcpy(dst->B, src->B, nb * 4, cudaMemcpyHostToDevice), "LoRA upload");
        e->index[src->layer * GP_DEV_MATRICES + src->which] = e->n - 1;
    }
    return 0;
}

/* Every adapted sequence's update of matrix `which` in layer l: input x
 * (ldx), output y (ldy, already offset to the matrix's columns). */
static void apply_loras(gp_dev_runner *r, int l, gp_dev_matrix which, const void *x, int ldx,
                        float *y, int ldy, cudaStream_t s) {
    for (int u = 0; u < r->n_uses; u++) {
        const gp_cuda_lora *e = &r->loras[r->uses[u].lora];
        const int k = e->index[l * GP_DEV_MATRICES + which];
        if (k >= 0)
            gp_cuda_lora_apply(x, r->m->wide, ldx, r->uses[u].row0, r->uses[u].rows, &e->mods[k], y,
                               ldy, s);
    }
}

/* A mixed step's attention split in two (GEPARD_CUDA_MIXED_TILES=1): its
 * first `tiled` rows, the decode rows (each a sequence of one row, the same
 * as a decode step's), by tiles; the prefill rows after them by q/k norm +
 * RoPE + cache write and split attention (`splits`), every row-indexed
 * pointer moved past the decode rows. */
static void attention_mixed(gp_dev_runner *r, const gp_cuda_attn_args *args, const float *q_norm,
                            const float *k_norm, int tiled, int splits, cudaStream_t s) {
    const gp_dev_model *m = r->m;
    const gp_dev_model_desc *d = &m->d;
    gp_cuda_attn_args dec = *args;
    dec.rows = tiled;
    dec.tiles = true;
    gp_cuda_decode_attention_tiles(&dec, r->qkv, q_norm, k_norm, r->rope, r->a, s);
    gp_cuda_attn_args pre = *args;
    pre.rows = args->rows - tiled;
    pre.row_seq += tiled;
    pre.row_pos += tiled;
    pre.splits = splits;
    pre.tiles = false;
    if (pre.rows <= 0) return;
    const size_t o = (size_t)tiled, qd = (size_t)d->heads * d->head_dim;
    float *qkv = r->qkv + o * m->qkv_rows, *q = r->q + o * qd;
    const float *rope = r->rope + o * 2 * (size_t)(d->rotary_dim / 2);
    void *out = (char *)r->a + o * qd * m->welem;
    gp_cuda_qkv_post(&pre, qkv, NULL, q_norm, k_norm, rope, q, s);
    gp_cuda_attention(&pre, q, qkv, r->part, out, s);
}

/* Attention of one layer: fused for one-row-per-sequence steps, else
 * q/k norm + RoPE + cache write, then split attention (or attention_mixed
 * when `tiled` leading rows attend by tiles). */
static void attention(gp_dev_runner *r, gp_cuda_attn_args *args, const float *qkv_bias,
                      const float *q_norm, const float *k_norm, bool fused, int tiled,
                      int tiled_splits, cudaStream_t s) {
    if (tiled > 0 && !qkv_bias) {
        attention_mixed(r, args, q_norm, k_norm, tiled, tiled_splits, s);
        return;
    }
    if (fused && !qkv_bias && args->tiles) {
        gp_cuda_decode_attention_tiles(args, r->qkv, q_norm, k_norm, r->rope, r->a, s);
        return;
    }
    if (fused && !qkv_bias) {
        gp_cuda_decode_attention(args, r->qkv, q_norm, k_norm, r->rope, r->part, r->a, s);
        return;
    }
    gp_cuda_qkv_post(args, r->qkv, qkv_bias, q_norm, k_norm, r->rope, r->q, s);
    gp_cuda_attention(args, r->q, r->qkv, r->part, r->a, s);
}

/* Enqueue the whole step on r->stream (direct or under graph capture). */
static int forward(gp_dev_runner *r, gp_dev_kv *kv, int rows, int seqs, int frames,
                   int n_decode_rows, int splits, bool one_row_each, int tiled, int tiled_splits,
                   gp_dev_status *st) {
    const gp_dev_model *m = r->m;
    const gp_dev_model_desc *d = &m->d;
    const int H = d->hidden, D = d->head_dim, NH = d->heads, I = d->intermediate;
    const int CE = d->channels * d->embed_dim;
    cudaStream_t s = r->stream;
    r->meta_rows = rows; /* (fill_meta's layout for this many rows) */
    gp_cuda_meta_layout L = gp_cuda_meta_layout_for(r);
    const int *row_seq = r->meta + L.row_seq, *row_pos = r->meta + L.row_pos;
    int rc = 0;
    /* Few rows (decode of a handful of streams): the fused skinny products. */
    /* Every sequence one row: the fused decode attention. */
    const bool fused_attn = one_row_each && gp_cuda_decode_attention_fits(m) && !r->no_fused;
    const bool skinny = rows <= GP_CUDA_GEMV_MAX_ROWS && H % 8 == 0 && (NH * D) % 8 == 0 &&
                        I % 8 == 0 && H <= 4096 && NH * D <= 4096 && I <= 4096 && !r->no_skinny &&
                        r->n_uses == 0;
    /* One row: the layers and heads as one persistent kernel, which may also
     * embed the row's audio frame (then the seven launches below are its). */
    const bool one_kernel = skinny && fused_attn && rows == 1 && seqs == 1;
    const bool embed_inside =
        one_kernel && frames == 1 && n_decode_rows == 1 && gp_cuda_decode1_embeds(r);
    gp_cuda_attn_args args = {m,
                              kv,
                              0,
                              rows,
                              splits,
                              r->bt_stride,
                              row_seq,
                              row_pos,
                              r->meta + L.block_table,
                              r->counters,
                              r->tile_rows > 0 && rows >= r->tile_rows};
    if (embed_inside) {
        if (!gp_cuda_decode1_launch(r, &args, true, s))
            return gp_cuda_fail(st, GEPARD_ERR_INTERNAL,
                                "CUDA: the single-row step kernel did not launch");
        return gp_cuda_check(cudaGetLastError(), "single-row step kernel", st);
    }
    if (frames > 0) {
        gp_cuda_embed_gather((const int32_t *)(r->meta + L.codes), frames, m, r->emb_z, s);
        if ((rc = gemm(r, m->proj0, CUDA_R_32F, r->emb_z, H, frames, CE, r->emb_t, 0, st)))
            return rc;
        gp_cuda_bias_gelu(r->emb_t, frames, H, m->proj0_b, s);
        if ((rc = gemm(r, m->proj2, CUDA_R_32F, r->emb_t, H, frames, H, r->emb, 0, st))) return rc;
        gp_cuda_bias_layernorm(r->emb, frames, H, m->proj2_b, d->audio_embed_scale, s);
    }
    gp_cuda_build_rows(r->emb, r->meta + L.decode_row_frame, n_decode_rows, r->prefill, rows, H,
                       r->x, s);
    gp_cuda_rope_table(row_pos, rows, m->rope_inv_freq, d->rotary_dim / 2, r->rope, s);
    if (one_kernel && gp_cuda_decode1_launch(r, &args, false, s))
        return gp_cuda_check(cudaGetLastError(), "single-row step kernel", st);
    for (int l = 0; l < d->layers; l++) {
        const gp_cuda_layer *Ly = &m->layers[l];
        const float *in_norm = Ly->norms, *post_norm = Ly->norms + H;
        const float *q_norm = Ly->norms + 2 * H, *k_norm = q_norm + D;
        args.layer = l;
        if (skinny) {
            const int mb = m->multiprocessors;
            gp_cuda_gemv g = {Ly->qkv,     m->qkv_rows, H,          rows, GP_GEMV_NORM,
                              r->x,        in_norm,     d->rms_eps, NULL, r->qkv,
                              m->qkv_rows, false,       mb};
            gp_cuda_gemv_run(&g, m->wide, s);
            attention(r, &args, Ly->qkv_bias, q_norm, k_norm, fused_attn, tiled, tiled_splits, s);
            g = (gp_cuda_gemv){Ly->o, H,    NH * D, rows, GP_GEMV_PLAIN, NULL, NULL,
                               0,     r->a, r->x,   H,    true,          mb};
            gp_cuda_gemv_run(&g, m->wide, s);
            if (Ly->o_bias) gp_cuda_add_bias(r->x, rows, H, Ly->o_bias, s);
            g = (gp_cuda_gemv){Ly->gu,     2 * I, H,     rows,  GP_GEMV_NORM, r->x, post_norm,
                               d->rms_eps, NULL,  r->gu, 2 * I, false,        mb};
            gp_cuda_gemv_run(&g, m->wide, s);
            g = (gp_cuda_gemv){Ly->down, H,     I,    rows, GP_GEMV_SILU, NULL, NULL,
                               0,        r->gu, r->x, H,    true,         mb};
            gp_cuda_gemv_run(&g, m->wide, s);
            continue;
        }
        gp_cuda_rmsnorm(r->x, H, NULL, rows, H, in_norm, d->rms_eps, r->a, m->wide, H, s);
        const int KV = d->kv_heads * D;
        if ((rc = gemm(r, Ly->qkv, m->wtype, r->a, m->qkv_rows, rows, H, r->qkv, 0, st))) return rc;
        if (r->n_uses) {
            apply_loras(r, l, GP_DEV_Q, r->a, H, r->qkv, m->qkv_rows, s);
            apply_loras(r, l, GP_DEV_K, r->a, H, r->qkv + 2 * NH * D, m->qkv_rows, s);
            apply_loras(r, l, GP_DEV_V, r->a, H, r->qkv + 2 * NH * D + KV, m->qkv_rows, s);
        }
        attention(r, &args, Ly->qkv_bias, q_norm, k_norm, fused_attn, tiled, tiled_splits, s);
        if ((rc = gemm(r, Ly->o, m->wtype, r->a, H, rows, NH * D, r->x, 1, st))) return rc;
        if (r->n_uses) apply_loras(r, l, GP_DEV_O, r->a, NH * D, r->x, H, s);
        if (Ly->o_bias) gp_cuda_add_bias(r->x, rows, H, Ly->o_bias, s);
        gp_cuda_rmsnorm(r->x, H, NULL, rows, H, post_norm, d->rms_eps, r->a, m->wide, H, s);
        if ((rc = gemm(r, Ly->gu, m->wtype, r->a, 2 * I, rows, H, r->gu, 0, st))) return rc;
        if (r->n_uses) {
            apply_loras(r, l, GP_DEV_GATE, r->a, H, r->gu, 2 * I, s);
            apply_loras(r, l, GP_DEV_UP, r->a, H, r->gu + I, 2 * I, s);
        }
        gp_cuda_silu_mul(r->gu, rows, I, r->a, m->wide, s);
        if ((rc = gemm(r, Ly->down, m->wtype, r->a, H, rows, I, r->x, 1, st))) return rc;
        if (r->n_uses) apply_loras(r, l, GP_DEV_DOWN, r->a, I, r->x, H, s);
    }
    gp_cuda_rmsnorm(r->x, H, r->meta + L.seq_last, seqs, H, m->final_norm, d->rms_eps, r->hidden,
                    true, H, s);
    if ((rc = gemm(r, m->heads, CUDA_R_32F, r->hidden, d->total_logits, seqs, H, r->logits, 0, st)))
        return rc;
    gp_cuda_add_bias(r->logits, seqs, d->total_logits, m->heads_b, s);
    return gp_cuda_check(cudaGetLastError(), "step kernels", st);
}

/* The rows a decode step's graph is captured for: powers of two up to 64,
 * then eight sizes per octave (72, 80, ... 128, 144, ... 1024, 1152, ...),
 * so padding costs at most 1/8 of a big step's rows — not up to half, as with
 * powers of two (GEPARD_CUDA_GRAPH_BUCKETS=pow2, for comparisons). */
static int bucket_for(const gp_dev_runner *r, int rows) {
    int b = 1;
    while (b < rows) b *= 2;
    if (b <= 64 || r->pow2_buckets) return b;
    const int step = b / 16; /* b/2 < rows <= b: steps of (b/2)/8 */
    return (rows + step - 1) / step * step;
}

/* Fill the pinned metadata for `rows_eff` rows (real rows first, padding
 * rows after as one-row sequences in the spare block). */
static void fill_meta(gp_dev_runner *r, const gp_dev_kv *kv, const gp_dev_step *p, int rows_eff,
                      int seqs_eff, int frames_eff) {
    r->meta_rows = rows_eff;
    gp_cuda_meta_layout L = gp_cuda_meta_layout_for(r);
    int *meta = r->h_meta;
    const int C = r->m->d.channels, spare = kv->blocks;
    int row = 0;
    for (int s = 0; s < p->n_seqs; s++) {
        for (int j = 0; j < p->seq_rows[s]; j++, row++) {
            meta[L.row_seq + row] = s;
            meta[L.row_pos + row] = p->seq_start[s] + j;
        }
        meta[L.seq_last + s] = row - 1;
        int *bt = meta + L.block_table + (size_t)s * r->bt_stride;
        memcpy(bt, p->seq_blocks[s], (size_t)p->seq_n_blocks[s] * sizeof(int));
        for (int b = p->seq_n_blocks[s]; b < r->bt_stride; b++) bt[b] = spare;
    }
    for (int s = p->n_seqs; s < seqs_eff; s++, row++) {
        meta[L.row_seq + row] = s;
        meta[L.row_pos + row] = 0;
        meta[L.seq_last + s] = row;
        int *bt = meta + L.block_table + (size_t)s * r->bt_stride;
        for (int b = 0; b < r->bt_stride; b++) bt[b] = spare;
    }
    for (int i = 0; i < p->n_decode_rows; i++)
        meta[L.decode_row_frame + i] = p->decode_row_frame[i];
    for (int i = p->n_rows; i < rows_eff; i++) meta[L.decode_row_frame + i] = 0; /* padding */
    memcpy(meta + L.codes, p->codes, (size_t)p->n_frames * C * sizeof(int32_t));
    memset(meta + L.codes + (size_t)p->n_frames * C, 0,
           (size_t)(frames_eff - p->n_frames) * C * sizeof(int32_t));
}

/* GEPARD_CUDA_GRAPH_LOG=1: one line on stderr per graph captured (the step's
 * and the codec's), with its size and the host time it took — to see whether
 * a server still captures graphs after its warm-up. */
void gp_cuda_graph_note(const char *what, int size, int splits, int held, double ms) {
    static int on = -1;
    if (on < 0) {
        const char *env = getenv("GEPARD_CUDA_GRAPH_LOG");
        on = env && strcmp(env, "1") == 0;
    }
    if (on)
        fprintf(stderr,
                "gepard cuda: captured the %s graph for %d (splits %d) in %.2f ms, %d held\n", what,
                size, splits, ms, held);
}

double gp_cuda_host_ms(void) {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static gp_cuda_graph *find_graph(gp_dev_runner *r, const gp_dev_kv *kv, int rows, int splits) {
    for (int i = 0; i < r->n_graphs; i++) {
        gp_cuda_graph *g = &r->graphs[i];
        if (g->rows == rows && g->splits == splits && g->bt_stride == r->bt_stride &&
            g->kv_data == kv->data && g->kv_blocks == kv->blocks)
            return g;
    }
    return NULL;
}

/* Capture the decode step of `rows` rows (buffers reserved for them) into
 * the runner's cache; *out: its executable graph. */
static int capture_graph(gp_dev_runner *r, gp_dev_kv *kv, int rows, int splits,
                         cudaGraphExec_t *out, gp_dev_status *st) {
    /* A full cache gives up the graph launched longest ago (emptying it all
     * made a server recapture its big sizes in service). */
    int slot = r->n_graphs;
    if (slot >= r->max_graphs) {
        slot = 0;
        for (int i = 1; i < r->n_graphs; i++)
            if (r->graphs[i].last_use < r->graphs[slot].last_use) slot = i;
        cudaGraphExecDestroy(r->graphs[slot].exec);
        r->graphs[slot] = r->graphs[--r->n_graphs];
        slot = r->n_graphs;
    }
    const double t0 = gp_cuda_host_ms();
    cudaGraph_t graph = NULL;
    GP_CUDA_TRY(cudaStreamBeginCapture(r->stream, cudaStreamCaptureModeThreadLocal),
                "graph capture");
    int rc = forward(r, kv, rows, rows, rows, rows, splits, true, 0, 0, st);
    cudaError_t e = cudaStreamEndCapture(r->stream, &graph);
    if (rc) {
        if (graph) cudaGraphDestroy(graph);
        return rc;
    }
    GP_CUDA_TRY(e, "graph capture");
    cudaGraphExec_t exec = NULL;
    e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    GP_CUDA_TRY(e, "cudaGraphInstantiate");
    r->graphs[slot] =
        (gp_cuda_graph){rows, splits, r->bt_stride, kv->data, kv->blocks, exec, ++r->graph_clock};
    r->n_graphs = slot + 1;
    gp_cuda_graph_note("step", rows, splits, r->n_graphs, gp_cuda_host_ms() - t0);
    *out = exec;
    return 0;
}

/* Launch the decode step's graph for `rows` rows, captured on first use.
 * Steps that attend by tiles have one graph per size whatever the context,
 * so with graphs_ahead, when one of them is captured, every other tile size
 * the reserved buffers hold is captured with it: the captures happen
 * together — in a server, during its warm-up — rather than one by one in
 * service, each stalling every stream's next frame. */
static int launch_graph(gp_dev_runner *r, gp_dev_kv *kv, int rows, int splits, gp_dev_status *st) {
    gp_cuda_graph *found = find_graph(r, kv, rows, splits);
    if (found) {
        found->last_use = ++r->graph_clock;
        return gp_cuda_check(cudaGraphLaunch(found->exec, r->stream), "cudaGraphLaunch", st);
    }
    cudaGraphExec_t exec = NULL;
    int rc = capture_graph(r, kv, rows, splits, &exec, st);
    if (rc) return rc;
    const bool tiles = r->tile_rows > 0 && rows >= r->tile_rows && splits == 1;
    if (tiles && r->graphs_ahead && !r->pow2_buckets) {
        for (int size = bucket_for(r, r->tile_rows); size <= r->cap_rows;
             size = bucket_for(r, size + 1)) {
            cudaGraphExec_t other = NULL;
            if (size == rows || find_graph(r, kv, size, 1)) continue;
            if (r->n_graphs >= r->max_graphs) break; /* (room for the sizes in use) */
            if ((rc = capture_graph(r, kv, size, 1, &other, st))) return rc;
        }
        /* the graph launched now is the most recently used, not the ones
         * captured after it (the cache evicts the least recently used) */
        gp_cuda_graph *used = find_graph(r, kv, rows, splits);
        if (used) used->last_use = ++r->graph_clock;
    }
    return gp_cuda_check(cudaGraphLaunch(exec, r->stream), "cudaGraphLaunch", st);
}

/* GEPARD_CUDA_PROFILE_STEPS=ROWS:COUNT: the process's first COUNT steps of
 * ROWS rows run between cudaProfilerStart and Stop, so a profiler started
 * with --profile-from-start off (ncu) sees only them (scripts/device-run.sh
 * lm-ncu). */
static bool profile_this_step(int rows) {
    static std::atomic<int> left{-1}, want_rows{0};
    if (left.load() < 0) {
        int r = 0, n = 0;
        const char *env = getenv("GEPARD_CUDA_PROFILE_STEPS");
        if (!env || sscanf(env, "%d:%d", &r, &n) != 2 || r < 1 || n < 0) n = 0;
        want_rows.store(r);
        left.store(n);
    }
    if (rows != want_rows.load()) return false;
    int n = left.load();
    while (n > 0 && !left.compare_exchange_weak(n, n - 1)) {
    }
    return n > 0;
}

int gp_cuda_step_launch(gp_dev_runner *r, gp_dev_kv *kv, const gp_dev_step *p, gp_dev_status *st) {
    GP_CUDA_TRY(cudaSetDevice(r->m->device), "cudaSetDevice");
    if (r->launched) {
        GP_CUDA_TRY(cudaEventSynchronize(r->done), "previous step");
        r->launched = false;
    }
    const int H = r->m->d.hidden;
    int max_blocks = 1, max_len = 1;
    for (int s = 0; s < p->n_seqs; s++) {
        if (p->seq_n_blocks[s] > max_blocks) max_blocks = p->seq_n_blocks[s];
        if (p->seq_start[s] + p->seq_rows[s] > max_len) max_len = p->seq_start[s] + p->seq_rows[s];
        if ((int64_t)(p->seq_start[s] + p->seq_rows[s]) >
            (int64_t)p->seq_n_blocks[s] * kv->block_size)
            return gp_cuda_fail(st, GEPARD_ERR_INTERNAL,
                                "CUDA step: sequence %d has too few KV blocks", s);
    }
    /* Sequences with a run-time adapter: their rows, in step order. */
    r->n_uses = 0;
    for (int s = 0, row = 0; p->seq_lora && s < p->n_seqs; row += p->seq_rows[s], s++) {
        if (!p->seq_lora[s]) continue;
        int idx = -1;
        for (int i = 0; i < r->n_loras; i++)
            if (r->loras[i].id == p->seq_lora[s]) idx = i;
        if (idx < 0)
            return gp_cuda_fail(st, GEPARD_ERR_INTERNAL, "CUDA step: LoRA adapter not uploaded");
        if (r->n_uses == r->cap_uses) {
            int cap = r->cap_uses ? 2 * r->cap_uses : 16;
            gp_cuda_lora_use *g =
                (gp_cuda_lora_use *)realloc(r->uses, (size_t)cap * sizeof *r->uses);
            if (!g) return gp_cuda_fail(st, GEPARD_ERR_NOMEM, "out of host memory");
            r->uses = g;
            r->cap_uses = cap;
        }
        r->uses[r->n_uses++] = (gp_cuda_lora_use){row, p->seq_rows[s], idx};
    }
    const bool graph = p->graph_ok && r->n_uses == 0 && p->n_rows == p->n_seqs &&
                       p->n_decode_rows == p->n_rows && p->n_frames <= p->n_rows &&
                       getenv("GEPARD_CUDA_GRAPHS") == NULL;
    const int rows_eff = graph ? bucket_for(r, p->n_rows) : p->n_rows;
    const int seqs_eff = graph ? rows_eff : p->n_seqs;
    const int frames_eff = graph ? rows_eff : p->n_frames;
    int rc = reserve(r, rows_eff, p->reserve_rows, max_blocks, st);
    if (rc) return rc;
    fill_meta(r, kv, p, rows_eff, seqs_eff, frames_eff);
    const int n_prefill = p->n_rows - p->n_decode_rows;
    if (profile_this_step(p->n_rows)) {
        r->profiling = true;
        cudaProfilerStart();
    }
    GP_CUDA_TRY(cudaEventRecord(r->t_start, r->stream), "cudaEventRecord");
    GP_CUDA_TRY(cudaMemcpyAsync(r->meta, r->h_meta, gp_cuda_meta_layout_for(r).total * 4,
                                cudaMemcpyHostToDevice, r->stream),
                "step metadata upload");
    if (n_prefill > 0) {
        memcpy(r->h_prefill, p->prefill_rows, (size_t)n_prefill * H * sizeof(float));
        GP_CUDA_TRY(cudaMemcpyAsync(r->prefill, r->h_prefill, (size_t)n_prefill * H * 4,
                                    cudaMemcpyHostToDevice, r->stream),
                    "prefill upload");
    }
    const bool one_row_each = p->n_rows == p->n_seqs;
    const bool fused = one_row_each && gp_cuda_decode_attention_fits(r->m) && !r->no_fused &&
                       !r->m->layers[0].qkv_bias;
    /* (tiles do not split: one graph per size, whatever the context) */
    const bool tiles = fused && r->tile_rows > 0 && rows_eff >= r->tile_rows;
    const int splits = tiles   ? 1
                       : fused ? decode_splits_for(r, rows_eff, max_len)
                               : splits_for(r, rows_eff, max_len);
    /* A mixed step's decode rows by tiles (GEPARD_CUDA_MIXED_TILES=1), its
     * prefill rows split by their own count */
    const bool mixed_tiles =
        !one_row_each && r->mixed_tiles && r->tile_rows > 0 && p->n_decode_rows >= r->tile_rows &&
        gp_cuda_decode_attention_fits(r->m) && !r->no_fused && !r->m->layers[0].qkv_bias;
    const int tiled = mixed_tiles ? p->n_decode_rows : 0;
    const int tiled_splits = mixed_tiles ? splits_for(r, p->n_rows - p->n_decode_rows, max_len) : 0;
    r->mixed_steps += !one_row_each && p->n_decode_rows > 0;
    r->mixed_tiled_steps += mixed_tiles;
    if (graph)
        rc = launch_graph(r, kv, rows_eff, splits, st);
    else
        rc = forward(r, kv, p->n_rows, p->n_seqs, p->n_frames, p->n_decode_rows, splits,
                     p->n_rows == p->n_seqs, tiled, tiled_splits, st);
    if (rc) return rc;
    const int T = r->m->d.total_logits;
    GP_CUDA_TRY(cudaMemcpyAsync(r->h_hidden, r->hidden, (size_t)p->n_seqs * H * 4,
                                cudaMemcpyDeviceToHost, r->stream),
                "hidden download");
    GP_CUDA_TRY(cudaMemcpyAsync(r->h_logits, r->logits, (size_t)p->n_seqs * T * 4,
                                cudaMemcpyDeviceToHost, r->stream),
                "logits download");
    GP_CUDA_TRY(cudaEventRecord(r->t_end, r->stream), "cudaEventRecord");
    GP_CUDA_TRY(cudaEventRecord(r->done, r->stream), "cudaEventRecord");
    r->n_rows = p->n_rows;
    r->n_seqs = p->n_seqs;
    r->launched = true;
    return 0;
}

int gp_cuda_step_wait(gp_dev_runner *r, const float **hidden, const float **logits,
                      gp_dev_status *st) {
    if (!r->launched) return gp_cuda_fail(st, GEPARD_ERR_INTERNAL, "CUDA: no step in flight");
    r->launched = false;
    GP_CUDA_TRY(cudaSetDevice(r->m->device), "cudaSetDevice");
    GP_CUDA_TRY(cudaEventSynchronize(r->done), "step");
    if (r->profiling) {
        cudaProfilerStop();
        r->profiling = false;
    }
    float ms = 0;
    if (cudaEventElapsedTime(&ms, r->t_start, r->t_end) == cudaSuccess) r->last_gpu_ms = ms;
    *hidden = r->h_hidden;
    *logits = r->h_logits;
    return 0;
}

int gp_cuda_step_all_hidden(gp_dev_runner *r, float *out, gp_dev_status *st) {
    const gp_dev_model *m = r->m;
    const int H = m->d.hidden;
    GP_CUDA_TRY(cudaSetDevice(m->device), "cudaSetDevice");
    float *tmp = NULL;
    GP_CUDA_TRY(cudaMalloc(&tmp, (size_t)r->n_rows * H * 4), "hidden buffer");
    gp_cuda_rmsnorm(r->x, H, NULL, r->n_rows, H, m->final_norm, m->d.rms_eps, tmp, true, H,
                    r->stream);
    int rc = gp_cuda_check(
        cudaMemcpyAsync(out, tmp, (size_t)r->n_rows * H * 4, cudaMemcpyDeviceToHost, r->stream),
        "hidden download", st);
    if (!rc) rc = gp_cuda_check(cudaStreamSynchronize(r->stream), "hidden download", st);
    cudaFree(tmp);
    return rc;
}

double gp_cuda_step_gpu_ms(gp_dev_runner *r) { return r->last_gpu_ms; }
