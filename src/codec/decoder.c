/* decoder.c — loading and running the streaming CausalHiFiGANDecoder (see decoder.h): the
 * reference and BLAS paths; the direct SIMD paths are in decoder_direct.c. */
#include "codec/decoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "codec/decoder_stream.h"
#include "codec/weights.h"

/* ---------------- loading ---------------- */

typedef struct dec_layout {
    size_t state; /* next free state float */
    size_t buf;   /* largest work buffer seen */
    size_t scratch;
} dec_layout;

/* Account for a causal layer over `c_in` channels and n samples per step. */
static void dec_place(gp_codec_causal *l, int c_in, size_t n, dec_layout *lay) {
    l->frame_cols = n / GP_CODEC_STEP_FRAMES;
    l->state_off = lay->state;
    lay->state += (size_t)c_in * (size_t)l->hist;
    size_t need = (size_t)c_in * ((size_t)l->hist + n);
    if (need > lay->buf) lay->buf = need;
    if (!l->transposed) {
        size_t s = gp_conv1d_fast_scratch(&l->conv, l->frame_cols);
        if (s > lay->scratch) lay->scratch = s;
    }
}

static int dec_load_causal(const gp_codec_loader *ld, const char *prefix, int c_out, int c_in,
                           int k, int d, gp_codec_causal *l) {
    memset(l, 0, sizeof *l);
    l->hist = (k - 1) * d;
    return gp_codec_load_conv(ld, prefix, c_out, c_in, k, d, 1, &l->conv);
}

static int dec_load_stage(const gp_codec_loader *ld, gp_codec_decoder *dec, int i,
                          dec_layout *lay) {
    const gp_codec_decoder_config *cfg = &dec->cfg;
    gp_codec_dec_stage *st = &dec->stages[i];
    st->c_in = gp_codec_decoder_channels(cfg, i - 1);
    st->c_out = gp_codec_decoder_channels(cfg, i);
    st->rate = cfg->rates[i];
    size_t n_in = (size_t)GP_CODEC_STEP_FRAMES, n_out;
    for (int j = 0; j < i; j++) n_in *= (size_t)cfg->rates[j];
    n_out = n_in * (size_t)st->rate;
    char p[256];
    snprintf(p, sizeof p, "audio_decoder.activations.%d", i);
    int rc = gp_codec_load_act(ld, p, cfg->activation, st->c_in, &st->act);
    if (rc) return rc;
    snprintf(p, sizeof p, "audio_decoder.up_sample_conv_layers.%d", i);
    st->up.transposed = true;
    rc = gp_codec_load_convt(ld, p, st->c_in, st->c_out, 2 * st->rate, st->rate,
                             cfg->groups_equal_out ? st->c_out : 1, &st->up.convt);
    if (rc) return rc;
    st->up.hist = gp_convt1d_history(&st->up.convt);
    dec_place(&st->up, st->c_in, n_in, lay);
    if ((size_t)st->c_out * n_out > lay->buf) lay->buf = (size_t)st->c_out * n_out;
    const int nk = cfg->res.n_kernels, nd = cfg->res.n_dilations;
    st->blocks = calloc((size_t)(nk * nd), sizeof *st->blocks);
    if (!st->blocks) return gp_fail_oom(ld->err, "decoder blocks", (size_t)(nk * nd));
    for (int j = 0; j < nk; j++) {
        for (int m = 0; m < nd; m++) {
            gp_codec_dec_block *b = &st->blocks[j * nd + m];
            const int k = cfg->res.kernels[j], d = cfg->res.dilations[m], c = st->c_out;
            char q[256];
            snprintf(p, sizeof p, "audio_decoder.res_layers.%d.res_blocks.%d.res_blocks.%d", i, j,
                     m);
            snprintf(q, sizeof q, "%s.input_activation", p);
            if ((rc = gp_codec_load_act(ld, q, cfg->activation, c, &b->in_act))) return rc;
            snprintf(q, sizeof q, "%s.skip_activation", p);
            if ((rc = gp_codec_load_act(ld, q, cfg->activation, c, &b->skip_act))) return rc;
            snprintf(q, sizeof q, "%s.input_conv", p);
            if ((rc = dec_load_causal(ld, q, c, c, k, d, &b->in_conv))) return rc;
            snprintf(q, sizeof q, "%s.skip_conv", p);
            if ((rc = dec_load_causal(ld, q, c, c, k, 1, &b->skip_conv))) return rc;
            dec_place(&b->in_conv, c, n_out, lay);
            dec_place(&b->skip_conv, c, n_out, lay);
        }
    }
    return GEPARD_OK;
}

