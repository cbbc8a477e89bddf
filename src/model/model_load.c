/* model_load.c — reading model.safetensors into a gp_model (MODEL.md §A.5,
 * §B): every required tensor is looked up by name and shape-checked against
 * the config; missing or mis-shaped tensors are errors naming the tensor;
 * unknown tensors are logged and ignored; an un-merged LoRA training
 * checkpoint (P.base.weight + P.lora_A/B) is merged on the fly. */
#include <cpuid.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "compute/bf16_packed.h"
#include "compute/conv_direct.h"
#include "compute/matmul_tiles.h"
#include "compute/onednn_matmul.h"
#include "io/file.h"
#include "model/lora.h"
#include "model/model.h"

#define HINT "is this a Gepard checkpoint matching its gepard_config.json?"

typedef struct loader {
    gp_model *model;
    const gp_st_file *file;
    bool *used; /* per tensor of the file */
} loader;

static const gp_st_tensor *loader_find(loader *ld, const char *name) {
    const gp_st_tensor *t = gp_st_find(ld->file, name);
    if (t) ld->used[t - ld->file->tensors] = true;
    return t;
}

static int loader_expect(loader *ld, const char *name, int ndim, const int64_t *shape,
                         const gp_st_tensor **out, gp_error *err) {
    int rc = gp_st_expect(ld->file, name, ndim, shape, HINT, out, err);
    if (rc == GEPARD_OK) ld->used[*out - ld->file->tensors] = true;
    return rc;
}

static int load_vector(loader *ld, const char *name, int n, float **out, gp_error *err) {
    const gp_st_tensor *t;
    int64_t shape[1] = {n};
    int rc = loader_expect(ld, name, 1, shape, &t, err);
    if (rc) return rc;
    rc = gp_st_load_f32(t, out, err);
    if (rc == GEPARD_OK) ld->model->weight_bytes += (size_t)n * 4;
    return rc;
}

/* Zero-centred RMSNorm gain: store 1 + w. */
static int load_norm_zc(loader *ld, const char *name, int n, float **out, gp_error *err) {
    int rc = load_vector(ld, name, n, out, err);
    if (rc) return rc;
    for (int i = 0; i < n; i++) (*out)[i] += 1.0f;
    return GEPARD_OK;
}

/* A scalar stored as shape [] or [1]. */
static int load_scalar(loader *ld, const char *name, float *out, gp_error *err) {
    const gp_st_tensor *t;
    int rc = loader_expect(ld, name, -1, NULL, &t, err);
    if (rc) return rc;
    if (t->numel != 1 || t->ndim > 1)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: tensor %s must be a scalar (shape [] or [1])",
                       ld->file->path, name);
    gp_convert_to_f32(t->dtype, t->data, out, 1);
    return GEPARD_OK;
}

/* Load the Linear weight under `prefix` ("model.layers.0.self_attn.q_proj")
 * as a [rows, cols] matrix, merging an un-merged LoRA training checkpoint. */
/* With a device model, backbone matrices (dev_layer >= 0) go straight from
 * the file mapping to the device and `m` stays empty. */
