/* synth.c — writing a synthetic Gepard checkpoint (see synth.h). Weights are
 * uniform with the variance of a standard initialisation (1/fan_in for
 * linears), so activations keep realistic magnitudes; the stop head is biased
 * low so generations run to max_frames unless forced — except where the spec
 * asks for a stop after some frames (the tiny preset): then the checkpoint is
 * written, run to fit the stop head (synth_stop.c), and written again with
 * that head (every other tensor the same). */
#include "model/synth.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/log.h"
#include "base/rng.h"
#include "io/file.h"
#include "io/safetensors.h"
#include "text/synth_tokenizer.h"

int gp_synth_model_preset(const char *name, gp_synth_model_spec *s) {
    memset(s, 0, sizeof *s);
    static const int levels[4] = {8, 7, 6, 6};
    memcpy(s->levels, levels, sizeof levels);
    if (strcmp(name, "gepard-1.0") == 0) {
        *s = (gp_synth_model_spec){.hidden = 1024,
                                   .layers = 14,
                                   .heads = 8,
                                   .kv_heads = 2,
                                   .head_dim = 256,
                                   .intermediate = 3584,
                                   .vocab = 248320,
                                   .audio_embed_dim = 32,
                                   .codec_groups = 8,
                                   .levels = {8, 7, 6, 6},
                                   .vc_queries = 8,
                                   .vc_layers = 2,
                                   .vc_heads = 8,
                                   .vc_ffn_multiplier = 4,
                                   .tokenizer_merges = 4000};
        return 0;
    }
    if (strcmp(name, "tiny") == 0) {
        *s = (gp_synth_model_spec){.hidden = 64,
                                   .layers = 2,
                                   .heads = 4,
                                   .kv_heads = 2,
                                   .head_dim = 16,
                                   .intermediate = 96,
                                   .vocab = 248320,
                                   .audio_embed_dim = 8,
                                   .codec_groups = 8,
                                   .levels = {8, 7, 6, 6},
                                   .vc_queries = 4,
                                   .vc_layers = 1,
                                   .vc_heads = 4,
                                   .vc_ffn_multiplier = 2,
                                   .tokenizer_merges = 4000,
                                   .stop_after_frames = 48}; /* ~2 s */
        return 0;
    }
    return -1;
}

typedef struct synth_writer {
    gp_st_writer *st;
    gp_rng rng;
    uint16_t **buffers;
    size_t n_buffers, cap_buffers;
    size_t params;
    const float *stop_weight; /* a fitted stop head, or NULL */
    float stop_bias;
} synth_writer;

/* Add a bf16 tensor of uniform values in [center - a, center + a]. */
static int add_uniform(synth_writer *w, const char *name, int ndim, const int64_t *shape,
                       float center, float amplitude, gp_error *err) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    uint16_t *data = malloc((n ? n : 1) * sizeof(uint16_t));
    if (!data) return gp_fail_oom(err, name, n * 2);
    for (size_t i = 0; i < n; i += 4) {
        uint64_t bits = gp_rng_next_u64(&w->rng);
        for (size_t k = 0; k < 4 && i + k < n; k++) {
            float u = (float)((bits >> (16 * k)) & 0xFFFF) * (2.0f / 65535.0f) - 1.0f;
            data[i + k] = gp_f32_to_bf16(center + amplitude * u);
        }
    }
    if (w->n_buffers == w->cap_buffers) {
        size_t cap = w->cap_buffers ? w->cap_buffers * 2 : 256;
        uint16_t **b = realloc(w->buffers, cap * sizeof *b);
        if (!b) {
            free(data);
            return gp_fail_oom(err, "tensor list", cap);
        }
        w->buffers = b;
        w->cap_buffers = cap;
    }
    w->buffers[w->n_buffers++] = data;
    w->params += n;
    return gp_st_writer_add(w->st, name, GP_BF16, ndim, shape, data, err);
}