static void dec_hint(const gp_codec_decoder_config *cfg, char *buf, size_t size) {
    size_t u = (size_t)snprintf(buf, size,
                                "model_config.yaml (audio_decoder: input_dim %d, base_channels "
                                "%d, up_sample_rates [",
                                cfg->input_dim, cfg->base_channels);
    for (int i = 0; i < cfg->n_stages && u < size; i++)
        u += (size_t)snprintf(buf + u, size - u, "%s%d", i ? ", " : "", cfg->rates[i]);
    if (u < size)
        snprintf(buf + u, size - u, "], activation %s)", gp_codec_act_name(cfg->activation));
}

int gp_codec_decoder_load(gp_codec_decoder *dec, const gp_codec_config *cfg,
                          const gp_codec_source *src, gp_error *err) {
    memset(dec, 0, sizeof *dec);
    dec->cfg = cfg->dec;
    dec->samples_per_frame = cfg->samples_per_frame;
    char hint[512];
    dec_hint(&cfg->dec, hint, sizeof hint);
    gp_codec_loader ld = {.src = src, .hint = hint, .err = err};
    dec_layout lay = {0, 0, 0};
    const int c0 = cfg->dec.base_channels;
    int rc = dec_load_causal(&ld, "audio_decoder.pre_conv", c0, cfg->dec.input_dim,
                             cfg->dec.in_kernel, 1, &dec->pre);
    if (rc == GEPARD_OK) {
        dec_place(&dec->pre, cfg->dec.input_dim, GP_CODEC_STEP_FRAMES, &lay);
        if ((size_t)c0 * GP_CODEC_STEP_FRAMES > lay.buf)
            lay.buf = (size_t)c0 * GP_CODEC_STEP_FRAMES;
    }
    for (int i = 0; rc == GEPARD_OK && i < cfg->dec.n_stages; i++)
        rc = dec_load_stage(&ld, dec, i, &lay);
    const int c_last = gp_codec_decoder_channels(&cfg->dec, cfg->dec.n_stages - 1);
    const size_t n_last = (size_t)GP_CODEC_STEP_FRAMES * (size_t)cfg->samples_per_frame;
    if (rc == GEPARD_OK)
        rc = gp_codec_load_act(&ld, "audio_decoder.post_activation", cfg->dec.activation, c_last,
                               &dec->post_act);
    if (rc == GEPARD_OK)
        rc = dec_load_causal(&ld, "audio_decoder.post_conv", 1, c_last, cfg->dec.out_kernel, 1,
                             &dec->post);
    if (rc == GEPARD_OK) dec_place(&dec->post, c_last, n_last, &lay);
    if (rc) {
        gp_codec_decoder_free(dec);
        return rc;
    }
    dec->state_floats = lay.state;
    dec->buf_floats = lay.buf;
    dec->scratch_floats = lay.scratch;
    return GEPARD_OK;
}

static void dec_free_causal(gp_codec_causal *l) {
    gp_conv1d_free(&l->conv);
    gp_convt1d_free(&l->convt);
    gp_dconv_free(&l->packed);
}

void gp_codec_decoder_free(gp_codec_decoder *dec) {
    if (!dec) return;
    dec_free_causal(&dec->pre);
    for (int i = 0; i < GP_CODEC_MAX_STAGES; i++) {
        gp_codec_dec_stage *st = &dec->stages[i];
        gp_act_free(&st->act);
        dec_free_causal(&st->up);
        if (st->blocks) {
            for (int b = 0; b < dec->cfg.res.n_kernels * dec->cfg.res.n_dilations; b++) {
                gp_act_free(&st->blocks[b].in_act);
                gp_act_free(&st->blocks[b].skip_act);
                dec_free_causal(&st->blocks[b].in_conv);
                dec_free_causal(&st->blocks[b].skip_conv);
            }
        }
        free(st->blocks);
        st->blocks = NULL;
    }
    gp_act_free(&dec->post_act);
    dec_free_causal(&dec->post);
    gp_aligned_free(dec->packed);
    dec->packed = NULL;
}