static int load_linear_to(loader *ld, const char *prefix, int rows, int cols,
                          gp_weight_format format, gp_matrix *m, int dev_layer,
                          gp_dev_matrix dev_which, gp_error *err) {
    gp_device_model *dev = dev_layer >= 0 ? ld->model->device : NULL;
    char name[256], base_name[256];
    snprintf(name, sizeof name, "%s.weight", prefix);
    snprintf(base_name, sizeof base_name, "%s.base.weight", prefix);
    const char *use =
        gp_st_find(ld->file, name) || !gp_st_find(ld->file, base_name) ? name : base_name;
    const gp_st_tensor *t;
    int64_t shape[2] = {rows, cols};
    int rc = loader_expect(ld, use, 2, shape, &t, err);
    if (rc) return rc;
    char a_name[256], b_name[256];
    snprintf(a_name, sizeof a_name, "%s.lora_A", prefix);
    snprintf(b_name, sizeof b_name, "%s.lora_B", prefix);
    const gp_st_tensor *a = loader_find(ld, a_name), *b = loader_find(ld, b_name);
    if (!a && !b && dev) {
        rc = gp_device_model_upload(dev, dev_layer, dev_which, t->dtype, t->data, rows, cols, err);
        gp_st_drop_pages(ld->file, t);
        return rc;
    }
    if (!a && !b) {
        rc = gp_matrix_from_data(m, format, rows, cols, t->dtype, t->data, err);
        if (rc == GEPARD_OK) ld->model->weight_bytes += gp_matrix_bytes(m);
        gp_st_drop_pages(ld->file, t); /* converted: the file's copy can leave memory */
        return rc;
    }
    if (!a || !b)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: %s has only one of lora_A / lora_B",
                       ld->file->path, prefix);
    float *w;
    if ((rc = gp_st_load_f32(t, &w, err))) return rc;
    double alpha = -1;
    const char *meta = gp_st_metadata(ld->file, "lora_alpha");
    if (!meta) meta = gp_st_metadata(ld->file, "alpha");
    if (meta) alpha = atof(meta);
    rc = gp_lora_merge_tensors(w, rows, cols, a, b, alpha, prefix, err);
    if (rc == GEPARD_OK && dev)
        rc = gp_device_model_upload(dev, dev_layer, dev_which, GP_F32, w, rows, cols, err);
    else if (rc == GEPARD_OK)
        rc = gp_matrix_from_f32(m, format, rows, cols, w, err);
    if (rc == GEPARD_OK) ld->model->weight_bytes += gp_matrix_bytes(m);
    gp_aligned_free(w);
    return rc;
}

static int load_linear(loader *ld, const char *prefix, int rows, int cols, gp_weight_format format,
                       gp_matrix *m, gp_error *err) {
    return load_linear_to(ld, prefix, rows, cols, format, m, -1, GP_DEV_Q, err);
}

static int load_layer(loader *ld, int l, gp_layer *layer, gp_error *err) {
    const gp_backbone_config *bb = &ld->model->cfg.backbone;
    const int H = bb->hidden_size, D = bb->head_dim, NH = bb->num_heads, NKV = bb->num_kv_heads;
    const int I = bb->intermediate_size;
    gp_weight_format f = ld->model->weight_format;
    char p[160], name[200];
    snprintf(p, sizeof p, "model.layers.%d", l);
#define NAME(suffix) (snprintf(name, sizeof name, "%s.%s", p, suffix), name)
    int rc;
    if ((rc = load_norm_zc(ld, NAME("input_layernorm.weight"), H, &layer->input_norm, err)) ||
        (rc = load_norm_zc(ld, NAME("post_attention_layernorm.weight"), H, &layer->post_norm,
                           err)) ||
        (rc = load_norm_zc(ld, NAME("self_attn.q_norm.weight"), D, &layer->q_norm, err)) ||
        (rc = load_norm_zc(ld, NAME("self_attn.k_norm.weight"), D, &layer->k_norm, err)) ||
        (rc = load_linear_to(ld, NAME("self_attn.q_proj"), 2 * NH * D, H, f, &layer->q_proj, l,
                             GP_DEV_Q, err)) ||
        (rc = load_linear_to(ld, NAME("self_attn.k_proj"), NKV * D, H, f, &layer->k_proj, l,
                             GP_DEV_K, err)) ||
        (rc = load_linear_to(ld, NAME("self_attn.v_proj"), NKV * D, H, f, &layer->v_proj, l,
                             GP_DEV_V, err)) ||
        (rc = load_linear_to(ld, NAME("self_attn.o_proj"), H, NH * D, f, &layer->o_proj, l,
                             GP_DEV_O, err)) ||
        (rc = load_linear_to(ld, NAME("mlp.gate_proj"), I, H, f, &layer->gate_proj, l, GP_DEV_GATE,
                             err)) ||
        (rc = load_linear_to(ld, NAME("mlp.up_proj"), I, H, f, &layer->up_proj, l, GP_DEV_UP,
                             err)) ||
        (rc = load_linear_to(ld, NAME("mlp.down_proj"), H, I, f, &layer->down_proj, l, GP_DEV_DOWN,
                             err)))
        return rc;
    if (bb->attention_bias) {
        if ((rc =
                 load_vector(ld, NAME("self_attn.q_proj.bias"), 2 * NH * D, &layer->q_bias, err)) ||
            (rc = load_vector(ld, NAME("self_attn.k_proj.bias"), NKV * D, &layer->k_bias, err)) ||
            (rc = load_vector(ld, NAME("self_attn.v_proj.bias"), NKV * D, &layer->v_bias, err)) ||
            (rc = load_vector(ld, NAME("self_attn.o_proj.bias"), H, &layer->o_bias, err)))
            return rc;
    }
#undef NAME
    return GEPARD_OK;
}

