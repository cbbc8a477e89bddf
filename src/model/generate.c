/* generate.c — the per-stream half of generation: creation, parameters,
 * KV reservation, guidance schedule, and the stop-check / sampling step in
 * the reference order (MODEL.md §E.2–E.6). The batched driver is in
 * generate_step.c. */
#include "model/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

gp_gen_params gp_gen_default_params(void) {
    gp_gen_params p = {
        .temperature = 1.0f,
        .top_k = 0,
        .stop_threshold = 0.5f,
        .max_frames = 2000,
        .repetition_penalty = 1.0f,
        .repetition_window = 32,
        .cfg_scale = 1.0f,
        .cfg_frames = -1,
        .cfg_uncond = GP_CFG_EMPTY_TEXT,
        .force_stop_frames = -1,
        .seed = 0,
    };
    return p;
}

int gp_gen_params_validate(const gp_gen_params *p, gp_error *err) {
    if (!isfinite(p->temperature))
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "temperature must be a finite number");
    if (p->top_k < 0)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "top_k must be >= 0 (0 turns it off)");
    if (!isfinite(p->stop_threshold))
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "stop_threshold must be a finite number");
    if (p->max_frames < 1 || p->max_frames > 1000000)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "max_frames must be between 1 and 1000000 (got %d)", p->max_frames);
    if (!(p->repetition_penalty > 0) || !isfinite(p->repetition_penalty))
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "repetition_penalty must be > 0 (1 turns it off)");
    if (p->repetition_window < 0)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "repetition_window must be >= 0 (0 means the whole history)");
    if (!isfinite(p->cfg_scale))
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "cfg_scale must be a finite number");
    if (p->cfg_frames < -1)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "cfg_frames must be >= 0 (or unset for every frame)");
    if (p->cfg_uncond != GP_CFG_EMPTY_TEXT && p->cfg_uncond != GP_CFG_AUDIO_ONLY)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "cfg_uncond must be empty_text or audio_only");
    if (p->force_stop_frames < -1)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "force_stop_frames must be >= 0 (or unset)");
    return GEPARD_OK;
}

bool gp_gen_params_use_cfg(const gp_gen_params *p) {
    return p->cfg_scale != 1.0f && p->cfg_frames != 0;
}

bool gp_gen_guided(const gp_gen_stream *s, int t) {
    return gp_gen_params_use_cfg(&s->params) &&
           (s->params.cfg_frames < 0 || t < s->params.cfg_frames);
}

int gp_gen_decode_rows(gp_gen_stream *const *streams, int n) {
    int rows = 0;
    for (int i = 0; i < n; i++) {
        const gp_gen_stream *s = streams[i];
        if (s->phase == GP_GEN_DECODE)
            rows += 1 + (s->uncond.used && gp_gen_guided(s, s->n_frames));
    }
    return rows;
}

int gp_gen_prefill_waiting(gp_gen_stream *const *streams, int n, bool *started) {
    int waiting = 0;
    *started = false;
    for (int i = 0; i < n; i++) {
        const gp_gen_stream *s = streams[i];
        if (s->phase != GP_GEN_PREFILL) continue;
        waiting++;
        if (s->prefill_urgent || s->cond.fed > 0 || (s->uncond.used && s->uncond.fed > 0))
            *started = true;
    }
    return waiting;
}

static int branch_init(gp_gen_branch *b, const gp_model *m, const int32_t *ids, int n_ids,
                       const float *prefix, int prefix_rows, gp_error *err) {
    const int H = m->cfg.backbone.hidden_size;
    gp_kv_seq_init(&b->kv);
    b->used = true;
    b->n_rows = prefix_rows + n_ids;
    b->rows = gp_aligned_alloc((size_t)b->n_rows * H * sizeof(float));
    b->hidden = gp_aligned_alloc((size_t)H * sizeof(float));
    b->logits = gp_aligned_alloc((size_t)m->cfg.total_logits * sizeof(float));
    if (!b->rows || !b->hidden || !b->logits)
        return gp_fail_oom(err, "prefill rows", (size_t)b->n_rows * H * 4);
    if (prefix_rows) memcpy(b->rows, prefix, (size_t)prefix_rows * H * sizeof(float));
    for (int i = 0; i < n_ids; i++) {
        int rc = gp_model_embed_token(m, ids[i], b->rows + (size_t)(prefix_rows + i) * H, err);
        if (rc) return rc;
    }
    return GEPARD_OK;
}

