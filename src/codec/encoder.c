/* encoder.c — loading and running the HiFiGAN encoder (see encoder.h). */
#include "codec/encoder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "codec/weights.h"

static void enc_hint(const gp_codec_encoder_config *cfg, char *buf, size_t size) {
    size_t u = (size_t)snprintf(buf, size,
                                "model_config.yaml (audio_encoder: encoded_dim %d, base_channels "
                                "%d, down_sample_rates [",
                                cfg->encoded_dim, cfg->base_channels);
    for (int i = 0; i < cfg->n_stages && u < size; i++)
        u += (size_t)snprintf(buf + u, size - u, "%s%d", i ? ", " : "", cfg->rates[i]);
    if (u < size) snprintf(buf + u, size - u, "])");
}

static int enc_load_stage(const gp_codec_loader *ld, gp_codec_encoder *enc, int i) {
    const gp_codec_encoder_config *cfg = &enc->cfg;
    gp_codec_enc_stage *st = &enc->stages[i];
    st->c_in = gp_codec_encoder_channels(cfg, i);
    st->c_out = gp_codec_encoder_channels(cfg, i + 1);
    st->rate = cfg->rates[i];
    const int nk = cfg->res.n_kernels, nd = cfg->res.n_dilations, c = st->c_in;
    st->blocks = calloc((size_t)(nk * nd), sizeof *st->blocks);
    if (!st->blocks) return gp_fail_oom(ld->err, "encoder blocks", (size_t)(nk * nd));
    char p[256], q[256];
    int rc;
    for (int j = 0; j < nk; j++) {
        for (int m = 0; m < nd; m++) {
            gp_codec_enc_block *b = &st->blocks[j * nd + m];
            const int k = cfg->res.kernels[j], d = cfg->res.dilations[m];
            snprintf(p, sizeof p, "audio_encoder.res_layers.%d.res_blocks.%d.res_blocks.%d", i, j,
                     m);
            snprintf(q, sizeof q, "%s.input_activation", p);
            if ((rc = gp_codec_load_act(ld, q, cfg->activation, c, &b->in_act))) return rc;
            snprintf(q, sizeof q, "%s.skip_activation", p);
            if ((rc = gp_codec_load_act(ld, q, cfg->activation, c, &b->skip_act))) return rc;
            snprintf(q, sizeof q, "%s.input_conv", p);
            if ((rc = gp_codec_load_conv(ld, q, c, c, k, d, 1, &b->in_conv))) return rc;
            snprintf(q, sizeof q, "%s.skip_conv", p);
            if ((rc = gp_codec_load_conv(ld, q, c, c, k, 1, 1, &b->skip_conv))) return rc;
        }
    }
    snprintf(p, sizeof p, "audio_encoder.activations.%d", i);
    if ((rc = gp_codec_load_act(ld, p, cfg->activation, c, &st->act))) return rc;
    snprintf(p, sizeof p, "audio_encoder.down_sample_conv_layers.%d", i);
    return gp_codec_load_conv(ld, p, st->c_out, c, 2 * st->rate, 1, st->rate, &st->down);
}

int gp_codec_encoder_load(gp_codec_encoder *enc, const gp_codec_config *cfg,
                          const gp_codec_source *src, gp_error *err) {
    memset(enc, 0, sizeof *enc);
    enc->cfg = cfg->enc;
    enc->samples_per_frame = cfg->samples_per_frame;
    char hint[512];
    enc_hint(&cfg->enc, hint, sizeof hint);
    gp_codec_loader ld = {.src = src, .hint = hint, .err = err};
    int rc = gp_codec_load_conv(&ld, "audio_encoder.pre_conv", cfg->enc.base_channels, 1,
                                cfg->enc.in_kernel, 1, 1, &enc->pre);
    for (int i = 0; rc == GEPARD_OK && i < cfg->enc.n_stages; i++) rc = enc_load_stage(&ld, enc, i);
    const int c_last = gp_codec_encoder_channels(&cfg->enc, cfg->enc.n_stages);
    if (rc == GEPARD_OK)
        rc = gp_codec_load_act(&ld, "audio_encoder.post_activation", cfg->enc.activation, c_last,
                               &enc->post_act);
    if (rc == GEPARD_OK)
        rc = gp_codec_load_conv(&ld, "audio_encoder.post_conv", cfg->enc.encoded_dim, c_last,
                                cfg->enc.out_kernel, 1, 1, &enc->post);
    if (rc) gp_codec_encoder_free(enc);
    return rc;
}

