/* synth_stop.c — fitting the stop head of a synthetic checkpoint so that it
 * fires after about a given number of frames (the "tiny" preset: a trial
 * request should end in a few seconds, not run max_frames of noise).
 *
 * Random weights carry no notion of "done", but they do carry time: as audio
 * frames accumulate, attention mixes ever more of them into each position,
 * and the final hidden state drifts along one direction (measured on the
 * tiny preset: the projection climbs steadily for ~100 frames, run-to-run
 * noise is a tenth of that). The fit runs the checkpoint just written on a
 * few layouts of random text, takes the drift direction d = mean(late
 * states) - mean(early states), and sets the head to k * (d.h - theta) with
 * theta the projection's typical value at the target frame. Longer text
 * dilutes the mixing, so longer inputs stop later, as speech would. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/pool.h"
#include "base/rng.h"
#include "model/generate.h"
#include "model/synth.h"
#include "text/layout.h"

#define FIT_TEXTS 4    /* text lengths 1, 5, 12 and 40 tokens */
#define FIT_SEEDS 2    /* sampling seeds per text */
#define FIT_EARLY 5    /* frames averaged as "early" */
#define FIT_LATE 40    /* frames averaged as "late" */
#define FIT_GAIN 4.0f  /* logit per unit of projection past theta */
#define FIT_MIN_STOP 8 /* no calibration run may stop before this frame */

/* One generation of `frames` frames; the final hidden state before each
 * frame into h[frames][H]. */
static int fit_run(const gp_model *m, const int32_t *ids, int n_ids, int frames, uint64_t seed,
                   gp_pool *pool, float *h, gp_error *err) {
    const gp_backbone_config *bb = &m->cfg.backbone;
    const int H = bb->hidden_size;
    gp_gen_params p = gp_gen_default_params();
    p.stop_threshold = 2.0f; /* the head being fitted must not end the run */
    p.max_frames = frames;
    p.seed = seed;
    gp_gen_stream *s = NULL;
    gp_kv_pool *kv = NULL;
    gp_gen_workspace w;
    gp_gen_workspace_init(&w);
    int rc = gp_gen_create(m, &p, ids, n_ids, NULL, 0, NULL, &s, err);
    if (!rc)
        rc = gp_kv_pool_create(bb->num_layers, bb->num_kv_heads, bb->head_dim, 16,
                               (n_ids + frames) / 16 + 4, &kv, err);
    if (!rc) rc = gp_gen_reserve(s, kv, err);
    int seen = 0;
    while (!rc && s->phase != GP_GEN_DONE) {
        int r = gp_gen_step(&s, 1, kv, &w, 4096, pool, err);
        if (r < 0) rc = -r;
        for (; !rc && seen < s->n_frames && seen < frames; seen++)
            memcpy(h + (size_t)seen * H, s->cond.hidden, (size_t)H * sizeof(float));
    }
    if (!rc && seen < frames)
        rc =
            gp_fail(err, GEPARD_ERR_INTERNAL, "stop-head fit: the run ended after %d frames", seen);
    gp_gen_free(s, kv);
    gp_kv_pool_free(kv);
    gp_gen_workspace_free(&w);
    return rc;
}

/* The layout of n random text ids (ids of the synthetic tokenizer's merges). */
static int fit_layout(const gp_model *m, int n, gp_rng *rng, int32_t **ids, int *n_ids,
                      gp_error *err) {
    int32_t text[64];
    for (int i = 0; i < n && i < 64; i++) text[i] = 300 + (int32_t)(gp_rng_next_u64(rng) % 3000);
    const gp_repetition_config *r = &m->cfg.repetition;
    gp_text_repetition policy = {r->enabled, r->target_text_tokens, r->apply_below, r->max_repeats};
    size_t len = 0;
    const gp_special_tokens *st = &m->cfg.special;
    int rc = gp_layout_build(&policy, st->start_of_text, st->end_of_text, st->start_of_speech, text,
                             (size_t)n, ids, &len, err);
    *n_ids = (int)len;
    return rc;
}

static double dot(const double *a, const float *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

int gp_synth_fit_stop_head(const char *dir, int target_frames, uint64_t seed, float *weight,
                           float *bias, gp_error *err) {
    gp_model_load_options o = {.weight_format = GP_WEIGHTS_F32};
    gp_model *m = NULL;
    int rc = gp_model_load(dir, &o, &m, err);
    if (rc) return rc;
    const int H = m->cfg.backbone.hidden_size, runs = FIT_TEXTS * FIT_SEEDS;
    const int frames = 3 * target_frames > target_frames + 2 * FIT_LATE
                           ? 3 * target_frames
                           : target_frames + 2 * FIT_LATE;
    static const int lengths[FIT_TEXTS] = {1, 5, 12, 40};
    float *h = malloc((size_t)runs * frames * H * sizeof(float));
    double *d = calloc((size_t)H, sizeof(double));
    gp_pool *pool = NULL;
    if (!h || !d) rc = gp_fail_oom(err, "stop-head fit", (size_t)runs * frames * H * 4);
    if (!rc) rc = gp_pool_create(1, &pool, err); /* the same sums whatever the machine's CPUs */
    gp_rng rng;
    gp_rng_seed(&rng, seed ^ 0x5709bead5eedULL);
    for (int r = 0; r < runs && !rc; r++) {
        int32_t *ids = NULL;
        int n_ids = 0;
        rc = fit_layout(m, lengths[r / FIT_SEEDS], &rng, &ids, &n_ids, err);
        if (!rc)
            rc = fit_run(m, ids, n_ids, frames, seed + 101 * (uint64_t)r, pool,
                         h + (size_t)r * frames * H, err);
        free(ids);
    }
    if (!rc) {
        /* d: late mean - early mean, over every run, unit length */
        for (int r = 0; r < runs; r++)
            for (int t = 0; t < frames; t++) {
                double wgt = t < FIT_EARLY            ? -1.0 / FIT_EARLY
                             : t >= frames - FIT_LATE ? 1.0 / FIT_LATE
                                                      : 0;
                if (wgt == 0) continue;
                const float *x = h + ((size_t)r * frames + t) * H;
                for (int i = 0; i < H; i++) d[i] += wgt * x[i];
            }
        double norm = 0;
        for (int i = 0; i < H; i++) norm += d[i] * d[i];
        norm = sqrt(norm);
        for (int i = 0; i < H; i++) d[i] = norm > 0 ? d[i] / norm : 0;
        /* theta: the projection's mean around the target frame; at least
         * above every run's first FIT_MIN_STOP frames */
        double theta = 0, early_max = -INFINITY;
        int n = 0;
        for (int r = 0; r < runs; r++)
            for (int t = 0; t < frames; t++) {
                double p = dot(d, h + ((size_t)r * frames + t) * H, H);
                if (t < FIT_MIN_STOP && p > early_max) early_max = p;
                if (abs(t - target_frames) <= 5) {
                    theta += p;
                    n++;
                }
            }
        theta /= n;
        if (theta < early_max + 0.1) theta = early_max + 0.1;
        for (int i = 0; i < H; i++) weight[i] = (float)(FIT_GAIN * d[i]);
        *bias = (float)(-FIT_GAIN * theta);
        GP_INFO("synth: stop head fitted to fire after about %d frames (mean drift %.2f, "
                "threshold %.2f)",
                target_frames, norm / runs, theta);
    }
    gp_pool_free(pool);
    free(h);
    free(d);
    gp_model_free(m);
    return rc;
}