/* ---------------- kernel choice ---------------- */

/* The default fast path is f32. bf16 weights cost accuracy in proportion to how much the
 * decoder amplifies small errors, which depends on the weights: on random real-size codecs
 * MIXED stays ~67 dB from the f32 decoder and BF16 ~59 dB, but on the gain-1.6 tiny fixture
 * every bf16 variant lands at 23-39 dB (tests/test_codec_direct.c), far outside the 60 dB
 * budget. So bf16 is a choice the caller makes for weights they have measured. */
#define DEC_DEFAULT_DIRECT GP_CODEC_KERNELS_F32

gp_codec_kernels gp_codec_kernels_resolve(gp_codec_kernels want) {
    const gp_dconv_isa isa = gp_dconv_best_isa();
    if (want == GP_CODEC_KERNELS_AUTO) want = DEC_DEFAULT_DIRECT;
    if (want == GP_CODEC_KERNELS_TILES && !gp_dconv_tiles_mode()) want = GP_CODEC_KERNELS_F32;
    if (want == GP_CODEC_KERNELS_BF16 && !gp_dconv_isa_has_bf16(isa)) want = GP_CODEC_KERNELS_MIXED;
    if ((want == GP_CODEC_KERNELS_MIXED || want == GP_CODEC_KERNELS_F32) && isa == GP_DCONV_NONE)
        want = GP_CODEC_KERNELS_BLAS;
    return want;
}

const char *gp_codec_kernels_name(gp_codec_kernels kernels) {
    switch (kernels) {
    case GP_CODEC_KERNELS_REFERENCE: return "reference";
    case GP_CODEC_KERNELS_BLAS: return "blas";
    case GP_CODEC_KERNELS_F32: return "f32";
    case GP_CODEC_KERNELS_MIXED: return "mixed";
    case GP_CODEC_KERNELS_BF16: return "bf16";
    case GP_CODEC_KERNELS_TILES: return "tiles";
    default: return "auto";
    }
}

bool gp_codec_kernels_direct(gp_codec_kernels kernels) {
    return kernels == GP_CODEC_KERNELS_F32 || kernels == GP_CODEC_KERNELS_MIXED ||
           kernels == GP_CODEC_KERNELS_BF16 || kernels == GP_CODEC_KERNELS_TILES;
}

/* Few samples per frame: vectors over channels rather than time. */
static bool dec_chan_layout(const gp_codec_causal *l) { return l->frame_cols < 16; }

/* Residual-layer weight types per stage for a direct path; `types` ("f", "w", "b", "o", "t"
 * per stage: f32, bf16-stored, bf16, oneDNN's bf16 convolution, our AMX tiles) overrides. */
static int dec_stage_types(gp_codec_decoder *dec, gp_codec_kernels kernels, const char *types,
                           gp_error *err) {
    const bool bf16_ok = gp_dconv_isa_has_bf16(gp_dconv_best_isa());
    for (int i = 0; i < dec->cfg.n_stages; i++) {
        const bool chan = dec_chan_layout(&dec->stages[i].blocks[0].in_conv);
        gp_dconv_type t = kernels == GP_CODEC_KERNELS_BF16            ? GP_DCONV_BF16
                          : kernels == GP_CODEC_KERNELS_TILES         ? GP_DCONV_TILES
                          : kernels == GP_CODEC_KERNELS_MIXED && chan ? GP_DCONV_W16
                                                                      : GP_DCONV_F32;
        const char c = types && i < (int)strlen(types) ? types[i] : 0;
        if (c)
            t = c == 'b'   ? GP_DCONV_BF16
                : c == 'w' ? GP_DCONV_W16
                : c == 'o' ? GP_DCONV_ONEDNN
                : c == 't' ? GP_DCONV_TILES
                           : GP_DCONV_F32;
        if ((t == GP_DCONV_BF16 && !bf16_ok) ||
            (t == GP_DCONV_W16 && (!chan || gp_dconv_best_isa() == GP_DCONV_NONE)))
            return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                           "codec stage %d cannot run %s weights on this CPU", i,
                           t == GP_DCONV_BF16 ? "bf16" : "bf16-stored");
        if (t == GP_DCONV_TILES && !gp_dconv_tiles_mode())
            return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                           "codec stage %d: this CPU has no AMX tile unit for the 't' path", i);
        dec->stage_type[i] = t;
    }
    return GEPARD_OK;
}

