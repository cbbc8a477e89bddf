/* cuda_common.c — what the GPU test files share (cuda_common.h). */
#include "cuda_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/sha256.h"
#include "model/device.h"
#include "test.h"

void require_cuda(void) {
    gp_error err;
    gp_error_clear(&err);
    const gp_dev_plugin *p = gp_device_cuda_plugin(&err);
    if (!p) {
        char why[1200];
        snprintf(why, sizeof why, "no CUDA device: %s", err.message);
        test_skip(why);
    }
    gp_dev_status st = {0, ""};
    if (p->device_count(&st) <= 0) {
        char why[700];
        snprintf(why, sizeof why, "no CUDA device: %s", st.message);
        test_skip(why);
    }
}

static int file_sha256(const char *path, char hex[65]) {
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

/* The synthetic real-size checkpoint: $GEPARD_REALSIZE_DIR or written now. */
const char *realsize_dir(const golden *g) {
    static char dir[1024];
    const char *env = getenv("GEPARD_REALSIZE_DIR");
    if (env && *env) {
        snprintf(dir, sizeof dir, "%s", env);
    } else {
        snprintf(dir, sizeof dir, "%s", test_tmp("realsize"));
        const char *args[] = {"synth", "--preset", "gepard-1.0", "--seed", "1", "--out", dir, NULL};
        test_cmd_result r;
        test_run_gepard(&r, NULL, 0, 280, args);
        int ok = r.status == 0;
        if (!ok) test_fail(__FILE__, __LINE__, "gepard synth failed: %s", r.err);
        test_cmd_result_free(&r);
        if (!ok) return NULL;
    }
    char path[1100], hex[65];
    snprintf(path, sizeof path, "%s/model/model.safetensors", dir);
    const cJSON *w = cJSON_GetObjectItem(g->json, "weights");
    const cJSON *want = cJSON_GetObjectItem(w, "DIR/model/model.safetensors sha256");
    if (file_sha256(path, hex) || !want || strcmp(hex, want->valuestring)) {
        test_fail(__FILE__, __LINE__,
                  "%s does not hold the weights the real-size goldens were computed on "
                  "(sha256 %s) — `gepard synth` changed; the goldens no longer apply",
                  path, hex);
        return NULL;
    }
    return dir;
}
