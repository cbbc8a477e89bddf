/* config.c — model_config.yaml -> gp_codec_config with NeMo defaults (see config.h). */
#include "codec/config.h"

#include <stdio.h>
#include <string.h>

#define CFG_MAX_CHANNELS 65536
#define CFG_MAX_RATE 64
#define CFG_MAX_KERNEL 129
#define CFG_MAX_LEVEL 65536

typedef struct cfg_ctx {
    const gp_yaml_doc *doc;
    const char *section; /* "audio_decoder" ... for messages */
    gp_error *err;
} cfg_ctx;

static int cfg_bad(cfg_ctx *c, const char *key, const char *fmt, long long value) {
    char what[160];
    snprintf(what, sizeof what, fmt, value);
    return gp_fail(c->err, GEPARD_ERR_FORMAT, "%s: %s%s%s is %s", c->doc->origin,
                   c->section ? c->section : "", c->section ? "." : "", key, what);
}

static int cfg_int(cfg_ctx *c, const gp_yaml_node *map, const char *key, int64_t fallback,
                   int64_t lo, int64_t hi, int *out) {
    int64_t v;
    int rc = gp_yaml_get_int(c->doc, map, key, fallback, &v, c->err);
    if (rc) return rc;
    if (v == -1 && fallback == -1)
        return gp_fail(c->err, GEPARD_ERR_FORMAT, "%s: %s%s%s is missing", c->doc->origin,
                       c->section ? c->section : "", c->section ? "." : "", key);
    if (v < lo || v > hi) {
        char range[96];
        snprintf(range, sizeof range, "%%lld, expected %lld..%lld", (long long)lo, (long long)hi);
        return cfg_bad(c, key, range, v);
    }
    *out = (int)v;
    return GEPARD_OK;
}

static int cfg_list(cfg_ctx *c, const gp_yaml_node *map, const char *key, const int64_t *fallback,
                    int fallback_n, int64_t lo, int64_t hi, int *out, int *n) {
    int64_t vals[GP_CODEC_MAX_STAGES > GP_CODEC_MAX_KERNELS ? GP_CODEC_MAX_STAGES
                                                            : GP_CODEC_MAX_KERNELS];
    int rc = gp_yaml_get_int_list(c->doc, map, key, fallback, fallback_n, vals, GP_CODEC_MAX_STAGES,
                                  n, c->err);
    if (rc) return rc;
    if (*n == 0) return cfg_bad(c, key, "an empty list%.0lld", 0);
    for (int i = 0; i < *n; i++) {
        if (vals[i] < lo || vals[i] > hi) {
            char range[96];
            snprintf(range, sizeof range, "%%lld at item %d, expected %lld..%lld", i, (long long)lo,
                     (long long)hi);
            return cfg_bad(c, key, range, vals[i]);
        }
        out[i] = (int)vals[i];
    }
    return GEPARD_OK;
}

static int cfg_activation(cfg_ctx *c, const gp_yaml_node *map, const char *fallback,
                          gp_act_kind *out) {
    const char *name;
    int rc = gp_yaml_get_string(c->doc, map, "activation", fallback, &name, c->err);
    if (rc) return rc;
    static const struct {
        const char *name;
        gp_act_kind kind;
    } names[] = {{"lrelu", GP_ACT_LRELU},
                 {"snake", GP_ACT_SNAKE},
                 {"half_snake", GP_ACT_HALF_SNAKE},
                 {"elu", GP_ACT_ELU}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0) return *out = names[i].kind, GEPARD_OK;
    return gp_fail(c->err, GEPARD_ERR_UNSUPPORTED,
                   "%s: %s.activation is \"%s\", expected lrelu, snake, half_snake or elu",
                   c->doc->origin, c->section, name);
}