int gp_gen_create(const gp_model *m, const gp_gen_params *params, const int32_t *ids, int n_ids,
                  const float *prefix, int prefix_rows, const gp_lora_adapter *lora,
                  gp_gen_stream **out, gp_error *err) {
    *out = NULL;
    int rc = gp_gen_params_validate(params, err);
    if (rc) return rc;
    if (n_ids < 1) return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "the text layout is empty");
    gp_gen_stream *s = calloc(1, sizeof *s);
    if (!s) return gp_fail_oom(err, "stream", sizeof *s);
    s->model = m;
    s->params = *params;
    s->lora = lora;
    gp_rng_seed(&s->rng, params->seed);
    const int C = m->cfg.num_channels;
    int max_vocab = 1;
    for (int c = 0; c < C; c++)
        if (m->cfg.channel_vocab[c] > max_vocab) max_vocab = m->cfg.channel_vocab[c];
    s->cap_frames = params->max_frames < 64 ? params->max_frames : 64;
    s->frames = malloc((size_t)s->cap_frames * C * sizeof(int32_t));
    s->logits = gp_aligned_alloc(2 * (size_t)m->cfg.total_logits * sizeof(float));
    s->penalize = calloc((size_t)max_vocab, sizeof(bool));
    if (!s->frames || !s->logits || !s->penalize) rc = gp_fail_oom(err, "stream", 0);
    if (rc == GEPARD_OK) rc = branch_init(&s->cond, m, ids, n_ids, prefix, prefix_rows, err);
    if (rc == GEPARD_OK && gp_gen_params_use_cfg(params)) {
        const gp_special_tokens *st = &m->cfg.special;
        int32_t empty[3] = {st->start_of_text, st->end_of_text, st->start_of_speech};
        int32_t audio_only[1] = {st->start_of_speech};
        bool empty_text = params->cfg_uncond == GP_CFG_EMPTY_TEXT;
        rc = branch_init(&s->uncond, m, empty_text ? empty : audio_only, empty_text ? 3 : 1, prefix,
                         prefix_rows, err);
    }
    if (rc) {
        gp_gen_free(s, NULL);
        return rc;
    }
    s->phase = GP_GEN_PREFILL;
    *out = s;
    return GEPARD_OK;
}

static void branch_free(gp_gen_branch *b, gp_kv_pool *kv) {
    if (kv)
        gp_kv_seq_release(kv, &b->kv);
    else
        free(b->kv.blocks);
    gp_aligned_free(b->rows);
    gp_aligned_free(b->hidden);
    gp_aligned_free(b->logits);
    memset(b, 0, sizeof *b);
}

void gp_gen_free(gp_gen_stream *s, gp_kv_pool *kv) {
    if (!s) return;
    branch_free(&s->cond, kv);
    branch_free(&s->uncond, kv);
    free(s->frames);
    gp_aligned_free(s->logits);
    free(s->penalize);
    free(s);
}

int gp_gen_kv_positions(const gp_gen_stream *s, bool uncond) {
    const gp_gen_branch *b = uncond ? &s->uncond : &s->cond;
    if (!b->used) return 0;
    int frames = s->params.max_frames;
    if (uncond && s->params.cfg_frames >= 0 && s->params.cfg_frames < frames)
        frames = s->params.cfg_frames;
    return b->n_rows + frames;
}

int gp_gen_reserve(gp_gen_stream *s, gp_kv_pool *kv, gp_error *err) {
    int rc = gp_kv_seq_reserve(kv, &s->cond.kv, gp_gen_kv_positions(s, false), err);
    if (rc == GEPARD_OK && s->uncond.used)
        rc = gp_kv_seq_reserve(kv, &s->uncond.kv, gp_gen_kv_positions(s, true), err);
    if (rc) {
        gp_kv_seq_release(kv, &s->cond.kv);
        gp_kv_seq_release(kv, &s->uncond.kv);
    }
    return rc;
}

