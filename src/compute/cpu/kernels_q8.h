/* kernels_q8.h — the int8 form of input rows that the SIMD q4 kernels
 * multiply 4-bit weights by (shared by kernels_avx2.c and kernels_avx512.c).
 *
 * An input row is rounded to int8 per group of GP_Q4_GROUP columns with scale
 * s_g = max|x| / 127 over the group (q = round(x / s_g)). The row is padded
 * to a multiple of 128 columns (4 groups, zeros beyond cols) and stored so
 * that one 64-byte load matches one 64-byte load of q4 nibbles:
 *
 *   q[b*128 + k*16 + i]      = element 32k + i      of block b (low nibbles)
 *   q[b*128 + 64 + k*16 + i] = element 32k + 16 + i of block b (high nibbles)
 *   corr[b*16 + 4k]          = -8 · Σ q over group k (the nibble offset),
 *   corr[b*16 + 4k + 1..3]   = 0
 *   xs[b*16 + 4k + 0..3]     = s_g of group k
 *
 * for k < 4, i < 16: the int32 lanes 4k..4k+3 of a VPDPBUSD over such a
 * block belong to group k, so corr is the accumulator's start value and xs
 * the per-lane scale. Rows live in a caller's stack buffer of GP_Q8_SCRATCH
 * bytes (row_bytes each); longer rows fall back to the scalar kernel.
 */
#ifndef GP_COMPUTE_CPU_KERNELS_Q8_H
#define GP_COMPUTE_CPU_KERNELS_Q8_H

#include <stddef.h>
#include <stdint.h>

#define GP_Q8_SCRATCH (64 * 1024)
#define GP_Q8_MAX_ROWS 64

typedef struct gp_q8_row {
    int8_t *q;     /* [padded cols] */
    int32_t *corr; /* [padded cols / 8] */
    float *xs;     /* [padded cols / 8] */
} gp_q8_row;

static inline size_t gp_q8_padded(int cols) { return ((size_t)cols + 127) & ~(size_t)127; }

/* Bytes one row takes: q, then corr, then xs (each 64-byte aligned). */
static inline size_t gp_q8_row_bytes(int cols) { return 2 * gp_q8_padded(cols); }

/* The row stored at `base` (64-byte aligned). */
static inline gp_q8_row gp_q8_row_at(unsigned char *base, int cols) {
    size_t padded = gp_q8_padded(cols);
    gp_q8_row r = {(int8_t *)base, (int32_t *)(void *)(base + padded),
                   (float *)(void *)(base + padded + padded / 2)};
    return r;
}

#endif