static int load_overlay(loader *ld, gp_error *err) {
    gp_model *m = ld->model;
    const gp_model_config *cfg = &m->cfg;
    const int H = cfg->backbone.hidden_size, E = cfg->audio_embed_dim, C = cfg->num_channels;
    char name[128];
    int rc = GEPARD_OK;
    m->audio_tables = gp_aligned_alloc((size_t)cfg->total_logits * E * sizeof(float));
    m->heads_bias = gp_aligned_alloc((size_t)cfg->total_logits * sizeof(float));
    float *heads = gp_aligned_alloc((size_t)cfg->total_logits * H * sizeof(float));
    if (!m->audio_tables || !m->heads_bias || !heads) {
        gp_aligned_free(heads);
        return gp_fail_oom(err, "audio heads", (size_t)cfg->total_logits * H * 4);
    }
    for (int c = 0; c < C && rc == 0; c++) {
        const int L = cfg->channel_vocab[c], off = cfg->channel_offset[c];
        const gp_st_tensor *t;
        int64_t emb_shape[2] = {L, E}, head_shape[2] = {L, H}, bias_shape[1] = {L};
        snprintf(name, sizeof name, "audio_embeddings.%d.weight", c);
        if ((rc = loader_expect(ld, name, 2, emb_shape, &t, err))) break;
        gp_convert_to_f32(t->dtype, t->data, m->audio_tables + (size_t)off * E, (size_t)L * E);
        snprintf(name, sizeof name, "codebook_heads.%d.weight", c);
        if ((rc = loader_expect(ld, name, 2, head_shape, &t, err))) break;
        gp_convert_to_f32(t->dtype, t->data, heads + (size_t)off * H, (size_t)L * H);
        snprintf(name, sizeof name, "codebook_heads.%d.bias", c);
        if ((rc = loader_expect(ld, name, 1, bias_shape, &t, err))) break;
        gp_convert_to_f32(t->dtype, t->data, m->heads_bias + off, (size_t)L);
    }
    if (rc == 0)
        rc = gp_matrix_from_f32(&m->heads, GP_WEIGHTS_F32, cfg->total_logits, H, heads, err);
    gp_aligned_free(heads);
    if (rc) return rc;
    const gp_st_tensor *t;
    int64_t stop_shape[2] = {1, H}, one[1] = {1};
    if ((rc = load_linear(ld, "audio_embed_proj.0", H, C * E, GP_WEIGHTS_F32, &m->embed_proj0,
                          err)) ||
        (rc = load_vector(ld, "audio_embed_proj.0.bias", H, &m->embed_proj0_bias, err)) ||
        (rc = load_linear(ld, "audio_embed_proj.2", H, H, GP_WEIGHTS_F32, &m->embed_proj2, err)) ||
        (rc = load_vector(ld, "audio_embed_proj.2.bias", H, &m->embed_proj2_bias, err)) ||
        (rc = load_scalar(ld, "audio_embed_scale", &m->audio_embed_scale, err)) ||
        (rc = loader_expect(ld, "stop_head.weight", 2, stop_shape, &t, err)) ||
        (rc = gp_st_load_f32(t, &m->stop_weight, err)) ||
        (rc = loader_expect(ld, "stop_head.bias", 1, one, &t, err)))
        return rc;
    gp_convert_to_f32(t->dtype, t->data, &m->stop_bias, 1);
    return GEPARD_OK;
}

