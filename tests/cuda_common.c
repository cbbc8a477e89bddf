/* cuda_common.c — what the GPU test files share (cuda_common.h). */
#include "cuda_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

gp_model *cuda_test_model(const char *dir, gp_device_kind kind, gp_dev_precision precision) {
    gp_model_load_options o = gp_model_load_default_options();
    o.weight_format = GP_WEIGHTS_F32;
    o.device.kind = kind;
    o.device.index = 0;
    o.device.precision = precision;
    gp_model *m = NULL;
    gp_error err;
    if (gp_model_load(dir, &o, &m, &err))
        test_fail(__FILE__, __LINE__, "model load (%s): %s",
                  kind == GP_DEVICE_CUDA ? "cuda" : "cpu", err.message);
    return m;
}

const char *cuda_test_precision_name(gp_dev_precision p) {
    return p == GP_DEV_F32 ? "f32" : "bf16";
}

gp_kv_pool *cuda_test_kv_pool(const gp_model *m, int blocks) {
    gp_kv_pool *kv = NULL;
    gp_error err;
    if (gp_kv_pool_create(m->cfg.backbone.num_layers, m->cfg.backbone.num_kv_heads,
                          m->cfg.backbone.head_dim, 16, blocks, &kv, &err))
        test_fail(__FILE__, __LINE__, "kv: %s", err.message);
    return kv;
}
