/* teacher_forcing.c — see teacher_forcing.h. */
#include "teacher_forcing.h"

#include <math.h>
#include <string.h>

#include "gen_cases.h"

static int forced_pick(const float *probs, int L, void *user) {
    (void)probs;
    (void)L;
    tf_forced *f = user;
    int t = f->calls / f->C, c = f->calls % f->C;
    f->calls++;
    return t < f->T ? f->codes[(size_t)t * f->C + c] : 0;
}

static void forced_frame(gp_gen_stream *s, int frame, const int32_t *codes, void *user) {
    (void)codes;
    tf_forced *f = user;
    if (frame >= f->T) return;
    if (f->logits)
        memcpy(f->logits + (size_t)frame * f->total, s->cond.logits,
               (size_t)f->total * sizeof(float));
    f->stop[frame] = frame > 0 ? s->stop_probability : NAN;
}

static void forced_probs(int frame, int channel, const float *probs, int L, void *user) {
    tf_forced *f = user;
    if (frame >= f->T || !f->probs) return;
    memcpy(f->probs + (size_t)frame * f->total + f->offsets[channel], probs,
           (size_t)L * sizeof(float));
}

int tf_run_forced(gp_model *m, const int32_t *ids, int n_ids, const float *prefix, int prefix_rows,
                  tf_forced *f, gp_pool *pool, gp_error *err) {
    gp_gen_params p = gp_gen_default_params();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.max_frames = f->T;
    p.stop_threshold = 2.0f;
    gp_kv_pool *kv = NULL;
    const gp_backbone_config *bb = &m->cfg.backbone;
    int rc =
        gp_kv_pool_create(bb->num_layers, bb->num_kv_heads, bb->head_dim, 16, 4096 / 16, &kv, err);
    gp_gen_stream *s = NULL;
    if (!rc) rc = gp_gen_create(m, &p, ids, n_ids, prefix, prefix_rows, NULL, &s, err);
    if (!rc) {
        s->pick = forced_pick;
        s->on_frame = forced_frame;
        s->on_probs = forced_probs;
        s->user = f;
        rc = pool ? gen_run_streams_on(&s, 1, kv, 512, pool, err)
                  : gen_run_streams(&s, 1, kv, 512, err);
    }
    if (s) gp_gen_free(s, kv);
    gp_kv_pool_free(kv);
    return rc;
}

void tf_compare_logits(const gp_model *m, const float *ref, const float *got, int rows,
                       double *mean_kl, double *max_err) {
    const int C = m->cfg.num_channels, total = m->cfg.total_logits;
    double kl_sum = 0, worst = 0;
    for (int t = 0; t < rows; t++)
        for (int c = 0; c < C; c++) {
            const int L = m->cfg.channel_vocab[c], off = m->cfg.channel_offset[c];
            const float *a = ref + (size_t)t * total + off, *b = got + (size_t)t * total + off;
            double ma = a[0], mb = b[0];
            for (int k = 0; k < L; k++) {
                ma = fmax(ma, a[k]);
                mb = fmax(mb, b[k]);
                worst = fmax(worst, fabs((double)a[k] - b[k]));
            }
            double za = 0, zb = 0;
            for (int k = 0; k < L; k++) {
                za += exp(a[k] - ma);
                zb += exp(b[k] - mb);
            }
            double kl = 0;
            for (int k = 0; k < L; k++) {
                double pa = exp(a[k] - ma) / za, pb = exp(b[k] - mb) / zb;
                kl += pa * (log(pa) - log(pb));
            }
            kl_sum += kl;
        }
    *mean_kl = kl_sum / ((double)rows * C);
    *max_err = worst;
}

void tf_compare_probs(const gp_model *m, const float *ref_logits, const float *got_probs, int rows,
                      double *mean_kl, double *max_err) {
    const int C = m->cfg.num_channels, total = m->cfg.total_logits;
    double kl_sum = 0, worst = 0;
    for (int t = 0; t < rows; t++)
        for (int c = 0; c < C; c++) {
            const int L = m->cfg.channel_vocab[c], off = m->cfg.channel_offset[c];
            const float *a = ref_logits + (size_t)t * total + off;
            const float *b = got_probs + (size_t)t * total + off;
            double ma = a[0], za = 0, kl = 0;
            for (int k = 0; k < L; k++) ma = fmax(ma, a[k]);
            for (int k = 0; k < L; k++) za += exp(a[k] - ma);
            for (int k = 0; k < L; k++) {
                const double pa = exp(a[k] - ma) / za, pb = fmax((double)b[k], 1e-30);
                worst = fmax(worst, fabs(pa - b[k]));
                if (pa > 0) kl += pa * (log(pa) - log(pb));
            }
            kl_sum += kl;
        }
    *mean_kl = kl_sum / ((double)rows * C);
    *max_err = worst;
}