/* Visit the convolutions of the direct paths in the order a step runs them. */
typedef int (*dec_conv_fn)(gp_codec_causal *l, gp_dconv_type type, void *ctx, gp_error *err);

static int dec_each_conv(gp_codec_decoder *dec, dec_conv_fn fn, void *ctx, gp_error *err) {
    /* pre and post convolutions stay f32 (and cost nothing): rounding the latent or the
     * last layer's input alone costs about as much accuracy as all residual layers */
    int rc = fn(&dec->pre, GP_DCONV_F32, ctx, err);
    const int nb = dec->cfg.res.n_kernels * dec->cfg.res.n_dilations;
    for (int i = 0; rc == GEPARD_OK && i < dec->cfg.n_stages; i++) {
        for (int b = 0; rc == GEPARD_OK && b < nb; b++) {
            rc = fn(&dec->stages[i].blocks[b].in_conv, dec->stage_type[i], ctx, err);
            if (rc == GEPARD_OK)
                rc = fn(&dec->stages[i].blocks[b].skip_conv, dec->stage_type[i], ctx, err);
        }
    }
    return rc == GEPARD_OK ? fn(&dec->post, GP_DCONV_F32, ctx, err) : rc;
}

static int dec_size_conv(gp_codec_causal *l, gp_dconv_type type, void *ctx, gp_error *err) {
    (void)err;
    *(size_t *)ctx += gp_dconv_pack_size(&l->conv, type, gp_dconv_best_isa(), dec_chan_layout(l));
    return GEPARD_OK;
}

/* Pack one conv at *ctx (the next free byte); its f32 weights are no longer needed. */
static int dec_pack_conv(gp_codec_causal *l, gp_dconv_type type, void *ctx, gp_error *err) {
    const gp_dconv_isa isa = gp_dconv_best_isa();
    char **next = ctx;
    int rc = gp_dconv_pack_into(&l->packed, &l->conv, type, isa, dec_chan_layout(l), *next, err);
    if (rc) return rc;
    *next += gp_dconv_pack_size(&l->conv, type, isa, dec_chan_layout(l));
    gp_aligned_free(l->conv.weight);
    l->conv.weight = NULL;
    return GEPARD_OK;
}

int gp_codec_decoder_use_kernels(gp_codec_decoder *dec, gp_codec_kernels kernels,
                                 const char *stage_types, gp_error *err) {
    kernels = gp_codec_kernels_resolve(kernels);
    if (dec->packed) {
        if (kernels != dec->kernels)
            return gp_fail(err, GEPARD_ERR_INTERNAL, "codec kernels are fixed once packed");
        return GEPARD_OK;
    }
    dec->kernels = kernels;
    if (!gp_codec_kernels_direct(kernels)) return GEPARD_OK;
    int rc = dec_stage_types(dec, kernels, stage_types, err);
    if (rc) return rc;
    size_t bytes = 0;
    dec_each_conv(dec, dec_size_conv, &bytes, err);
    dec->packed = gp_huge_alloc(bytes);
    if (!dec->packed) return gp_fail_oom(err, "packed decoder weights", bytes);
    char *next = dec->packed;
    return dec_each_conv(dec, dec_pack_conv, &next, err);
}

