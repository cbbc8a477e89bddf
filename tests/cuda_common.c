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
