/* test_kernels.c — the SIMD kernel tables (compute/cpu/kernels_avx2.c,
 * kernels_avx512.c) against the scalar reference, at every level this CPU
 * supports:
 *
 *  - matmul_rows for f32, bf16, int8 and q4 over awkward shapes (rows not a
 *    multiple of 4 or 16, columns a multiple of 32 but not of 64/128 and, for
 *    the dense formats, not even of 8), n = 1, 2, 3, 7, 16, 33 input rows,
 *    strided x/y and partial row ranges (rows outside the range untouched);
 *  - batch invariance: each row of a batch equals that row computed alone;
 *  - gp_matmul over a thread pool against the single-threaded kernel;
 *  - the thread pool waking workers that went to sleep between jobs;
 *  - cached attention over paged KV blocks (positions not a multiple of the
 *    block size, head dims not a multiple of 16 or 8, shuffled blocks), one
 *    head at a time and grouped (heads sharing a KV head in one pass);
 *  - the model-tiny teacher-forced case and a 30-frame greedy generation with
 *    every weight format at the best level, printing hidden-state and
 *    head-logit errors against the f32 goldens and the greedy-code agreement.
 *
 * Tolerances (stated next to each comparison):
 *  - f32 / bf16 / int8 multiply the same stored weights by the same f32
 *    activations; only the summation order differs, so the maximum absolute
 *    difference must be ≤ 1e-5 of the largest reference output.
 *  - The SIMD q4 kernels round activations to int8 per group of 32 (scale
 *    max|x|/127) before the integer dot product, so each output may differ
 *    from the f32-activation reference by at most Σ_i |w_i| · scale_g(i) / 2;
 *    every output is checked against that bound (+1e-5 of Σ|w_i x_i| for
 *    f32 rounding). AVX2 and AVX-512 q4 compute identical integer sums and
 *    must agree to 1e-5.
 *  - Attention: 1e-5 of the largest output (polynomial exp is ~1 ulp).
 *  - Threaded gp_matmul runs the same kernel per row, so it must be bitwise
 *    equal to one thread.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/dtype.h"
#include "base/rng.h"
#include "compute/attention.h"
#include "compute/conv_direct.h"
#include "compute/kernels.h"
#include "compute/kv_cache.h"
#include "golden.h"
#include "model/backbone.h"
#include "model/generate.h"
#include "model/overlay.h"
#include "test.h"

#define EXACT_TOLERANCE 1e-5
#define ATTENTION_TOLERANCE 1e-5
#define BF16_MODEL_TOLERANCE 1e-2

static void fill_random(float *v, size_t n, gp_rng *rng, float scale) {
    for (size_t i = 0; i < n; i++) v[i] = (float)(gp_rng_uniform(rng) * 2 - 1) * scale;
}

static const gp_kernel_level simd_levels[] = {GP_KERNELS_AVX2, GP_KERNELS_AVX512};

/* ---- matrix products ---- */

typedef struct mm_case {
    gp_matrix w;
    float *dense; /* [rows][cols] dequantised weights (gp_matrix_row_f32) */
    float *x;     /* [n][ldx] */
    int rows, cols, n, ldx, ldy;
} mm_case;

static int mm_case_init(mm_case *c, gp_weight_format f, int rows, int cols, int n, gp_rng *rng) {
    memset(c, 0, sizeof *c);
    c->rows = rows;
    c->cols = cols;
    c->n = n;
    c->ldx = cols + 3; /* strided rows catch kernels that assume ldx == cols */
    c->ldy = rows + 5;
    float *src = malloc((size_t)rows * cols * sizeof(float));
    c->dense = malloc((size_t)rows * cols * sizeof(float));
    c->x = gp_aligned_alloc((size_t)n * c->ldx * sizeof(float));
    if (!src || !c->dense || !c->x) return -1;
    fill_random(src, (size_t)rows * cols, rng, 0.05f);
    /* a few large weights and activations so scales vary between rows/groups */
    for (int r = 0; r < rows; r += 3) src[(size_t)r * cols + (r * 7) % cols] = 0.9f;
    fill_random(c->x, (size_t)n * c->ldx, rng, 1.0f);
    for (int j = 0; j < n; j++) c->x[(size_t)j * c->ldx + (j * 13) % cols] = 8.0f;
    gp_error err;
    int rc = gp_matrix_from_f32(&c->w, f, rows, cols, src, &err);
    free(src);
    if (rc) return rc;
    for (int r = 0; r < rows; r++) gp_matrix_row_f32(&c->w, r, c->dense + (size_t)r * cols);
    return 0;
}

static void mm_case_free(mm_case *c) {
    gp_matrix_free(&c->w);
    free(c->dense);
    gp_aligned_free(c->x);
}

static float *run_rows(const gp_kernel_table *t, const mm_case *c, int r0, int r1) {
    float *y = malloc((size_t)c->n * c->ldy * sizeof(float));
    for (size_t i = 0; i < (size_t)c->n * c->ldy; i++) y[i] = NAN;
    t->matmul_rows[c->w.format](&c->w, c->x, c->n, c->ldx, y, c->ldy, r0, r1);
    return y;
}

/* Max over outputs of |got - want| / max |want|, and for q4 the check of
 * every output against its activation-rounding bound. Outputs outside
 * [r0, r1) must still be NaN. */
