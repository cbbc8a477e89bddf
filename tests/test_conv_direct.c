/* test_conv_direct.c — the direct convolution kernels (compute/conv_direct.h) against the
 * reference convolution on awkward shapes, for every instruction set the CPU has (AVX2 and
 * AVX-512), every weight type (f32, bf16, bf16-stored) and both layouts; the fused
 * epilogues against scalar arithmetic; and the vectorised sin^2. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/dtype.h"
#include "base/rng.h"
#include "compute/conv.h"
#include "compute/conv_direct.h"
#include "test.h"

static void fill(gp_rng *rng, float *p, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) p[i] = scale * (float)(2 * gp_rng_uniform(rng) - 1);
}

static float round_bf16(float x) { return gp_bf16_to_f32(gp_f32_to_bf16(x)); }

static void make_conv(gp_rng *rng, gp_conv1d *conv, int ci, int co, int k, int d) {
    *conv = (gp_conv1d){ci, co, k, d, 1, NULL, NULL};
    size_t wn = (size_t)co * (size_t)ci * (size_t)k;
    conv->weight = gp_aligned_alloc(wn * sizeof(float));
    conv->bias = gp_aligned_alloc((size_t)co * sizeof(float));
    fill(rng, conv->weight, wn, 1.0f / sqrtf((float)(ci * k)));
    fill(rng, conv->bias, (size_t)co, 0.1f);
}

/* Input rows as the kernels of `type` read them: f32 [ci][xs], or bf16 pairs. */
static void *make_input(const float *x, int ci, size_t xs, gp_dconv_type type) {
    if (type != GP_DCONV_BF16) {
        float *p = gp_aligned_alloc((size_t)ci * xs * sizeof(float));
        memcpy(p, x, (size_t)ci * xs * sizeof(float));
        return p;
    }
    const int pairs = (ci + 1) / 2;
    uint32_t *p = gp_aligned_alloc((size_t)pairs * xs * sizeof(uint32_t));
    for (int r = 0; r < pairs; r++)
        for (size_t i = 0; i < xs; i++)
            p[(size_t)r * xs + i] =
                gp_bf16_pair(x[(size_t)(2 * r) * xs + i],
                             2 * r + 1 < ci ? x[(size_t)(2 * r + 1) * xs + i] : 0.0f);
    return p;
}

typedef struct shape {
    int ci, co, k, d;
    size_t n;
} shape;

/* One shape, isa, type and layout on two signals at once: the result must equal the
 * reference convolution of what the kernel multiplies (inputs and weights rounded to bf16
 * where the type rounds them), to f32 accumulation error. Returns the relative error. */
static double check_shape(gp_rng *rng, const shape *sh, gp_dconv_isa isa, gp_dconv_type type,
                          bool chan, gp_pool *pool) {
    gp_conv1d conv, rounded;
    make_conv(rng, &conv, sh->ci, sh->co, sh->k, sh->d);
    make_conv(rng, &rounded, sh->ci, sh->co, sh->k, sh->d);
    const size_t wn = (size_t)sh->co * (size_t)sh->ci * (size_t)sh->k;
    for (size_t i = 0; i < wn; i++)
        rounded.weight[i] = type == GP_DCONV_F32 ? conv.weight[i] : round_bf16(conv.weight[i]);
    memcpy(rounded.bias, conv.bias, (size_t)sh->co * sizeof(float));
    gp_dconv dc;
    gp_error err;
    if (gp_dconv_pack(&dc, &conv, type, isa, chan, &err)) {
        test_fail(__FILE__, __LINE__, "pack: %s", err.message);
        return 1;
    }
    const size_t xs = sh->n + (size_t)(sh->k - 1) * (size_t)sh->d + 3; /* slack columns */
    const size_t ysz = (size_t)sh->co * sh->n;
    double worst = 0;
    gp_dconv_signal sig[2];
    float *x[2], *y[2], *want = malloc(ysz * sizeof(float));
    void *xin[2];
    for (int s = 0; s < 2; s++) {
        x[s] = malloc((size_t)sh->ci * xs * sizeof(float));
        fill(rng, x[s], (size_t)sh->ci * xs, 1.0f);
        if (type == GP_DCONV_BF16)
            for (size_t i = 0; i < (size_t)sh->ci * xs; i++) x[s][i] = round_bf16(x[s][i]);
        xin[s] = make_input(x[s], sh->ci, xs, type);
        y[s] = malloc(ysz * sizeof(float));
        memset(&sig[s], 0, sizeof sig[s]);
        sig[s].x = xin[s];
        sig[s].xs = xs;
        sig[s].out.store = y[s];
        sig[s].out.ld = sh->n;
    }
    gp_dconv_run(&dc, sig, 2, sh->n, pool);
    for (int s = 0; s < 2; s++) {
        gp_conv1d_ref(&rounded, x[s], xs, want, sh->n, sh->n);
        double e = test_rel_error(y[s], want, ysz);
        if (!(e <= worst)) worst = e;
        free(x[s]);
        gp_aligned_free(xin[s]);
        free(y[s]);
    }
    free(want);
    gp_dconv_free(&dc);
    gp_conv1d_free(&conv);
    gp_conv1d_free(&rounded);
    return worst;
}

