/* synthetic.c — random-weight codec state dicts from a config (see synthetic.h). */
#include "codec/synthetic.h"

#include "io/file.h"
#include "io/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "codec/config.h"

const char gp_codec_nano_22khz_yaml[] =
    "sample_rate: 22050\nsamples_per_frame: 1024\n"
    "audio_encoder:\n"
    "  _target_: nemo.collections.tts.modules.audio_codec_modules.HiFiGANEncoder\n"
    "  down_sample_rates: [2, 2, 4, 8, 8]\n  encoded_dim: 32\n  base_channels: 24\n"
    "  activation: lrelu\n  pad_mode: replicate\n"
    "audio_decoder:\n"
    "  _target_: nemo.collections.tts.modules.audio_codec_modules.CausalHiFiGANDecoder\n"
    "  up_sample_rates: [8, 8, 4, 2, 2]\n  input_dim: 32\n  base_channels: 864\n"
    "  activation: half_snake\n  output_activation: clamp\n  pad_mode: zeros\n"
    "  n_groups_equal_to_out_channels: true\n"
    "vector_quantizer:\n"
    "  _target_: nemo.collections.tts.modules.audio_codec_modules.GroupFiniteScalarQuantizer\n"
    "  num_groups: 8\n  num_levels_per_group: [8, 7, 6, 6]\n";

typedef struct syn_ctx {
    gp_codec_source *src;
    size_t cap;
    gp_rng rng;
    gp_error *err;
} syn_ctx;

/* Memory owned by the source through its block list (freed by gp_codec_source_free). */
static void *syn_alloc(syn_ctx *c, size_t bytes) {
    gp_codec_block *b = malloc(sizeof(gp_codec_block) + bytes);
    if (!b) return NULL;
    b->next = c->src->blocks;
    c->src->blocks = b;
    return b + 1;
}

static int syn_add(syn_ctx *c, const char *name, int ndim, const int64_t *shape, float scale,
                   float centre) {
    gp_codec_source *s = c->src;
    if (s->count == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 512;
        gp_codec_tensor *p = realloc(s->tensors, cap * sizeof *p);
        if (!p) return gp_fail_oom(c->err, "tensor table", cap * sizeof *p);
        s->tensors = p;
        c->cap = cap;
    }
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= (size_t)shape[i];
    char *n = syn_alloc(c, strlen(name) + 1);
    float *data = syn_alloc(c, numel * sizeof(float));
    if (!n || !data) return gp_fail_oom(c->err, name, numel * sizeof(float));
    strcpy(n, name);
    for (size_t i = 0; i < numel; i++)
        data[i] = centre + scale * (float)(2.0 * gp_rng_uniform(&c->rng) - 1.0);
    gp_codec_tensor *t = &s->tensors[s->count++];
    memset(t, 0, sizeof *t);
    t->name = n;
    t->dtype = GP_F32;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->numel = numel;
    t->data = data;
    return GEPARD_OK;
}

static int syn_conv(syn_ctx *c, const char *prefix, int64_t d0, int64_t d1, int64_t k, int64_t out,
                    double fan_in) {
    char name[256];
    const int64_t w[3] = {d0, d1, k}, b[1] = {out};
    snprintf(name, sizeof name, "%s.conv.weight", prefix);
    int rc = syn_add(c, name, 3, w, (float)(1.0 / sqrt(fan_in)), 0.0f);
    snprintf(name, sizeof name, "%s.conv.bias", prefix);
    return rc ? rc : syn_add(c, name, 1, b, 0.01f, 0.0f);
}

static int syn_act(syn_ctx *c, const char *prefix, gp_act_kind kind, int channels) {
    if (kind != GP_ACT_SNAKE && kind != GP_ACT_HALF_SNAKE) return GEPARD_OK;
    char name[256];
    snprintf(name, sizeof name, "%s.activation.%salpha", prefix,
             kind == GP_ACT_HALF_SNAKE ? "snake_act." : "");
    const int64_t shape[3] = {1, kind == GP_ACT_SNAKE ? channels : channels / 2, 1};
    return syn_add(c, name, 3, shape, 0.1f, 1.0f);
}

static int syn_res(syn_ctx *c, const char *part, int stage, const gp_codec_resblock_config *res,
                   gp_act_kind act, int ch) {
    char p[256], q[256];
    int rc = GEPARD_OK;
    for (int j = 0; j < res->n_kernels && !rc; j++) {
        for (int m = 0; m < res->n_dilations && !rc; m++) {
            snprintf(p, sizeof p, "%s.res_layers.%d.res_blocks.%d.res_blocks.%d", part, stage, j,
                     m);
            const int k = res->kernels[j];
            snprintf(q, sizeof q, "%s.input_activation", p);
            if ((rc = syn_act(c, q, act, ch))) break;
            snprintf(q, sizeof q, "%s.skip_activation", p);
            if ((rc = syn_act(c, q, act, ch))) break;
            snprintf(q, sizeof q, "%s.input_conv", p);
            if ((rc = syn_conv(c, q, ch, ch, k, ch, (double)ch * k))) break;
            snprintf(q, sizeof q, "%s.skip_conv", p);
            rc = syn_conv(c, q, ch, ch, k, ch, (double)ch * k);
        }
    }
    return rc;
}

