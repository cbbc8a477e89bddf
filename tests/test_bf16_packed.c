/* test_bf16_packed.c — the 12-bit lossless form of bf16 matrices
 * (compute/bf16_packed.h):
 *
 *  - every chunk reads back as the bf16 values it was built from, bit for
 *    bit, including the chunks kept whole (a weight more than 14 binades
 *    below its chunk's largest, Inf, NaN) and the code for exponent 0 (zeros
 *    of both signs, subnormals), over shapes with padding rows and columns;
 *  - the AVX2 and AVX-512 decode kernels through the packed copy give bitwise the
 *    outputs of the bf16 kernels (1-3 input rows, weight streams on and off,
 *    partial row ranges): the same weights in the same FMAs;
 *  - GEPARD_BF16_PACKED=0 / 1 decide without timing, and the timed choice
 *    says what it measured;
 *  - real size: real2's greedy codes through the packed copies equal the
 *    golden codes (test_real_size.c's check, packing forced).
 * No tolerance anywhere: the form is lossless, so every comparison is
 * bitwise. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "compute/bf16_packed.h"
#include "compute/kernels.h"
#include "compute/matrix.h"
#include "gen_cases.h"
#include "golden.h"
#include "model/generate.h"
#include "model/lora.h"
#include "model/model.h"
#include "test.h"

/* Weights spread about as a layer's are (roughly normal) with, in some
 * rows, the values that test the format's edges. */
static float *crafted_weights(int rows, int cols, gp_rng *rng) {
    float *w = malloc((size_t)rows * cols * sizeof *w);
    if (!w) return NULL;
    for (size_t i = 0; i < (size_t)rows * cols; i++) { /* about normal, sigma 0.02 */
        double u = 0;
        for (int k = 0; k < 4; k++) u += gp_rng_uniform(rng);
        w[i] = (float)(0.02 * 1.7320508 * (u - 2));
    }
    for (int r = 1; r < rows; r += 7) {
        float *row = w + (size_t)r * cols;
        row[r % cols] = 0.0f;
        row[(r + 1) % cols] = -0.0f;
        row[(r + 2) % cols] = 1e-40f;            /* subnormal: exponent 0 */
        row[(r + 3) % cols] = 3.0e-9f;           /* far below its chunk: kept whole */
        if (r % 3 == 0) row[(r + 5) % cols] = 0; /* more zeros */
    }
    return w;
}

static void check_round_trip(const gp_matrix *m, const char *what) {
    const gp_bf16_packed *p = m->packed;
    const size_t tiles = gp_matrix_padded_rows(m) / GP_TILE_ROWS;
    const uint16_t *data = m->data;
    int differ = 0;
    for (size_t t = 0; t < tiles; t++)
        for (size_t k = 0; k < p->chunks; k++) {
            uint16_t got[64];
            gp_bf16_packed_chunk(p, t, k, got);
            const uint16_t *want = data + (t * gp_matrix_padded_cols(m) + k * 16) * GP_TILE_ROWS;
            differ += memcmp(got, want, sizeof got) != 0;
        }
    CHECK_MSG(differ == 0, "%s: %d chunks read back differently", what, differ);
}