TEST(conv_direct_kernels_match_reference) {
    const shape shapes[] = {{5, 7, 3, 2, 37},     {27, 27, 3, 5, 100}, {32, 48, 7, 1, 8},
                            {64, 100, 11, 5, 70}, {13, 6, 1, 1, 17},   {3, 1, 3, 1, 50},
                            {54, 54, 11, 3, 1},   {33, 40, 5, 1, 129}};
    const gp_dconv_type types[] = {GP_DCONV_F32, GP_DCONV_BF16, GP_DCONV_W16};
    const char *type_names[] = {"f32", "bf16", "w16"};
    gp_rng rng;
    gp_rng_seed(&rng, 11);
    gp_pool *pool;
    gp_error err;
    REQUIRE_OK(gp_pool_create(2, &pool, &err), &err);
    const gp_dconv_isa best = gp_dconv_best_isa();
    if (best == GP_DCONV_NONE) test_note("no AVX2/AVX-512: nothing to test");
    for (int isa = GP_DCONV_AVX2; isa <= (int)best; isa++) {
        for (int t = 0; t < 3; t++) {
            if (types[t] == GP_DCONV_BF16 && !gp_dconv_isa_has_bf16((gp_dconv_isa)isa)) continue;
            for (int chan = 0; chan < 2; chan++) {
                if (types[t] == GP_DCONV_W16 && !chan) continue; /* channel layout only */
                double worst = 0;
                for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
                    double e = check_shape(&rng, &shapes[i], (gp_dconv_isa)isa, types[t], chan != 0,
                                           i % 2 ? pool : NULL);
                    CHECK_MSG(e <= 1e-5, "%s %s %s shape %zu: relative error %.3g",
                              gp_dconv_isa_name((gp_dconv_isa)isa), type_names[t],
                              chan ? "chan" : "time", i, e);
                    if (e > worst) worst = e;
                }
                test_note("%s %s %s layout: worst relative error %.3g (tolerance 1e-5)",
                          gp_dconv_isa_name((gp_dconv_isa)isa), type_names[t],
                          chan ? "channel" : "time", worst);
            }
        }
    }
    gp_pool_free(pool);
}

/* What the epilogue should produce for act(v) in channel c (scalar, with sinf). */
static float act_expect(const gp_act *act, int c, float v) {
    float y;
    gp_act_ref(&(gp_act){.kind = act->kind,
                         .channels = 1,
                         .n_snake = c < act->n_snake,
                         .alpha = c < act->n_snake ? &act->alpha[c] : NULL,
                         .inv_alpha = c < act->n_snake ? &act->inv_alpha[c] : NULL,
                         .slope = act->slope},
               &v, 1, &y, 1, 1);
    return y;
}

#define SENTINEL 12345.0f

/* Residual add, store, branch accumulator and activation into a bf16 or f32 buffer with
 * left context and slack: values against scalar arithmetic, and nothing written outside. */