static double compare_outputs(const mm_case *c, const float *got, const float *want, int r0, int r1,
                              const char *what) {
    double ref = 0, diff = 0;
    int outside = 0, over_bound = 0;
    for (int j = 0; j < c->n; j++) {
        const float *xj = c->x + (size_t)j * c->ldx;
        for (int r = 0; r < c->rows; r++) {
            float g = got[(size_t)j * c->ldy + r], w = want[(size_t)j * c->ldy + r];
            if (r < r0 || r >= r1) {
                outside += !isnan(g);
                continue;
            }
            ref = fmax(ref, fabs(w));
            diff = fmax(diff, fabs((double)g - w));
            if (c->w.format != GP_WEIGHTS_Q4) continue;
            const float *wr = c->dense + (size_t)r * c->cols;
            double bound = 0, mag = 0;
            for (int g0 = 0; g0 < c->cols; g0 += GP_Q4_GROUP) {
                double amax = 0, wsum = 0;
                for (int i = g0; i < g0 + GP_Q4_GROUP; i++) {
                    amax = fmax(amax, fabs(xj[i]));
                    wsum += fabs(wr[i]);
                    mag += fabs(wr[i] * xj[i]);
                }
                bound += 0.5 * amax / 127.0 * wsum;
            }
            if (fabs((double)g - w) > bound * (1 + 1e-3) + 1e-5 * mag) over_bound++;
        }
    }
    CHECK_MSG(outside == 0, "%s: %d outputs outside rows [%d, %d) were written", what, outside, r0,
              r1);
    CHECK_MSG(over_bound == 0, "%s: %d outputs exceed the int8-activation error bound", what,
              over_bound);
    return ref > 0 ? diff / ref : diff;
}

static void check_level_format(gp_kernel_level level, gp_weight_format f) {
    const gp_kernel_table *t = gp_kernel_table_for(level);
    if (!t) {
        test_note("%s: not supported by this CPU, skipped", gp_kernel_level_name(level));
        return;
    }
    static const int shapes[][2] = {{1, 32},  {5, 96},    {13, 160},  {37, 288},
                                    {16, 64}, {67, 1056}, {100, 416}, {3, 4128}};
    static const int dense_shapes[][2] = {{7, 7}, {19, 50}, {33, 1001}, {4, 17}};
    static const int ns[] = {1, 2, 3, 7, 16, 33};
    gp_rng rng;
    gp_rng_seed(&rng, 1000 + (uint64_t)level * 10 + f);
    double worst = 0, worst_q4_vs_other = 0;
    int cases = 0;
    size_t n_shapes = sizeof shapes / sizeof shapes[0];
    size_t n_all =
        n_shapes + (f == GP_WEIGHTS_Q4 ? 0 : sizeof dense_shapes / sizeof dense_shapes[0]);
    for (size_t s = 0; s < n_all; s++) {
        int rows = s < n_shapes ? shapes[s][0] : dense_shapes[s - n_shapes][0];
        int cols = s < n_shapes ? shapes[s][1] : dense_shapes[s - n_shapes][1];
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            mm_case c;
            REQUIRE(mm_case_init(&c, f, rows, cols, ns[k], &rng) == 0);
            char what[96];
            snprintf(what, sizeof what, "%s %s %dx%d n=%d", t->name, gp_weight_format_name(f), rows,
                     cols, ns[k]);
            /* full range, then a partial one that starts and ends mid-tile */
            int ranges[2][2] = {{0, rows}, {rows > 2 ? 1 : 0, rows > 6 ? rows - 2 : rows}};
            for (int q = 0; q < 2; q++) {
                int r0 = ranges[q][0], r1 = ranges[q][1];
                float *want = run_rows(&gp_kernels_scalar, &c, r0, r1);
                float *got = run_rows(t, &c, r0, r1);
                double rel = compare_outputs(&c, got, want, r0, r1, what);
                if (f != GP_WEIGHTS_Q4) {
                    /* same weights, same f32 activations: summation order only */
                    CHECK_MSG(rel <= EXACT_TOLERANCE, "%s rows [%d,%d): relative error %.3g > %g",
                              what, r0, r1, rel, EXACT_TOLERANCE);
                } else {
                    /* identical int8 sums at both SIMD levels */
                    const gp_kernel_table *other = gp_kernel_table_for(
                        level == GP_KERNELS_AVX2 ? GP_KERNELS_AVX512 : GP_KERNELS_AVX2);
                    if (other) {
                        float *y2 = run_rows(other, &c, r0, r1);
                        double d = 0, m = 0;
                        for (int j = 0; j < c.n; j++)
                            for (int r = r0; r < r1; r++) {
                                size_t i = (size_t)j * c.ldy + r;
                                d = fmax(d, fabs((double)y2[i] - got[i]));
                                m = fmax(m, fabs(got[i]));
                            }
                        double rel2 = m > 0 ? d / m : d;
                        CHECK_MSG(rel2 <= EXACT_TOLERANCE, "%s: avx2 vs avx512 q4 differ by %.3g",
                                  what, rel2);
                        if (rel2 > worst_q4_vs_other) worst_q4_vs_other = rel2;
                        free(y2);
                    }
                }
                if (rel > worst) worst = rel;
                cases++;
                free(want);
                free(got);
            }
            mm_case_free(&c);
        }
    }
    test_note("%s %-4s: %d cases, max relative difference to scalar %.3g%s", t->name,
              gp_weight_format_name(f), cases, worst,
              f == GP_WEIGHTS_Q4 ? " (int8 activations; every output within its bound)" : "");
    if (f == GP_WEIGHTS_Q4 && worst_q4_vs_other > 0)
        test_note("  q4 avx2 vs avx512: max relative difference %.3g", worst_q4_vs_other);
}

