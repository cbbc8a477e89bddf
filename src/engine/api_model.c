/* api_model.c — the public model, voice, LoRA and code-generation functions
 * of gepard.h. gepard_generate_codes drives the same batched generation step
 * (gp_gen_step) as the streaming engine, with a single stream. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/pool.h"
#include "base/rng.h"
#include "engine/api_error.h"
#include "engine/api_internal.h"
#include "engine/hub_paths.h"
#include "io/file.h"
#include "model/compressor.h"
#include "model/device.h"
#include "model/generate.h"

gepard_load_params gepard_load_default_params(void) {
    gepard_load_params p;
    memset(&p, 0, sizeof p);
    p.weights = GEPARD_WEIGHTS_DEFAULT;
    return p;
}

gepard_status gepard_model_load(const char *path, const gepard_load_params *params,
                                gepard_model **out) {
    *out = NULL;
    gp_error err;
    gp_error_clear(&err);
    gepard_load_params defaults = gepard_load_default_params();
    if (!params) params = &defaults;
    if (!path || !*path) return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT, "no model path given");
    char *dir = NULL;
    if (gp_resolve_model_path(path, params, &dir, &err)) return gp_api_fail(&err);
    if (!gp_path_is_dir(dir)) {
        free(dir);
        return gp_api_failf(GEPARD_ERR_NOT_FOUND,
                            "%s: not a model directory (expected gepard_config.json, "
                            "model.safetensors and tokenizer.json inside it)",
                            path);
    }
    gepard_model *m = calloc(1, sizeof *m);
    if (!m) {
        free(dir);
        return gp_api_failf(GEPARD_ERR_NOMEM, "out of memory");
    }
    m->dir = dir;
    path = dir;
    gp_model_load_options opts = gp_model_load_default_options();
    if (params->weights != GEPARD_WEIGHTS_DEFAULT)
        opts.weight_format = (gp_weight_format)params->weights;
    opts.packed_weights = params->packed_weights < 0 ? -1 : params->packed_weights > 0 ? 1 : 0;
    int rc = m->dir ? GEPARD_OK : gp_fail_oom(&err, "path", strlen(path));
    char note[256] = "";
    if (rc == GEPARD_OK) rc = gp_device_parse(params->device, &opts.device, &err);
    if (rc == GEPARD_OK)
        rc = gp_device_precision_parse(params->gpu_precision, &opts.device.precision, &err);
    if (rc == GEPARD_OK) rc = gp_device_resolve(&opts.device, note, sizeof note, &err);
    if (rc == GEPARD_OK) {
        GP_INFO("%s", note);
        gp_device_describe(&opts.device, m->device, sizeof m->device);
    }
    if (rc == GEPARD_OK) rc = gp_api_tokenizer_init(&m->tokenizer, path, true, &err);
    if (rc == GEPARD_OK) rc = gp_model_load(path, &opts, &m->model, &err);
    if (rc) {
        gepard_model_free(m);
        return gp_api_fail(&err);
    }
    *out = m;
    return gp_api_ok();
}

void gepard_model_free(gepard_model *m) {
    if (!m) return;
    gp_model_free(m->model);
    gp_api_tokenizer_clear(&m->tokenizer);
    free(m->dir);
    free(m);
}

gepard_tokenizer *gepard_model_tokenizer(gepard_model *m) { return &m->tokenizer; }
const char *gepard_model_device(const gepard_model *m) { return m->device; }
int gepard_model_channels(const gepard_model *m) { return m->model->cfg.num_channels; }
int gepard_model_channel_vocab(const gepard_model *m, int c) {
    return c >= 0 && c < m->model->cfg.num_channels ? m->model->cfg.channel_vocab[c] : 0;
}
int gepard_model_supports_voices(const gepard_model *m) { return m->model->has_voice_cloning; }

gepard_synth_params gepard_synth_default_params(void) {
    gepard_synth_params p;
    memset(&p, 0, sizeof p);
    gp_gen_params g = gp_gen_default_params();
    p.temperature = g.temperature;
    p.top_k = g.top_k;
    p.stop_threshold = g.stop_threshold;
    p.max_frames = g.max_frames;
    p.repetition_penalty = g.repetition_penalty;
    p.repetition_window = g.repetition_window;
    p.cfg_scale = g.cfg_scale;
    p.cfg_frames = g.cfg_frames;
    p.cfg_uncond = GEPARD_CFG_EMPTY_TEXT;
    p.force_stop_frames = g.force_stop_frames;
    p.random_seed = 1;
    p.split_text = 1;
    p.max_text_bytes = 1u << 20;
    return p;
}

/* ---- voices ---- */

static gepard_status voice_new(int rows, int width, gepard_voice **out) {
    gepard_voice *v = calloc(1, sizeof *v);
    if (v) v->prefix = calloc((size_t)rows * width, sizeof(float));
    if (!v || !v->prefix) {
        if (v) free(v);
        return gp_api_failf(GEPARD_ERR_NOMEM, "out of memory for a voice");
    }
    v->rows = rows;
    v->width = width;
    *out = v;
    return GEPARD_OK;
}