/* RoPE inverse frequencies. The upstream model keeps them in a
 * non-persistent buffer that is cast with the model to bf16 (model_dtype), so
 * every upstream run — including an f32 one made from a bf16-cast model —
 * uses inv_freq rounded to bf16. We do the same: with exact f32 frequencies
 * the hidden states drift from the reference by ~1e-3 relative within 30
 * positions (measured against ../shared/fixtures/model-tiny). */
static void compute_rope(gp_model *m) {
    const gp_backbone_config *bb = &m->cfg.backbone;
    int half = bb->rotary_dim / 2;
    for (int i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)bb->rotary_dim;
        float inv = 1.0f / powf((float)bb->rope_theta, e);
        m->rope_inv_freq[i] = gp_bf16_to_f32(gp_f32_to_bf16(inv));
    }
}

static bool has_compressor_tensors(const gp_st_file *f) {
    return gp_st_find(f, "ref_compressor.input_proj.weight") &&
           gp_st_find(f, "ref_compressor.queries") &&
           gp_st_find(f, "ref_compressor.final_norm.weight");
}

static void log_unused(const loader *ld) {
    size_t unused = 0;
    for (size_t i = 0; i < ld->file->count; i++) {
        const char *name = ld->file->tensors[i].name;
        if (ld->used[i] || strncmp(name, "ref_compressor.", 15) == 0 ||
            strcmp(name, "null_prefix") == 0)
            continue;
        if (unused++ < 8) GP_DEBUG("%s: ignoring tensor %s", ld->file->path, name);
    }
    if (unused) GP_DEBUG("%s: %zu tensors not used by inference", ld->file->path, unused);
}

gp_model_load_options gp_model_load_default_options(void) {
    gp_model_load_options o = {.weight_format = GP_WEIGHTS_BF16,
                               .device = {.kind = GP_DEVICE_CPU, .precision = GP_DEV_BF16}};
    return o;
}

/* Whether this CPU has bf16 matrix instructions (AVX512-BF16 or AMX-BF16):
 * without them oneDNN's bf16 matmul is emulated and never worth timing. */
static bool cpu_has_bf16_matrix(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool amx_bf16 = (d >> 22) & 1u;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return amx_bf16;
    return amx_bf16 || ((a >> 5) & 1u);
}

/* Prefill through oneDNN where it measures faster (bf16 weights only): every
 * backbone matrix gets a oneDNN copy. A failure to build one leaves prefill
 * on the native kernels (said in prefill_why), never fails the load. */
static int choose_onednn(gp_model *m, gp_error *err) {
    const char *env = getenv("GEPARD_PREFILL");
    const bool forced = env && !strcmp(env, "onednn");
    if (m->weight_format != GP_WEIGHTS_BF16) {
        snprintf(m->prefill_why, sizeof m->prefill_why, "native: oneDNN's path needs bf16 weights");
        return GEPARD_OK;
    }
    if (!forced && gp_kernels_active() < GP_KERNELS_AVX512) {
        snprintf(m->prefill_why, sizeof m->prefill_why,
                 "native: GEPARD_KERNELS=%s stands for a CPU without AVX-512 (oneDNN's bf16 "
                 "matmul and the AMX tiles are not tried)",
                 gp_kernel_level_name(gp_kernels_active()));
        return GEPARD_OK;
    }
    if (!forced && !cpu_has_bf16_matrix()) {
        snprintf(m->prefill_why, sizeof m->prefill_why,
                 "native: no bf16 matrix instructions (AVX512-BF16 or AMX-BF16) for oneDNN");
        return GEPARD_OK;
    }
    m->prefill_onednn =
        gp_onednn_choose(&m->layers[0].gate_proj, m->prefill_why, sizeof m->prefill_why);
    gp_matrix *ms[GP_LAYER_MATRICES];
    for (int l = 0; m->prefill_onednn && l < m->cfg.backbone.num_layers; l++) {
        gp_layer_matrices(&m->layers[l], ms);
        for (int i = 0; i < GP_LAYER_MATRICES && m->prefill_onednn; i++) {
            gp_error why;
            gp_error_clear(&why);
            if (gp_onednn_attach(ms[i], &why) == GEPARD_OK) continue;
            if (why.code == GEPARD_ERR_NOMEM) return gp_fail(err, why.code, "%s", why.message);
            GP_WARN("prefill stays on the native kernels: %s", why.message);
            snprintf(m->prefill_why, sizeof m->prefill_why, "native: %s", why.message);
            m->prefill_onednn = false;
        }
    }
    for (int l = 0; !m->prefill_onednn && l < m->cfg.backbone.num_layers; l++) {
        gp_layer_matrices(&m->layers[l], ms);
        for (int i = 0; i < GP_LAYER_MATRICES; i++) gp_onednn_detach(ms[i]);
    }
    return GEPARD_OK;
}