TEST(kernels_f32_match_scalar) {
    for (size_t l = 0; l < 2; l++) check_level_format(simd_levels[l], GP_WEIGHTS_F32);
}
TEST(kernels_bf16_match_scalar) {
    for (size_t l = 0; l < 2; l++) check_level_format(simd_levels[l], GP_WEIGHTS_BF16);
}
TEST(kernels_int8_match_scalar) {
    for (size_t l = 0; l < 2; l++) check_level_format(simd_levels[l], GP_WEIGHTS_INT8);
}
TEST(kernels_q4_match_scalar) {
    for (size_t l = 0; l < 2; l++) check_level_format(simd_levels[l], GP_WEIGHTS_Q4);
}

/* The scalar kernels read the same layout gp_matrix_row_f32 describes, and
 * quantised rows stay within half a step of the source weights. */
TEST(kernels_layout_consistent_with_row_f32) {
    gp_rng rng;
    gp_rng_seed(&rng, 7);
    for (int f = 0; f < 4; f++) {
        mm_case c;
        REQUIRE(mm_case_init(&c, (gp_weight_format)f, 29, 192, 3, &rng) == 0);
        float *y = run_rows(&gp_kernels_scalar, &c, 0, c.rows);
        double worst = 0;
        for (int j = 0; j < c.n; j++)
            for (int r = 0; r < c.rows; r++) {
                double acc = 0, mag = 0;
                for (int i = 0; i < c.cols; i++) {
                    acc += (double)c.dense[(size_t)r * c.cols + i] * c.x[(size_t)j * c.ldx + i];
                    mag += fabs(c.dense[(size_t)r * c.cols + i] * c.x[(size_t)j * c.ldx + i]);
                }
                worst = fmax(worst, fabs(acc - y[(size_t)j * c.ldy + r]) / mag);
            }
        /* f32 accumulation of 192 products: well under 1e-5 of Σ|w x| */
        CHECK_MSG(worst < 1e-5, "%s: scalar kernel vs gp_matrix_row_f32 differ by %.3g",
                  gp_weight_format_name((gp_weight_format)f), worst);
        free(y);
        mm_case_free(&c);
    }
    /* q4 maps each group's largest magnitude to -8, so values of the other
     * sign may clip at +7: the dequantised value is within one step
     * (max|w| / 8, +1% for the f16 rounding of the scale) of the source. */
    float src[64];
    fill_random(src, 64, &rng, 0.3f);
    gp_matrix m;
    gp_error err;
    REQUIRE_OK(gp_matrix_from_f32(&m, GP_WEIGHTS_Q4, 1, 64, src, &err), &err);
    float back[64];
    gp_matrix_row_f32(&m, 0, back);
    for (int g = 0; g < 2; g++) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(src[g * 32 + i]));
        for (int i = 0; i < 32; i++)
            CHECK(fabsf(back[g * 32 + i] - src[g * 32 + i]) <= amax / 8 * 1.01f);
    }
    /* tiled: 4 rows (3 of zeros) × 128 columns of nibbles + 16 f16 scales */
    CHECK_EQ_INT(gp_matrix_bytes(&m), 4 * 64 + 16 * 2);
    gp_matrix_free(&m);
}

/* Every output's arithmetic is the same whatever the batch: row j of an
 * n-row product equals, bitwise, the product of row j alone (so a stream's
 * result never depends on what it is batched with). Batches of several rows
 * take the cache-blocked kernels (column blocks of 512, groups of input
 * rows, passes of 96 rows): the shapes cover one and several column blocks
 * with a partial last chunk, an odd tile count, partial groups and more than
 * one pass, over the full row range and one that starts and ends mid-tile. */
TEST(kernels_batch_invariant) {
    /* (q4 needs columns in groups of 32: 1100 columns fall back to int8) */
    static const int shapes[][3] = {{45, 416, 9}, {37, 1100, 100}, {13, 2080, 5}};
    gp_rng rng;
    gp_rng_seed(&rng, 12);
    for (int l = 0; l < 3; l++) {
        const gp_kernel_table *t = gp_kernel_table_for((gp_kernel_level)l);
        if (!t) continue;
        for (int f = 0; f < 4; f++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                if (l == 0 && s > 0) continue; /* the scalar reference is row by row anyway */
                mm_case c;
                REQUIRE(mm_case_init(&c, (gp_weight_format)f, shapes[s][0], shapes[s][1],
                                     shapes[s][2], &rng) == 0);
                const int ranges[2][2] = {{0, c.rows}, {3, c.rows - 2}};
                for (int q = 0; q < 2; q++) {
                    const int r0 = ranges[q][0], r1 = ranges[q][1];
                    float *all = run_rows(t, &c, r0, r1);
                    float *one = malloc((size_t)c.rows * sizeof(float));
                    int differ = 0;
                    for (int j = 0; j < c.n; j++) {
                        t->matmul_rows[c.w.format](&c.w, c.x + (size_t)j * c.ldx, 1, c.ldx, one,
                                                   c.rows, r0, r1);
                        differ += memcmp(one + r0, all + (size_t)j * c.ldy + r0,
                                         (size_t)(r1 - r0) * sizeof(float)) != 0;
                    }
                    CHECK_MSG(differ == 0,
                              "%s %s %dx%d rows [%d,%d): %d of %d rows differ "
                              "between n=%d and n=1",
                              t->name, gp_weight_format_name((gp_weight_format)f), c.rows, c.cols,
                              r0, r1, differ, c.n, c.n);
                    free(one);
                    free(all);
                }
                mm_case_free(&c);
            }
    }
}