TEST(bf16_packed_round_trips_every_chunk) {
    static const int shapes[][2] = {{45, 416}, {37, 1100}, {4, 64}, {64, 1031}, {9, 16}};
    gp_rng rng;
    gp_rng_seed(&rng, 5);
    gp_error err;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int rows = shapes[s][0], cols = shapes[s][1];
        float *w = crafted_weights(rows, cols, &rng);
        REQUIRE(w);
        gp_matrix m;
        REQUIRE_OK(gp_matrix_from_f32(&m, GP_WEIGHTS_BF16, rows, cols, w, &err), &err);
        REQUIRE_OK(gp_bf16_packed_attach(&m, NULL, &err), &err);
        char what[64];
        snprintf(what, sizeof what, "%dx%d", rows, cols);
        check_round_trip(&m, what);
        const size_t chunks = gp_matrix_padded_rows(&m) / GP_TILE_ROWS * m.packed->chunks;
        /* every 7th row from 1 has a weight 20+ binades down: its chunk is kept whole */
        CHECK_MSG(m.packed->n_raw >= (size_t)(rows - 1 + 6) / 7 && m.packed->n_raw < chunks,
                  "%s: %zu of %zu chunks kept whole", what, m.packed->n_raw, chunks);
        test_note("%s: %zu of %zu chunks kept whole, %.3f of the bf16 bytes", what, m.packed->n_raw,
                  chunks,
                  (double)m.packed->bytes /
                      (double)(gp_matrix_padded_rows(&m) * gp_matrix_padded_cols(&m) * 2));
        gp_matrix_free(&m);
        free(w);
    }
    /* Inf and NaN: their chunks are kept whole, and read back */
    float w[8 * 32];
    for (int i = 0; i < 8 * 32; i++) w[i] = 0.01f * (float)(i % 17 - 8);
    w[3] = INFINITY;
    w[60] = -INFINITY; /* row 1, column 28: the second chunk of tile 0 */
    w[200] = NAN;
    gp_matrix m;
    REQUIRE_OK(gp_matrix_from_f32(&m, GP_WEIGHTS_BF16, 8, 32, w, &err), &err);
    REQUIRE_OK(gp_bf16_packed_attach(&m, NULL, &err), &err);
    check_round_trip(&m, "8x32 with Inf and NaN");
    CHECK_EQ_INT((int)m.packed->n_raw, 3);
    gp_matrix_free(&m);
    /* only bf16 matrices have the form */
    REQUIRE_OK(gp_matrix_from_f32(&m, GP_WEIGHTS_INT8, 8, 32, w, &err), &err);
    CHECK(gp_bf16_packed_attach(&m, NULL, &err) == GEPARD_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "int8") != NULL);
    gp_matrix_free(&m);
}

/* y for n input rows through the AVX-512 table's bf16 entry, rows [r0, r1). */
static float *run_rows(const gp_kernel_table *t, const gp_matrix *m, const float *x, int n, int ldx,
                       int ldy, int r0, int r1) {
    float *y = malloc((size_t)n * ldy * sizeof(float));
    for (size_t i = 0; i < (size_t)n * ldy; i++) y[i] = NAN;
    t->matmul_rows[GP_WEIGHTS_BF16](m, x, n, ldx, y, ldy, r0, r1);
    return y;
}

/* Every shape, 1-3 input rows, streams on and off, three row ranges: the
 * outputs through the packed copy against the bf16 data's (*run counts them). */
static void packed_cases(const gp_kernel_table *t, int *run) {
    static const int shapes[][2] = {{45, 416}, {37, 1100}, {531, 256}, {4, 64}, {64, 1031}};
    gp_rng rng;
    gp_rng_seed(&rng, 11);
    gp_error err;
    const bool was = gp_bf16_packed_on();
    int cases = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int rows = shapes[s][0], cols = shapes[s][1], ldx = cols + 3, ldy = rows + 5;
        float *w = crafted_weights(rows, cols, &rng);
        float *x = gp_aligned_alloc((size_t)3 * ldx * sizeof *x);
        REQUIRE(w && x);
        for (int i = 0; i < 3 * ldx; i++) x[i] = (float)(gp_rng_uniform(&rng) * 2 - 1);
        gp_matrix m;
        REQUIRE_OK(gp_matrix_from_f32(&m, GP_WEIGHTS_BF16, rows, cols, w, &err), &err);
        REQUIRE_OK(gp_bf16_packed_attach(&m, NULL, &err), &err);
        const int ranges[3][2] = {{0, rows}, {3, rows - 2}, {5, rows}};
        for (int n = 1; n <= 3; n++)
            for (int streams = 0; streams < 2; streams++)
                for (int q = 0; q < 3; q++) {
                    const int r0 = ranges[q][0], r1 = ranges[q][1];
                    if (r1 <= r0) continue;
                    gp_decode_streams_set(streams);
                    gp_bf16_packed_set(false);
                    float *plain = run_rows(t, &m, x, n, ldx, ldy, r0, r1);
                    gp_bf16_packed_set(true);
                    float *packed = run_rows(t, &m, x, n, ldx, ldy, r0, r1);
                    const int differ = memcmp(plain, packed, (size_t)n * ldy * sizeof(float)) != 0;
                    CHECK_MSG(!differ, "%s %dx%d n=%d streams=%d rows [%d,%d): packed differs",
                              t->name, rows, cols, n, streams, r0, r1);
                    cases++;
                    free(plain);
                    free(packed);
                }
        gp_decode_streams_set(-1);
        gp_matrix_free(&m);
        gp_aligned_free(x);
        free(w);
    }
    gp_bf16_packed_set(was);
    *run += cases;
}

