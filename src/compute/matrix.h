/* matrix.h — weight matrices in the formats the kernels run, and y = x·Wᵀ.
 *
 * A gp_matrix is the weight of one Linear layer, [rows = out][cols = in],
 * stored in one of the formats chosen at load time: f32 (the reference),
 * bf16, int8 with per-row scales, or 4-bit with per-group scales. gp_matmul
 * multiplies a small batch of input rows by it, splitting the output rows
 * over the thread pool and dispatching to the best kernel for the CPU (or the
 * scalar reference when asked). Activations and accumulators are always f32.
 */
#ifndef GP_COMPUTE_MATRIX_H
#define GP_COMPUTE_MATRIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/error.h"
#include "base/pool.h"

typedef enum gp_weight_format {
    GP_WEIGHTS_F32 = 0,
    GP_WEIGHTS_BF16 = 1,
    GP_WEIGHTS_INT8 = 2, /* symmetric int8, one f32 scale per row */
    GP_WEIGHTS_Q4 = 3,   /* symmetric 4-bit, one f16 scale per group of GP_Q4_GROUP columns */
} gp_weight_format;

#define GP_Q4_GROUP 32

typedef struct gp_matrix {
    gp_weight_format format;
    int rows;          /* output features */
    int cols;          /* input features */
    void *data;        /* f32 / uint16 bf16 / int8 / packed nibbles, row-major, owned */
    float *scales;     /* int8: [rows] f32 row scales; owned */
    uint16_t *gscales; /* q4: [rows][cols / GP_Q4_GROUP] f16 group scales; owned */
} gp_matrix;

/* The q4 layout: row r's nibbles start at byte r * cols / 2; group g of a row
 * is GP_Q4_GROUP / 2 bytes, byte k holding element k in its low nibble and
 * element k + GP_Q4_GROUP / 2 in its high nibble, as the unsigned value
 * q + 8 (q in [-8, 7]). Element value = q * gscales[r][g] (f16 widened). The
 * f16 scale keeps a group at 18 bytes (0.5625 bytes per weight). */

/* Parse "f32" | "bf16" | "int8" | "q4"; returns -1 if unknown. */
int gp_weight_format_parse(const char *name);
const char *gp_weight_format_name(gp_weight_format format);
/* Bytes of weight data (+ scales) one pass over the matrix reads. */
size_t gp_matrix_bytes(const gp_matrix *m);

/* Build a matrix of `format` from `rows*cols` source elements of a float
 * dtype (F32/F16/BF16). q4 needs cols % GP_Q4_GROUP == 0 (else falls back to
 * int8 and says so in the log). */
int gp_matrix_from_data(gp_matrix *m, gp_weight_format format, int rows, int cols,
                        gp_dtype src_dtype, const void *src, gp_error *err);
/* Same from f32 values. */
int gp_matrix_from_f32(gp_matrix *m, gp_weight_format format, int rows, int cols, const float *src,
                       gp_error *err);
void gp_matrix_free(gp_matrix *m);

/* Dequantise row r into dst[cols] (the value the kernels multiply by). */
void gp_matrix_row_f32(const gp_matrix *m, int row, float *dst);

/* Which kernels run: the best the CPU supports (default) or the scalar
 * reference. Set once at start-up (GEPARD_KERNELS=scalar|avx2|avx512 in the
 * environment overrides the default). */
typedef enum gp_kernel_level {
    GP_KERNELS_SCALAR = 0,
    GP_KERNELS_AVX2 = 1,
    GP_KERNELS_AVX512 = 2,
} gp_kernel_level;

gp_kernel_level gp_kernels_best(void);
gp_kernel_level gp_kernels_active(void);
/* Clamp to what the CPU supports; returns the level actually set. */
gp_kernel_level gp_kernels_set(gp_kernel_level level);
const char *gp_kernel_level_name(gp_kernel_level level);

/* y[j][r] = Σ_i W[r][i] · x[j][i] for j < n, r < rows, with x rows `ldx`
 * floats apart and y rows `ldy` apart. */
void gp_matmul(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
               gp_pool *pool);

#endif