static int add_linear(synth_writer *w, const char *name, int64_t out, int64_t in, gp_error *err) {
    int64_t shape[2] = {out, in};
    return add_uniform(w, name, 2, shape, 0, sqrtf(3.0f / (float)in), err);
}

static int add_vector(synth_writer *w, const char *name, int64_t n, float center, float amp,
                      gp_error *err) {
    int64_t shape[1] = {n};
    return add_uniform(w, name, 1, shape, center, amp, err);
}

static int write_backbone(synth_writer *w, const gp_synth_model_spec *s, gp_error *err) {
    int64_t emb[2] = {s->vocab, s->hidden};
    int rc = add_uniform(w, "model.embed_tokens.weight", 2, emb, 0, 0.05f, err);
    char name[160];
    const int H = s->hidden, D = s->head_dim;
    for (int l = 0; l < s->layers && !rc; l++) {
#define N(suffix) (snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix), name)
        if ((rc = add_vector(w, N("input_layernorm.weight"), H, 0, 0.1f, err)) ||
            (rc = add_vector(w, N("post_attention_layernorm.weight"), H, 0, 0.1f, err)) ||
            (rc = add_vector(w, N("self_attn.q_norm.weight"), D, 0, 0.1f, err)) ||
            (rc = add_vector(w, N("self_attn.k_norm.weight"), D, 0, 0.1f, err)) ||
            (rc = add_linear(w, N("self_attn.q_proj.weight"), 2 * s->heads * D, H, err)) ||
            (rc = add_linear(w, N("self_attn.k_proj.weight"), s->kv_heads * D, H, err)) ||
            (rc = add_linear(w, N("self_attn.v_proj.weight"), s->kv_heads * D, H, err)) ||
            (rc = add_linear(w, N("self_attn.o_proj.weight"), H, s->heads * D, err)) ||
            (rc = add_linear(w, N("mlp.gate_proj.weight"), s->intermediate, H, err)) ||
            (rc = add_linear(w, N("mlp.up_proj.weight"), s->intermediate, H, err)) ||
            (rc = add_linear(w, N("mlp.down_proj.weight"), H, s->intermediate, err)))
            break;
        if (s->attention_bias &&
            ((rc = add_vector(w, N("self_attn.q_proj.bias"), 2 * s->heads * D, 0, 0.1f, err)) ||
             (rc = add_vector(w, N("self_attn.k_proj.bias"), s->kv_heads * D, 0, 0.1f, err)) ||
             (rc = add_vector(w, N("self_attn.v_proj.bias"), s->kv_heads * D, 0, 0.1f, err)) ||
             (rc = add_vector(w, N("self_attn.o_proj.bias"), H, 0, 0.1f, err))))
            break;
#undef N
        if (gp_progress_enabled()) gp_progress("synth: layer %d/%d", l + 1, s->layers);
    }
    gp_progress_done();
    if (!rc) rc = add_vector(w, "model.norm.weight", H, 0, 0.1f, err);
    return rc;
}

static int write_overlay(synth_writer *w, const gp_synth_model_spec *s, gp_error *err) {
    const int H = s->hidden, E = s->audio_embed_dim, C = s->codec_groups * 4;
    char name[160];
    int rc = 0;
    for (int c = 0; c < C && !rc; c++) {
        int L = s->levels[c % 4];
        int64_t emb[2] = {L, E};
        snprintf(name, sizeof name, "audio_embeddings.%d.weight", c);
        if ((rc = add_uniform(w, name, 2, emb, 0, 1.0f, err))) break;
        snprintf(name, sizeof name, "codebook_heads.%d.weight", c);
        if ((rc = add_linear(w, name, L, H, err))) break;
        snprintf(name, sizeof name, "codebook_heads.%d.bias", c);
        rc = add_vector(w, name, L, 0, 0.1f, err);
    }
    int64_t stop_shape[2] = {1, H};
    if (rc || (rc = add_linear(w, "audio_embed_proj.0.weight", H, C * E, err)) ||
        (rc = add_vector(w, "audio_embed_proj.0.bias", H, 0, 0.02f, err)) ||
        (rc = add_linear(w, "audio_embed_proj.2.weight", H, H, err)) ||
        (rc = add_vector(w, "audio_embed_proj.2.bias", H, 0, 0.02f, err)) ||
        (rc = add_uniform(w, "audio_embed_scale", 0, NULL, 0.03f, 0, err)) ||
        (rc = add_uniform(w, "stop_head.weight", 2, stop_shape, 0, 0.01f, err)))
        return rc;
    if (w->stop_weight) /* the random draws above are still made: the rest stays the same */
        for (int i = 0; i < H; i++)
            w->buffers[w->n_buffers - 1][i] = gp_f32_to_bf16(w->stop_weight[i]);
    rc = add_vector(w, "stop_head.bias", 1, -8.0f, 0.0f, err);
    if (!rc && w->stop_weight) w->buffers[w->n_buffers - 1][0] = gp_f32_to_bf16(w->stop_bias);
    return rc;
}