/* _target_ must name one of the accepted classes; returns the index of the match. */
static int cfg_target(cfg_ctx *c, const gp_yaml_node *map, const char *const *classes, int n,
                      int *which) {
    const char *target;
    int rc = gp_yaml_get_string(c->doc, map, "_target_", NULL, &target, c->err);
    if (rc) return rc;
    if (!target)
        return gp_fail(c->err, GEPARD_ERR_FORMAT, "%s: %s._target_ is missing (expected %s)",
                       c->doc->origin, c->section, classes[0]);
    const char *dot = strrchr(target, '.');
    const char *cls = dot ? dot + 1 : target;
    for (int i = 0; i < n; i++)
        if (strcmp(cls, classes[i]) == 0) return *which = i, GEPARD_OK;
    return gp_fail(c->err, GEPARD_ERR_UNSUPPORTED, "%s: %s._target_ is %s; this engine runs %s%s%s",
                   c->doc->origin, c->section, target, classes[0], n > 1 ? " or " : "",
                   n > 1 ? classes[1] : "");
}

static int cfg_resblocks(cfg_ctx *c, const gp_yaml_node *map, gp_codec_resblock_config *res) {
    static const int64_t kernels[] = {3, 7, 11}, dilations[] = {1, 3, 5};
    int rc = cfg_list(c, map, "resblock_kernel_sizes", kernels, 3, 1, CFG_MAX_KERNEL, res->kernels,
                      &res->n_kernels);
    if (rc == GEPARD_OK)
        rc = cfg_list(c, map, "resblock_dilation_sizes", dilations, 3, 1, CFG_MAX_RATE,
                      res->dilations, &res->n_dilations);
    return rc;
}

static const gp_yaml_node *cfg_section(cfg_ctx *c, const gp_yaml_node *model, const char *name,
                                       gp_error *err) {
    const gp_yaml_node *n = gp_yaml_get(c->doc, model, name);
    if (!n || n->kind != GP_YAML_MAPPING) {
        gp_fail(err, GEPARD_ERR_FORMAT, "%s: section %s is missing — is this a NeMo audio codec?",
                c->doc->origin, name);
        return NULL;
    }
    c->section = name;
    return n;
}

static int cfg_decoder(cfg_ctx *c, const gp_yaml_node *model, gp_codec_decoder_config *dec) {
    const gp_yaml_node *m = cfg_section(c, model, "audio_decoder", c->err);
    if (!m) return c->err->code;
    static const char *const classes[] = {"CausalHiFiGANDecoder"};
    static const int64_t rates[] = {8, 8, 2, 2};
    int which, rc;
    const char *out_act = NULL;
    if ((rc = cfg_target(c, m, classes, 1, &which)) ||
        (rc = cfg_int(c, m, "input_dim", -1, 1, CFG_MAX_CHANNELS, &dec->input_dim)) ||
        (rc = cfg_int(c, m, "base_channels", 512, 1, CFG_MAX_CHANNELS, &dec->base_channels)) ||
        (rc = cfg_list(c, m, "up_sample_rates", rates, 4, 1, CFG_MAX_RATE, dec->rates,
                       &dec->n_stages)) ||
        (rc = cfg_int(c, m, "in_kernel_size", 7, 1, CFG_MAX_KERNEL, &dec->in_kernel)) ||
        (rc = cfg_int(c, m, "out_kernel_size", 3, 1, CFG_MAX_KERNEL, &dec->out_kernel)) ||
        (rc = cfg_resblocks(c, m, &dec->res)) ||
        (rc = cfg_activation(c, m, "lrelu", &dec->activation)) ||
        (rc = gp_yaml_get_string(c->doc, m, "output_activation", "tanh", &out_act, c->err)) ||
        (rc = gp_yaml_get_bool(c->doc, m, "n_groups_equal_to_out_channels", true,
                               &dec->groups_equal_out, c->err)))
        return rc;
    if (strcmp(out_act, "tanh") == 0)
        dec->output_activation = GP_CODEC_OUT_TANH;
    else if (strcmp(out_act, "clamp") == 0)
        dec->output_activation = GP_CODEC_OUT_CLAMP;
    else
        return gp_fail(c->err, GEPARD_ERR_UNSUPPORTED,
                       "%s: audio_decoder.output_activation is \"%s\", expected tanh or clamp",
                       c->doc->origin, out_act);
    for (int i = 0; i <= dec->n_stages; i++)
        if (gp_codec_decoder_channels(dec, i - 1) < 1)
            return cfg_bad(c, "base_channels",
                           "%lld, too small to halve at every up-sampling stage",
                           dec->base_channels);
    return GEPARD_OK;
}

