/* kernels.h — the per-instruction-set kernel table behind gp_matmul and the
 * other hot loops. One table per level (scalar reference, AVX2+FMA,
 * AVX-512); each entry computes a range of output rows so the caller can
 * split work across threads. Tables for levels the CPU lacks are never
 * called. */
#ifndef GP_COMPUTE_KERNELS_H
#define GP_COMPUTE_KERNELS_H

#include "compute/matrix.h"

/* Rows [r0, r1) of y = x·Wᵀ for a matrix in one format. */
typedef void (*gp_matmul_rows_fn)(const gp_matrix *w, const float *x, int n, int ldx, float *y,
                                  int ldy, int r0, int r1);

typedef struct gp_kernel_table {
    const char *name;
    gp_matmul_rows_fn matmul_rows[4]; /* indexed by gp_weight_format */
} gp_kernel_table;

/* The scalar reference table (always present). SIMD tables register in
 * matrix.c's level table when they exist. */
extern const gp_kernel_table gp_kernels_scalar;

const gp_kernel_table *gp_kernel_table_active(void);

#endif
