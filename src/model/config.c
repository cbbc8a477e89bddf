/* config.c — parsing and validating gepard_config.json / config.json
 * (MODEL.md §A). Every default below is the upstream class default; every
 * refusal names the key and says why the engine cannot run it. */
#include "model/config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "io/file.h"
#include "io/json.h"

#define CONFIG_MAX_BYTES (16u * 1024u * 1024u)

/* Read an integer field into an int with a range check. */
static int get_int_field(const cJSON *obj, const char *key, int64_t fallback, int64_t min,
                         int64_t max, int *out, const char *origin, gp_error *err) {
    int64_t v;
    int rc = gp_json_get_int(obj, key, fallback, &v, origin, err);
    if (rc) return rc;
    if (v < min || v > max)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: \"%s\" = %lld is out of range [%lld, %lld]",
                       origin, key, (long long)v, (long long)min, (long long)max);
    *out = (int)v;
    return GEPARD_OK;
}

static int parse_rope(const cJSON *root, const char *origin, double gepard_prf,
                      gp_backbone_config *bb, gp_error *err) {
    const cJSON *rope = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    if (rope && !cJSON_IsNull(rope) && !cJSON_IsObject(rope))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: \"rope_parameters\" must be an object", origin);
    if (rope && cJSON_IsNull(rope)) rope = NULL;
    const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (!rope && scaling && cJSON_IsObject(scaling)) rope = scaling;
    const char *rope_type = "default";
    int rc = 0;
    if (rope) {
        rc = gp_json_get_string(rope, "rope_type", "default", &rope_type, origin, err);
        if (rc) return rc;
        if (!cJSON_GetObjectItemCaseSensitive(rope, "rope_type"))
            rc = gp_json_get_string(rope, "type", "default", &rope_type, origin, err);
        if (rc) return rc;
    }
    if (strcmp(rope_type, "default") != 0)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "%s: rope_type \"%s\" is not supported — Gepard uses plain (\"default\") "
                       "rotary embeddings",
                       origin, rope_type);
    double theta = -1;
    if (rope) {
        rc = gp_json_get_double(rope, "rope_theta", -1, &theta, origin, err);
        if (rc) return rc;
    }
    if (theta < 0) {
        rc = gp_json_get_double(root, "rope_theta", -1, &theta, origin, err);
        if (rc) return rc;
    }
    if (theta <= 0)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: rope_theta is missing (neither rope_parameters.rope_theta nor a flat "
                       "rope_theta) — the engine will not guess it; Gepard-1.0 uses 10000000",
                       origin);
    bb->rope_theta = theta;

    /* partial_rotary_factor: gepard_config top level, then nested, then flat, then 1.0. */
    double nested = -1, flat = -1;
    if (rope) {
        rc = gp_json_get_double(rope, "partial_rotary_factor", -1, &nested, origin, err);
        if (rc) return rc;
    }
    rc = gp_json_get_double(root, "partial_rotary_factor", -1, &flat, origin, err);
    if (rc) return rc;
    double prf = gepard_prf >= 0 ? gepard_prf : nested >= 0 ? nested : flat >= 0 ? flat : 1.0;
    if (nested >= 0 && fabs(nested - prf) > 1e-12)
        GP_WARN("%s: partial_rotary_factor %g overrides the backbone's nested value %g (the "
                "upstream runner does the same)",
                origin, prf, nested);
    if (!(prf > 0 && prf <= 1))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: partial_rotary_factor %g must be in (0, 1]",
                       origin, prf);
    bb->partial_rotary_factor = prf;
    bb->rotary_dim = (int)floor((double)bb->head_dim * prf + 1e-9);
    if (bb->rotary_dim <= 0 || bb->rotary_dim % 2)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: head_dim %d × partial_rotary_factor %g gives a rotary width of %d, "
                       "which must be even and positive",
                       origin, bb->head_dim, prf, bb->rotary_dim);
    return GEPARD_OK;
}

static int parse_layer_types(const cJSON *root, const char *origin, int num_layers, gp_error *err) {
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (!types || cJSON_IsNull(types)) {
        GP_WARN("%s: no layer_types; assuming every layer is full attention", origin);
        return GEPARD_OK;
    }
    if (!cJSON_IsArray(types))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: \"layer_types\" must be an array", origin);
    if (cJSON_GetArraySize(types) != num_layers)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: \"layer_types\" lists %d layers but num_hidden_layers is %d", origin,
                       cJSON_GetArraySize(types), num_layers);
    int index = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, types) {
        if (!cJSON_IsString(t))
            return gp_fail(err, GEPARD_ERR_FORMAT, "%s: layer_types[%d] must be a string", origin,
                           index);
        if (strcmp(t->valuestring, "full_attention") != 0)
            return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                           "%s: layer %d is a \"%s\" layer; gepard.c runs only full-attention "
                           "Qwen3.5 backbones (all Gepard checkpoints are full attention)",
                           origin, index, t->valuestring);
        index++;
    }
    return GEPARD_OK;
}

