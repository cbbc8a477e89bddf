/* roofline_avx2.c — AVX2+FMA loops for the roofline probes (see
 * roofline_avx512.c). */
#include <immintrin.h>

#include "compute/roofline.h"

#define CHAINS(OP)                                                                                 \
    OP(a0, 0)                                                                                      \
    OP(a1, 1)                                                                                      \
    OP(a2, 2)                                                                                      \
    OP(a3, 3) OP(a4, 4) OP(a5, 5) OP(a6, 6) OP(a7, 7) OP(a8, 8) OP(a9, 9) OP(a10, 10) OP(a11, 11)

double gp_roofline_fma_loop_avx2(long iterations) {
    const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
#define INIT(v, k) __m256 v = _mm256_set1_ps(1.0f + 0.125f * (k));
#define STEP(v, k) v = _mm256_fmadd_ps(v, x, y);
#define SUM(v, k) s = _mm256_add_ps(s, v);
    CHAINS(INIT)
    for (long it = 0; it < iterations; it++) {
        CHAINS(STEP)
    }
    __m256 s = _mm256_setzero_ps();
    CHAINS(SUM)
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    volatile float sink = lanes[0] + lanes[7];
    (void)sink;
    return (double)iterations * 12 * 8 * 2;
}

/* Four streams, as gp_roofline_sum_avx512. */
double gp_roofline_sum_avx2(const float *x, size_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    const size_t q = n / 4 / 32 * 32;
    for (size_t i = 0; i < q; i += 32)
        for (int k = 0; k < 4; k++) {
            const float *p = x + (size_t)k * q + i;
            s0 = _mm256_add_ps(s0, _mm256_loadu_ps(p));
            s1 = _mm256_add_ps(s1, _mm256_loadu_ps(p + 8));
            s2 = _mm256_add_ps(s2, _mm256_loadu_ps(p + 16));
            s3 = _mm256_add_ps(s3, _mm256_loadu_ps(p + 24));
        }
    float lanes[8];
    _mm256_storeu_ps(lanes, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    double total = 0;
    for (int k = 0; k < 8; k++) total += lanes[k];
    for (size_t i = 4 * q; i < n; i++) total += x[i];
    return total;
}