static void check_epilogue(gp_dconv_isa isa, gp_dconv_type type, gp_dconv_acc mode,
                           gp_dconv_act_src src) {
    gp_rng rng;
    gp_rng_seed(&rng, 21 + (uint64_t)mode * 3 + (uint64_t)src);
    const int C = 11, k = 3, d = 2, P = 4; /* P: the next conv's left context */
    const size_t n = 45, xs = n + (size_t)(k - 1) * d, ald = (size_t)P + n + 5;
    const bool bf16_dst = type == GP_DCONV_BF16;
    gp_conv1d conv;
    make_conv(&rng, &conv, C, C, k, d);
    float alpha[C];
    fill(&rng, alpha, C, 2.0f);
    gp_act act;
    gp_error err;
    REQUIRE_OK(gp_act_init(&act, GP_ACT_HALF_SNAKE, C, alpha, &err), &err);
    gp_dconv dc;
    REQUIRE_OK(gp_dconv_pack(&dc, &conv,
                             type == GP_DCONV_BF16 || type == GP_DCONV_TILES ? type : GP_DCONV_F32,
                             isa, false, &err),
               &err);
    float *x = malloc((size_t)C * xs * 4), *v = malloc((size_t)C * n * 4);
    fill(&rng, x, (size_t)C * xs, 1.0f);
    if (type == GP_DCONV_BF16)
        for (size_t i = 0; i < (size_t)C * xs; i++) x[i] = round_bf16(x[i]);
    void *xin = make_input(x, C, xs, type);
    float *base = malloc((size_t)C * n * 4), *store = malloc((size_t)C * n * 4);
    float *acc = malloc((size_t)C * n * 4), *acc0 = malloc((size_t)C * n * 4);
    float *from = malloc((size_t)C * n * 4);
    fill(&rng, base, (size_t)C * n, 1.0f);
    fill(&rng, acc0, (size_t)C * n, 1.0f);
    fill(&rng, from, (size_t)C * n, 3.0f);
    memcpy(acc, acc0, (size_t)C * n * 4);
    const int rows = bf16_dst ? (C + 1) / 2 : C;
    float *dst = malloc((size_t)rows * ald * 4);
    for (size_t i = 0; i < (size_t)rows * ald; i++) dst[i] = SENTINEL;
    gp_dconv_signal sig = {.x = xin, .xs = xs};
    sig.out = (gp_dconv_out){.base = base,
                             .store = store,
                             .acc = mode == GP_DCONV_ACC_NONE ? NULL : acc,
                             .acc_mode = mode,
                             .acc_div = 3.0f,
                             .ld = n,
                             .act = &act,
                             .act_src = src,
                             .act_from = from,
                             .act_dst = dst + P,
                             .act_ld = ald,
                             .act_bf16 = bf16_dst};
    gp_dconv_run(&dc, &sig, 1, n, NULL);
    gp_conv1d rounded = conv;
    if (type == GP_DCONV_BF16 || type == GP_DCONV_TILES) { /* the weights multiplied */
        rounded.weight = malloc((size_t)C * C * k * 4);
        for (size_t i = 0; i < (size_t)C * C * k; i++)
            rounded.weight[i] = round_bf16(conv.weight[i]);
    }
    gp_conv1d_ref(&rounded, x, xs, v, n, n);
    double e_val = 0, e_act = 0;
    bool outside_ok = true;
    for (int c = 0; c < C; c++) {
        for (size_t i = 0; i < n; i++) {
            const size_t j = (size_t)c * n + i;
            const float want = v[j] + base[j];
            float a = want;
            e_val = fmax(e_val, fabs(store[j] - want));
            if (mode != GP_DCONV_ACC_NONE) {
                float s = mode == GP_DCONV_ACC_SET ? want : acc0[j] + want;
                if (mode == GP_DCONV_ACC_ADD_DIV) s /= 3.0f;
                e_val = fmax(e_val, fabs(acc[j] - s));
                if (src == GP_DCONV_ACT_OF_ACC) a = s;
            }
            if (src == GP_DCONV_ACT_OF_FROM) a = from[j];
            const float wa = act_expect(&act, c, a);
            float got;
            if (bf16_dst) {
                uint32_t word;
                memcpy(&word, &dst[(size_t)(c / 2) * ald + P + i], 4);
                got = gp_bf16_to_f32((uint16_t)(c % 2 ? word >> 16 : word & 0xffff));
                e_act = fmax(e_act, fabs(got - wa) / (fabs(wa) + 1e-3)); /* bf16 rounding */
            } else {
                got = dst[(size_t)c * ald + P + i];
                e_act = fmax(e_act, fabs(got - wa) / (1.0 + fabs(wa)));
            }
        }
    }
    for (int r = 0; r < rows; r++) {
        for (size_t i = 0; i < ald; i++) {
            if (i >= (size_t)P && i < P + n) continue;
            outside_ok &= dst[(size_t)r * ald + i] == SENTINEL;
        }
        if (bf16_dst && C % 2) { /* the padding channel of the last pair is zero */
            uint32_t word;
            memcpy(&word, &dst[(size_t)(rows - 1) * ald + P], 4);
            outside_ok &= (word >> 16) == 0;
        }
    }
    /* the tiles' inputs are two bf16 terms (~16 bits): ~1e-5 of values of order 1 */
    const double val_tol = type == GP_DCONV_TILES ? 1e-4 : 2e-5;
    CHECK_MSG(e_val <= val_tol, "%s type %d mode %d src %d: value error %.3g",
              gp_dconv_isa_name(isa), (int)type, (int)mode, (int)src, e_val);
    /* (the tiles' activations inherit their values' error) */
    const double act_tol = bf16_dst ? 8e-3 : type == GP_DCONV_TILES ? 2e-5 : 2e-6;
    CHECK_MSG(e_act <= act_tol, "%s mode %d src %d: activation error %.3g", gp_dconv_isa_name(isa),
              (int)mode, (int)src, e_act);
    CHECK_MSG(outside_ok, "%s: the epilogue wrote outside its output", gp_dconv_isa_name(isa));
    if (rounded.weight != conv.weight) free(rounded.weight);
    gp_dconv_free(&dc);
    gp_conv1d_free(&conv);
    gp_act_free(&act);
    free(x);
    free(v);
    gp_aligned_free(xin);
    free(base);
    free(store);
    free(acc);
    free(acc0);
    free(from);
    free(dst);
}