static int write_compressor(synth_writer *w, const gp_synth_model_spec *s, gp_error *err) {
    const int d = s->hidden, F = d * s->vc_ffn_multiplier, C = s->codec_groups * 4;
    int64_t queries[2] = {s->vc_queries, d};
    int rc;
    if ((rc = add_linear(w, "ref_compressor.input_proj.weight", d, C, err)) ||
        (rc = add_vector(w, "ref_compressor.input_proj.bias", d, 0, 0.02f, err)) ||
        (rc = add_uniform(w, "ref_compressor.queries", 2, queries, 0, 1.0f, err)) ||
        (rc = add_vector(w, "ref_compressor.final_norm.weight", d, 1, 0.1f, err)) ||
        (rc = add_uniform(w, "ref_compressor.output_scale", 0, NULL, 0.05f, 0, err)) ||
        (rc = add_uniform(w, "null_prefix", 2, queries, 0, 0.05f, err)))
        return rc;
    char name[160];
    static const char *const attn[] = {"self_attn", "cross_attn"};
    static const char *const proj[] = {"q_proj", "k_proj", "v_proj", "out_proj"};
    for (int b = 0; b < s->vc_layers && !rc; b++) {
#define N(suffix) (snprintf(name, sizeof name, "ref_compressor.blocks.%d.%s", b, suffix), name)
        if ((rc = add_vector(w, N("norm_self.weight"), d, 1, 0.1f, err)) ||
            (rc = add_vector(w, N("norm_cross.weight"), d, 1, 0.1f, err)) ||
            (rc = add_vector(w, N("norm_ffn.weight"), d, 1, 0.1f, err)) ||
            (rc = add_linear(w, N("ffn.gate_proj.weight"), F, d, err)) ||
            (rc = add_linear(w, N("ffn.up_proj.weight"), F, d, err)) ||
            (rc = add_linear(w, N("ffn.down_proj.weight"), d, F, err)))
            break;
        for (int a = 0; a < 2 && !rc; a++)
            for (int p = 0; p < 4 && !rc; p++) {
                char suffix[64];
                snprintf(suffix, sizeof suffix, "%s.%s.weight", attn[a], proj[p]);
                rc = add_linear(w, N(suffix), d, d, err);
            }
#undef N
    }
    return rc;
}

