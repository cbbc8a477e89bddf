/* backbone.c — Qwen3.5 full-attention decoder layers over a batch of rows from
 * several sequences (see backbone.h; the math is MODEL.md §C). Written as the
 * readable reference: small named steps, f32 everywhere; the matrix products
 * go through gp_matmul, which picks the fast kernels. */
#include "model/backbone.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "compute/attention.h"

void gp_forward_scratch_init(gp_forward_scratch *s) { memset(s, 0, sizeof *s); }

void gp_forward_scratch_free(gp_forward_scratch *s) {
    float **bufs[] = {&s->x,    &s->a,  &s->qg,  &s->q,        &s->k,        &s->v,     &s->att,
                      &s->gate, &s->up, &s->tmp, &s->rope_cos, &s->rope_sin, &s->scores};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gp_aligned_free(*bufs[i]);
    free(s->row_seq);
    free(s->row_pos);
    memset(s, 0, sizeof *s);
}

static int scratch_reserve(gp_forward_scratch *s, const gp_model *m, int rows, int max_positions,
                           int threads, gp_error *err) {
    const gp_backbone_config *bb = &m->cfg.backbone;
    if ((size_t)rows > s->capacity_rows) {
        size_t cap = s->capacity_rows ? s->capacity_rows : 16;
        while (cap < (size_t)rows) cap *= 2;
        gp_forward_scratch fresh;
        gp_forward_scratch_init(&fresh);
        fresh.scores = s->scores;
        fresh.score_capacity = s->score_capacity;
        fresh.score_threads = s->score_threads;
        s->scores = NULL;
        gp_forward_scratch_free(s);
        *s = fresh;
        const size_t H = (size_t)bb->hidden_size, D = (size_t)bb->head_dim;
        const size_t NH = (size_t)bb->num_heads, NKV = (size_t)bb->num_kv_heads;
        const size_t I = (size_t)bb->intermediate_size;
        size_t wide = I > 2 * NH * D ? I : 2 * NH * D;
        s->x = gp_aligned_alloc(cap * H * 4);
        s->a = gp_aligned_alloc(cap * H * 4);
        s->qg = gp_aligned_alloc(cap * 2 * NH * D * 4);
        s->q = gp_aligned_alloc(cap * NH * D * 4);
        s->k = gp_aligned_alloc(cap * NKV * D * 4);
        s->v = gp_aligned_alloc(cap * NKV * D * 4);
        s->att = gp_aligned_alloc(cap * NH * D * 4);
        s->gate = gp_aligned_alloc(cap * I * 4);
        s->up = gp_aligned_alloc(cap * I * 4);
        s->tmp = gp_aligned_alloc(cap * wide * 4);
        s->rope_cos = gp_aligned_alloc(cap * (size_t)(bb->rotary_dim / 2 + 1) * 4);
        s->rope_sin = gp_aligned_alloc(cap * (size_t)(bb->rotary_dim / 2 + 1) * 4);
        s->row_seq = malloc(cap * sizeof(int));
        s->row_pos = malloc(cap * sizeof(int));
        if (!s->x || !s->a || !s->qg || !s->q || !s->k || !s->v || !s->att || !s->gate || !s->up ||
            !s->tmp || !s->rope_cos || !s->rope_sin || !s->row_seq || !s->row_pos) {
            gp_forward_scratch_free(s);
            return gp_fail_oom(err, "forward pass buffers", cap * (H * 4 + wide * 4) * 4);
        }
        s->capacity_rows = cap;
    }
    const size_t group = (size_t)(bb->num_heads / bb->num_kv_heads);
    if ((size_t)max_positions * group > s->score_capacity || threads > s->score_threads) {
        size_t cap = s->score_capacity ? s->score_capacity : 256;
        while (cap < (size_t)max_positions * group) cap *= 2;
        int nthreads = threads > s->score_threads ? threads : s->score_threads;
        gp_aligned_free(s->scores);
        s->scores = gp_aligned_alloc(cap * (size_t)nthreads * sizeof(float));
        if (!s->scores) {
            s->score_capacity = 0;
            return gp_fail_oom(err, "attention scores", cap * (size_t)nthreads * 4);
        }
        s->score_capacity = cap;
        s->score_threads = nthreads;
    }
    return GEPARD_OK;
}

