/* roofline_avx512.c — AVX-512 loops for the roofline probes: 12 independent
 * accumulator chains hide the FMA latency; nothing touches memory — but the
 * read-bandwidth sum. */
#include <immintrin.h>

#include "compute/roofline.h"

/* Twelve named accumulators so they live in registers. */
#define CHAINS(OP)                                                                                 \
    OP(a0, 0)                                                                                      \
    OP(a1, 1)                                                                                      \
    OP(a2, 2)                                                                                      \
    OP(a3, 3) OP(a4, 4) OP(a5, 5) OP(a6, 6) OP(a7, 7) OP(a8, 8) OP(a9, 9) OP(a10, 10) OP(a11, 11)

double gp_roofline_fma_loop_avx512(long iterations) {
    const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
#define INIT(v, k) __m512 v = _mm512_set1_ps(1.0f + 0.125f * (k));
#define STEP(v, k) v = _mm512_fmadd_ps(v, x, y);
#define SUM(v, k) s = _mm512_add_ps(s, v);
    CHAINS(INIT)
    for (long it = 0; it < iterations; it++) {
        CHAINS(STEP)
    }
    __m512 s = _mm512_setzero_ps();
    CHAINS(SUM)
#undef STEP
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    return (double)iterations * 12 * 16 * 2;
}

double gp_roofline_bf16_loop_avx512(long iterations) {
    const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3F80), y = (__m512bh)_mm512_set1_epi16(0x3380);
#define STEP(v, k) v = _mm512_dpbf16_ps(v, x, y);
    CHAINS(INIT)
    for (long it = 0; it < iterations; it++) {
        CHAINS(STEP)
    }
    __m512 s = _mm512_setzero_ps();
    CHAINS(SUM)
#undef STEP
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    return (double)iterations * 12 * 32 * 2;
}

/* The sum of x[0 .. n) read as four streams, one per quarter, 256 bytes of each
 * in turn: the way the decode kernels read their weights (kernels.h,
 * gp_decode_streams), and on a Xeon 1.5x the bandwidth of one stream per core. */
double gp_roofline_sum_avx512(const float *x, size_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    const size_t q = n / 4 / 64 * 64;
    for (size_t i = 0; i < q; i += 64)
        for (int k = 0; k < 4; k++) {
            const float *p = x + (size_t)k * q + i;
            s0 = _mm512_add_ps(s0, _mm512_loadu_ps(p));
            s1 = _mm512_add_ps(s1, _mm512_loadu_ps(p + 16));
            s2 = _mm512_add_ps(s2, _mm512_loadu_ps(p + 32));
            s3 = _mm512_add_ps(s3, _mm512_loadu_ps(p + 48));
        }
    double total =
        _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    for (size_t i = 4 * q; i < n; i++) total += x[i];
    return total;
}