int gp_backbone_config_parse(const cJSON *root, const char *origin, double gepard_prf,
                             gp_backbone_config *bb, gp_error *err) {
    memset(bb, 0, sizeof *bb);
    if (!cJSON_IsObject(root))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: backbone config must be a JSON object", origin);
    int rc;
    if ((rc =
             get_int_field(root, "hidden_size", 4096, 1, 1 << 16, &bb->hidden_size, origin, err)) ||
        (rc =
             get_int_field(root, "num_hidden_layers", 32, 1, 1024, &bb->num_layers, origin, err)) ||
        (rc = get_int_field(root, "num_attention_heads", 16, 1, 1024, &bb->num_heads, origin,
                            err)) ||
        (rc = get_int_field(root, "num_key_value_heads", 4, 1, 1024, &bb->num_kv_heads, origin,
                            err)) ||
        (rc = get_int_field(root, "head_dim", 256, 2, 4096, &bb->head_dim, origin, err)) ||
        (rc = get_int_field(root, "intermediate_size", 12288, 1, 1 << 20, &bb->intermediate_size,
                            origin, err)))
        return rc;
    if ((rc = gp_json_get_int(root, "vocab_size", 248320, &bb->vocab_size, origin, err)) ||
        (rc = gp_json_get_int(root, "max_position_embeddings", 32768, &bb->max_position_embeddings,
                              origin, err)) ||
        (rc = gp_json_get_double(root, "rms_norm_eps", 1e-6, &bb->rms_norm_eps, origin, err)) ||
        (rc = gp_json_get_bool(root, "attention_bias", false, &bb->attention_bias, origin, err)))
        return rc;
    if (bb->vocab_size < 1 || bb->vocab_size > (1 << 30))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: vocab_size %lld is out of range", origin,
                       (long long)bb->vocab_size);
    if (!(bb->rms_norm_eps > 0 && bb->rms_norm_eps < 1))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: rms_norm_eps must be in (0, 1)", origin);
    if (bb->num_heads % bb->num_kv_heads)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                       origin, bb->num_heads, bb->num_kv_heads);
    const char *act;
    if ((rc = gp_json_get_string(root, "hidden_act", "silu", &act, origin, err))) return rc;
    if (strcmp(act, "silu") != 0)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "%s: hidden_act \"%s\" is not supported (Qwen3.5 uses silu)", origin, act);
    if ((rc = parse_layer_types(root, origin, bb->num_layers, err))) return rc;
    return parse_rope(root, origin, gepard_prf, bb, err);
}

static int parse_codec_block(const cJSON *root, const char *origin, gp_codec_geometry *codec,
                             gp_error *err) {
    memset(codec, 0, sizeof *codec);
    codec->do_unfold = true;
    const cJSON *block = cJSON_GetObjectItemCaseSensitive(root, "codec");
    if (!block || cJSON_IsNull(block)) return GEPARD_OK;
    if (!cJSON_IsObject(block))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: \"codec\" must be an object", origin);
    codec->present = true;
    int rc;
    if ((rc = get_int_field(block, "num_layers", 8, 1, 64, &codec->num_layers, origin, err)) ||
        (rc = gp_json_get_bool(block, "do_unfold", true, &codec->do_unfold, origin, err)) ||
        (rc = gp_json_get_double(block, "frame_rate_hz", 21.5, &codec->frame_rate_hz, origin,
                                 err)) ||
        (rc = get_int_field(block, "sample_rate", 22050, 1, 1000000, &codec->sample_rate, origin,
                            err)))
        return rc;
    const char *id;
    if ((rc = gp_json_get_string(block, "codec_id", "", &id, origin, err))) return rc;
    snprintf(codec->codec_id, sizeof codec->codec_id, "%s", id);
    const cJSON *levels = cJSON_GetObjectItemCaseSensitive(block, "fsq_levels");
    if (!levels || cJSON_IsNull(levels))
        levels = cJSON_GetObjectItemCaseSensitive(block, "fsq_Levels");
    if (!levels || cJSON_IsNull(levels)) {
        static const int defaults[4] = {8, 7, 6, 6};
        codec->num_levels = 4;
        memcpy(codec->fsq_levels, defaults, sizeof defaults);
    } else {
        if (!cJSON_IsArray(levels) || cJSON_GetArraySize(levels) < 1 ||
            cJSON_GetArraySize(levels) > GP_MAX_FSQ_LEVELS)
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: codec.fsq_levels must be an array of 1 to %d integers", origin,
                           GP_MAX_FSQ_LEVELS);
        const cJSON *v;
        cJSON_ArrayForEach(v, levels) {
            if (!gp_json_is_integer(v) || v->valuedouble < 2 || v->valuedouble > 1024)
                return gp_fail(err, GEPARD_ERR_FORMAT,
                               "%s: codec.fsq_levels entries must be integers in [2, 1024]",
                               origin);
            codec->fsq_levels[codec->num_levels++] = (int)v->valuedouble;
        }
    }
    if (!codec->do_unfold)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "%s: codec.do_unfold = false (packed codec tokens) is not supported; "
                       "Gepard models predict unfolded per-dimension codes",
                       origin);
    return GEPARD_OK;
}

