/* generate_step.c — one batched step over many generation streams (see
 * generate.h): decode rows of every running stream first, then prefill chunks
 * up to the row budget, one backbone forward for all of them, then stop
 * checks and one batched head evaluation, then sampling stream by stream. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "model/generate.h"
#include "model/overlay.h"

typedef struct gp_gen_slot {
    gp_gen_stream *stream;
    gp_gen_branch *branch;
    int n_rows;
    bool decode;
} gp_gen_slot;

void gp_gen_workspace_init(gp_gen_workspace *w) {
    memset(w, 0, sizeof *w);
    gp_forward_scratch_init(&w->forward);
}

void gp_gen_workspace_free(gp_gen_workspace *w) {
    gp_forward_scratch_free(&w->forward);
    gp_aligned_free(w->rows);
    gp_aligned_free(w->hidden);
    gp_aligned_free(w->embed_work);
    gp_aligned_free(w->logits);
    free(w->codes);
    free(w->seqs);
    free(w->slots);
    free(w->sampling);
    memset(w, 0, sizeof *w);
}

static int workspace_reserve(gp_gen_workspace *w, const gp_model *m, size_t rows, size_t seqs,
                             gp_error *err) {
    const size_t H = (size_t)m->cfg.backbone.hidden_size, C = (size_t)m->cfg.num_channels;
    const size_t E = (size_t)m->cfg.audio_embed_dim, total = (size_t)m->cfg.total_logits;
    if (rows > w->cap_rows) {
        size_t cap = w->cap_rows ? w->cap_rows : 64;
        while (cap < rows) cap *= 2;
        gp_aligned_free(w->rows);
        gp_aligned_free(w->embed_work);
        w->rows = gp_aligned_alloc(cap * H * sizeof(float));
        w->embed_work = gp_aligned_alloc(cap * (C * E > H ? C * E : H) * sizeof(float));
        w->cap_rows = w->rows && w->embed_work ? cap : 0;
        if (!w->cap_rows) return gp_fail_oom(err, "step rows", cap * H * 4);
    }
    if (seqs > w->cap_seqs) {
        size_t cap = w->cap_seqs ? w->cap_seqs : 16;
        while (cap < seqs) cap *= 2;
        gp_aligned_free(w->hidden);
        gp_aligned_free(w->logits);
        free(w->codes);
        free(w->seqs);
        free(w->slots);
        free(w->sampling);
        w->hidden = gp_aligned_alloc(cap * H * sizeof(float));
        w->logits = gp_aligned_alloc(cap * total * sizeof(float));
        w->codes = malloc(cap * C * sizeof(int32_t));
        w->seqs = malloc(cap * sizeof *w->seqs);
        w->slots = malloc(cap * sizeof *w->slots);
        w->sampling = malloc(cap * sizeof *w->sampling);
        w->cap_seqs =
            w->hidden && w->logits && w->codes && w->seqs && w->slots && w->sampling ? cap : 0;
        if (!w->cap_seqs) return gp_fail_oom(err, "step state", cap * H * 4);
    }
    return GEPARD_OK;
}

static void add_slot(gp_gen_workspace *w, int *n_slots, gp_gen_stream *s, gp_gen_branch *b,
                     int rows, bool decode) {
    w->slots[*n_slots] = (gp_gen_slot){s, b, rows, decode};
    w->seqs[*n_slots] = (gp_backbone_seq){&b->kv, rows, s->lora};
    (*n_slots)++;
}

static bool prefill_complete(const gp_gen_stream *s) {
    return s->cond.fed == s->cond.n_rows && (!s->uncond.used || s->uncond.fed == s->uncond.n_rows);
}

/* Plan the batch: decode rows (one embedded frame, fed to each active branch),
 * then prefill chunks. Returns the number of rows. */
static int plan_rows(gp_gen_stream **streams, int n, gp_gen_workspace *w, int max_rows,
                     int *n_slots, gp_pool *pool) {
    const gp_model *m = streams[0]->model;
    const int H = m->cfg.backbone.hidden_size, C = m->cfg.num_channels;
    int n_decode = 0;
    for (int i = 0; i < n; i++) {
        gp_gen_stream *s = streams[i];
        if (!gp_gen_begin_decode(s)) continue;
        memcpy(w->codes + (size_t)n_decode * C, s->frames + (size_t)(s->n_frames - 1) * C,
               (size_t)C * sizeof(int32_t));
        n_decode++;
    }
    /* Embed every decoding stream's last frame in one batch, into the tail
     * half of the row buffer, then copy each to its branch rows. */
    float *embeds = w->hidden; /* [n_decode][H], free until the forward */
    if (n_decode) gp_overlay_embed_frames(m, w->codes, n_decode, embeds, w->embed_work, pool);
    int rows = 0, d = 0;
    for (int i = 0; i < n; i++) {
        gp_gen_stream *s = streams[i];
        if (s->phase != GP_GEN_DECODE) continue;
        const float *e = embeds + (size_t)d++ * H;
        memcpy(w->rows + (size_t)rows++ * H, e, (size_t)H * sizeof(float));
        add_slot(w, n_slots, s, &s->cond, 1, true);
        if (s->uncond.used && gp_gen_guided(s, s->n_frames)) {
            memcpy(w->rows + (size_t)rows++ * H, e, (size_t)H * sizeof(float));
            add_slot(w, n_slots, s, &s->uncond, 1, true);
        }
    }
    for (int i = 0; i < n && rows < max_rows; i++) {
        gp_gen_stream *s = streams[i];
        if (s->phase != GP_GEN_PREFILL) continue;
        gp_gen_branch *branches[2] = {&s->cond, &s->uncond};
        for (int k = 0; k < 2 && rows < max_rows; k++) {
            gp_gen_branch *b = branches[k];
            if (!b->used || b->fed == b->n_rows) continue;
            int take = b->n_rows - b->fed;
            if (take > max_rows - rows) take = max_rows - rows;
            memcpy(w->rows + (size_t)rows * H, b->rows + (size_t)b->fed * H,
                   (size_t)take * H * sizeof(float));
            rows += take;
            add_slot(w, n_slots, s, b, take, false);
        }
    }
    return rows;
}