/* One to three input rows (q4: one) read several tiles at once, each from its own
 * part of the row range (gp_decode_streams): bitwise the same outputs as one tile
 * at a time, for every format, tile counts that leave tiles over, partial row ranges
 * and a column count with a partial chunk. */
TEST(kernels_decode_streams_are_bitwise_one_tile_at_a_time) {
    static const int shapes[][2] = {{45, 416}, {37, 1100}, {531, 256}, {4, 64}, {64, 1031}};
    gp_rng rng;
    gp_rng_seed(&rng, 13);
    int cases = 0;
    for (int l = 1; l < 3; l++) {
        const gp_kernel_table *t = gp_kernel_table_for((gp_kernel_level)l);
        if (!t) continue;
        for (int f = 0; f < 4; f++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int n = 1; n <= 3; n++) {
                    if (f == GP_WEIGHTS_Q4 && shapes[s][1] % 32) continue; /* q4: groups of 32 */
                    mm_case c;
                    REQUIRE(mm_case_init(&c, (gp_weight_format)f, shapes[s][0], shapes[s][1], n,
                                         &rng) == 0);
                    const int ranges[3][2] = {{0, c.rows}, {3, c.rows - 2}, {5, c.rows}};
                    for (int q = 0; q < 3; q++) {
                        const int r0 = ranges[q][0], r1 = ranges[q][1];
                        if (r1 <= r0) continue;
                        gp_decode_streams_set(1);
                        float *streams = run_rows(t, &c, r0, r1);
                        gp_decode_streams_set(0);
                        float *one = run_rows(t, &c, r0, r1);
                        gp_decode_streams_set(-1);
                        int differ = 0;
                        for (int j = 0; j < n; j++)
                            for (int r = 0; r < c.rows; r++) {
                                const float a = streams[(size_t)j * c.ldy + r],
                                            b = one[(size_t)j * c.ldy + r];
                                differ += memcmp(&a, &b, sizeof a) != 0; /* NaN outside too */
                            }
                        CHECK_MSG(differ == 0, "%s %s %dx%d n=%d rows [%d,%d): %d outputs differ",
                                  t->name, gp_weight_format_name((gp_weight_format)f), c.rows,
                                  c.cols, n, r0, r1, differ);
                        cases++;
                        free(streams);
                        free(one);
                    }
                    mm_case_free(&c);
                }
    }
    if (!cases) test_skip("no AVX2 or AVX-512 kernels on this CPU");
    test_note("%d cases bitwise equal", cases);
}

/* The AVX-512 prefill reads bf16 weights widened once per block or once per
 * row group, as the load-time timing chooses (gp_prefill_widen): both must
 * give bitwise the same outputs, for several shapes and batches. The choice
 * itself follows GEPARD_PREFILL_WIDEN without timing. */
TEST(kernels_prefill_widen_is_bitwise_the_same) {
    const gp_kernel_table *t = gp_kernel_table_for(GP_KERNELS_AVX512);
    if (!t) test_skip("no AVX-512 kernels on this CPU");
    static const int shapes[][3] = {{45, 416, 9}, {37, 1100, 100}, {13, 2080, 5}, {64, 1024, 64}};
    gp_rng rng;
    gp_rng_seed(&rng, 13);
    const bool was = gp_prefill_widen();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        mm_case c;
        REQUIRE(mm_case_init(&c, GP_WEIGHTS_BF16, shapes[s][0], shapes[s][1], shapes[s][2], &rng) ==
                0);
        gp_prefill_widen_set(false);
        float *per_group = run_rows(t, &c, 0, c.rows);
        gp_prefill_widen_set(true);
        float *once = run_rows(t, &c, 0, c.rows);
        int differ = 0;
        for (int j = 0; j < c.n; j++)
            differ += memcmp(per_group + (size_t)j * c.ldy, once + (size_t)j * c.ldy,
                             (size_t)c.rows * sizeof(float)) != 0;
        CHECK_MSG(differ == 0, "bf16 %dx%d, %d rows: %d rows differ between the two ways", c.rows,
                  c.cols, c.n, differ);
        free(per_group);
        free(once);
        mm_case_free(&c);
    }
    mm_case c;
    REQUIRE(mm_case_init(&c, GP_WEIGHTS_BF16, 64, 1024, 1, &rng) == 0);
    char why[200];
    setenv("GEPARD_PREFILL_WIDEN", "1", 1);
    CHECK(gp_prefill_widen_choose(&c.w, why, sizeof why) && gp_prefill_widen());
    CHECK(strstr(why, "GEPARD_PREFILL_WIDEN=1") != NULL);
    setenv("GEPARD_PREFILL_WIDEN", "0", 1);
    CHECK(!gp_prefill_widen_choose(&c.w, why, sizeof why) && !gp_prefill_widen());
    unsetenv("GEPARD_PREFILL_WIDEN");
    mm_case_free(&c);
    gp_prefill_widen_set(was);
}