static int parse_audio_heads(const cJSON *root, const char *origin, gp_model_config *cfg,
                             gp_error *err) {
    const cJSON *heads = cJSON_GetObjectItemCaseSensitive(root, "audio_heads");
    if (!heads || cJSON_IsNull(heads) || (cJSON_IsObject(heads) && !heads->child))
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: \"audio_heads\" is missing or empty — it maps level_audio_<i> to each "
                       "audio head's vocabulary and every Gepard export carries it; re-export the "
                       "checkpoint or restore the key",
                       origin);
    if (!cJSON_IsObject(heads))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: \"audio_heads\" must be an object", origin);
    int count = cJSON_GetArraySize(heads);
    if (count > GP_MAX_CHANNELS)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED, "%s: %d audio heads (at most %d supported)",
                       origin, count, GP_MAX_CHANNELS);
    bool seen[GP_MAX_CHANNELS] = {false};
    const cJSON *h;
    cJSON_ArrayForEach(h, heads) {
        const char *key = h->string;
        const char *prefix = "level_audio_";
        char *end = NULL;
        long index = -1;
        if (strncmp(key, prefix, strlen(prefix)) == 0 && key[strlen(prefix)] >= '0' &&
            key[strlen(prefix)] <= '9')
            index = strtol(key + strlen(prefix), &end, 10);
        if (index < 0 || !end || *end)
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: audio_heads key \"%s\" is not of the form level_audio_<number>",
                           origin, key);
        if (index >= count || seen[index])
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: audio_heads indices must be 0..%d without gaps or duplicates "
                           "(found \"%s\")",
                           origin, count - 1, key);
        if (!gp_json_is_integer(h) || h->valuedouble < 1 || h->valuedouble > 65536)
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: audio_heads[\"%s\"] must be a positive integer vocabulary size",
                           origin, key);
        seen[index] = true;
        cfg->channel_vocab[index] = (int)h->valuedouble;
    }
    cfg->num_channels = count;
    const gp_codec_geometry *codec = &cfg->codec;
    if (codec->present) {
        if (count != codec->num_layers * codec->num_levels)
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: %d audio heads, but the codec block implies %d (num_layers %d × "
                           "%d fsq_levels)",
                           origin, count, codec->num_layers * codec->num_levels, codec->num_layers,
                           codec->num_levels);
        for (int c = 0; c < count; c++)
            if (cfg->channel_vocab[c] != codec->fsq_levels[c % codec->num_levels])
                return gp_fail(err, GEPARD_ERR_FORMAT,
                               "%s: audio head level_audio_%d has vocabulary %d but codec "
                               "fsq_levels says %d",
                               origin, c, cfg->channel_vocab[c],
                               codec->fsq_levels[c % codec->num_levels]);
    }
    return GEPARD_OK;
}

static int parse_special_tokens(const cJSON *root, const char *origin, gp_model_config *cfg,
                                gp_error *err) {
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "special_tokens");
    if (st && !cJSON_IsNull(st) && !cJSON_IsObject(st))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: \"special_tokens\" must be an object", origin);
    int64_t vocab = cfg->backbone.vocab_size;
    struct {
        const char *key;
        int32_t *field;
        int64_t fallback;
    } fields[] = {
        {"start_of_text", &cfg->special.start_of_text, 248073},
        {"end_of_text", &cfg->special.end_of_text, 248074},
        {"start_of_speech", &cfg->special.start_of_speech, 248070},
        {"end_of_speech", &cfg->special.end_of_speech, 248071},
        {"tts_pad", &cfg->special.tts_pad, 248076},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        int64_t v;
        int rc = gp_json_get_int(st, fields[i].key, fields[i].fallback, &v, origin, err);
        if (rc) return rc;
        bool used = i < 3; /* only SOT, EOT, SOS are fed to the model */
        if (v < 0 || v > INT32_MAX || (used && v >= vocab))
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: special_tokens.%s = %lld is outside the embedding table (%lld "
                           "rows)",
                           origin, fields[i].key, (long long)v, (long long)vocab);
        *fields[i].field = (int32_t)v;
    }
    return GEPARD_OK;
}