TEST(bf16_packed_kernels_bitwise_bf16) {
    static const gp_kernel_level levels[] = {GP_KERNELS_AVX2, GP_KERNELS_AVX512};
    int cases = 0;
    for (int l = 0; l < 2; l++) {
        const gp_kernel_table *t = gp_kernel_table_for(levels[l]);
        if (t) packed_cases(t, &cases);
    }
    if (!cases) test_skip("no AVX2 or AVX-512 kernels on this CPU (the packed form's only ones)");
    test_note("%d cases bitwise equal", cases);
}

TEST(bf16_packed_choice_follows_the_environment) {
    gp_rng rng;
    gp_rng_seed(&rng, 3);
    gp_error err;
    float *w = crafted_weights(64, 1024, &rng);
    REQUIRE(w);
    gp_matrix a, b;
    REQUIRE_OK(gp_matrix_from_f32(&a, GP_WEIGHTS_BF16, 64, 1024, w, &err), &err);
    REQUIRE_OK(gp_matrix_from_f32(&b, GP_WEIGHTS_BF16, 64, 1024, w, &err), &err);
    gp_matrix *ms[2] = {&a, &b};
    const bool simd = gp_kernels_active() >= GP_KERNELS_AVX2;
    char why[300];
    setenv("GEPARD_BF16_PACKED", "0", 1);
    REQUIRE_OK(gp_bf16_packed_choose(ms, 2, 0, why, sizeof why, &err), &err);
    CHECK(!a.packed && !b.packed && !gp_bf16_packed_on());
    CHECK(strstr(why, "GEPARD_BF16_PACKED=0") != NULL);
    /* the environment decides over the caller's policy; without it, the policy */
    REQUIRE_OK(gp_bf16_packed_choose(ms, 2, 1, why, sizeof why, &err), &err);
    CHECK(!a.packed && strstr(why, "GEPARD_BF16_PACKED=0"));
    unsetenv("GEPARD_BF16_PACKED");
    REQUIRE_OK(gp_bf16_packed_choose(ms, 2, -1, why, sizeof why, &err), &err);
    CHECK(!a.packed && !gp_bf16_packed_on() && strstr(why, "not asked for"));
    REQUIRE_OK(gp_bf16_packed_choose(ms, 2, 1, why, sizeof why, &err), &err);
    CHECK(gp_kernels_active() < GP_KERNELS_AVX2 || (a.packed && strstr(why, "asked for")));
    setenv("GEPARD_BF16_PACKED", "0", 1);
    gp_bf16_packed_detach(&a);
    gp_bf16_packed_detach(&b);
    setenv("GEPARD_BF16_PACKED", "1", 1);
    REQUIRE_OK(gp_bf16_packed_choose(ms, 2, 0, why, sizeof why, &err), &err);
    test_note("GEPARD_BF16_PACKED=1: %s", why);
    CHECK(simd == (a.packed && b.packed && gp_bf16_packed_on()));
    if (simd) CHECK(strstr(why, "lossless") != NULL);
    CHECK(simd ? gp_matrix_decode_bytes(&a) < gp_matrix_bytes(&a)
               : gp_matrix_decode_bytes(&a) == gp_matrix_bytes(&a));
    unsetenv("GEPARD_BF16_PACKED");
    const int timed = gp_bf16_packed_choose(ms, 2, 0, why, sizeof why, &err);
    setenv("GEPARD_BF16_PACKED", "0", 1); /* the suite's default (test_main.c) */
    REQUIRE_OK(timed, &err);
    test_note("timed: %s", why);
    CHECK(!simd || strstr(why, "ms") != NULL);
    CHECK((a.packed != NULL) == gp_bf16_packed_on());
    gp_bf16_packed_set(false);
    gp_matrix_free(&a);
    gp_matrix_free(&b);
    free(w);
}

