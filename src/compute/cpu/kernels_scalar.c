/* kernels_scalar.c — the plain C reference kernels: readable loops with f32
 * accumulation in index order. Every SIMD kernel is tested against these. */
#include <string.h>

#include "compute/attention.h"
#include "compute/kernels.h"

static void matmul_rows_f32(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                            int r0, int r1) {
    const float *W = w->data;
    for (int r = r0; r < r1; r++) {
        const float *wr = W + (size_t)r * w->cols;
        for (int j = 0; j < n; j++) {
            const float *xj = x + (size_t)j * ldx;
            float acc = 0;
            for (int i = 0; i < w->cols; i++) acc += wr[i] * xj[i];
            y[(size_t)j * ldy + r] = acc;
        }
    }
}

static void matmul_rows_bf16(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                             int r0, int r1) {
    const uint16_t *W = w->data;
    for (int r = r0; r < r1; r++) {
        const uint16_t *wr = W + (size_t)r * w->cols;
        for (int j = 0; j < n; j++) {
            const float *xj = x + (size_t)j * ldx;
            float acc = 0;
            for (int i = 0; i < w->cols; i++) acc += gp_bf16_to_f32(wr[i]) * xj[i];
            y[(size_t)j * ldy + r] = acc;
        }
    }
}

static void matmul_rows_int8(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                             int r0, int r1) {
    const int8_t *W = w->data;
    for (int r = r0; r < r1; r++) {
        const int8_t *wr = W + (size_t)r * w->cols;
        for (int j = 0; j < n; j++) {
            const float *xj = x + (size_t)j * ldx;
            float acc = 0;
            for (int i = 0; i < w->cols; i++) acc += (float)wr[i] * xj[i];
            y[(size_t)j * ldy + r] = acc * w->scales[r];
        }
    }
}

static void matmul_rows_q4(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                           int r0, int r1) {
    const int groups = w->cols / GP_Q4_GROUP;
    const int half = GP_Q4_GROUP / 2;
    for (int r = r0; r < r1; r++) {
        const uint8_t *wr = (const uint8_t *)w->data + (size_t)r * w->cols / 2;
        const uint16_t *scales = w->gscales + (size_t)r * groups;
        for (int j = 0; j < n; j++) {
            const float *xj = x + (size_t)j * ldx;
            float acc = 0;
            for (int g = 0; g < groups; g++) {
                const uint8_t *b = wr + g * half;
                const float *xg = xj + g * GP_Q4_GROUP;
                float part = 0;
                for (int i = 0; i < half; i++)
                    part +=
                        (float)((b[i] & 15) - 8) * xg[i] + (float)((b[i] >> 4) - 8) * xg[i + half];
                acc += part * gp_f16_to_f32(scales[g]);
            }
            y[(size_t)j * ldy + r] = acc;
        }
    }
}

const gp_kernel_table gp_kernels_scalar = {
    .name = "scalar",
    .matmul_rows = {matmul_rows_f32, matmul_rows_bf16, matmul_rows_int8, matmul_rows_q4},
    .attend = gp_attend_cached_scalar,
};
