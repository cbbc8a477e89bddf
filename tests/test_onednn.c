/* test_onednn.c — prefill's oneDNN path (compute/onednn_matmul.c) against
 * the native kernels, on whatever oneDNN runs here (AMX on Sapphire Rapids,
 * AVX512-BF16 on Zen 4; skipped visibly where oneDNN has no bf16 matmul).
 *
 * Tolerances: the three bf16 terms carry all 24 bits of each f32 input and
 * every bf16 × bf16 product is exact in f32, so only the order of the f32
 * additions differs from the native kernel: ≤ 1e-5 of the largest output, the
 * bound the native kernels meet against the scalar reference
 * (test_kernels.c). Batch invariance (a row's result alone = in a batch) is
 * reported; oneDNN does not promise it, so it is held to the same 1e-5, and
 * chunked prefill stays exact because decode and chunks under
 * GP_ONEDNN_MIN_ROWS rows never take this path. With two terms
 * (GEPARD_ONEDNN_TERMS=2, a measurement option: 16-17 bits of each input,
 * relative error <= 2^-17 per input) the bound is 4e-5 of the largest output.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "compute/matrix.h"
#include "compute/onednn_matmul.h"
#include "test.h"

#define ONEDNN_TOLERANCE 1e-5
#define ONEDNN_TWO_TERMS_TOLERANCE 4e-5

static double max_abs(const float *v, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(v[i]) > m) m = fabs(v[i]);
    return m;
}

/* oneDNN's matmul against the native kernels for 8, 13 and 40 rows, within
 * `tol` of the largest output; batch invariance; gp_matmul's routing. */
static void matches_native(double tol) {
    /* 300 rows: two whole slices and a partial one; 200 columns: not a
     * multiple of 16 or 32 */
    const int R = 300, C = 200, ldx = 211, ldy = 307;
    gp_rng rng;
    gp_rng_seed(&rng, 11);
    float *w = malloc((size_t)R * C * sizeof *w);
    for (size_t i = 0; i < (size_t)R * C; i++) w[i] = (float)(gp_rng_uniform(&rng) * 2 - 1) * 0.1f;
    gp_matrix m;
    gp_error err;
    gp_error_clear(&err);
    REQUIRE_OK(gp_matrix_from_f32(&m, GP_WEIGHTS_BF16, R, C, w, &err), &err);
    free(w);
    if (gp_onednn_attach(&m, &err)) {
        gp_matrix_free(&m);
        test_skip(err.message);
    }
    const int ns[] = {8, 13, 40};
    float *x = malloc((size_t)40 * ldx * sizeof *x);
    float *ya = malloc((size_t)40 * ldy * sizeof *ya), *yb = malloc((size_t)40 * ldy * sizeof *yb);
    float *y1 = malloc((size_t)8 * ldy * sizeof *y1);
    for (size_t i = 0; i < (size_t)40 * ldx; i++)
        x[i] = (float)(gp_rng_uniform(&rng) * 2 - 1) * (i % 7 == 0 ? 100.0f : 1.0f);
    gp_pool *pool = NULL;
    REQUIRE_OK(gp_pool_create(2, &pool, &err), &err);
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        const int n = ns[t];
        for (size_t i = 0; i < (size_t)n * ldy; i++) ya[i] = yb[i] = -7.0f;
        gp_matmul_native(&m, x, n, ldx, ya, ldy, pool);
        REQUIRE_OK(gp_onednn_matmul(&m, x, n, ldx, yb, ldy, pool), &err);
        double scale = 0, diff = 0;
        bool untouched = true;
        for (int j = 0; j < n; j++) {
            for (int r = 0; r < R; r++) {
                const double a = ya[(size_t)j * ldy + r], b = yb[(size_t)j * ldy + r];
                if (fabs(a) > scale) scale = fabs(a);
                if (fabs(a - b) > diff) diff = fabs(a - b);
            }
            for (int r = R; r < ldy; r++) untouched &= yb[(size_t)j * ldy + r] == -7.0f;
        }
        test_note("n = %d: max |oneDNN − native| %.3g of outputs up to %.3g (%.2g relative)", n,
                  diff, scale, diff / scale);
        CHECK(diff <= tol * scale);
        CHECK_MSG(untouched, "n = %d: oneDNN wrote past the matrix's rows", n);
    }
    /* batch invariance: the first 8 rows alone against the same rows in the 40-row batch
     * (yb holds the 40-row result now) */
    REQUIRE_OK(gp_onednn_matmul(&m, x, 8, ldx, y1, ldy, pool), &err);
    double diff = 0;
    int equal = 1;
    for (int j = 0; j < 8; j++)
        for (int r = 0; r < R; r++) {
            const float a = y1[(size_t)j * ldy + r], b = yb[(size_t)j * ldy + r];
            if (a != b) equal = 0;
            if (fabs((double)a - b) > diff) diff = fabs((double)a - b);
        }
    test_note("8 rows alone vs in a batch of 40: %s (max difference %.3g)",
              equal ? "bitwise equal" : "not bitwise equal", diff);
    CHECK(diff <= tol * max_abs(yb, (size_t)40 * ldy));
    /* gp_matmul takes the path from GP_ONEDNN_MIN_ROWS rows, and not while switched off */
    gp_matmul(&m, x, 8, ldx, ya, ldy, pool);
    CHECK(memcmp(ya, y1, sizeof(float) * (size_t)R) == 0);
    gp_onednn_enable(false);
    gp_matmul(&m, x, 8, ldx, ya, ldy, pool);
    gp_onednn_enable(true);
    gp_matmul_native(&m, x, 8, ldx, yb, ldy, pool);
    CHECK(memcmp(ya, yb, sizeof(float) * (size_t)R) == 0);
    /* a non-finite input goes to the native kernels (which say what it gives) */
    x[5] = NAN;
    CHECK(gp_onednn_matmul(&m, x, 8, ldx, yb, ldy, pool) == GEPARD_ERR_UNSUPPORTED);
    gp_pool_free(pool);
    free(x);
    free(ya);
    free(yb);
    free(y1);
    gp_matrix_free(&m);
}