/* Prefill on our AMX tile loop (compute/matmul_tiles.c) where it measures faster than
 * the native kernels: every backbone matrix gets a tile copy and oneDNN is not tried.
 * GEPARD_PREFILL=tiles forces it, native or onednn skip it. */
static bool choose_tiles(gp_model *m, gp_error *err) {
    const char *env = getenv("GEPARD_PREFILL");
    const bool forced = env && !strcmp(env, "tiles");
    if (env && !forced) return false;
    if (m->weight_format != GP_WEIGHTS_BF16 || !gp_dconv_tiles_mode()) {
        if (forced)
            snprintf(m->prefill_why, sizeof m->prefill_why, "native: GEPARD_PREFILL=tiles, but %s",
                     m->weight_format != GP_WEIGHTS_BF16 ? "the tiles need bf16 weights"
                                                         : "this CPU has no AMX tile unit");
        return false;
    }
    if (!gp_tiles_choose(&m->layers[0].gate_proj, forced, m->prefill_why, sizeof m->prefill_why))
        return false;
    gp_matrix *ms[GP_LAYER_MATRICES];
    bool ok = true;
    for (int l = 0; ok && l < m->cfg.backbone.num_layers; l++) {
        gp_layer_matrices(&m->layers[l], ms);
        for (int i = 0; ok && i < GP_LAYER_MATRICES; i++) {
            gp_error why;
            gp_error_clear(&why);
            if (gp_tiles_attach(ms[i], &why) == GEPARD_OK) continue;
            if (why.code == GEPARD_ERR_NOMEM) *err = why;
            snprintf(m->prefill_why, sizeof m->prefill_why, "native: %s", why.message);
            ok = false;
        }
    }
    for (int l = 0; !ok && l < m->cfg.backbone.num_layers; l++) {
        gp_layer_matrices(&m->layers[l], ms);
        for (int i = 0; i < GP_LAYER_MATRICES; i++) gp_tiles_detach(ms[i]);
    }
    return ok;
}

/* How prefill multiplies on this CPU, chosen by timing (compute/matrix.h's
 * widening of bf16 blocks, then oneDNN against the native kernels); the
 * reasons go to m->prefill_why for `gepard bench`. */
static int choose_prefill_path(gp_model *m, gp_error *err) {
    char widen[160] = "";
    if (m->weight_format == GP_WEIGHTS_BF16)
        gp_prefill_widen_choose(&m->layers[0].gate_proj, widen, sizeof widen);
    int rc = GEPARD_OK;
    gp_error_clear(err);
    const char *env = getenv("GEPARD_PREFILL");
    if (choose_tiles(m, err))
        m->prefill_tiles = true;
    else if (err->code == GEPARD_ERR_NOMEM)
        rc = err->code;
    else if (!(env && !strcmp(env, "tiles")))
        rc = choose_onednn(m, err);
    const size_t used = strlen(m->prefill_why);
    if (rc == GEPARD_OK && widen[0] && used + 2 < sizeof m->prefill_why)
        snprintf(m->prefill_why + used, sizeof m->prefill_why - used, "; %s", widen);
    return rc;
}

/* Whether the decode step reads the backbone's bf16 matrices through their
 * 12-bit packed copies (compute/bf16_packed.h), chosen by timing. */
