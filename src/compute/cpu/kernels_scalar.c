/* kernels_scalar.c — the plain C reference kernels: readable loops with f32
 * accumulation in index order, reading each element through the layout
 * helpers of matrix.h. Every SIMD kernel is tested against these. */
#include <string.h>

#include "compute/attention.h"
#include "compute/kernels.h"

static void matmul_rows_f32(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                            int r0, int r1) {
    const float *W = w->data;
    for (int r = r0; r < r1; r++)
        for (int j = 0; j < n; j++) {
            const float *xj = x + (size_t)j * ldx;
            float acc = 0;
            for (int i = 0; i < w->cols; i++) acc += W[gp_matrix_index(w, r, i)] * xj[i];
            y[(size_t)j * ldy + r] = acc;
        }
}

static void matmul_rows_bf16(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                             int r0, int r1) {
    const uint16_t *W = w->data;
    for (int r = r0; r < r1; r++)
        for (int j = 0; j < n; j++) {
            const float *xj = x + (size_t)j * ldx;
            float acc = 0;
            for (int i = 0; i < w->cols; i++)
                acc += gp_bf16_to_f32(W[gp_matrix_index(w, r, i)]) * xj[i];
            y[(size_t)j * ldy + r] = acc;
        }
}

static void matmul_rows_int8(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                             int r0, int r1) {
    const int8_t *W = w->data;
    for (int r = r0; r < r1; r++)
        for (int j = 0; j < n; j++) {
            const float *xj = x + (size_t)j * ldx;
            float acc = 0;
            for (int i = 0; i < w->cols; i++) acc += (float)W[gp_matrix_index(w, r, i)] * xj[i];
            y[(size_t)j * ldy + r] = acc * w->scales[r];
        }
}

static void matmul_rows_q4(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                           int r0, int r1) {
    const uint8_t *W = w->data;
    const int half = GP_Q4_GROUP / 2;
    for (int r = r0; r < r1; r++)
        for (int j = 0; j < n; j++) {
            const float *xj = x + (size_t)j * ldx;
            float acc = 0;
            for (int g = 0; g < w->cols; g += GP_Q4_GROUP) {
                const uint8_t *b = W + gp_q4_byte_index(w, r, g);
                float part = 0;
                for (int i = 0; i < half; i++)
                    part += (float)((b[i] & 15) - 8) * xj[g + i] +
                            (float)((b[i] >> 4) - 8) * xj[g + i + half];
                acc += part * gp_f16_to_f32(w->gscales[gp_q4_scale_index(w, r, g)]);
            }
            y[(size_t)j * ldy + r] = acc;
        }
}

const gp_kernel_table gp_kernels_scalar = {
    .name = "scalar",
    .prefill = "row by row (scalar reference)",
    .matmul_rows = {matmul_rows_f32, matmul_rows_bf16, matmul_rows_int8, matmul_rows_q4},
    .attend = gp_attend_cached_scalar,
    .attend_group = gp_attend_cached_group_scalar,
};