void gp_codec_encoder_free(gp_codec_encoder *enc) {
    if (!enc) return;
    gp_conv1d_free(&enc->pre);
    for (int i = 0; i < GP_CODEC_MAX_STAGES; i++) {
        gp_codec_enc_stage *st = &enc->stages[i];
        if (st->blocks) {
            for (int b = 0; b < enc->cfg.res.n_kernels * enc->cfg.res.n_dilations; b++) {
                gp_act_free(&st->blocks[b].in_act);
                gp_act_free(&st->blocks[b].skip_act);
                gp_conv1d_free(&st->blocks[b].in_conv);
                gp_conv1d_free(&st->blocks[b].skip_conv);
            }
        }
        free(st->blocks);
        st->blocks = NULL;
        gp_act_free(&st->act);
        gp_conv1d_free(&st->down);
    }
    gp_act_free(&enc->post_act);
    gp_conv1d_free(&enc->post);
}

/* ---------------- running ---------------- */

typedef struct enc_run {
    const gp_codec_encoder *enc;
    float *sig, *acc, *run, *tmp, *in;
    gp_conv_scratch scratch;
    gp_error *err;
} enc_run;

/* Left and right padding of a conv's input of n samples (NeMo Conv1dNorm / CausalConv1dNorm). */
static void enc_padding(const gp_codec_encoder *enc, const gp_conv1d *conv, size_t n, size_t *left,
                        size_t *right) {
    const size_t k = (size_t)conv->kernel, d = (size_t)conv->dilation, s = (size_t)conv->stride;
    if (enc->cfg.causal) {
        *left = (k - 1) * d + 1 - s;
        *right = (n + s - 1) / s * s - n;
    } else {
        *left = *right = s == 1 ? d * (k - 1) / 2 : (k - s + 1) / 2;
    }
}

static size_t enc_out_len(const gp_conv1d *conv, size_t width) {
    return (width - (size_t)conv->dilation * (size_t)(conv->kernel - 1) - 1) /
               (size_t)conv->stride +
           1;
}

/* out = conv(pad(act(x))) for c_in rows of n samples; *n_out set. */
static int enc_layer(enc_run *r, const gp_conv1d *conv, const gp_act *act, const float *x, size_t n,
                     float *out, size_t *n_out) {
    const gp_codec_encoder *enc = r->enc;
    size_t left, right;
    enc_padding(enc, conv, n, &left, &right);
    gp_pad_mode mode = enc->cfg.causal ? GP_PAD_ZEROS : enc->cfg.pad_mode;
    if (mode == GP_PAD_REFLECT && (left >= n || right >= n))
        return gp_fail(r->err, GEPARD_ERR_INVALID_ARGUMENT,
                       "the audio is too short for the encoder's reflect padding (a layer sees %zu "
                       "samples but pads %zu) — use a longer reference",
                       n, left);
    const size_t W = left + n + right;
    const int ci = conv->c_in;
    if (act && enc->reference)
        gp_act_ref(act, x, n, r->in + left, W, n);
    else if (act)
        gp_act_fast(act, x, n, r->in + left, W, n);
    else
        for (int c = 0; c < ci; c++) memcpy(r->in + c * W + left, x + c * n, n * sizeof(float));
    gp_pad1d_fill(r->in, W, ci, left, n, right, mode);
    *n_out = enc_out_len(conv, W);
    if (enc->reference)
        gp_conv1d_ref(conv, r->in, W, out, *n_out, *n_out);
    else
        gp_conv1d_fast(conv, r->in, W, out, *n_out, *n_out, 0, &r->scratch, enc->pool);
    return GEPARD_OK;
}

/* Residual layer over sig [c][n] (n unchanged): result in acc. */
static int enc_res_layer(enc_run *r, const gp_codec_enc_stage *st, size_t n) {
    const gp_codec_resblock_config *res = &r->enc->cfg.res;
    const size_t total = (size_t)st->c_in * n;
    size_t m_out;
    int rc;
    for (int j = 0; j < res->n_kernels; j++) {
        float *run = j == 0 ? r->acc : r->run;
        memcpy(run, r->sig, total * sizeof(float));
        for (int m = 0; m < res->n_dilations; m++) {
            const gp_codec_enc_block *b = &st->blocks[j * res->n_dilations + m];
            if ((rc = enc_layer(r, &b->in_conv, &b->in_act, run, n, r->tmp, &m_out)) ||
                (rc = enc_layer(r, &b->skip_conv, &b->skip_act, r->tmp, n, r->tmp, &m_out)))
                return rc;
            for (size_t i = 0; i < total; i++) run[i] += r->tmp[i];
        }
        if (j > 0)
            for (size_t i = 0; i < total; i++) r->acc[i] += run[i];
    }
    const float count = (float)res->n_kernels;
    for (size_t i = 0; i < total; i++) r->acc[i] /= count;
    return GEPARD_OK;
}