static int syn_decoder(syn_ctx *c, const gp_codec_decoder_config *d) {
    char p[256];
    int rc = syn_conv(c, "audio_decoder.pre_conv", d->base_channels, d->input_dim, d->in_kernel,
                      d->base_channels, (double)d->input_dim * d->in_kernel);
    for (int i = 0; i < d->n_stages && !rc; i++) {
        int cin = gp_codec_decoder_channels(d, i - 1), cout = gp_codec_decoder_channels(d, i);
        int groups = d->groups_equal_out ? cout : 1;
        snprintf(p, sizeof p, "audio_decoder.activations.%d", i);
        if ((rc = syn_act(c, p, d->activation, cin))) break;
        snprintf(p, sizeof p, "audio_decoder.up_sample_conv_layers.%d", i);
        if ((rc = syn_conv(c, p, cin, cout / groups, 2 * d->rates[i], cout,
                           (double)cin / groups * 2)))
            break;
        rc = syn_res(c, "audio_decoder", i, &d->res, d->activation, cout);
    }
    int last = gp_codec_decoder_channels(d, d->n_stages - 1);
    if (!rc) rc = syn_act(c, "audio_decoder.post_activation", d->activation, last);
    if (!rc)
        rc = syn_conv(c, "audio_decoder.post_conv", 1, last, d->out_kernel, 1,
                      (double)last * d->out_kernel);
    return rc;
}

static int syn_encoder(syn_ctx *c, const gp_codec_encoder_config *e) {
    char p[256];
    int rc = syn_conv(c, "audio_encoder.pre_conv", e->base_channels, 1, e->in_kernel,
                      e->base_channels, e->in_kernel);
    for (int i = 0; i < e->n_stages && !rc; i++) {
        int cin = gp_codec_encoder_channels(e, i), cout = gp_codec_encoder_channels(e, i + 1);
        if ((rc = syn_res(c, "audio_encoder", i, &e->res, e->activation, cin))) break;
        snprintf(p, sizeof p, "audio_encoder.activations.%d", i);
        if ((rc = syn_act(c, p, e->activation, cin))) break;
        snprintf(p, sizeof p, "audio_encoder.down_sample_conv_layers.%d", i);
        rc = syn_conv(c, p, cout, cin, 2 * e->rates[i], cout, (double)cin * 2 * e->rates[i]);
    }
    int last = gp_codec_encoder_channels(e, e->n_stages);
    if (!rc) rc = syn_act(c, "audio_encoder.post_activation", e->activation, last);
    if (!rc)
        rc = syn_conv(c, "audio_encoder.post_conv", e->encoded_dim, last, e->out_kernel,
                      e->encoded_dim, (double)last * e->out_kernel);
    return rc;
}

static int syn_cmp(const void *a, const void *b) {
    return strcmp(((const gp_codec_tensor *)a)->name, ((const gp_codec_tensor *)b)->name);
}

int gp_codec_synthetic_source(const char *yaml, uint64_t seed, gp_codec_source **out,
                              gp_error *err) {
    *out = NULL;
    gp_codec_source *s = calloc(1, sizeof *s);
    if (!s) return gp_fail_oom(err, "codec source", sizeof *s);
    s->path = strdup("(synthetic)");
    s->weights_origin = strdup("(synthetic weights)");
    s->container = "synthetic";
    syn_ctx c = {.src = s, .err = err};
    gp_rng_seed(&c.rng, seed);
    gp_codec_config cfg;
    int rc = gp_yaml_parse(yaml, strlen(yaml), "(synthetic config)", &s->yaml, err);
    if (!rc) rc = gp_codec_config_parse(s->yaml, &cfg, err);
    if (!rc) rc = syn_decoder(&c, &cfg.dec);
    if (!rc) rc = syn_encoder(&c, &cfg.enc);
    if (rc) {
        gp_codec_source_free(s);
        return rc;
    }
    qsort(s->tensors, s->count, sizeof *s->tensors, syn_cmp);
    *out = s;
    return GEPARD_OK;
}

int gp_codec_synthetic_write(const char *dir, const char *yaml, uint64_t seed, gp_error *err) {
    int rc = gp_make_dirs(dir, err);
    if (rc) return rc;
    gp_codec_source *src;
    if ((rc = gp_codec_synthetic_source(yaml, seed, &src, err))) return rc;
    gp_st_writer *w = gp_st_writer_create();
    if (!w) rc = gp_fail_oom(err, "writer", 0);
    for (size_t i = 0; !rc && i < src->count; i++) {
        const gp_codec_tensor *t = &src->tensors[i];
        rc = gp_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, err);
    }
    char *weights = gp_path_join(dir, "model_weights.safetensors");
    char *config = gp_path_join(dir, "model_config.yaml");
    if (!rc && (!weights || !config)) rc = gp_fail_oom(err, "path", 0);
    if (!rc) rc = gp_st_writer_write(w, weights, err);
    gp_st_writer_free(w);
    gp_codec_source_free(src);
    gp_atomic_file af;
    if (!rc) rc = gp_atomic_file_open(&af, config, err);
    if (!rc) {
        gp_atomic_file_write(&af, yaml, strlen(yaml));
        rc = gp_atomic_file_commit(&af, err); /* reports a failed write */
    }
    free(weights);
    free(config);
    return rc;
}