void gp_rmsnorm_rows(const float *x, int n, int width, const float *gain, float eps, float *y) {
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * width;
        float *yr = y + (size_t)r * width;
        double sum = 0;
        for (int i = 0; i < width; i++) sum += (double)xr[i] * xr[i];
        float inv = 1.0f / sqrtf((float)(sum / width) + eps);
        for (int i = 0; i < width; i++) yr[i] = (xr[i] * inv) * gain[i];
    }
}

/* cos/sin of (float)position · inv_freq[i] for every row (MODEL.md §C.3). */
static void rope_tables(const gp_model *m, gp_forward_scratch *s, int rows) {
    const int half = m->cfg.backbone.rotary_dim / 2;
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < half; i++) {
            float angle = (float)s->row_pos[r] * m->rope_inv_freq[i];
            s->rope_cos[(size_t)r * half + i] = (float)cos((double)angle);
            s->rope_sin[(size_t)r * half + i] = (float)sin((double)angle);
        }
    }
}

/* Rotate-half RoPE on one head vector: pairs (i, i + half). */
static void rope_apply(float *z, const float *cosv, const float *sinv, int half) {
    for (int i = 0; i < half; i++) {
        float a = z[i], b = z[i + half];
        z[i] = a * cosv[i] - b * sinv[i];
        z[i + half] = b * cosv[i] + a * sinv[i];
    }
}

static void add_bias_rows(float *y, int rows, int width, const float *bias) {
    if (!bias) return;
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < width; i++) y[(size_t)r * width + i] += bias[i];
}

/* y = x·Wᵀ (+ bias) (+ each sequence's run-time LoRA update). */
static void linear(const gp_matrix *w, const float *bias, const float *x, int rows, float *y,
                   const gp_backbone_seq *seqs, int n_seqs, int layer, gp_lora_target target,
                   float *lora_tmp, gp_pool *pool) {
    gp_matmul(w, x, rows, w->cols, y, w->rows, pool);
    add_bias_rows(y, rows, w->rows, bias);
    int row = 0;
    for (int s = 0; s < n_seqs; s++) {
        const gp_lora_module *mod = gp_lora_module_for(seqs[s].lora, layer, target);
        if (mod)
            gp_lora_apply(mod, x + (size_t)row * w->cols, seqs[s].n_rows, w->cols,
                          y + (size_t)row * w->rows, w->rows, lora_tmp);
        row += seqs[s].n_rows;
    }
}

/* Split q/gate per head, q_norm/k_norm, RoPE, and store K/V in the cache,
 * for rows [r0, r1). */
static void attention_inputs(const gp_model *m, const gp_layer *L, int layer, gp_kv_pool *kv,
                             gp_forward_scratch *s, const gp_backbone_seq *seqs, int r0, int r1) {
    const gp_backbone_config *bb = &m->cfg.backbone;
    const int D = bb->head_dim, NH = bb->num_heads, NKV = bb->num_kv_heads;
    const int half = bb->rotary_dim / 2;
    const float eps = (float)bb->rms_norm_eps;
    for (int r = r0; r < r1; r++) {
        const float *cosv = s->rope_cos + (size_t)r * half, *sinv = s->rope_sin + (size_t)r * half;
        for (int h = 0; h < NH; h++) {
            float *q = s->q + ((size_t)r * NH + h) * D;
            const float *src = s->qg + (size_t)r * 2 * NH * D + (size_t)h * 2 * D;
            gp_rmsnorm_rows(src, 1, D, L->q_norm, eps, q);
            rope_apply(q, cosv, sinv, half);
        }
        const gp_backbone_seq *seq = &seqs[s->row_seq[r]];
        for (int g = 0; g < NKV; g++) {
            float *k = gp_kv_at(kv, seq->kv, layer, 0, g, s->row_pos[r]);
            float *v = gp_kv_at(kv, seq->kv, layer, 1, g, s->row_pos[r]);
            gp_rmsnorm_rows(s->k + ((size_t)r * NKV + g) * D, 1, D, L->k_norm, eps, k);
            rope_apply(k, cosv, sinv, half);
            memcpy(v, s->v + ((size_t)r * NKV + g) * D, (size_t)D * sizeof(float));
        }
    }
}

/* Row-wise steps split over the pool by rows (each row's values are the
 * same whatever the split): the RMSNorm of the residual stream and the
 * attention inputs. */