static cJSON *backbone_json(const gp_synth_model_spec *s) {
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "model_type", "qwen3_5_text");
    cJSON_AddNumberToObject(b, "vocab_size", (double)s->vocab);
    cJSON_AddNumberToObject(b, "hidden_size", s->hidden);
    cJSON_AddNumberToObject(b, "intermediate_size", s->intermediate);
    cJSON_AddNumberToObject(b, "num_hidden_layers", s->layers);
    cJSON_AddNumberToObject(b, "num_attention_heads", s->heads);
    cJSON_AddNumberToObject(b, "num_key_value_heads", s->kv_heads);
    cJSON_AddNumberToObject(b, "head_dim", s->head_dim);
    cJSON_AddStringToObject(b, "hidden_act", "silu");
    cJSON_AddNumberToObject(b, "max_position_embeddings", 262144);
    cJSON_AddNumberToObject(b, "rms_norm_eps", 1e-6);
    cJSON_AddBoolToObject(b, "attention_bias", s->attention_bias);
    cJSON_AddFalseToObject(b, "tie_word_embeddings");
    cJSON *rope = cJSON_AddObjectToObject(b, "rope_parameters");
    cJSON_AddStringToObject(rope, "rope_type", "default");
    cJSON_AddNumberToObject(rope, "rope_theta", 10000000.0);
    double prf = s->partial_rotary_factor > 0 ? s->partial_rotary_factor : 1.0;
    cJSON_AddNumberToObject(rope, "partial_rotary_factor", prf);
    cJSON_AddNumberToObject(b, "partial_rotary_factor", prf);
    cJSON *types = cJSON_AddArrayToObject(b, "layer_types");
    for (int l = 0; l < s->layers; l++)
        cJSON_AddItemToArray(types, cJSON_CreateString("full_attention"));
    return b;
}

static cJSON *gepard_json(const gp_synth_model_spec *s) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "backbone_config", backbone_json(s));
    cJSON *heads = cJSON_AddObjectToObject(root, "audio_heads");
    for (int c = 0; c < s->codec_groups * 4; c++) {
        char key[32];
        snprintf(key, sizeof key, "level_audio_%d", c);
        cJSON_AddNumberToObject(heads, key, s->levels[c % 4]);
    }
    cJSON_AddNumberToObject(root, "audio_embed_dim", s->audio_embed_dim);
    cJSON_AddNumberToObject(root, "partial_rotary_factor",
                            s->partial_rotary_factor > 0 ? s->partial_rotary_factor : 1.0);
    cJSON *st = cJSON_AddObjectToObject(root, "special_tokens");
    cJSON_AddNumberToObject(st, "tokeniser_length", 248077);
    cJSON_AddNumberToObject(st, "start_of_text", 248073);
    cJSON_AddNumberToObject(st, "end_of_text", 248074);
    cJSON_AddNumberToObject(st, "start_of_speech", 248070);
    cJSON_AddNumberToObject(st, "end_of_speech", 248071);
    cJSON_AddNumberToObject(st, "tts_pad", 248076);
    cJSON_AddStringToObject(root, "model_dtype", "bfloat16");
    cJSON *codec = cJSON_AddObjectToObject(root, "codec");
    cJSON_AddNumberToObject(codec, "num_layers", s->codec_groups);
    cJSON *lv = cJSON_AddArrayToObject(codec, "fsq_levels");
    for (int i = 0; i < 4; i++) cJSON_AddItemToArray(lv, cJSON_CreateNumber(s->levels[i]));
    cJSON_AddTrueToObject(codec, "do_unfold");
    cJSON_AddNumberToObject(codec, "frame_rate_hz", 21.5);
    cJSON_AddStringToObject(codec, "codec_id", "nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps");
    cJSON_AddNumberToObject(codec, "sample_rate", 22050);
    cJSON *rep = cJSON_AddObjectToObject(root, "text_repetition");
    cJSON_AddBoolToObject(rep, "enabled", !s->no_repetition);
    cJSON_AddNumberToObject(rep, "target_text_tokens", 16);
    cJSON_AddNumberToObject(rep, "apply_below", 13);
    cJSON_AddNumberToObject(rep, "max_repeats", 8);
    cJSON *vc = cJSON_AddObjectToObject(root, "voice_cloning");
    cJSON_AddTrueToObject(vc, "enabled");
    cJSON *comp = cJSON_AddObjectToObject(vc, "compressor");
    cJSON_AddNumberToObject(comp, "num_queries", s->vc_queries);
    cJSON_AddNumberToObject(comp, "num_layers", s->vc_layers);
    cJSON_AddNumberToObject(comp, "num_heads", s->vc_heads);
    cJSON_AddNumberToObject(comp, "d_model", s->hidden);
    cJSON_AddNumberToObject(comp, "ffn_hidden_size_multiplier", s->vc_ffn_multiplier);
    cJSON_AddStringToObject(root, "model_type", "gepard");
    cJSON_AddStringToObject(root, "synthetic",
                            "random weights written by `gepard synth`; not a model");
    return root;
}

