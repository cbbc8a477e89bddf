/* api_codes.c — gepard_generate_codes: text → audio codes with one stream
 * through the batched generation step. */
#include <stdlib.h>
#include <string.h>

#include "base/pool.h"
#include "engine/api_error.h"
#include "engine/synth_prep.h"

#define CODES_KV_BLOCK 16

typedef struct codes_run {
    gp_pool *pool;
    gp_kv_pool *kv;
    gp_gen_stream *stream;
    gp_gen_workspace work;
} codes_run;

static int codes_run_all(gepard_model *gm, const char *text, const gepard_synth_params *params,
                         int threads, codes_run *run, gp_error *err) {
    const gp_model *m = gm->model;
    gp_gen_params gen;
    int rc = gp_synth_params_convert(params, &gen, err);
    if (rc) return rc;
    const gepard_voice *voice = params->voice;
    if (voice && (voice->width != m->cfg.backbone.hidden_size))
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "the voice was made for a model of width %d, this one is %d", voice->width,
                       m->cfg.backbone.hidden_size);
    int prefix_rows = voice ? voice->rows : 0;
    int32_t *ids;
    int n_ids;
    rc = gp_synth_layout(gm, text, strlen(text), prefix_rows, gen.max_frames, &ids, &n_ids, err);
    if (rc) return rc;
    rc = gp_gen_create(m, &gen, ids, n_ids, voice ? voice->prefix : NULL, prefix_rows,
                       params->lora ? params->lora->adapter : NULL, &run->stream, err);
    free(ids);
    if (rc) return rc;
    int positions =
        gp_gen_kv_positions(run->stream, false) + gp_gen_kv_positions(run->stream, true);
    int blocks = positions / CODES_KV_BLOCK + 4;
    const gp_backbone_config *bb = &m->cfg.backbone;
    if ((rc = gp_kv_pool_create(bb->num_layers, bb->num_kv_heads, bb->head_dim, CODES_KV_BLOCK,
                                blocks, &run->kv, err)) ||
        (rc = gp_pool_create(threads, &run->pool, err)) ||
        (rc = gp_gen_reserve(run->stream, run->kv, err)))
        return rc;
    while (run->stream->phase != GP_GEN_DONE) {
        int r = gp_gen_step(&run->stream, 1, run->kv, &run->work, 512, run->pool, err);
        if (r < 0) return -r;
        if (r == 0) break;
    }
    return GEPARD_OK;
}

gepard_status gepard_generate_codes(gepard_model *gm, const char *text,
                                    const gepard_synth_params *params, int threads, int32_t **codes,
                                    size_t *n_frames) {
    *codes = NULL;
    *n_frames = 0;
    gp_error err;
    gp_error_clear(&err);
    gepard_synth_params defaults = gepard_synth_default_params();
    if (!params) params = &defaults;
    codes_run run;
    memset(&run, 0, sizeof run);
    gp_gen_workspace_init(&run.work);
    int rc = codes_run_all(gm, text, params, threads, &run, &err);
    if (rc == GEPARD_OK) {
        size_t bytes = (size_t)run.stream->n_frames * gm->model->cfg.num_channels * sizeof(int32_t);
        *codes = malloc(bytes ? bytes : 1);
        if (!*codes) {
            rc = gp_fail_oom(&err, "codes", bytes);
        } else {
            memcpy(*codes, run.stream->frames, bytes);
            *n_frames = (size_t)run.stream->n_frames;
        }
    }
    gp_gen_free(run.stream, run.kv);
    gp_gen_workspace_free(&run.work);
    gp_kv_pool_free(run.kv);
    gp_pool_free(run.pool);
    return rc ? gp_api_fail(&err) : gp_api_ok();
}
