/* test_matmul_tiles.c — prefill's matrix products on AMX tiles (compute/matmul_tiles.h)
 * against the native kernels: within the error of two bf16 activation terms, every row's
 * result independent of the rows batched with it (bit for bit), and the AMX unit against
 * the plain-C emulation of its products where the CPU has one. The emulation
 * (GEPARD_TILES=emulate) runs everywhere. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "compute/conv_direct.h"
#include "compute/matmul_tiles.h"
#include "compute/matrix.h"
#include "test.h"

static double mt_rel(const float *a, const float *b, size_t n) {
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(e / (s > 0 ? s : 1));
}

TEST(matmul_tiles_match_native_and_are_batch_invariant) {
    /* 600 outputs: tasks of 4 or more output pairs on one thread, whose columns go in chunks */
    const int shapes[][2] = {{100, 200}, {48, 1000}, {130, 64}, {600, 1000}};
    const int batches[] = {8, 17, 33, 64, 100}; /* 100: two groups of row blocks */
    const char *modes[2] = {"emulate", "amx"};
    unsetenv("GEPARD_TILES");
    const int n_modes = gp_dconv_tiles_mode() ? 2 : 1;
    if (n_modes == 1) test_note("no AMX tile unit here: the tile matmul runs emulated only");
    gp_rng rng;
    gp_rng_seed(&rng, 51);
    gp_pool *pool;
    gp_error err;
    REQUIRE_OK(gp_pool_create(2, &pool, &err), &err);
    double worst = 0, unit_vs_emu = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int N = shapes[s][0], K = shapes[s][1], nmax = 100;
        float *w = malloc((size_t)N * K * 4), *x = malloc((size_t)nmax * K * 4);
        float *want = malloc((size_t)nmax * N * 4), *got = malloc((size_t)nmax * N * 4),
              *alone = malloc((size_t)8 * N * 4), *first = malloc((size_t)nmax * N * 4);
        REQUIRE(w && x && want && got && alone && first);
        for (size_t i = 0; i < (size_t)N * K; i++) w[i] = (float)(2 * gp_rng_uniform(&rng) - 1);
        for (size_t i = 0; i < (size_t)nmax * K; i++) x[i] = (float)(4 * gp_rng_uniform(&rng) - 2);
        gp_matrix m;
        REQUIRE_OK(gp_matrix_from_f32(&m, GP_WEIGHTS_BF16, N, K, w, &err), &err);
        for (int md = 0; md < n_modes; md++) {
            if (md == 0)
                setenv("GEPARD_TILES", "emulate", 1);
            else
                unsetenv("GEPARD_TILES");
            REQUIRE_OK(gp_tiles_attach(&m, &err), &err);
            for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
                const int n = batches[b];
                gp_matmul_native(&m, x, n, K, want, N, NULL);
                REQUIRE_OK(gp_tiles_matmul(&m, x, n, K, got, N, b % 2 ? pool : NULL), &err);
                const double e = mt_rel(got, want, (size_t)n * N);
                CHECK_MSG(e <= 2e-5, "%s %dx%d, %d rows: relative error %.3g", modes[md], N, K, n,
                          e);
                if (e > worst) worst = e;
                /* the last 8 rows alone give the same bits as inside the batch */
                REQUIRE_OK(gp_tiles_matmul(&m, x + (size_t)(n - 8) * K, 8, K, alone, N, pool),
                           &err);
                CHECK_MSG(!memcmp(alone, got + (size_t)(n - 8) * N, (size_t)8 * N * 4),
                          "%s %dx%d: rows alone differ from the same rows in a batch of %d",
                          modes[md], N, K, n);
            }
            if (md == 0) {
                memcpy(first, got, (size_t)64 * N * 4);
            } else { /* relative to the largest value: sums of K products in another order */
                double big = 1;
                for (size_t i = 0; i < (size_t)64 * N; i++) big = fmax(big, fabs(first[i]));
                for (size_t i = 0; i < (size_t)64 * N; i++)
                    unit_vs_emu = fmax(unit_vs_emu, fabs((double)first[i] - got[i]) / big);
            }
            gp_tiles_detach(&m);
        }
        unsetenv("GEPARD_TILES");
        gp_matrix_free(&m);
        free(w);
        free(x);
        free(want);
        free(got);
        free(alone);
        free(first);
    }
    test_note("tile matmul vs native: worst relative error %.3g (tolerance 2e-5: two bf16 "
              "activation terms); rows alone = in a batch, bit for bit",
              worst);
    if (n_modes == 2) {
        test_note("AMX unit vs emulation: max difference %.3g of the largest value (tolerance "
                  "1e-5)",
                  unit_vs_emu);
        CHECK_MSG(unit_vs_emu <= 1e-5, "AMX unit vs emulation: %.3g", unit_vs_emu);
    }
    gp_pool_free(pool);
}