double gp_codec_decoder_macs_per_frame(const gp_codec_decoder *dec) {
    const gp_codec_decoder_config *cfg = &dec->cfg;
    double n = 1, macs = (double)dec->pre.conv.c_out * dec->pre.conv.c_in * dec->pre.conv.kernel;
    for (int i = 0; i < cfg->n_stages; i++) {
        const gp_codec_dec_stage *st = &dec->stages[i];
        macs += n * st->c_in * (2.0 * st->rate) * st->c_out / st->up.convt.groups;
        n *= st->rate;
        for (int j = 0; j < cfg->res.n_kernels; j++)
            macs += n * cfg->res.n_dilations * 2.0 * st->c_out * st->c_out * cfg->res.kernels[j];
    }
    return macs + n * dec->post.conv.c_in * dec->post.conv.kernel;
}

/* ---------------- streaming ---------------- */

int gp_codec_stream_create(const gp_codec_decoder *dec, gp_codec_stream **out, gp_error *err) {
    *out = NULL;
    gp_codec_stream *s = calloc(1, sizeof *s);
    if (!s) return gp_fail_oom(err, "codec stream", sizeof *s);
    s->dec = dec;
    s->state = gp_aligned_calloc(dec->state_floats ? dec->state_floats : 1, sizeof(float));
    bool ok = s->state != NULL;
    for (int i = 0; i < BUF_COUNT && ok; i++)
        ok = (s->buf[i] = gp_aligned_alloc(dec->buf_floats * sizeof(float))) != NULL;
    int rc = ok ? GEPARD_OK
                : gp_fail_oom(err, "codec stream state",
                              (dec->state_floats + BUF_COUNT * dec->buf_floats) * sizeof(float));
    if (rc == GEPARD_OK && dec->kernels == GP_CODEC_KERNELS_BLAS)
        rc = gp_conv_scratch_reserve(&s->scratch, dec->scratch_floats, err);
    if (rc) {
        gp_codec_stream_free(s);
        return rc;
    }
    *out = s;
    return GEPARD_OK;
}

void gp_codec_stream_free(gp_codec_stream *s) {
    if (!s) return;
    gp_aligned_free(s->state);
    for (int i = 0; i < BUF_COUNT; i++) gp_aligned_free(s->buf[i]);
    gp_conv_scratch_free(&s->scratch);
    free(s);
}

void gp_codec_stream_reset(gp_codec_stream *s) {
    memset(s->state, 0, s->dec->state_floats * sizeof(float));
}

/* out[c_out][n] = layer(act(x[c_in][n])) with the layer's left context taken from and
 * returned to the stream state. `act` may be NULL; x and out may alias. */
static void stream_layer(gp_codec_stream *s, const gp_codec_causal *l, const gp_act *act, int c_in,
                         const float *x, size_t xs, size_t n, float *out) {
    const gp_codec_decoder *dec = s->dec;
    const size_t P = (size_t)l->hist, W = P + n;
    float *in = s->buf[BUF_IN], *hist = s->state + l->state_off;
    for (int c = 0; c < c_in; c++) memcpy(in + c * W, hist + c * P, P * sizeof(float));
    const bool reference = dec->kernels == GP_CODEC_KERNELS_REFERENCE;
    if (act && reference)
        gp_act_ref(act, x, xs, in + P, W, n);
    else if (act)
        gp_act_fast(act, x, xs, in + P, W, n);
    else
        for (int c = 0; c < c_in; c++) memcpy(in + c * W + P, x + c * xs, n * sizeof(float));
    for (int c = 0; c < c_in; c++) memcpy(hist + c * P, in + c * W + n, P * sizeof(float));
    if (l->transposed)
        gp_convt1d_ref(&l->convt, in, W, n, out, n * (size_t)l->convt.stride);
    else if (reference)
        gp_conv1d_ref(&l->conv, in, W, out, n, n);
    else
        gp_conv1d_fast(&l->conv, in, W, out, n, n, l->frame_cols, &s->scratch, dec->pool);
}