/* gp_matmul over pools of 2 and 3 threads equals the one-thread result
 * bitwise (each row is computed by the same code whatever the split). */
TEST(kernels_threaded_matmul_matches_single_thread) {
    gp_rng rng;
    gp_rng_seed(&rng, 11);
    for (int threads = 2; threads <= 3; threads++) {
        gp_pool *pool;
        gp_error err;
        REQUIRE_OK(gp_pool_create(threads, &pool, &err), &err);
        for (int f = 0; f < 4; f++) {
            static const int ns[] = {1, 4, 17};
            for (int k = 0; k < 3; k++) {
                mm_case c;
                REQUIRE(mm_case_init(&c, (gp_weight_format)f, 531, 256, ns[k], &rng) == 0);
                float *y1 = calloc((size_t)c.n * c.ldy, sizeof(float));
                float *y2 = calloc((size_t)c.n * c.ldy, sizeof(float));
                gp_matmul(&c.w, c.x, c.n, c.ldx, y1, c.ldy, NULL);
                gp_matmul(&c.w, c.x, c.n, c.ldx, y2, c.ldy, pool);
                CHECK_MSG(memcmp(y1, y2, (size_t)c.n * c.ldy * sizeof(float)) == 0,
                          "%s n=%d: %d threads differ from 1",
                          gp_weight_format_name((gp_weight_format)f), c.n, threads);
                free(y1);
                free(y2);
                mm_case_free(&c);
            }
        }
        gp_pool_free(pool);
    }
}

/* ---- attention ---- */

/* Two sequences reserved in turns so their blocks interleave in the pool. */
static double attention_case(const gp_kernel_table *t, int D, int bs, int positions, gp_rng *rng) {
    const int layers = 2, heads = 2;
    int blocks = (positions + bs - 1) / bs;
    gp_kv_pool *kv;
    gp_error err;
    if (gp_kv_pool_create(layers, heads, D, bs, 2 * blocks + 1, &kv, &err)) {
        test_fail(__FILE__, __LINE__, "kv pool: %s", err.message);
        return 1;
    }
    gp_kv_seq a, b;
    gp_kv_seq_init(&a);
    gp_kv_seq_init(&b);
    for (int p = bs; p < positions + bs; p += bs) {
        int upto = p < positions ? p : positions;
        if (gp_kv_seq_reserve(kv, &b, upto, &err) || gp_kv_seq_reserve(kv, &a, upto, &err))
            test_fail(__FILE__, __LINE__, "kv reserve: %s", err.message);
    }
    for (int l = 0; l < layers; l++)
        for (int h = 0; h < heads; h++)
            for (int p = 0; p < positions; p++) {
                fill_random(gp_kv_at(kv, &a, l, 0, h, p), (size_t)D, rng, 1.0f);
                fill_random(gp_kv_at(kv, &a, l, 1, h, p), (size_t)D, rng, 1.0f);
            }
    enum { MAX_Q = 5 };
    const int qs = D + 3, os = D + 5; /* strided heads */
    float *q = malloc((size_t)MAX_Q * qs * sizeof(float));
    float *scores = malloc((size_t)MAX_Q * positions * sizeof(float));
    float *want = malloc((size_t)MAX_Q * os * sizeof(float));
    float *got = malloc((size_t)MAX_Q * os * sizeof(float));
    double worst = 0;
    for (int l = 0; l < layers; l++)
        for (int h = 0; h < heads; h++) {
            /* large q: scores spread over ±20, a peaked softmax */
            fill_random(q, (size_t)D, rng, 4.0f);
            float scale = 1.0f / sqrtf((float)D);
            gp_attend_cached_scalar(kv, &a, l, h, q, positions, scale, want, scores);
            t->attend(kv, &a, l, h, q, positions, scale, got, scores);
            double rel = test_rel_error(got, want, (size_t)D);
            CHECK_MSG(rel <= ATTENTION_TOLERANCE,
                      "%s attention D=%d block=%d positions=%d: relative error %.3g", t->name, D,
                      bs, positions, rel);
            if (rel > worst) worst = rel;
            /* grouped heads: against the scalar per-head reference, and each
             * head bitwise equal to the same level's single-head call */
            const int n_q = 1 + (l * 2 + h + positions) % MAX_Q;
            fill_random(q, (size_t)MAX_Q * qs, rng, 4.0f);
            gp_attend_cached_group_scalar(kv, &a, l, h, q, qs, n_q, positions, scale, want, os,
                                          scores);
            t->attend_group(kv, &a, l, h, q, qs, n_q, positions, scale, got, os, scores);
            float *one = malloc((size_t)D * sizeof(float));
            for (int g = 0; g < n_q; g++) {
                rel = test_rel_error(got + (size_t)g * os, want + (size_t)g * os, (size_t)D);
                CHECK_MSG(rel <= ATTENTION_TOLERANCE,
                          "%s grouped attention (%d heads) D=%d positions=%d: relative error %.3g",
                          t->name, n_q, D, positions, rel);
                if (rel > worst) worst = rel;
                t->attend(kv, &a, l, h, q + (size_t)g * qs, positions, scale, one, scores);
                CHECK_MSG(memcmp(one, got + (size_t)g * os, (size_t)D * sizeof(float)) == 0,
                          "%s: grouped head %d of %d differs from the single-head call", t->name, g,
                          n_q);
            }
            free(one);
        }
    free(q);
    free(scores);
    free(want);
    free(got);
    gp_kv_seq_release(kv, &a);
    gp_kv_seq_release(kv, &b);
    gp_kv_pool_free(kv);
    return worst;
}