static int parse_repetition(const cJSON *root, const char *origin, gp_repetition_config *rep,
                            gp_error *err) {
    rep->enabled = false;
    rep->target_text_tokens = 16;
    rep->apply_below = 13;
    rep->max_repeats = 8;
    const cJSON *block = cJSON_GetObjectItemCaseSensitive(root, "text_repetition");
    if (!block || cJSON_IsNull(block)) return GEPARD_OK;
    if (!cJSON_IsObject(block))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: \"text_repetition\" must be an object", origin);
    int rc;
    if ((rc = gp_json_get_bool(block, "enabled", false, &rep->enabled, origin, err)) ||
        (rc = get_int_field(block, "target_text_tokens", 16, 1, 1 << 20, &rep->target_text_tokens,
                            origin, err)) ||
        (rc =
             get_int_field(block, "apply_below", 13, 0, 1 << 20, &rep->apply_below, origin, err)) ||
        (rc = get_int_field(block, "max_repeats", 8, 1, 1024, &rep->max_repeats, origin, err)))
        return rc;
    return GEPARD_OK;
}

static int parse_voice_cloning(const cJSON *root, const char *origin, gp_model_config *cfg,
                               gp_error *err) {
    gp_voice_cloning_config *vc = &cfg->voice_cloning;
    memset(vc, 0, sizeof *vc);
    const cJSON *block = cJSON_GetObjectItemCaseSensitive(root, "voice_cloning");
    if (!block || cJSON_IsNull(block)) return GEPARD_OK;
    if (!cJSON_IsObject(block))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: \"voice_cloning\" must be an object", origin);
    int rc = gp_json_get_bool(block, "enabled", false, &vc->enabled, origin, err);
    if (rc || !vc->enabled) return rc;
    const cJSON *comp = cJSON_GetObjectItemCaseSensitive(block, "compressor");
    if (!cJSON_IsObject(comp))
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: voice_cloning is enabled but voice_cloning.compressor is missing",
                       origin);
    const char *required[] = {"num_queries", "num_layers", "num_heads",
                              "ffn_hidden_size_multiplier"};
    for (size_t i = 0; i < 4; i++)
        if (!cJSON_GetObjectItemCaseSensitive(comp, required[i]))
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: voice_cloning.compressor.%s is required when voice cloning is "
                           "enabled",
                           origin, required[i]);
    int multiplier = 0;
    if ((rc = get_int_field(comp, "num_queries", 8, 1, 4096, &vc->num_queries, origin, err)) ||
        (rc = get_int_field(comp, "num_layers", 2, 0, 256, &vc->num_layers, origin, err)) ||
        (rc = get_int_field(comp, "num_heads", 8, 1, 1024, &vc->num_heads, origin, err)) ||
        (rc = get_int_field(comp, "ffn_hidden_size_multiplier", 4, 1, 64, &multiplier, origin,
                            err)) ||
        (rc = get_int_field(comp, "d_model", cfg->backbone.hidden_size, 1, 1 << 16, &vc->d_model,
                            origin, err)))
        return rc;
    if (vc->d_model != cfg->backbone.hidden_size)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: voice_cloning.compressor.d_model %d differs from the backbone hidden "
                       "size %d; the speaker prefix rows must have the backbone's width",
                       origin, vc->d_model, cfg->backbone.hidden_size);
    if (vc->d_model % vc->num_heads)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: compressor d_model %d is not divisible by num_heads %d", origin,
                       vc->d_model, vc->num_heads);
    vc->ffn_hidden_size = vc->d_model * multiplier;
    if (!cfg->codec.present)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: voice cloning needs the \"codec\" block (num_layers, fsq_levels)",
                       origin);
    return GEPARD_OK;
}

static void finish_channels(gp_model_config *cfg) {
    int offset = 0;
    for (int c = 0; c < cfg->num_channels; c++) {
        cfg->channel_offset[c] = offset;
        offset += cfg->channel_vocab[c];
    }
    cfg->total_logits = offset;
}