static int cfg_encoder(cfg_ctx *c, const gp_yaml_node *model, gp_codec_encoder_config *enc) {
    const gp_yaml_node *m = cfg_section(c, model, "audio_encoder", c->err);
    if (!m) return c->err->code;
    static const char *const classes[] = {"HiFiGANEncoder", "CausalHiFiGANEncoder"};
    static const int64_t rates[] = {2, 2, 8, 8};
    int which, rc;
    const char *pad = NULL;
    if ((rc = cfg_target(c, m, classes, 2, &which))) return rc;
    enc->causal = which == 1;
    if ((rc = cfg_int(c, m, "encoded_dim", -1, 1, CFG_MAX_CHANNELS, &enc->encoded_dim)) ||
        (rc = cfg_int(c, m, "base_channels", 32, 1, CFG_MAX_CHANNELS, &enc->base_channels)) ||
        (rc = cfg_list(c, m, "down_sample_rates", rates, 4, 1, CFG_MAX_RATE, enc->rates,
                       &enc->n_stages)) ||
        (rc = cfg_int(c, m, "in_kernel_size", 7, 1, CFG_MAX_KERNEL, &enc->in_kernel)) ||
        (rc = cfg_int(c, m, "out_kernel_size", 7, 1, CFG_MAX_KERNEL, &enc->out_kernel)) ||
        (rc = cfg_resblocks(c, m, &enc->res)) ||
        (rc = cfg_activation(c, m, "lrelu", &enc->activation)) ||
        (rc = gp_yaml_get_string(c->doc, m, "pad_mode", enc->causal ? "zeros" : "reflect", &pad,
                                 c->err)))
        return rc;
    if (strcmp(pad, "zeros") == 0 || strcmp(pad, "constant") == 0)
        enc->pad_mode = GP_PAD_ZEROS;
    else if (strcmp(pad, "replicate") == 0)
        enc->pad_mode = GP_PAD_REPLICATE;
    else if (strcmp(pad, "reflect") == 0)
        enc->pad_mode = GP_PAD_REFLECT;
    else
        return gp_fail(c->err, GEPARD_ERR_UNSUPPORTED,
                       "%s: audio_encoder.pad_mode is \"%s\", expected zeros, replicate or reflect",
                       c->doc->origin, pad);
    if (!enc->causal) {
        const int ks[3] = {enc->in_kernel, enc->out_kernel, 0};
        for (int i = 0; i < 2 + enc->res.n_kernels; i++) {
            int k = i < 2 ? ks[i] : enc->res.kernels[i - 2];
            if (k % 2 == 0)
                return cfg_bad(c,
                               i == 0   ? "in_kernel_size"
                               : i == 1 ? "out_kernel_size"
                                        : "resblock_kernel_sizes",
                               "%lld, but the non-causal encoder needs odd kernels", k);
        }
    }
    if ((long long)gp_codec_encoder_channels(enc, enc->n_stages) > CFG_MAX_CHANNELS)
        return cfg_bad(c, "base_channels", "%lld, too large after doubling at every stage",
                       enc->base_channels);
    return GEPARD_OK;
}

static int cfg_quantizer(cfg_ctx *c, const gp_yaml_node *model, gp_codec_fsq_config *fsq) {
    const gp_yaml_node *m = cfg_section(c, model, "vector_quantizer", c->err);
    if (!m) return c->err->code;
    static const char *const classes[] = {"GroupFiniteScalarQuantizer"};
    int which, rc;
    if ((rc = cfg_target(c, m, classes, 1, &which)) ||
        (rc = cfg_int(c, m, "num_groups", -1, 1, 1024, &fsq->num_groups)))
        return rc;
    int64_t levels[GP_CODEC_MAX_LEVELS];
    if ((rc = gp_yaml_get_int_list(c->doc, m, "num_levels_per_group", NULL, 0, levels,
                                   GP_CODEC_MAX_LEVELS, &fsq->n_levels, c->err)))
        return rc;
    if (fsq->n_levels == 0)
        return gp_fail(c->err, GEPARD_ERR_FORMAT,
                       "%s: vector_quantizer.num_levels_per_group is missing or empty",
                       c->doc->origin);
    long long codebook = 1;
    for (int i = 0; i < fsq->n_levels; i++) {
        if (levels[i] < 2 || levels[i] > CFG_MAX_LEVEL)
            return cfg_bad(c, "num_levels_per_group", "%lld, expected 2..65536 levels", levels[i]);
        fsq->levels[i] = (int)levels[i];
        codebook *= levels[i];
        if (codebook > 0x7fffffffLL)
            return cfg_bad(c, "num_levels_per_group",
                           "too large: the product of the levels exceeds 2^31%.0lld", 0);
    }
    if ((rc = gp_yaml_get_double(c->doc, m, "eps", 1e-3, &fsq->eps, c->err))) return rc;
    if (!(fsq->eps >= 0 && fsq->eps < 1))
        return gp_fail(c->err, GEPARD_ERR_FORMAT, "%s: vector_quantizer.eps is %g, expected 0..1",
                       c->doc->origin, fsq->eps);
    return GEPARD_OK;
}