TEST(kernels_attention_matches_scalar) {
    static const int dims[] = {16, 20, 40, 256};
    static const int block_sizes[] = {16, 5};
    static const int positions[] = {1, 4, 7, 16, 17, 33, 100, 257};
    gp_rng rng;
    gp_rng_seed(&rng, 5);
    for (size_t l = 0; l < 2; l++) {
        const gp_kernel_table *t = gp_kernel_table_for(simd_levels[l]);
        if (!t) continue;
        double worst = 0;
        for (size_t d = 0; d < 4; d++)
            for (size_t b = 0; b < 2; b++)
                for (size_t p = 0; p < 8; p++) {
                    double rel = attention_case(t, dims[d], block_sizes[b], positions[p], &rng);
                    if (rel > worst) worst = rel;
                }
        test_note("%s attention: max relative difference to scalar %.3g", t->name, worst);
    }
}

/* gp_attend_cached follows the active level. */
TEST(kernels_attention_dispatch) {
    gp_rng rng;
    gp_rng_seed(&rng, 6);
    gp_kernels_set(GP_KERNELS_SCALAR);
    CHECK(gp_kernel_table_active() == &gp_kernels_scalar);
    gp_kernel_level best = gp_kernels_set(gp_kernels_best());
    CHECK(gp_kernel_table_active() == gp_kernel_table_for(best));
    test_note("best kernel level on this CPU: %s", gp_kernel_level_name(best));
    (void)attention_case(gp_kernel_table_active(), 256, 16, 40, &rng);
}

/* ---- model-tiny with every weight format ---- */

typedef struct tf_run {
    float *hidden; /* [T + 1][H] */
    float *logits; /* [T + 1][total] */
    int T, H, total, C;
    int vocab[GP_MAX_CHANNELS], offset[GP_MAX_CHANNELS];
} tf_run;

/* Steps × channels whose arg-max code agrees between two logit arrays. */
static int argmax_agreement(const tf_run *run, const float *a, const float *b) {
    int same = 0;
    for (int t = 0; t <= run->T; t++)
        for (int c = 0; c < run->C; c++) {
            const float *la = a + (size_t)t * run->total + run->offset[c];
            const float *lb = b + (size_t)t * run->total + run->offset[c];
            int ia = 0, ib = 0;
            for (int k = 1; k < run->vocab[c]; k++) {
                if (la[k] > la[ia]) ia = k;
                if (lb[k] > lb[ib]) ib = k;
            }
            same += ia == ib;
        }
    return same;
}

/* Teacher-forced tf1 (no voice prefix): prefill, then one decode step per
 * golden frame, then the heads — as test_model_tf.c does. */
static int run_tf1(const golden *g, gp_weight_format f, gp_pool *pool, tf_run *out) {
    memset(out, 0, sizeof *out);
    gp_model_load_options o = {.weight_format = f};
    gp_model *m = NULL;
    gp_error err;
    if (gp_model_load(test_fixture("model-tiny/model"), &o, &m, &err)) {
        test_fail(__FILE__, __LINE__, "model load: %s", err.message);
        return -1;
    }
    const cJSON *tc = golden_case(g, "teacher_forced", "tf1");
    size_t n_ids;
    int32_t *ids = golden_int_array(cJSON_GetObjectItem(tc, "layout_ids"), &n_ids);
    const int H = m->cfg.backbone.hidden_size, C = m->cfg.num_channels;
    int64_t fdims[2];
    int32_t *frames = golden_i32(g, "tf1.frames", fdims, NULL);
    const int T = (int)fdims[0];
    float *rows = calloc(n_ids * H, sizeof(float));
    float *embeds = calloc((size_t)H, sizeof(float));
    float *work = calloc((size_t)(C * m->cfg.audio_embed_dim + H), sizeof(float));
    out->hidden = calloc((size_t)(T + 1) * H, sizeof(float));
    out->logits = calloc((size_t)(T + 1) * m->cfg.total_logits, sizeof(float));
    out->T = T;
    out->H = H;
    out->total = m->cfg.total_logits;
    out->C = C;
    memcpy(out->vocab, m->cfg.channel_vocab, sizeof out->vocab);
    memcpy(out->offset, m->cfg.channel_offset, sizeof out->offset);
    for (size_t i = 0; i < n_ids; i++) gp_model_embed_token(m, ids[i], rows + i * H, &err);
    gp_kv_pool *kv;
    int rc = gp_kv_pool_create(m->cfg.backbone.num_layers, m->cfg.backbone.num_kv_heads,
                               m->cfg.backbone.head_dim, 16, 64, &kv, &err);
    gp_kv_seq seq;
    gp_kv_seq_init(&seq);
    gp_forward_scratch scratch;
    gp_forward_scratch_init(&scratch);
    if (!rc) rc = gp_kv_seq_reserve(kv, &seq, (int)n_ids + T + 1, &err);
    gp_backbone_seq bs = {&seq, (int)n_ids, NULL};
    if (!rc) rc = gp_backbone_forward(m, kv, &scratch, &bs, 1, rows, out->hidden, NULL, pool, &err);
    for (int t = 0; t < T && !rc; t++) {
        gp_overlay_embed_frames(m, frames + (size_t)t * C, 1, embeds, work, pool);
        bs.n_rows = 1;
        rc = gp_backbone_forward(m, kv, &scratch, &bs, 1, embeds, out->hidden + (size_t)(t + 1) * H,
                                 NULL, pool, &err);
    }
    if (rc)
        test_fail(__FILE__, __LINE__, "forward: %s", err.message);
    else
        gp_overlay_heads(m, out->hidden, T + 1, out->logits, pool);
    gp_forward_scratch_free(&scratch);
    gp_kv_seq_release(kv, &seq);
    gp_kv_pool_free(kv);
    free(rows);
    free(embeds);
    free(work);
    free(frames);
    free(ids);
    gp_model_free(m);
    return rc;
}