/* The largest buffer any layer needs for an input of n samples, and the fast scratch. */
static void enc_sizes(const gp_codec_encoder *enc, size_t n, size_t *buf, size_t *scratch) {
    size_t pad_max = 0, c_max = (size_t)enc->cfg.encoded_dim;
    *scratch = gp_conv1d_fast_scratch(&enc->pre, 0);
    size_t s = gp_conv1d_fast_scratch(&enc->post, 0);
    if (s > *scratch) *scratch = s;
    for (int i = 0; i < enc->cfg.n_stages; i++) {
        const gp_codec_enc_stage *st = &enc->stages[i];
        if ((size_t)st->c_out > c_max) c_max = (size_t)st->c_out;
        for (int b = 0; b < enc->cfg.res.n_kernels * enc->cfg.res.n_dilations; b++) {
            size_t p =
                (size_t)st->blocks[b].in_conv.dilation * (size_t)st->blocks[b].in_conv.kernel;
            if (p > pad_max) pad_max = p;
            s = gp_conv1d_fast_scratch(&st->blocks[b].in_conv, 0);
            if (s > *scratch) *scratch = s;
        }
        if ((size_t)st->down.kernel > pad_max) pad_max = (size_t)st->down.kernel;
        s = gp_conv1d_fast_scratch(&st->down, 0);
        if (s > *scratch) *scratch = s;
    }
    if ((size_t)enc->pre.kernel > pad_max) pad_max = (size_t)enc->pre.kernel;
    if ((size_t)enc->post.kernel > pad_max) pad_max = (size_t)enc->post.kernel;
    /* Channels grow as samples shrink; bound each stage's c * (n + padding). */
    size_t best = (size_t)enc->cfg.base_channels * (n + 2 * pad_max), len = n;
    for (int i = 0; i < enc->cfg.n_stages; i++) {
        const gp_codec_enc_stage *st = &enc->stages[i];
        size_t a = (size_t)st->c_in * (len + 2 * pad_max);
        len = (len + (size_t)st->rate - 1) / (size_t)st->rate;
        size_t b = (size_t)st->c_out * (len + 2 * pad_max);
        if (a > best) best = a;
        if (b > best) best = b;
    }
    if (c_max * (len + 2 * pad_max) > best) best = c_max * (len + 2 * pad_max);
    *buf = best;
}

static int enc_forward(enc_run *r, const float *audio, size_t n, float *latent) {
    const gp_codec_encoder *enc = r->enc;
    size_t m;
    int rc = enc_layer(r, &enc->pre, NULL, audio, n, r->sig, &m);
    for (int i = 0; rc == GEPARD_OK && i < enc->cfg.n_stages; i++) {
        const gp_codec_enc_stage *st = &enc->stages[i];
        if ((rc = enc_res_layer(r, st, m))) break;
        rc = enc_layer(r, &st->down, &st->act, r->acc, m, r->sig, &m);
    }
    if (rc == GEPARD_OK) rc = enc_layer(r, &enc->post, &enc->post_act, r->sig, m, latent, &m);
    return rc;
}

int gp_codec_encoder_run(const gp_codec_encoder *enc, const float *audio, size_t n_samples,
                         float *latent, gp_error *err) {
    const size_t spf = (size_t)enc->samples_per_frame;
    if (n_samples == 0 || n_samples % spf)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "encoder input of %zu samples is not a positive multiple of %zu", n_samples,
                       spf);
    enc_run r = {.enc = enc, .err = err};
    size_t buf, scratch;
    enc_sizes(enc, n_samples, &buf, &scratch);
    float **bufs[5] = {&r.sig, &r.acc, &r.run, &r.tmp, &r.in};
    int rc = GEPARD_OK;
    for (int i = 0; i < 5 && rc == GEPARD_OK; i++) {
        *bufs[i] = gp_aligned_alloc(buf * sizeof(float));
        if (!*bufs[i]) rc = gp_fail_oom(err, "encoder buffers", buf * sizeof(float));
    }
    if (rc == GEPARD_OK && !enc->reference) rc = gp_conv_scratch_reserve(&r.scratch, scratch, err);
    if (rc == GEPARD_OK) rc = enc_forward(&r, audio, n_samples, latent);
    for (int i = 0; i < 5; i++) gp_aligned_free(*bufs[i]);
    gp_conv_scratch_free(&r.scratch);
    return rc;
}