typedef struct rows_job {
    const gp_model *m;
    const gp_layer *L;
    int layer, rows, parts;
    gp_kv_pool *kv;
    gp_forward_scratch *s;
    const gp_backbone_seq *seqs;
    const float *gain; /* RMSNorm s->x -> s->a with this gain, or NULL: attention inputs */
} rows_job;

static void rows_task(void *ctx, int task, int worker) {
    (void)worker;
    const rows_job *j = ctx;
    long r0, r1;
    gp_split_range(j->rows, j->parts, task, 1, &r0, &r1);
    if (r1 <= r0) return;
    if (j->gain) {
        const int H = j->m->cfg.backbone.hidden_size;
        gp_rmsnorm_rows(j->s->x + (size_t)r0 * H, (int)(r1 - r0), H, j->gain,
                        (float)j->m->cfg.backbone.rms_norm_eps, j->s->a + (size_t)r0 * H);
    } else {
        attention_inputs(j->m, j->L, j->layer, j->kv, j->s, j->seqs, (int)r0, (int)r1);
    }
}

static void run_rows(rows_job *job, gp_pool *pool) {
    job->parts = gp_pool_size(pool) < job->rows ? gp_pool_size(pool) : job->rows;
    gp_pool_parallel_for(pool, job->parts, rows_task, job);
}

typedef struct attention_job {
    const gp_model *m;
    int layer;
    gp_kv_pool *kv;
    gp_forward_scratch *s;
    const gp_backbone_seq *seqs;
} attention_job;

/* One task per (row, KV head): the query heads sharing that KV head read
 * each cached key and value once (grouped-query attention); then their
 * outputs are multiplied by sigmoid(gate) (MODEL.md §C.2). */
static void attention_task(void *ctx, int task, int worker) {
    const attention_job *job = ctx;
    const gp_backbone_config *bb = &job->m->cfg.backbone;
    const int NH = bb->num_heads, NKV = bb->num_kv_heads, D = bb->head_dim;
    const int group = NH / NKV;
    const int r = task / NKV, g = task % NKV;
    gp_forward_scratch *s = job->s;
    const gp_backbone_seq *seq = &job->seqs[s->row_seq[r]];
    const size_t first = (size_t)r * NH + (size_t)g * group;
    gp_attend_cached_group(job->kv, seq->kv, job->layer, g, s->q + first * D, D, group,
                           s->row_pos[r] + 1, 1.0f / sqrtf((float)D), s->att + first * D, D,
                           s->scores + (size_t)worker * s->score_capacity);
    for (int h = g * group; h < (g + 1) * group; h++) {
        float *o = s->att + ((size_t)r * NH + h) * D;
        const float *gate = s->qg + (size_t)r * 2 * NH * D + (size_t)h * 2 * D + D;
        for (int d = 0; d < D; d++) o[d] *= 1.0f / (1.0f + expf(-gate[d]));
    }
}

/* gate[i] = silu(gate[i]) · up[i] over n elements, in parts on the pool
 * (elementwise: the same values whatever the split). */
typedef struct silu_job {
    float *gate;
    const float *up;
    size_t n;
    int parts;
} silu_job;

static void silu_task(void *ctx, int task, int worker) {
    (void)worker;
    const silu_job *job = ctx;
    long i0, i1;
    gp_split_range((long)job->n, job->parts, task, 16, &i0, &i1);
    for (long i = i0; i < i1; i++) {
        float g = job->gate[i];
        job->gate[i] = g / (1.0f + expf(-g)) * job->up[i];
    }
}

static void silu_mul(float *gate, const float *up, size_t n, gp_pool *pool) {
    silu_job job = {gate, up, n, gp_pool_size(pool)};
    gp_pool_parallel_for(pool, job.parts, silu_task, &job);
}