/* 30 greedy frames (stop head disabled) through the generation API. */
static int32_t *greedy_codes(const golden *g, gp_weight_format f, gp_pool *pool, int frames,
                             int *n_frames, int *C_out) {
    gp_model_load_options o = {.weight_format = f};
    gp_model *m = NULL;
    gp_error err;
    if (gp_model_load(test_fixture("model-tiny/model"), &o, &m, &err)) return NULL;
    size_t n_ids;
    int32_t *ids = golden_int_array(
        cJSON_GetObjectItem(golden_case(g, "teacher_forced", "tf1"), "layout_ids"), &n_ids);
    gp_gen_params p = gp_gen_default_params();
    p.temperature = 0;
    p.max_frames = frames;
    p.stop_threshold = 2.0f; /* probabilities never exceed 1: run all frames */
    gp_kv_pool *kv = NULL;
    gp_gen_stream *s = NULL;
    int32_t *codes = NULL;
    int rc = gp_kv_pool_create(m->cfg.backbone.num_layers, m->cfg.backbone.num_kv_heads,
                               m->cfg.backbone.head_dim, 16, 64, &kv, &err);
    if (!rc) rc = gp_gen_create(m, &p, ids, (int)n_ids, NULL, 0, NULL, &s, &err);
    if (!rc) rc = gp_gen_reserve(s, kv, &err);
    gp_gen_workspace w;
    gp_gen_workspace_init(&w);
    for (int guard = 0; !rc && guard < 10000; guard++) {
        int r = gp_gen_step(&s, 1, kv, &w, 16, pool, &err);
        if (r < 0) rc = -r;
        if (r == 0) break;
    }
    gp_gen_workspace_free(&w);
    if (!rc) {
        *n_frames = s->n_frames;
        *C_out = m->cfg.num_channels;
        codes = malloc((size_t)s->n_frames * m->cfg.num_channels * sizeof(int32_t));
        memcpy(codes, s->frames, (size_t)s->n_frames * m->cfg.num_channels * sizeof(int32_t));
    } else {
        test_fail(__FILE__, __LINE__, "generation: %s", err.message);
    }
    gp_gen_free(s, kv);
    gp_kv_pool_free(kv);
    free(ids);
    gp_model_free(m);
    return codes;
}

/* Hidden-state and head-logit errors of one format at one level against
 * the f32 goldens, and teacher-forced arg-max agreement; 0 on success. */
static int tf_errors(const golden *g, gp_weight_format f, gp_kernel_level level, gp_pool *pool,
                     const float *want_hidden, const float *want_logits, double *eh, double *el,
                     int *agree, int *steps) {
    gp_kernels_set(level);
    tf_run run;
    if (run_tf1(g, f, pool, &run)) return -1;
    *eh = test_rel_error(run.hidden, want_hidden, (size_t)(run.T + 1) * run.H);
    *el = test_rel_error(run.logits, want_logits, (size_t)(run.T + 1) * run.total);
    *agree = argmax_agreement(&run, run.logits, want_logits);
    *steps = (run.T + 1) * run.C;
    free(run.hidden);
    free(run.logits);
    return 0;
}

/* Every weight format at the best level (and int8/q4 also with the scalar
 * kernels, whose activations stay f32, to show what the SIMD int8
 * activations add). Teacher-forced: errors against the f32 goldens and
 * arg-max agreement per step and channel. Free-running: 30 greedy frames
 * against f32 weights with scalar kernels; once one code differs the inputs
 * differ, so the first differing frame matters more than the count. */