TEST(conv_direct_epilogues) {
    const gp_dconv_isa best = gp_dconv_best_isa();
    int runs = 0;
    for (int isa = GP_DCONV_AVX2; isa <= (int)best; isa++) {
        for (int t = 0; t < 2; t++) {
            gp_dconv_type type = t ? GP_DCONV_BF16 : GP_DCONV_F32;
            if (t && !gp_dconv_isa_has_bf16((gp_dconv_isa)isa)) continue;
            for (int mode = GP_DCONV_ACC_NONE; mode <= GP_DCONV_ACC_ADD_DIV; mode++) {
                for (int src = GP_DCONV_ACT_OF_V; src <= GP_DCONV_ACT_OF_FROM; src++) {
                    if (src == GP_DCONV_ACT_OF_ACC && mode == GP_DCONV_ACC_NONE) continue;
                    check_epilogue((gp_dconv_isa)isa, type, (gp_dconv_acc)mode,
                                   (gp_dconv_act_src)src);
                    runs++;
                }
            }
        }
    }
    test_note("%d epilogue combinations checked (values 2e-5, activations 2e-6 f32 / 8e-3 "
              "relative bf16)",
              runs);
}

TEST(conv_direct_act_rows) {
    gp_rng rng;
    gp_rng_seed(&rng, 5);
    const int C = 9;
    const size_t n = 70;
    float alpha[C];
    fill(&rng, alpha, C, 1.5f);
    gp_act act;
    gp_error err;
    REQUIRE_OK(gp_act_init(&act, GP_ACT_HALF_SNAKE, C, alpha, &err), &err);
    float *x = malloc(C * n * 4), *y = malloc(C * n * 4), *want = malloc(C * n * 4);
    uint32_t *pairs = malloc((C + 1) / 2 * n * 4);
    fill(&rng, x, C * n, 5.0f);
    gp_act_ref(&act, x, n, want, n, n);
    gp_dconv_act_rows(&act, x, n, y, n, false, 0, C, n);
    CHECK(test_rel_error(y, want, C * n) <= 1e-6);
    if (gp_dconv_isa_has_bf16(gp_dconv_best_isa()) || gp_dconv_best_isa() == GP_DCONV_NONE) {
        gp_dconv_act_rows(&act, x, n, pairs, n, true, 0, C, n);
        int bad = 0;
        for (int c = 0; c < C; c++)
            for (size_t i = 0; i < n; i++) {
                uint32_t w = pairs[(size_t)(c / 2) * n + i];
                float got = gp_bf16_to_f32((uint16_t)(c % 2 ? w >> 16 : w & 0xffff));
                float exp = want[(size_t)c * n + i];
                bad += fabsf(got - exp) > fabsf(exp) * (1.0f / 128) + 1e-6f;
            }
        CHECK_EQ_INT(bad, 0);
        for (size_t i = 0; i < n; i++) CHECK(pairs[(size_t)(C / 2) * n + i] >> 16 == 0);
    }
    gp_act_free(&act);
    free(x);
    free(y);
    free(want);
    free(pairs);
}