const gp_yaml_node *gp_codec_config_model_node(const gp_yaml_doc *doc) {
    const gp_yaml_node *root = gp_yaml_root(doc);
    const gp_yaml_node *model = gp_yaml_get(doc, root, "model");
    return model && model->kind == GP_YAML_MAPPING ? model : root;
}

static long long cfg_product(const int *v, int n) {
    long long p = 1;
    for (int i = 0; i < n; i++) p *= v[i];
    return p;
}

int gp_codec_config_parse(const gp_yaml_doc *doc, gp_codec_config *cfg, gp_error *err) {
    memset(cfg, 0, sizeof *cfg);
    const gp_yaml_node *model = gp_codec_config_model_node(doc);
    cfg_ctx c = {.doc = doc, .err = err};
    int rc;
    if (!model || model->kind != GP_YAML_MAPPING)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: expected a mapping of model settings",
                       doc->origin);
    if ((rc = cfg_int(&c, model, "sample_rate", -1, 1000, 1000000, &cfg->sample_rate)) ||
        (rc = cfg_int(&c, model, "samples_per_frame", -1, 1, 1 << 20, &cfg->samples_per_frame)) ||
        (rc = cfg_decoder(&c, model, &cfg->dec)) || (rc = cfg_encoder(&c, model, &cfg->enc)) ||
        (rc = cfg_quantizer(&c, model, &cfg->fsq)))
        return rc;
    long long up = cfg_product(cfg->dec.rates, cfg->dec.n_stages);
    long long down = cfg_product(cfg->enc.rates, cfg->enc.n_stages);
    if (up != cfg->samples_per_frame || down != cfg->samples_per_frame)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: samples_per_frame is %d but the decoder's up_sample_rates multiply to "
                       "%lld and the encoder's down_sample_rates to %lld; they must agree",
                       doc->origin, cfg->samples_per_frame, up, down);
    int width = cfg->fsq.num_groups * cfg->fsq.n_levels;
    if (width != cfg->dec.input_dim || width != cfg->enc.encoded_dim)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: vector_quantizer has %d groups x %d levels = %d dimensions, but "
                       "audio_decoder.input_dim is %d and audio_encoder.encoded_dim is %d",
                       doc->origin, cfg->fsq.num_groups, cfg->fsq.n_levels, width,
                       cfg->dec.input_dim, cfg->enc.encoded_dim);
    return GEPARD_OK;
}

const char *gp_codec_act_name(gp_act_kind kind) {
    switch (kind) {
    case GP_ACT_LRELU: return "lrelu";
    case GP_ACT_SNAKE: return "snake";
    case GP_ACT_HALF_SNAKE: return "half_snake";
    case GP_ACT_ELU: return "elu";
    default: return "identity";
    }
}

const char *gp_codec_pad_name(gp_pad_mode mode) {
    return mode == GP_PAD_REPLICATE ? "replicate" : mode == GP_PAD_REFLECT ? "reflect" : "zeros";
}

int gp_codec_decoder_channels(const gp_codec_decoder_config *dec, int stage) {
    int c = dec->base_channels;
    for (int i = 0; i <= stage; i++) c /= 2;
    return c;
}

int gp_codec_encoder_channels(const gp_codec_encoder_config *enc, int stage) {
    long long c = enc->base_channels;
    for (int i = 0; i < stage && c <= CFG_MAX_CHANNELS; i++) c *= 2;
    return c > CFG_MAX_CHANNELS ? CFG_MAX_CHANNELS + 1 : (int)c;
}