/* Residual layer over sig [C][n]: result in acc. */
static void stream_res_layer(gp_codec_stream *s, const gp_codec_dec_stage *st, size_t n) {
    const gp_codec_resblock_config *res = &s->dec->cfg.res;
    const int C = st->c_out;
    const size_t total = (size_t)C * n;
    float *sig = s->buf[BUF_SIG], *acc = s->buf[BUF_ACC], *tmp = s->buf[BUF_TMP];
    for (int j = 0; j < res->n_kernels; j++) {
        float *run = j == 0 ? acc : s->buf[BUF_RUN]; /* branch 0 runs in the accumulator */
        memcpy(run, sig, total * sizeof(float));
        for (int m = 0; m < res->n_dilations; m++) {
            const gp_codec_dec_block *b = &st->blocks[j * res->n_dilations + m];
            stream_layer(s, &b->in_conv, &b->in_act, C, run, n, n, tmp);
            stream_layer(s, &b->skip_conv, &b->skip_act, C, tmp, n, n, tmp);
            for (size_t i = 0; i < total; i++) run[i] += tmp[i];
        }
        if (j > 0)
            for (size_t i = 0; i < total; i++) acc[i] += run[i];
    }
    const float count = (float)res->n_kernels;
    for (size_t i = 0; i < total; i++) acc[i] /= count;
}

/* One step of at most GP_CODEC_STEP_FRAMES frames. */
static void stream_step(gp_codec_stream *s, const float *latent, size_t ld, size_t frames,
                        float *pcm) {
    const gp_codec_decoder *dec = s->dec;
    size_t n = frames;
    stream_layer(s, &dec->pre, NULL, dec->cfg.input_dim, latent, ld, n, s->buf[BUF_SIG]);
    for (int i = 0; i < dec->cfg.n_stages; i++) {
        const gp_codec_dec_stage *st = &dec->stages[i];
        stream_layer(s, &st->up, &st->act, st->c_in, s->buf[BUF_SIG], n, n, s->buf[BUF_TMP]);
        n *= (size_t)st->rate;
        float *t = s->buf[BUF_SIG]; /* the transposed conv's output becomes the signal */
        s->buf[BUF_SIG] = s->buf[BUF_TMP];
        s->buf[BUF_TMP] = t;
        stream_res_layer(s, st, n);
        t = s->buf[BUF_SIG];
        s->buf[BUF_SIG] = s->buf[BUF_ACC];
        s->buf[BUF_ACC] = t;
    }
    const int c_last = dec->post.conv.c_in;
    stream_layer(s, &dec->post, &dec->post_act, c_last, s->buf[BUF_SIG], n, n, pcm);
    if (dec->cfg.output_activation == GP_CODEC_OUT_CLAMP) {
        for (size_t i = 0; i < n; i++)
            pcm[i] = pcm[i] < -1.0f ? -1.0f : pcm[i] > 1.0f ? 1.0f : pcm[i];
    } else {
        for (size_t i = 0; i < n; i++) pcm[i] = tanhf(pcm[i]);
    }
}

void gp_codec_stream_push_latent(gp_codec_stream *s, const float *latent, size_t ld, size_t frames,
                                 float *pcm) {
    gp_codec_stream_push_latent_multi(&s, 1, &latent, ld, frames, &pcm);
}

void gp_codec_stream_push_latent_multi(gp_codec_stream *const *s, int n, const float *const *latent,
                                       size_t ld, size_t frames, float *const *pcm) {
    if (n <= 0) return;
    const gp_codec_decoder *dec = s[0]->dec;
    const size_t spf = (size_t)dec->samples_per_frame;
    const bool direct = gp_codec_kernels_direct(dec->kernels);
    for (size_t f = 0; f < frames; f += GP_CODEC_STEP_FRAMES) {
        size_t m = frames - f < GP_CODEC_STEP_FRAMES ? frames - f : GP_CODEC_STEP_FRAMES;
        for (int g = 0; g < n; g += GP_CODEC_MULTI_MAX) {
            const int count = n - g < GP_CODEC_MULTI_MAX ? n - g : GP_CODEC_MULTI_MAX;
            const float *lat[GP_CODEC_MULTI_MAX];
            float *out[GP_CODEC_MULTI_MAX];
            for (int i = 0; i < count; i++) {
                lat[i] = latent[g + i] + f;
                out[i] = pcm[g + i] + f * spf;
            }
            if (direct) {
                gp_codec_direct_step(s + g, count, lat, ld, m, out);
            } else {
                for (int i = 0; i < count; i++) stream_step(s[g + i], lat[i], ld, m, out[i]);
            }
        }
    }
}