static void add_rows(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

static void decoder_layer(const gp_model *m, int l, gp_kv_pool *kv, gp_forward_scratch *s,
                          const gp_backbone_seq *seqs, int n_seqs, int rows, gp_pool *pool) {
    const gp_backbone_config *bb = &m->cfg.backbone;
    const gp_layer *L = &m->layers[l];
    const int H = bb->hidden_size;
    float *lora_tmp = s->tmp;
    /* Attention block. */
    rows_job rj = {m, L, l, rows, 1, kv, s, seqs, L->input_norm};
    run_rows(&rj, pool);
    linear(&L->q_proj, L->q_bias, s->a, rows, s->qg, seqs, n_seqs, l, GP_LORA_Q, lora_tmp, pool);
    linear(&L->k_proj, L->k_bias, s->a, rows, s->k, seqs, n_seqs, l, GP_LORA_K, lora_tmp, pool);
    linear(&L->v_proj, L->v_bias, s->a, rows, s->v, seqs, n_seqs, l, GP_LORA_V, lora_tmp, pool);
    rj.gain = NULL;
    run_rows(&rj, pool);
    attention_job job = {m, l, kv, s, seqs};
    gp_pool_parallel_for(pool, rows * bb->num_kv_heads, attention_task, &job);
    linear(&L->o_proj, L->o_bias, s->att, rows, s->a, seqs, n_seqs, l, GP_LORA_O, lora_tmp, pool);
    add_rows(s->x, s->a, (size_t)rows * H);
    /* MLP block. */
    rj.gain = L->post_norm;
    run_rows(&rj, pool);
    linear(&L->gate_proj, NULL, s->a, rows, s->gate, seqs, n_seqs, l, GP_LORA_GATE, lora_tmp, pool);
    linear(&L->up_proj, NULL, s->a, rows, s->up, seqs, n_seqs, l, GP_LORA_UP, lora_tmp, pool);
    silu_mul(s->gate, s->up, (size_t)rows * bb->intermediate_size, pool);
    linear(&L->down_proj, NULL, s->gate, rows, s->a, seqs, n_seqs, l, GP_LORA_DOWN, lora_tmp, pool);
    add_rows(s->x, s->a, (size_t)rows * H);
}

int gp_backbone_forward(const gp_model *m, gp_kv_pool *kv, gp_forward_scratch *s,
                        const gp_backbone_seq *seqs, int n_seqs, const float *x_in, float *h_last,
                        const gp_backbone_debug *debug, gp_pool *pool, gp_error *err) {
    const gp_backbone_config *bb = &m->cfg.backbone;
    const int H = bb->hidden_size;
    int rows = 0, max_positions = 0;
    for (int i = 0; i < n_seqs; i++) {
        const gp_kv_seq *kvs = seqs[i].kv;
        if (seqs[i].n_rows < 1)
            return gp_fail(err, GEPARD_ERR_INTERNAL, "backbone: sequence %d has no rows", i);
        int end = kvs->length + seqs[i].n_rows;
        if (gp_kv_blocks_for(kv, end) > kvs->n_blocks)
            return gp_fail(err, GEPARD_ERR_INTERNAL,
                           "backbone: KV blocks for %d positions were not reserved", end);
        rows += seqs[i].n_rows;
        if (end > max_positions) max_positions = end;
    }
    int rc = scratch_reserve(s, m, rows, max_positions, gp_pool_size(pool), err);
    if (rc) return rc;
    int r = 0;
    for (int i = 0; i < n_seqs; i++)
        for (int j = 0; j < seqs[i].n_rows; j++, r++) {
            s->row_seq[r] = i;
            s->row_pos[r] = seqs[i].kv->length + j;
        }
    memcpy(s->x, x_in, (size_t)rows * H * sizeof(float));
    if (debug && debug->layer_out && debug->layer_out[0])
        memcpy(debug->layer_out[0], s->x, (size_t)rows * H * sizeof(float));
    rope_tables(m, s, rows);
    for (int l = 0; l < bb->num_layers; l++) {
        decoder_layer(m, l, kv, s, seqs, n_seqs, rows, pool);
        if (debug && debug->layer_out && debug->layer_out[l + 1])
            memcpy(debug->layer_out[l + 1], s->x, (size_t)rows * H * sizeof(float));
    }
    if (debug && debug->layer_out && debug->layer_out[bb->num_layers + 1])
        gp_rmsnorm_rows(s->x, rows, H, m->final_norm, (float)bb->rms_norm_eps,
                        debug->layer_out[bb->num_layers + 1]);
    r = 0;
    for (int i = 0; i < n_seqs; i++) {
        r += seqs[i].n_rows;
        gp_rmsnorm_rows(s->x + (size_t)(r - 1) * H, 1, H, m->final_norm, (float)bb->rms_norm_eps,
                        h_last + (size_t)i * H);
        seqs[i].kv->length += seqs[i].n_rows;
    }
    return GEPARD_OK;
}