gepard_status gepard_voice_from_codes(gepard_model *m, const int32_t *codes, size_t n_frames,
                                      gepard_voice **out) {
    *out = NULL;
    gp_error err;
    gp_error_clear(&err);
    if (gp_model_ensure_compressor(m->model, &err)) return gp_api_fail(&err);
    if (n_frames == 0 || n_frames > 100000)
        return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT,
                            "a reference needs between 1 and 100000 frames (got %zu)", n_frames);
    gepard_voice *v;
    gepard_status st =
        voice_new(m->model->cfg.voice_cloning.num_queries, m->model->cfg.backbone.hidden_size, &v);
    if (st) return st;
    gp_pool *pool = NULL;
    gp_pool_create(0, &pool, &err);
    int rc = gp_compressor_run(m->model, codes, (int)n_frames, v->prefix, pool, &err);
    gp_pool_free(pool);
    if (rc) {
        gepard_voice_free(v);
        return gp_api_fail(&err);
    }
    *out = v;
    return gp_api_ok();
}

gepard_status gepard_voice_null(gepard_model *m, gepard_voice **out) {
    *out = NULL;
    if (!m->model->null_prefix)
        return gp_api_failf(GEPARD_ERR_UNSUPPORTED, "this model has no null_prefix tensor");
    gepard_voice *v;
    gepard_status st =
        voice_new(m->model->cfg.voice_cloning.num_queries, m->model->cfg.backbone.hidden_size, &v);
    if (st) return st;
    memcpy(v->prefix, m->model->null_prefix, (size_t)v->rows * v->width * sizeof(float));
    *out = v;
    return gp_api_ok();
}

gepard_status gepard_voice_save(const gepard_voice *v, const char *path) {
    gp_error err;
    gp_error_clear(&err);
    gp_st_writer *w = gp_st_writer_create();
    if (!w) return gp_api_failf(GEPARD_ERR_NOMEM, "out of memory");
    int64_t shape[2] = {v->rows, v->width};
    int rc = gp_st_writer_add(w, "speaker_prefix", GP_F32, 2, shape, v->prefix, &err);
    if (!rc) rc = gp_st_writer_set_metadata(w, "format", "gepard-voice", &err);
    if (!rc) rc = gp_st_writer_write(w, path, &err);
    gp_st_writer_free(w);
    return rc ? gp_api_fail(&err) : gp_api_ok();
}

gepard_status gepard_voice_load(gepard_model *m, const char *path, gepard_voice **out) {
    *out = NULL;
    gp_error err;
    gp_error_clear(&err);
    gp_st_file *f;
    if (gp_st_open(path, &f, &err)) return gp_api_fail(&err);
    const int K = m->model->cfg.voice_cloning.num_queries, H = m->model->cfg.backbone.hidden_size;
    const gp_st_tensor *t;
    int64_t shape[2] = {K, H};
    int rc = gp_st_expect(f, "speaker_prefix", 2, shape,
                          "is this a voice saved by gepard for this model?", &t, &err);
    gepard_voice *v = NULL;
    if (rc == GEPARD_OK) {
        gepard_status st = voice_new(K, H, &v);
        if (st) {
            gp_st_close(f);
            return st;
        }
        gp_convert_to_f32(t->dtype, t->data, v->prefix, (size_t)K * H);
        for (size_t i = 0; i < (size_t)K * H; i++)
            if (!isfinite(v->prefix[i])) {
                rc = gp_fail(&err, GEPARD_ERR_FORMAT,
                             "%s: the speaker prefix contains NaN or "
                             "infinite values",
                             path);
                break;
            }
    }
    gp_st_close(f);
    if (rc) {
        gepard_voice_free(v);
        return gp_api_fail(&err);
    }
    *out = v;
    return gp_api_ok();
}

void gepard_voice_free(gepard_voice *v) {
    if (!v) return;
    free(v->prefix);
    free(v);
}

/* ---- LoRA ---- */

gepard_status gepard_lora_load(gepard_model *m, const char *path, float alpha, gepard_lora **out) {
    *out = NULL;
    gp_error err;
    gp_error_clear(&err);
    gepard_lora *l = calloc(1, sizeof *l);
    if (!l) return gp_api_failf(GEPARD_ERR_NOMEM, "out of memory");
    if (gp_lora_load(path, m->model, alpha, &l->adapter, &err)) {
        free(l);
        return gp_api_fail(&err);
    }
    *out = l;
    return gp_api_ok();
}

gepard_status gepard_lora_merge(gepard_model *m, const gepard_lora *l) {
    gp_error err;
    gp_error_clear(&err);
    if (gp_lora_merge(m->model, l->adapter, &err)) return gp_api_fail(&err);
    return gp_api_ok();
}

void gepard_lora_free(gepard_lora *l) {
    if (!l) return;
    gp_lora_free(l->adapter);
    free(l);
}