static int write_json_file(const char *dir, const char *name, cJSON *doc, gp_error *err) {
    char *text = cJSON_Print(doc);
    cJSON_Delete(doc);
    char *path = gp_path_join(dir, name);
    int rc = (!text || !path) ? gp_fail_oom(err, name, 0) : GEPARD_OK;
    gp_atomic_file af;
    if (!rc) rc = gp_atomic_file_open(&af, path, err);
    if (!rc) {
        gp_atomic_file_write(&af, text, strlen(text));
        rc = gp_atomic_file_commit(&af, err); /* reports a failed write */
    }
    free(text);
    free(path);
    return rc;
}

static int write_tokenizer(const char *dir, int merges, gp_error *err) {
    gp_buf json;
    gp_buf_init(&json);
    int rc = gp_synth_tokenizer_json(&json, merges, err);
    char *path = gp_path_join(dir, "tokenizer.json");
    gp_atomic_file af;
    if (!rc && !path) rc = gp_fail_oom(err, "path", 0);
    if (!rc) rc = gp_atomic_file_open(&af, path, err);
    if (!rc) {
        gp_atomic_file_write(&af, json.data, json.len);
        rc = gp_atomic_file_commit(&af, err); /* reports a failed write */
    }
    free(path);
    gp_buf_free(&json);
    return rc;
}

static int write_checkpoint(const char *dir, const gp_synth_model_spec *s, uint64_t seed,
                            const float *stop_weight, float stop_bias, gp_error *err) {
    int rc = gp_make_dirs(dir, err);
    if (rc) return rc;
    synth_writer w;
    memset(&w, 0, sizeof w);
    w.stop_weight = stop_weight;
    w.stop_bias = stop_bias;
    gp_rng_seed(&w.rng, seed);
    w.st = gp_st_writer_create();
    if (!w.st) return gp_fail_oom(err, "writer", 0);
    gp_st_writer_set_metadata(w.st, "format", "pt", err);
    gp_st_writer_set_metadata(w.st, "synthetic", "random weights from gepard synth", err);
    rc = write_backbone(&w, s, err);
    if (!rc) rc = write_overlay(&w, s, err);
    if (!rc) rc = write_compressor(&w, s, err);
    char *path = gp_path_join(dir, "model.safetensors");
    if (!rc && !path) rc = gp_fail_oom(err, "path", 0);
    if (!rc) rc = gp_st_writer_write(w.st, path, err);
    free(path);
    gp_st_writer_free(w.st);
    for (size_t i = 0; i < w.n_buffers; i++) free(w.buffers[i]);
    free(w.buffers);
    if (!rc) rc = write_json_file(dir, "gepard_config.json", gepard_json(s), err);
    if (!rc) rc = write_json_file(dir, "config.json", backbone_json(s), err);
    if (!rc) rc = write_tokenizer(dir, s->tokenizer_merges, err);
    return rc;
}

int gp_synth_model_write(const char *dir, const gp_synth_model_spec *s, uint64_t seed,
                         gp_error *err) {
    int rc = write_checkpoint(dir, s, seed, NULL, 0, err);
    if (rc || s->stop_after_frames <= 0) return rc;
    float *weight = malloc((size_t)s->hidden * sizeof(float)), bias = 0;
    if (!weight) return gp_fail_oom(err, "stop head", (size_t)s->hidden * sizeof(float));
    rc = gp_synth_fit_stop_head(dir, s->stop_after_frames, seed, weight, &bias, err);
    if (!rc) rc = write_checkpoint(dir, s, seed, weight, bias, err);
    free(weight);
    return rc;
}
