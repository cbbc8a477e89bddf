/* gen_cases.c — see gen_cases.h. */
#include "gen_cases.h"

#include <string.h>

/* Layout ids of a fixture text, taken from the teacher_forced cases (the
 * tokenizer has its own tests). */
int32_t *gen_case_layout(const golden *g, const char *text, size_t *n) {
    const cJSON *arr = cJSON_GetObjectItem(g->json, "teacher_forced"), *c;
    cJSON_ArrayForEach(c, arr) {
        if (strcmp(cJSON_GetObjectItem(c, "text")->valuestring, text) == 0)
            return golden_int_array(cJSON_GetObjectItem(c, "layout_ids"), n);
    }
    return NULL;
}

gp_gen_params gen_case_params(const cJSON *o) {
    gp_gen_params p = gp_gen_default_params();
    const cJSON *v;
    if ((v = cJSON_GetObjectItem(o, "temperature"))) p.temperature = (float)v->valuedouble;
    if ((v = cJSON_GetObjectItem(o, "top_k"))) p.top_k = v->valueint;
    if ((v = cJSON_GetObjectItem(o, "max_frames"))) p.max_frames = v->valueint;
    if ((v = cJSON_GetObjectItem(o, "stop_threshold"))) p.stop_threshold = (float)v->valuedouble;
    if ((v = cJSON_GetObjectItem(o, "repetition_penalty")))
        p.repetition_penalty = (float)v->valuedouble;
    if ((v = cJSON_GetObjectItem(o, "repetition_window"))) p.repetition_window = v->valueint;
    if ((v = cJSON_GetObjectItem(o, "cfg_scale"))) p.cfg_scale = (float)v->valuedouble;
    if ((v = cJSON_GetObjectItem(o, "cfg_frames")) && !cJSON_IsNull(v)) p.cfg_frames = v->valueint;
    if ((v = cJSON_GetObjectItem(o, "cfg_uncond_mode")))
        p.cfg_uncond =
            strcmp(v->valuestring, "audio_only") == 0 ? GP_CFG_AUDIO_ONLY : GP_CFG_EMPTY_TEXT;
    if ((v = cJSON_GetObjectItem(o, "force_stop_frames")) && !cJSON_IsNull(v))
        p.force_stop_frames = v->valueint;
    return p;
}

/* Run streams to completion through gp_gen_step with a small row budget so
 * prefill is chunked. */
int gen_run_streams(gp_gen_stream **streams, int n, gp_kv_pool *kv, int max_rows, gp_error *err) {
    gp_gen_workspace w;
    gp_gen_workspace_init(&w);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) rc = gp_gen_reserve(streams[i], kv, err);
    for (int guard = 0; !rc && guard < 100000; guard++) {
        int r = gp_gen_step(streams, n, kv, &w, max_rows, NULL, err);
        if (r < 0) rc = -r;
        if (r == 0) break;
    }
    gp_gen_workspace_free(&w);
    return rc;
}