static int choose_decode_weights(gp_model *m, int policy, gp_error *err) {
    const int layers = m->cfg.backbone.num_layers;
    gp_matrix **all = malloc((size_t)layers * GP_LAYER_MATRICES * sizeof *all);
    if (!all) return gp_fail_oom(err, "matrix list", (size_t)layers * GP_LAYER_MATRICES);
    for (int l = 0; l < layers; l++) gp_layer_matrices(&m->layers[l], all + l * GP_LAYER_MATRICES);
    gp_error_clear(err);
    const int rc = gp_bf16_packed_choose(all, layers * GP_LAYER_MATRICES, policy,
                                         m->decode_weights_why, sizeof m->decode_weights_why, err);
    for (int i = 0; i < layers * GP_LAYER_MATRICES; i++) /* resident beside the bf16 data */
        if (all[i]->packed) m->weight_bytes += all[i]->packed->bytes;
    free(all);
    return rc;
}

int gp_model_load(const char *dir, const gp_model_load_options *options, gp_model **out,
                  gp_error *err) {
    *out = NULL;
    gp_model *m = calloc(1, sizeof *m);
    if (!m) return gp_fail_oom(err, "model", sizeof *m);
    pthread_mutex_init(&m->compressor_lock, NULL);
    m->weight_format = options ? options->weight_format : GP_WEIGHTS_BF16;
    m->dir = strdup(dir);
    char *st_path = gp_path_join(dir, "model.safetensors");
    int rc = (!m->dir || !st_path) ? gp_fail_oom(err, "path", strlen(dir)) : GEPARD_OK;
    if (rc == GEPARD_OK) rc = gp_model_config_load(dir, &m->cfg, err);
    if (rc == GEPARD_OK) rc = gp_st_open(st_path, &m->file, err);
    free(st_path);
    if (rc == GEPARD_OK && options && options->device.kind == GP_DEVICE_CUDA)
        rc = gp_device_model_create(&options->device, m, &m->device, err);
    loader ld = {m, m->file, NULL};
    if (rc == GEPARD_OK) {
        ld.used = calloc(m->file->count + 1, sizeof(bool));
        if (!ld.used) rc = gp_fail_oom(err, "tensor table", m->file->count);
    }
    const gp_backbone_config *bb = &m->cfg.backbone;
    if (rc == GEPARD_OK) {
        int64_t embed_shape[2] = {bb->vocab_size, bb->hidden_size};
        rc = loader_expect(&ld, "model.embed_tokens.weight", 2, embed_shape, &m->embed, err);
    }
    if (rc == GEPARD_OK) {
        m->layers = calloc((size_t)bb->num_layers, sizeof *m->layers);
        m->rope_inv_freq = gp_aligned_alloc((size_t)bb->rotary_dim / 2 * sizeof(float) + 4);
        if (!m->layers || !m->rope_inv_freq) rc = gp_fail_oom(err, "layers", 0);
    }
    for (int l = 0; rc == GEPARD_OK && l < bb->num_layers; l++) {
        rc = load_layer(&ld, l, &m->layers[l], err);
        if (gp_progress_enabled()) gp_progress("loading model: layer %d/%d", l + 1, bb->num_layers);
    }
    gp_progress_done();
    if (rc == GEPARD_OK)
        rc = load_norm_zc(&ld, "model.norm.weight", bb->hidden_size, &m->final_norm, err);
    if (rc == GEPARD_OK) rc = load_overlay(&ld, err);
    if (rc == GEPARD_OK) {
        compute_rope(m);
        m->has_voice_cloning = m->cfg.voice_cloning.enabled && has_compressor_tensors(m->file);
        if (m->cfg.voice_cloning.enabled && !m->has_voice_cloning)
            GP_WARN("%s: voice cloning is enabled in the config but ref_compressor.* tensors are "
                    "missing; voices are unavailable",
                    dir);
        if (gp_st_find(m->file, "null_prefix") && m->cfg.voice_cloning.enabled) {
            int64_t shape[2] = {m->cfg.voice_cloning.num_queries, bb->hidden_size};
            const gp_st_tensor *t;
            rc = loader_expect(&ld, "null_prefix", 2, shape, &t, err);
            if (rc == GEPARD_OK) rc = gp_st_load_f32(t, &m->null_prefix, err);
        }
        log_unused(&ld);
    }
    if (rc == GEPARD_OK && m->device) rc = gp_device_model_finish(m->device, m, err);
    if (rc == GEPARD_OK && !m->device) rc = choose_prefill_path(m, err);
    if (rc == GEPARD_OK && !m->device)
        rc = choose_decode_weights(m, options ? options->packed_weights : 0, err);
    free(ld.used);
    if (rc) {
        gp_model_free(m);
        return rc;
    }
    *out = m;
    return GEPARD_OK;
}