void gp_gen_release_finished_branches(gp_gen_stream *s, gp_kv_pool *kv) {
    if (s->uncond.used && s->phase == GP_GEN_DECODE && !gp_gen_guided(s, s->n_frames)) {
        gp_kv_seq_release(kv, &s->uncond.kv);
        s->uncond.used = false;
    }
    if (s->phase == GP_GEN_DONE) {
        gp_kv_seq_release(kv, &s->cond.kv);
        gp_kv_seq_release(kv, &s->uncond.kv);
    }
}

void gp_gen_cancel(gp_gen_stream *s) {
    if (s->phase != GP_GEN_DONE) {
        s->phase = GP_GEN_DONE;
        s->stop_reason = GP_STOP_CANCELLED;
    }
}

/* Mark the distinct codes channel c took in the penalty window. */
static void mark_window(const gp_gen_stream *s, int c, int L) {
    memset(s->penalize, 0, (size_t)L * sizeof(bool));
    const int C = s->model->cfg.num_channels;
    int window = s->params.repetition_window;
    int first = window == 0 || window > s->n_frames ? 0 : s->n_frames - window;
    for (int t = first; t < s->n_frames; t++) s->penalize[s->frames[(size_t)t * C + c]] = true;
}

static int append_frame(gp_gen_stream *s, const int32_t *codes) {
    const int C = s->model->cfg.num_channels;
    if (s->n_frames == s->cap_frames) {
        int cap = s->cap_frames * 2;
        if (cap > s->params.max_frames) cap = s->params.max_frames;
        if (cap <= s->n_frames) return -1;
        int32_t *frames = realloc(s->frames, (size_t)cap * C * sizeof(int32_t));
        if (!frames) return -1;
        s->frames = frames;
        s->cap_frames = cap;
    }
    memcpy(s->frames + (size_t)s->n_frames * C, codes, (size_t)C * sizeof(int32_t));
    s->n_frames++;
    return 0;
}

/* Sample frame n_frames from cond (and, when guided, uncond) logits, both
 * [total_logits] with bias included. */
int gp_gen_sample_frame(gp_gen_stream *s, const float *cond_logits, const float *uncond_logits,
                        gp_error *err) {
    const gp_model_config *cfg = &s->model->cfg;
    const int C = cfg->num_channels, t = s->n_frames;
    const bool guided = uncond_logits && gp_gen_guided(s, t);
    const bool use_penalty = s->params.repetition_penalty != 1.0f && t > 0;
    gp_sampler_params sp = {s->params.temperature, s->params.top_k, s->params.repetition_penalty};
    int32_t codes[GP_MAX_CHANNELS];
    float *z = s->logits;
    for (int c = 0; c < C; c++) {
        const int L = cfg->channel_vocab[c], off = cfg->channel_offset[c];
        for (int k = 0; k < L; k++) {
            float zc = cond_logits[off + k];
            if (guided) {
                float zu = uncond_logits[off + k];
                zc = zu + s->params.cfg_scale * (zc - zu);
            }
            z[k] = zc;
        }
        if (use_penalty) mark_window(s, c, L);
        gp_sampler_probs(z, L, &sp, use_penalty ? s->penalize : NULL);
        if (s->on_probs) s->on_probs(t, c, z, L, s->user);
        double u = gp_rng_uniform(&s->rng);
        codes[c] = s->pick ? s->pick(z, L, s->user) : gp_sampler_draw(z, L, u);
    }
    if (append_frame(s, codes) != 0) return gp_fail_oom(err, "frames", (size_t)C * 4);
    if (s->on_frame) s->on_frame(s, t, codes, s->user);
    return GEPARD_OK;
}

/* Before a decode step: stop on max_frames or force_stop_frames. Returns
 * true when the stream still needs a decode row. */
bool gp_gen_begin_decode(gp_gen_stream *s) {
    if (s->phase != GP_GEN_DECODE) return false;
    if (s->n_frames >= s->params.max_frames) {
        s->phase = GP_GEN_DONE;
        s->stop_reason = GP_STOP_MAX_FRAMES;
        return false;
    }
    /* Upstream runs the step's forward and then breaks; the result cannot
     * change the output, so the forward is skipped. */
    if (s->params.force_stop_frames >= 0 && s->n_frames >= s->params.force_stop_frames) {
        s->phase = GP_GEN_DONE;
        s->stop_reason = GP_STOP_FORCED;
        return false;
    }
    return true;
}