/* Max |sin2(x) - sin(x)^2| over a sweep; the far values fall back to sinf. */
static double sin2_error(void (*fn)(const float *, float *, size_t)) {
    const size_t n = 200003;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    for (size_t i = 0; i < n; i++) x[i] = -20000.0f + 40000.0f * (float)i / (float)(n - 1);
    x[7] = 1e9f;
    x[8] = -3e7f;
    x[9] = 0.0f;
    x[10] = -0.0f;
    x[11] = 1e-30f;
    fn(x, y, n);
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        double s = sin((double)x[i]);
        e = fmax(e, fabs((double)y[i] - s * s));
    }
    float nan_in = NAN, nan_out = 0;
    fn(&nan_in, &nan_out, 1);
    if (!isnan(nan_out)) e = 1;
    free(x);
    free(y);
    return e;
}

TEST(conv_direct_sin2_accuracy) {
    double e = sin2_error(gp_dconv_sin2);
    test_note("vectorised sin^2 (%s): max abs error %.3g over [-2e4, 2e4] (tolerance 4e-7)",
              gp_dconv_isa_name(gp_dconv_best_isa()), e);
    CHECK(e <= 4e-7);
    if (gp_dconv_best_isa() >= GP_DCONV_AVX2) {
        double e2 = sin2_error(gp_dconv_sin2_avx2);
        test_note("AVX2 sin^2: max abs error %.3g (tolerance 4e-7)", e2);
        CHECK(e2 <= 4e-7);
    }
}

TEST(conv_direct_pack_errors) {
    gp_rng rng;
    gp_rng_seed(&rng, 1);
    gp_conv1d conv;
    make_conv(&rng, &conv, 4, 4, 3, 1);
    gp_dconv dc;
    gp_error err;
    for (int isa = GP_DCONV_AVX2; isa <= (int)gp_dconv_best_isa(); isa++)
        CHECK_ERR_CONTAINS(gp_dconv_pack(&dc, &conv, GP_DCONV_W16, (gp_dconv_isa)isa, false, &err),
                           &err, "channel layout");
    conv.stride = 2;
    CHECK(gp_dconv_pack(&dc, &conv, GP_DCONV_F32, GP_DCONV_AVX2, false, &err) != 0);
    CHECK(gp_dconv_pack(&dc, &conv, GP_DCONV_F32, GP_DCONV_NONE, false, &err) != 0);
    conv.stride = 1;
    gp_conv1d_free(&conv);
}