int gp_model_embed_token(const gp_model *m, int32_t id, float *dst, gp_error *err) {
    const int64_t H = m->cfg.backbone.hidden_size;
    if (id < 0 || id >= m->cfg.backbone.vocab_size)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "token id %d is outside the embedding table (%lld rows)", id,
                       (long long)m->cfg.backbone.vocab_size);
    size_t esize = gp_dtype_size(m->embed->dtype);
    gp_convert_to_f32(m->embed->dtype,
                      (const unsigned char *)m->embed->data + (size_t)id * H * esize, dst,
                      (size_t)H);
    return GEPARD_OK;
}

static void free_compressor(gp_compressor *c, int blocks) {
    gp_matrix_free(&c->input_proj);
    gp_aligned_free(c->input_bias);
    gp_aligned_free(c->queries);
    gp_aligned_free(c->final_norm);
    for (int b = 0; c->blocks && b < blocks; b++) {
        gp_compressor_block *k = &c->blocks[b];
        gp_aligned_free(k->norm_self);
        gp_aligned_free(k->norm_cross);
        gp_aligned_free(k->norm_ffn);
        gp_matrix *ms[] = {&k->self_q,   &k->self_k,  &k->self_v,  &k->self_out,
                           &k->cross_q,  &k->cross_k, &k->cross_v, &k->cross_out,
                           &k->ffn_gate, &k->ffn_up,  &k->ffn_down};
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) gp_matrix_free(ms[i]);
    }
    free(c->blocks);
    memset(c, 0, sizeof *c);
}

void gp_model_free(gp_model *m) {
    if (!m) return;
    gp_device_model_free(m->device);
    for (int l = 0; m->layers && l < m->cfg.backbone.num_layers; l++) {
        gp_layer *L = &m->layers[l];
        gp_aligned_free(L->input_norm);
        gp_aligned_free(L->post_norm);
        gp_aligned_free(L->q_norm);
        gp_aligned_free(L->k_norm);
        gp_matrix *ms[GP_LAYER_MATRICES];
        gp_layer_matrices(L, ms);
        for (int i = 0; i < GP_LAYER_MATRICES; i++) gp_matrix_free(ms[i]);
        gp_aligned_free(L->q_bias);
        gp_aligned_free(L->k_bias);
        gp_aligned_free(L->v_bias);
        gp_aligned_free(L->o_bias);
    }
    free(m->layers);
    gp_aligned_free(m->final_norm);
    gp_aligned_free(m->rope_inv_freq);
    gp_aligned_free(m->audio_tables);
    gp_matrix_free(&m->embed_proj0);
    gp_matrix_free(&m->embed_proj2);
    gp_aligned_free(m->embed_proj0_bias);
    gp_aligned_free(m->embed_proj2_bias);
    gp_matrix_free(&m->heads);
    gp_aligned_free(m->heads_bias);
    gp_aligned_free(m->stop_weight);
    free_compressor(&m->compressor, m->cfg.voice_cloning.num_layers);
    gp_aligned_free(m->null_prefix);
    pthread_mutex_destroy(&m->compressor_lock);
    gp_st_close(m->file);
    free(m->dir);
    free(m);
}

/* ---- compressor (loaded lazily: only voice cloning needs it) ---- */