TEST(kernels_model_tiny_every_format) {
    golden g;
    REQUIRE(golden_open(&g, "model-tiny") == 0);
    gp_pool *pool;
    gp_error err;
    REQUIRE_OK(gp_pool_create(2, &pool, &err), &err);
    gp_kernels_set(GP_KERNELS_SCALAR);
    int ref_frames = 0, C = 0;
    int32_t *ref_codes = greedy_codes(&g, GP_WEIGHTS_F32, NULL, 30, &ref_frames, &C);
    REQUIRE(ref_codes);
    const gp_kernel_level best = gp_kernels_best();
    float *want_hidden = golden_f32(&g, "tf1.hidden", NULL);
    float *want_logits = golden_f32(&g, "tf1.head_logits", NULL);
    REQUIRE(want_hidden && want_logits);
    for (int f = 0; f < 4; f++) {
        const char *name = gp_weight_format_name((gp_weight_format)f);
        double eh, el;
        int agree, steps;
        if (f >= GP_WEIGHTS_INT8 &&
            tf_errors(&g, (gp_weight_format)f, GP_KERNELS_SCALAR, pool, want_hidden, want_logits,
                      &eh, &el, &agree, &steps) == 0)
            test_note("%-4s @ scalar: hidden rel error %.3g, head-logit rel error %.3g, "
                      "teacher-forced arg-max %d/%d",
                      name, eh, el, agree, steps);
        if (tf_errors(&g, (gp_weight_format)f, best, pool, want_hidden, want_logits, &eh, &el,
                      &agree, &steps))
            break;
        int n_frames = 0, C2 = 0;
        int32_t *codes = greedy_codes(&g, (gp_weight_format)f, pool, 30, &n_frames, &C2);
        int same = 0, first_diff = -1, total = 0;
        for (int t = 0; codes && t < n_frames && t < ref_frames; t++)
            for (int c = 0; c < C; c++) {
                int eq = codes[(size_t)t * C + c] == ref_codes[(size_t)t * C + c];
                same += eq;
                total++;
                if (!eq && first_diff < 0) first_diff = t;
            }
        char diff[48] = "none";
        if (first_diff >= 0) snprintf(diff, sizeof diff, "frame %d", first_diff);
        test_note("%-4s @ %s: hidden rel error %.3g, head-logit rel error %.3g, "
                  "teacher-forced arg-max %d/%d; greedy run %d/%d codes agree over %d frames, "
                  "first difference: %s",
                  name, gp_kernel_level_name(best), eh, el, agree, steps, same, total, n_frames,
                  diff);
        CHECK_EQ_INT(n_frames, ref_frames);
        if (f == GP_WEIGHTS_F32 || f == GP_WEIGHTS_BF16) {
            /* f32: the reference tolerance of test_model_tf.c; bf16: the bf16 budget */
            double tol = f == GP_WEIGHTS_F32 ? 1e-4 : BF16_MODEL_TOLERANCE;
            CHECK_MSG(eh <= tol && el <= tol, "%s: hidden %.3g / logits %.3g > %g", name, eh, el,
                      tol);
        } else {
            /* Not accuracy claims but regression guards at about twice what
             * this random tiny model measures (int8 ~0.015 hidden / ~0.012
             * logits, 412 of 416 arg-max; q4 ~0.28 / ~0.23, 356 of 416). */
            double tol = f == GP_WEIGHTS_INT8 ? 0.05 : 0.6;
            int min_agree = f == GP_WEIGHTS_INT8 ? steps * 9 / 10 : steps * 3 / 4;
            CHECK_MSG(eh <= tol && el <= tol, "%s: hidden %.3g / logits %.3g > guard %g", name, eh,
                      el, tol);
            CHECK_MSG(agree >= min_agree, "%s: arg-max agreement %d/%d below guard %d", name, agree,
                      steps, min_agree);
        }
        free(codes);
    }
    free(want_hidden);
    free(want_logits);
    free(ref_codes);
    gp_pool_free(pool);
    golden_close(&g);
}

/* ---- the pool's sleep/wake path ---- */

typedef struct wake_ctx {
    int hits[64];
} wake_ctx;

static void wake_task(void *ctx, int task, int worker) {
    (void)worker;
    ((wake_ctx *)ctx)->hits[task]++;
}

/* Dispatch skips the condition variable while workers spin; after a pause
 * long enough for them to fall asleep (~0.4 ms of spinning) every job must
 * still run each task exactly once and return. */
TEST(kernels_pool_wakes_sleeping_workers) {
    gp_pool *pool;
    gp_error err;
    REQUIRE_OK(gp_pool_create(3, &pool, &err), &err);
    static const long pauses_us[] = {0, 50, 300, 1000, 3000};
    for (int round = 0; round < 20; round++) {
        long us = pauses_us[round % 5];
        struct timespec ts = {0, us * 1000};
        if (us) nanosleep(&ts, NULL);
        wake_ctx ctx;
        memset(&ctx, 0, sizeof ctx);
        int n = 2 + round % 40;
        gp_pool_parallel_for(pool, n, wake_task, &ctx);
        for (int i = 0; i < n; i++) CHECK_EQ_INT(ctx.hits[i], 1);
    }
    gp_pool_free(pool);
}

/* GEPARD_KERNELS=avx2 stands for a CPU without AVX-512 (how this project measures the
 * AVX2 machines it does not have): neither oneDNN's bf16 matmul nor the AMX tiles may
 * serve prefill or the codec then, whatever this CPU has. */
TEST(kernels_avx2_cap_leaves_out_the_avx512_paths) {
    setenv("GEPARD_KERNELS", "avx2", 1);
    unsetenv("GEPARD_PREFILL");
    unsetenv("GEPARD_TILES");
    if (gp_kernels_active() != GP_KERNELS_AVX2) {
        test_note("no AVX2 on this CPU: skipped");
        return;
    }
    CHECK(gp_dconv_best_isa() == GP_DCONV_AVX2);
    CHECK(gp_dconv_tiles_mode() == NULL);
    gp_model_load_options o = gp_model_load_default_options();
    gp_model *m = NULL;
    gp_error err;
    REQUIRE_OK(gp_model_load(test_fixture("model-tiny/model"), &o, &m, &err), &err);
    test_note("prefill: %s", m->prefill_why);
    CHECK(!m->prefill_onednn && !m->prefill_tiles);
    CHECK(strstr(m->prefill_why, "GEPARD_KERNELS=avx2") != NULL);
    CHECK(strstr(m->prefill_why, "widened once per block") != NULL);
    gp_model_free(m);
}