/* The up-sampling transposed convolution against the reference loop, on channel ranges. */
TEST(conv_direct_convt_matches_reference) {
    gp_rng rng;
    gp_rng_seed(&rng, 17);
    const int strides[] = {2, 4, 8, 16, 3};
    const size_t lengths[] = {1, 5, 8, 33};
    double worst = 0, worst_avx2 = 0;
    for (int si = 0; si < 5; si++) {
        const int s = strides[si], co = 7, ci = 2 * co, k = 2 * s;
        gp_convt1d conv = {ci, co, k, s, co, NULL, NULL};
        conv.weight = gp_aligned_alloc((size_t)ci * k * 4);
        conv.bias = gp_aligned_alloc((size_t)co * 4);
        fill(&rng, conv.weight, (size_t)ci * k, 0.5f);
        fill(&rng, conv.bias, (size_t)co, 0.1f);
        for (int li = 0; li < 4; li++) {
            const size_t n = lengths[li], xs = n + 1, ys = n * (size_t)s;
            float *x = malloc((size_t)ci * xs * 4), *y1 = malloc((size_t)co * ys * 4),
                  *y2 = malloc((size_t)co * ys * 4);
            fill(&rng, x, (size_t)ci * xs, 1.0f);
            gp_convt1d_ref(&conv, x, xs, n, y1, ys);
            gp_dconv_convt_rows(&conv, x, xs, n, y2, ys, 0, 3);
            gp_dconv_convt_rows(&conv, x, xs, n, y2, ys, 3, co);
            double e = test_rel_error(y2, y1, (size_t)co * ys);
            CHECK_MSG(e <= 1e-6, "stride %d, %zu inputs: relative error %.3g", s, n, e);
            if (e > worst) worst = e;
            /* the AVX2 kernel (strides dividing 8) on its own: the reference's values, and
             * the AVX-512 kernel's bit for bit (the same FMAs in the same order) */
            if (gp_dconv_best_isa() >= GP_DCONV_AVX2 && 8 % s == 0) {
                float *y3 = malloc((size_t)co * ys * 4);
                gp_dconv_convt_rows_avx2(&conv, x, xs, n, y3, ys, 0, co);
                e = test_rel_error(y3, y1, (size_t)co * ys);
                CHECK_MSG(e <= 1e-6, "AVX2, stride %d, %zu inputs: relative error %.3g", s, n, e);
                if (e > worst_avx2) worst_avx2 = e;
                if (gp_dconv_best_isa() == GP_DCONV_AVX512)
                    CHECK_MSG(memcmp(y3, y2, (size_t)co * ys * 4) == 0,
                              "AVX2 and AVX-512, stride %d, %zu inputs: values differ", s, n);
                free(y3);
            }
            free(x);
            free(y1);
            free(y2);
        }
        gp_convt1d_free(&conv);
    }
    test_note("grouped transposed conv vs reference: worst relative error %.3g, AVX2 kernel "
              "%.3g (tolerance 1e-6)",
              worst, worst_avx2);
}

/* ---- AMX tiles (GP_DCONV_TILES) ---- */

/* The tile modes to test here: the emulation everywhere, the unit where the CPU has it.
 * Returns how many; names[] gets the GEPARD_TILES values. */
static int tile_modes(const char *names[2]) {
    int n = 0;
    names[n++] = "emulate";
    unsetenv("GEPARD_TILES");
    if (gp_dconv_tiles_mode())
        names[n++] = "amx";
    else
        test_note("no AMX tile unit here: the tile path runs emulated only");
    return n;
}

static void tile_mode_set(const char *name) {
    if (!strcmp(name, "amx"))
        unsetenv("GEPARD_TILES");
    else
        setenv("GEPARD_TILES", name, 1);
}

TEST(conv_tiles_match_reference) {
    /* partial blocks of channels and samples, an odd number of channel blocks, taps with
     * dilation, several 128-sample chunks, and the codec's first-stage shape */
    const shape shapes[] = {{5, 7, 3, 2, 37},     {27, 27, 3, 5, 300},  {32, 48, 7, 1, 8},
                            {54, 54, 11, 3, 1},   {108, 40, 7, 5, 129}, {13, 6, 1, 1, 17},
                            {200, 216, 3, 1, 64}, {432, 432, 3, 1, 8}};
    const char *modes[2];
    const int n_modes = tile_modes(modes);
    gp_rng rng;
    gp_rng_seed(&rng, 31);
    gp_pool *pool;
    gp_error err;
    REQUIRE_OK(gp_pool_create(2, &pool, &err), &err);
    for (int m = 0; m < n_modes; m++) {
        tile_mode_set(modes[m]);
        double worst = 0;
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            const double e = check_shape(&rng, &shapes[i], GP_DCONV_AVX512, GP_DCONV_TILES, false,
                                         i % 2 ? pool : NULL);
            CHECK_MSG(e <= 3e-5, "tiles (%s) shape %zu: relative error %.3g", modes[m], i, e);
            if (!(e <= worst)) worst = e;
        }
        test_note("tiles (%s) vs the reference with bf16 weights: worst relative error %.3g "
                  "(tolerance 3e-5: the inputs' two bf16 terms)",
                  modes[m], worst);
    }
    unsetenv("GEPARD_TILES");
    gp_pool_free(pool);
}