TEST(onednn_matmul_matches_native_kernels) { matches_native(ONEDNN_TOLERANCE); }

TEST(onednn_two_terms_match_native_kernels) {
    setenv("GEPARD_ONEDNN_TERMS", "2", 1);
    matches_native(ONEDNN_TWO_TERMS_TOLERANCE);
    unsetenv("GEPARD_ONEDNN_TERMS");
}

TEST(onednn_choice_follows_measurement_or_environment) {
    gp_rng rng;
    gp_rng_seed(&rng, 5);
    const int R = 256, C = 256;
    float *w = malloc((size_t)R * C * sizeof *w);
    for (size_t i = 0; i < (size_t)R * C; i++) w[i] = (float)(gp_rng_uniform(&rng) - 0.5);
    gp_matrix m;
    gp_error err;
    gp_error_clear(&err);
    REQUIRE_OK(gp_matrix_from_f32(&m, GP_WEIGHTS_BF16, R, C, w, &err), &err);
    free(w);
    char why[240];
    setenv("GEPARD_PREFILL", "native", 1);
    CHECK(!gp_onednn_choose(&m, why, sizeof why));
    CHECK(strstr(why, "GEPARD_PREFILL=native") != NULL);
    /* without the variable: matrices this small are not worth it */
    unsetenv("GEPARD_PREFILL");
    CHECK(!gp_onednn_choose(&m, why, sizeof why));
    CHECK(strstr(why, "too small") != NULL);
    gp_matrix_free(&m);
    /* 1024 x 1024: timed both ways */
    w = malloc((size_t)1024 * 1024 * sizeof *w);
    for (size_t i = 0; i < (size_t)1024 * 1024; i++) w[i] = (float)(gp_rng_uniform(&rng) - 0.5);
    REQUIRE_OK(gp_matrix_from_f32(&m, GP_WEIGHTS_BF16, 1024, 1024, w, &err), &err);
    free(w);
    const bool chosen = gp_onednn_choose(&m, why, sizeof why);
    setenv("GEPARD_PREFILL", "native", 1); /* the suite's default (test_main.c) */
    test_note("measured here: %s — %s", chosen ? "oneDNN" : "native", why);
    CHECK(strstr(why, " ms") != NULL || strstr(why, "oneDNN") != NULL);
    CHECK(m.onednn == NULL); /* the trial's copy is gone */
    gp_matrix_free(&m);
}
