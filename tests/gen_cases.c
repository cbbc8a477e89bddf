/* gen_cases.c — see gen_cases.h. */
#include "gen_cases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/sha256.h"
#include "test.h"

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
    return gen_run_streams_on(streams, n, kv, max_rows, NULL, err);
}

int gen_run_streams_on(gp_gen_stream **streams, int n, gp_kv_pool *kv, int max_rows, gp_pool *pool,
                       gp_error *err) {
    return gen_run_streams_reserved(streams, n, kv, max_rows, 0, pool, err);
}

int gen_run_streams_reserved(gp_gen_stream **streams, int n, gp_kv_pool *kv, int max_rows,
                             int reserve_rows, gp_pool *pool, gp_error *err) {
    gp_gen_workspace w;
    gp_gen_workspace_init(&w);
    w.device_reserve_rows = reserve_rows;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) rc = gp_gen_reserve(streams[i], kv, err);
    for (int guard = 0; !rc && guard < 100000; guard++) {
        int r = gp_gen_step(streams, n, kv, &w, max_rows, pool, err);
        if (r < 0) rc = -r;
        if (r == 0) break;
    }
    gp_gen_workspace_free(&w);
    return rc;
}

/* coreutils' sha256sum hashes 1.2 GB in seconds where the ASan build of
 * io/sha256.c (tested on its own) takes half a minute; it is the fallback. */
static int file_sha256(const char *path, char hex[65]) {
    const char *argv[] = {"sha256sum", path, NULL};
    test_cmd_result r;
    if (test_run_program(&r, NULL, 0, 120, argv) == 0 && r.status == 0 && r.out &&
        r.out_len >= 64) {
        memcpy(hex, r.out, 64);
        hex[64] = 0;
        test_cmd_result_free(&r);
        return 0;
    }
    test_cmd_result_free(&r);
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    gp_sha256 s;
    gp_sha256_init(&s);
    static unsigned char buf[1 << 20];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, fp)) > 0) gp_sha256_update(&s, buf, n);
    fclose(fp);
    gp_sha256_final_hex(&s, hex);
    return 0;
}

/* "size mtime" of a file, for the verification marker. */
static int file_stamp(const char *path, char *out, size_t n) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    snprintf(out, n, "%lld %lld.%09ld", (long long)st.st_size, (long long)st.st_mtim.tv_sec,
             st.st_mtim.tv_nsec);
    return 0;
}

/* See gen_cases.h. */
const char *gen_realsize_dir(const golden *g) {
    static char dir[1024];
    char path[1100], hex[65], stamp[128], marker_text[1300];
    const char *env = getenv("GEPARD_REALSIZE_DIR");
    snprintf(dir, sizeof dir, "%s", env && *env ? env : test_shared_tmp("realsize"));
    snprintf(path, sizeof path, "%s/model/model.safetensors", dir);
    /* Synthesising (~10 s) and hashing 1.2 GB (~30 s under ASan) once per run:
     * the checkpoint lives in the run's shared directory, and a marker there
     * records the file that was verified (path, size, mtime). */
    const char *marker = test_shared_tmp("realsize.verified");
    if (file_stamp(path, stamp, sizeof stamp) == 0) {
        snprintf(marker_text, sizeof marker_text, "%s %s\n", path, stamp);
        FILE *f = fopen(marker, "r");
        char got[1300] = "";
        if (f) {
            if (!fgets(got, sizeof got, f)) got[0] = 0;
            fclose(f);
        }
        if (strcmp(got, marker_text) == 0) return dir;
    }
    if (!(env && *env) && access(path, R_OK) != 0) {
        /* the release build when there is one (`make test` names it): 3x faster */
        const char *rel = getenv("GEPARD_RELEASE_BIN");
        const char *args[] = {rel && *rel ? rel : "",
                              "synth",
                              "--preset",
                              "gepard-1.0",
                              "--seed",
                              "1",
                              "--out",
                              dir,
                              NULL};
        test_cmd_result r;
        if (rel && *rel)
            test_run_program(&r, NULL, 0, 280, args);
        else
            test_run_gepard(&r, NULL, 0, 280, args + 1);
        int ok = r.status == 0;
        if (!ok) test_fail(__FILE__, __LINE__, "gepard synth failed: %s", r.err);
        test_cmd_result_free(&r);
        if (!ok) return NULL;
    }
    const cJSON *w = cJSON_GetObjectItem(g->json, "weights");
    const cJSON *want = cJSON_GetObjectItem(w, "DIR/model/model.safetensors sha256");
    if (file_sha256(path, hex) || !want || strcmp(hex, want->valuestring)) {
        test_fail(__FILE__, __LINE__,
                  "%s does not hold the weights the real-size goldens were computed on "
                  "(sha256 %s) — `gepard synth` changed; the goldens no longer apply",
                  path, hex);
        return NULL;
    }
    if (file_stamp(path, stamp, sizeof stamp) == 0) {
        snprintf(marker_text, sizeof marker_text, "%s %s\n", path, stamp);
        test_write_file(marker, marker_text, strlen(marker_text));
    }
    return dir;
}

/* See gen_cases.h. */
int32_t *gen_realsize_case(const golden *g, const cJSON *c, size_t *n_ids, int32_t **codes,
                           int *frames) {
    const char *key = cJSON_GetObjectItem(c, "key")->valuestring;
    int32_t *ids = golden_int_array(cJSON_GetObjectItem(c, "layout"), n_ids);
    char name[64];
    int64_t dims[2] = {0, 0};
    snprintf(name, sizeof name, "%s.codes", key);
    *codes = golden_i32(g, name, dims, NULL);
    *frames = (int)dims[0];
    if (!ids || !*codes) {
        free(ids);
        free(*codes);
        *codes = NULL;
        return NULL;
    }
    return ids;
}

const char *gen_realsize_model_dir(const golden *g) {
    static char model_dir[1100];
    const char *dir = gen_realsize_dir(g);
    if (!dir) return NULL;
    snprintf(model_dir, sizeof model_dir, "%s/model", dir);
    return model_dir;
}