int gp_model_config_parse_gepard(const cJSON *root, const char *origin, gp_model_config *cfg,
                                 gp_error *err) {
    memset(cfg, 0, sizeof *cfg);
    if (!cJSON_IsObject(root))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: must be a JSON object", origin);
    const cJSON *bb = cJSON_GetObjectItemCaseSensitive(root, "backbone_config");
    if (!cJSON_IsObject(bb) || !bb->child)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: \"backbone_config\" is missing or empty — without it the backbone's "
                       "shape is unknown",
                       origin);
    double prf = -1;
    int rc = gp_json_get_double(root, "partial_rotary_factor", -1, &prf, origin, err);
    if (rc) return rc;
    if ((rc = gp_backbone_config_parse(bb, origin, prf, &cfg->backbone, err))) return rc;
    int64_t e;
    if ((rc = gp_json_get_int(root, "audio_embed_dim", 32, &e, origin, err))) return rc;
    if (e < 1 || e > 65536)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: audio_embed_dim %lld is out of range", origin,
                       (long long)e);
    cfg->audio_embed_dim = (int)e;
    const char *dtype;
    if ((rc = gp_json_get_string(root, "model_dtype", "bfloat16", &dtype, origin, err))) return rc;
    snprintf(cfg->model_dtype, sizeof cfg->model_dtype, "%s", dtype);
    if ((rc = parse_codec_block(root, origin, &cfg->codec, err)) ||
        (rc = parse_audio_heads(root, origin, cfg, err)) ||
        (rc = parse_special_tokens(root, origin, cfg, err)) ||
        (rc = parse_repetition(root, origin, &cfg->repetition, err)) ||
        (rc = parse_voice_cloning(root, origin, cfg, err)))
        return rc;
    finish_channels(cfg);
    return GEPARD_OK;
}

/* Legacy directory: config.json only. The overlay takes Gepard-1.0's shape. */
static int parse_legacy(const cJSON *root, const char *origin, gp_model_config *cfg,
                        gp_error *err) {
    memset(cfg, 0, sizeof *cfg);
    int rc = gp_backbone_config_parse(root, origin, -1, &cfg->backbone, err);
    if (rc) return rc;
    GP_WARN("%s: no gepard_config.json; assuming Gepard-1.0's audio overlay (8 codec groups of "
            "levels [8, 7, 6, 6], audio_embed_dim 32, no voice cloning, no text repetition)",
            origin);
    cfg->legacy = true;
    cfg->audio_embed_dim = 32;
    snprintf(cfg->model_dtype, sizeof cfg->model_dtype, "bfloat16");
    static const int levels[4] = {8, 7, 6, 6};
    cfg->codec.present = true;
    cfg->codec.do_unfold = true;
    cfg->codec.num_layers = 8;
    cfg->codec.num_levels = 4;
    memcpy(cfg->codec.fsq_levels, levels, sizeof levels);
    cfg->codec.frame_rate_hz = 21.5;
    cfg->codec.sample_rate = 22050;
    cfg->num_channels = 32;
    for (int c = 0; c < 32; c++) cfg->channel_vocab[c] = levels[c % 4];
    if ((rc = parse_special_tokens(NULL, origin, cfg, err))) return rc;
    parse_repetition(NULL, origin, &cfg->repetition, err);
    finish_channels(cfg);
    return GEPARD_OK;
}

int gp_model_config_load(const char *model_dir, gp_model_config *out, gp_error *err) {
    char *path = gp_path_join(model_dir, "gepard_config.json");
    if (!path) return gp_fail_oom(err, "path", strlen(model_dir));
    bool legacy = false;
    if (!gp_path_exists(path)) {
        char *legacy_path = gp_path_join(model_dir, "config.json");
        if (!legacy_path) {
            free(path);
            return gp_fail_oom(err, "path", strlen(model_dir));
        }
        if (!gp_path_exists(legacy_path)) {
            free(legacy_path);
            int rc = gp_fail(err, GEPARD_ERR_NOT_FOUND,
                             "%s: no gepard_config.json (or config.json) — is this a Gepard model "
                             "directory?",
                             model_dir);
            free(path);
            return rc;
        }
        free(path);
        path = legacy_path;
        legacy = true;
    }
    cJSON *root;
    int rc = gp_json_load_file(path, CONFIG_MAX_BYTES, &root, err);
    if (rc == GEPARD_OK) {
        rc = legacy ? parse_legacy(root, path, out, err)
                    : gp_model_config_parse_gepard(root, path, out, err);
        cJSON_Delete(root);
    }
    free(path);
    return rc;
}