int gp_gen_step(gp_gen_stream **streams, int n, gp_kv_pool *kv, gp_gen_workspace *w, int max_rows,
                gp_pool *pool, gp_error *err) {
    if (n <= 0) return 0;
    const gp_model *m = streams[0]->model;
    const int H = m->cfg.backbone.hidden_size, total = m->cfg.total_logits;
    if (max_rows < 1) max_rows = 1;
    /* Worst case: 2 decode rows per stream + max_rows prefill rows. */
    int rc = workspace_reserve(w, m, (size_t)2 * n + (size_t)max_rows, (size_t)2 * n + 2, err);
    if (rc) return -rc;
    int n_slots = 0;
    int rows = plan_rows(streams, n, w, max_rows, &n_slots, pool);
    if (n_slots == 0) return 0;
    rc = gp_backbone_forward(m, kv, &w->forward, w->seqs, n_slots, w->rows, w->hidden, NULL, pool,
                             err);
    if (rc) return -rc;
    (void)rows;
    for (int i = 0; i < n_slots; i++) {
        gp_gen_slot *slot = &w->slots[i];
        if (!slot->decode) slot->branch->fed += slot->n_rows;
        if (slot->decode || slot->branch->fed == slot->branch->n_rows)
            memcpy(slot->branch->hidden, w->hidden + (size_t)i * H, (size_t)H * sizeof(float));
    }
    /* Stop checks (cond branch only), then collect the hidden states that
     * need heads: frame 0 after a complete prefill, or a decode step that did
     * not stop. */
    int n_heads = 0, worked = 0;
    gp_gen_stream **sampling = w->sampling;
    for (int i = 0; i < n; i++) {
        gp_gen_stream *s = streams[i];
        bool ran = false;
        for (int k = 0; k < n_slots; k++)
            if (w->slots[k].stream == s) ran = true;
        if (!ran) continue;
        worked++;
        if (s->phase == GP_GEN_PREFILL && !prefill_complete(s)) continue;
        if (s->phase == GP_GEN_DECODE) {
            const float *sw = s->lora && s->lora->has_stop_head ? s->lora->stop_weight : NULL;
            float sb = sw ? s->lora->stop_bias : 0;
            s->stop_probability = gp_overlay_stop_probability(m, s->cond.hidden, sw, sb);
            if (s->stop_probability > s->params.stop_threshold) {
                s->phase = GP_GEN_DONE;
                s->stop_reason = GP_STOP_HEAD;
                gp_gen_release_finished_branches(s, kv);
                continue;
            }
        }
        sampling[n_heads++] = s;
    }
    /* One head evaluation for all: rows [cond, uncond?] per sampling stream. */
    int head_rows = 0;
    for (int i = 0; i < n_heads; i++) {
        gp_gen_stream *s = sampling[i];
        memcpy(w->rows + (size_t)head_rows++ * H, s->cond.hidden, (size_t)H * sizeof(float));
        if (s->uncond.used && gp_gen_guided(s, s->n_frames))
            memcpy(w->rows + (size_t)head_rows++ * H, s->uncond.hidden, (size_t)H * sizeof(float));
    }
    if (head_rows) gp_overlay_heads(m, w->rows, head_rows, w->logits, pool);
    int r = 0;
    for (int i = 0; i < n_heads; i++) {
        gp_gen_stream *s = sampling[i];
        const float *cond = w->logits + (size_t)r++ * total, *uncond = NULL;
        if (s->uncond.used && gp_gen_guided(s, s->n_frames))
            uncond = w->logits + (size_t)r++ * total;
        rc = gp_gen_sample_frame(s, cond, uncond, err);
        if (rc) return -rc;
        if (s->phase == GP_GEN_PREFILL) s->phase = GP_GEN_DECODE;
        gp_gen_begin_decode(s); /* ends the stream now if its length limit is reached */
        gp_gen_release_finished_branches(s, kv);
    }
    return worked;
}