static int load_compressor_locked(gp_model *m, gp_error *err) {
    const gp_voice_cloning_config *vc = &m->cfg.voice_cloning;
    const int d = vc->d_model, F = vc->ffn_hidden_size, Cin = m->cfg.num_channels;
    bool *used = calloc(m->file->count + 1, sizeof(bool));
    if (!used) return gp_fail_oom(err, "tensor table", m->file->count);
    loader ld = {m, m->file, used};
    gp_compressor *c = &m->compressor;
    /* Compressor matrices: the backbone's format, but never below bf16 precision. */
    gp_weight_format f = m->weight_format == GP_WEIGHTS_F32 ? GP_WEIGHTS_F32 : GP_WEIGHTS_BF16;
    int rc;
    const gp_st_tensor *t;
    int64_t q_shape[2] = {vc->num_queries, d};
    if ((rc = load_linear(&ld, "ref_compressor.input_proj", d, Cin, GP_WEIGHTS_F32, &c->input_proj,
                          err)) ||
        (rc = load_vector(&ld, "ref_compressor.input_proj.bias", d, &c->input_bias, err)) ||
        (rc = loader_expect(&ld, "ref_compressor.queries", 2, q_shape, &t, err)) ||
        (rc = gp_st_load_f32(t, &c->queries, err)) ||
        (rc = load_vector(&ld, "ref_compressor.final_norm.weight", d, &c->final_norm, err)) ||
        (rc = load_scalar(&ld, "ref_compressor.output_scale", &c->output_scale, err))) {
        free(used);
        return rc;
    }
    c->blocks = calloc((size_t)vc->num_layers + 1, sizeof *c->blocks);
    if (!c->blocks) {
        free(used);
        return gp_fail_oom(err, "compressor", 0);
    }
    char p[160], name[200];
#define NAME(suffix) (snprintf(name, sizeof name, "%s.%s", p, suffix), name)
    for (int b = 0; rc == GEPARD_OK && b < vc->num_layers; b++) {
        gp_compressor_block *k = &c->blocks[b];
        snprintf(p, sizeof p, "ref_compressor.blocks.%d", b);
        if ((rc = load_vector(&ld, NAME("norm_self.weight"), d, &k->norm_self, err)) ||
            (rc = load_vector(&ld, NAME("norm_cross.weight"), d, &k->norm_cross, err)) ||
            (rc = load_vector(&ld, NAME("norm_ffn.weight"), d, &k->norm_ffn, err)) ||
            (rc = load_linear(&ld, NAME("self_attn.q_proj"), d, d, f, &k->self_q, err)) ||
            (rc = load_linear(&ld, NAME("self_attn.k_proj"), d, d, f, &k->self_k, err)) ||
            (rc = load_linear(&ld, NAME("self_attn.v_proj"), d, d, f, &k->self_v, err)) ||
            (rc = load_linear(&ld, NAME("self_attn.out_proj"), d, d, f, &k->self_out, err)) ||
            (rc = load_linear(&ld, NAME("cross_attn.q_proj"), d, d, f, &k->cross_q, err)) ||
            (rc = load_linear(&ld, NAME("cross_attn.k_proj"), d, d, f, &k->cross_k, err)) ||
            (rc = load_linear(&ld, NAME("cross_attn.v_proj"), d, d, f, &k->cross_v, err)) ||
            (rc = load_linear(&ld, NAME("cross_attn.out_proj"), d, d, f, &k->cross_out, err)) ||
            (rc = load_linear(&ld, NAME("ffn.gate_proj"), F, d, f, &k->ffn_gate, err)) ||
            (rc = load_linear(&ld, NAME("ffn.up_proj"), F, d, f, &k->ffn_up, err)) ||
            (rc = load_linear(&ld, NAME("ffn.down_proj"), d, F, f, &k->ffn_down, err)))
            break;
    }
#undef NAME
    free(used);
    if (rc) free_compressor(c, vc->num_layers);
    return rc;
}

int gp_model_ensure_compressor(gp_model *m, gp_error *err) {
    if (!m->has_voice_cloning)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "%s: this model has no voice-cloning compressor (voice_cloning disabled or "
                       "ref_compressor.* tensors missing), so it cannot take a reference voice",
                       m->dir);
    pthread_mutex_lock(&m->compressor_lock);
    int rc = GEPARD_OK;
    if (!m->compressor_loaded) {
        rc = load_compressor_locked(m, err);
        if (rc == GEPARD_OK) m->compressor_loaded = true;
    }
    pthread_mutex_unlock(&m->compressor_lock);
    return rc;
}