/* model-tiny in bf16 with its LoRA adapter merged (the merge rebuilds each
 * target matrix: its packed copy is rebuilt with it), lora0's greedy codes
 * with GEPARD_BF16_PACKED=`packed`; *has_packed: whether the merged q_proj
 * has a packed copy. The caller frees the codes. */
static int32_t *tiny_merged_codes(const char *packed, int *frames, bool *has_packed) {
    golden g;
    if (golden_open(&g, "model-tiny")) return NULL;
    const cJSON *lc = golden_case(&g, "lora", "lora0");
    size_t n_ids = 0;
    int32_t *ids =
        lc ? gen_case_layout(&g, cJSON_GetObjectItem(lc, "text")->valuestring, &n_ids) : NULL;
    gp_gen_params p = gen_case_params(cJSON_GetObjectItem(lc, "options"));
    p.temperature = 0.0f; /* greedy */
    setenv("GEPARD_BF16_PACKED", packed, 1);
    gp_model_load_options o = {.weight_format = GP_WEIGHTS_BF16};
    gp_model *m = NULL;
    gp_error err;
    int rc = ids ? gp_model_load(test_fixture("model-tiny/model"), &o, &m, &err) : -1;
    setenv("GEPARD_BF16_PACKED", "0", 1); /* the suite's default (test_main.c) */
    gp_lora_adapter *ad = NULL;
    if (!rc)
        rc = gp_lora_load(test_fixture("model-tiny/lora_adapter.safetensors"), m,
                          cJSON_GetObjectItem(lc, "alpha")->valuedouble, &ad, &err);
    if (!rc) rc = gp_lora_merge(m, ad, &err);
    *has_packed = !rc && m->layers[0].q_proj.packed != NULL;
    gp_kv_pool *kv = NULL;
    gp_gen_stream *s = NULL;
    if (!rc)
        rc = gp_kv_pool_create(m->cfg.backbone.num_layers, m->cfg.backbone.num_kv_heads,
                               m->cfg.backbone.head_dim, 16, 64, &kv, &err);
    if (!rc) rc = gp_gen_create(m, &p, ids, (int)n_ids, NULL, 0, NULL, &s, &err);
    if (!rc) rc = gen_run_streams(&s, 1, kv, 64, &err);
    int32_t *codes = NULL;
    if (!rc) {
        const size_t n = (size_t)s->n_frames * m->cfg.num_channels;
        codes = malloc(n * sizeof *codes);
        if (codes) memcpy(codes, s->frames, n * sizeof *codes);
        *frames = s->n_frames;
    }
    if (s) gp_gen_free(s, kv);
    gp_kv_pool_free(kv);
    gp_lora_free(ad);
    gp_model_free(m);
    free(ids);
    golden_close(&g);
    return codes;
}

TEST(bf16_packed_survives_a_lora_merge) {
    int fa = 0, fb = 0;
    bool pa = false, pb = false;
    int32_t *plain = tiny_merged_codes("0", &fa, &pa);
    int32_t *packed = tiny_merged_codes("1", &fb, &pb);
    REQUIRE(plain && packed);
    CHECK(!pa);
    CHECK(pb == (gp_kernels_active() >= GP_KERNELS_AVX2));
    CHECK_EQ_INT(fa, fb);
    CHECK_MSG(fa == fb &&
                  memcmp(plain, packed,
                         (size_t)fa * 32 * sizeof *plain /* model-tiny: 32 channels */) == 0,
              "the merged model's greedy codes differ with the packed copies");
    test_note("lora0 merged, bf16: %d greedy frames, packed copies %s", fa,
              pb ? "rebuilt and read" : "not available here");
    gp_bf16_packed_set(false);
    free(plain);
    free(packed);
}
