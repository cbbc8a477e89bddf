/* roofline.h — the machine's physical limits, measured in the same run as a
 * benchmark: read bandwidth from a large parallel sum, and the f32 FMA and
 * bf16 dot-product peaks from register-only loops on every thread. */
#ifndef GP_COMPUTE_ROOFLINE_H
#define GP_COMPUTE_ROOFLINE_H

#include <stddef.h>

#include "base/pool.h"

/* GB/s reading `bytes` (best of several passes) with every pool thread. */
double gp_roofline_read_bandwidth(gp_pool *pool, size_t bytes);
/* GFLOP/s of f32 fused multiply-adds (2 flops each) on every pool thread. */
double gp_roofline_fma_f32(gp_pool *pool);
/* GFLOP/s of bf16 dot products (vdpbf16ps: 2 flops per pair); 0 when the
 * CPU has no AVX512-BF16. */
double gp_roofline_dot_bf16(gp_pool *pool);

/* Per-ISA loops (in roofline_avx2.c / roofline_avx512.c): return flops done. */
double gp_roofline_fma_loop_avx2(long iterations);
double gp_roofline_fma_loop_avx512(long iterations);
double gp_roofline_bf16_loop_avx512(long iterations);
double gp_roofline_sum_avx2(const float *x, size_t n);
double gp_roofline_sum_avx512(const float *x, size_t n);

#endif