TEST(conv_tiles_epilogues) {
    const char *modes[2];
    const int n_modes = tile_modes(modes);
    int runs = 0;
    for (int m = 0; m < n_modes; m++) {
        tile_mode_set(modes[m]);
        for (int mode = GP_DCONV_ACC_NONE; mode <= GP_DCONV_ACC_ADD_DIV; mode++)
            for (int src = GP_DCONV_ACT_OF_V; src <= GP_DCONV_ACT_OF_FROM; src++) {
                if (src == GP_DCONV_ACT_OF_ACC && mode == GP_DCONV_ACC_NONE) continue;
                check_epilogue(GP_DCONV_AVX512, GP_DCONV_TILES, (gp_dconv_acc)mode,
                               (gp_dconv_act_src)src);
                runs++;
            }
    }
    unsetenv("GEPARD_TILES");
    test_note("%d tile epilogue combinations checked (values 1e-4, activations 2e-5)", runs);
}

/* A signal cut into calls of any length, and on 1 or 2 threads, gives the same bits as
 * one call: each sample is summed in one order (what streaming decoding relies on). */
TEST(conv_tiles_chunking_is_bit_identical) {
    const char *modes[2];
    const int n_modes = tile_modes(modes);
    const int ci = 54, co = 54, k = 7, d = 3;
    const size_t n = 301, hist = (size_t)(k - 1) * d, xs = n + hist;
    gp_rng rng;
    gp_rng_seed(&rng, 41);
    gp_conv1d conv;
    make_conv(&rng, &conv, ci, co, k, d);
    float *x = malloc((size_t)ci * xs * 4), *one = malloc((size_t)co * n * 4),
          *cut = malloc((size_t)co * n * 4), *par = malloc((size_t)co * n * 4);
    REQUIRE(x && one && cut && par);
    fill(&rng, x, (size_t)ci * xs, 1.0f);
    gp_pool *pool;
    gp_error err;
    REQUIRE_OK(gp_pool_create(2, &pool, &err), &err);
    const size_t pieces[] = {1, 16, 37, 128, 119};
    float *first = malloc((size_t)co * n * 4);
    REQUIRE(first);
    for (int m = 0; m < n_modes; m++) {
        tile_mode_set(modes[m]);
        gp_dconv dc;
        REQUIRE_OK(gp_dconv_pack(&dc, &conv, GP_DCONV_TILES, GP_DCONV_AVX512, false, &err), &err);
        gp_dconv_signal sig = {.x = x, .xs = xs, .out = {.store = one, .ld = n}};
        gp_dconv_run(&dc, &sig, 1, n, NULL);
        sig.out.store = par;
        gp_dconv_run(&dc, &sig, 1, n, pool);
        /* pieces: the output columns [c0, c0 + len) read input columns from c0 */
        float *piece = malloc((size_t)co * 128 * 4);
        size_t c0 = 0;
        for (size_t p = 0; c0 < n; p++) {
            size_t len = pieces[p % 5];
            if (len > n - c0) len = n - c0;
            gp_dconv_signal ps = {.x = x + c0, .xs = xs, .out = {.store = piece, .ld = len}};
            gp_dconv_run(&dc, &ps, 1, len, p % 2 ? pool : NULL);
            for (int c = 0; c < co; c++)
                memcpy(cut + (size_t)c * n + c0, piece + (size_t)c * len, len * 4);
            c0 += len;
        }
        free(piece);
        CHECK_MSG(!memcmp(one, cut, (size_t)co * n * 4),
                  "tiles (%s): calls of 1-128 samples "
                  "differ from one call",
                  modes[m]);
        CHECK_MSG(!memcmp(one, par, (size_t)co * n * 4), "tiles (%s): 2 threads differ from 1",
                  modes[m]);
        gp_dconv_free(&dc);
        if (m == 0) {
            memcpy(first, one, (size_t)co * n * 4);
        } else { /* the unit against the emulation of its products */
            double diff = 0;
            for (size_t i = 0; i < (size_t)co * n; i++)
                diff = fmax(diff, fabs((double)first[i] - one[i]));
            test_note("AMX unit vs emulated tiles: max difference %.3g (tolerance 1e-5)", diff);
            CHECK_MSG(diff <= 1e-5, "AMX unit vs emulation: max difference %.3g", diff);
        }
    }
    free(first);
    unsetenv("GEPARD_TILES");
    test_note("tiles: one call = calls of 1, 16, 37, 128 and 119 samples = 2 threads, bit for "
              "bit (%s)",
              n_modes > 1 ? "emulated and AMX" : "emulated");
    gp_pool_free(pool);
    gp_conv1d_free(&conv);
    free(x);
    free(one);
    free(cut);
    free(par);
}
