/* test_conv.c — the fast kernels against the reference ones (random layers), and
 * codecs of other shapes built from random weights: other widths, rates, activations,
 * plain (ungrouped) transposed convs, tanh output, the causal encoder and reflect padding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "codec/codec.h"
#include "codec/synthetic.h"
#include "compute/conv.h"
#include "test.h"

static void fill(gp_rng *rng, float *p, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) p[i] = scale * (float)(2 * gp_rng_uniform(rng) - 1);
}

TEST(conv_fast_matches_reference) {
    gp_rng rng;
    gp_rng_seed(&rng, 7);
    gp_pool *pool;
    gp_error err;
    REQUIRE_OK(gp_pool_create(2, &pool, &err), &err);
    const struct {
        int ci, co, k, d, s;
        size_t n;
    } cases[] = {{32, 96, 7, 1, 1, 40},  {48, 48, 11, 5, 1, 300}, {27, 27, 3, 3, 1, 1024},
                 {24, 48, 4, 1, 2, 512}, {64, 128, 16, 1, 8, 64}, {1, 8, 7, 1, 1, 777}};
    double worst = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gp_conv1d conv = {cases[i].ci, cases[i].co, cases[i].k, cases[i].d, cases[i].s, NULL, NULL};
        size_t wn = (size_t)conv.c_out * conv.c_in * conv.kernel;
        conv.weight = gp_aligned_alloc(wn * 4);
        conv.bias = gp_aligned_alloc((size_t)conv.c_out * 4);
        fill(&rng, conv.weight, wn, 1.0f / sqrtf((float)(conv.c_in * conv.kernel)));
        fill(&rng, conv.bias, (size_t)conv.c_out, 0.1f);
        size_t n = cases[i].n,
               xs = (n - 1) * conv.stride + (size_t)(conv.kernel - 1) * conv.dilation + 1;
        float *x = malloc((size_t)conv.c_in * xs * 4), *y1 = malloc((size_t)conv.c_out * n * 4),
              *y2 = malloc((size_t)conv.c_out * n * 4);
        fill(&rng, x, (size_t)conv.c_in * xs, 1.0f);
        gp_conv_scratch scratch = {0};
        REQUIRE_OK(gp_conv_scratch_reserve(&scratch, gp_conv1d_fast_scratch(&conv, 0), &err), &err);
        gp_conv1d_ref(&conv, x, xs, y1, n, n);
        gp_conv1d_fast(&conv, x, xs, y2, n, n, 0, &scratch, i % 2 ? pool : NULL);
        double e = test_rel_error(y2, y1, (size_t)conv.c_out * n);
        if (e > worst) worst = e;
        CHECK_MSG(e <= 1e-5, "case %zu: relative error %.3g", i, e);
        gp_conv_scratch_free(&scratch);
        gp_conv1d_free(&conv);
        free(x);
        free(y1);
        free(y2);
    }
    test_note("fast conv vs reference: worst relative error %.3g (tolerance 1e-5)", worst);
    gp_pool_free(pool);
}

TEST(snake_fast_matches_reference) {
    gp_rng rng;
    gp_rng_seed(&rng, 9);
    const int C = 10;
    const size_t n = 1001;
    float alpha[10];
    fill(&rng, alpha, C, 1.0f);
    alpha[0] = 40.0f; /* large arguments */
    gp_act act;
    gp_error err;
    REQUIRE_OK(gp_act_init(&act, GP_ACT_HALF_SNAKE, 2 * C, alpha, &err), &err);
    float *x = malloc(2 * C * n * 4), *y1 = malloc(2 * C * n * 4), *y2 = malloc(2 * C * n * 4);
    fill(&rng, x, 2 * C * n, 30.0f);
    x[5] = 1e6f; /* beyond the polynomial's range: falls back to sinf */
    gp_act_ref(&act, x, n, y1, n, n);
    gp_act_fast(&act, x, n, y2, n, n);
    double e = 0;
    for (size_t i = 0; i < 2 * C * n; i++) {
        double d = fabs((double)y1[i] - y2[i]) / (1.0 + fabs((double)y1[i]));
        if (d > e) e = d;
    }
    test_note("fast Snake vs reference: max error %.3g (relative to 1+|y|; tolerance 1e-5)", e);
    CHECK(e <= 1e-5);
    float s[9] = {0, 1, -1, 3.14159265f, 100, -1000, 25000, 1e-20f, 0.5f}, o[9];
    gp_sin2_fast(s, o, 9);
    for (int i = 0; i < 9; i++) CHECK(fabs(o[i] - pow(sin((double)s[i]), 2)) < 2e-6);
    gp_act_free(&act);
    free(x);
    free(y1);
    free(y2);
}

/* A small codec of a different shape: snake + tanh, ungrouped up-sampling, 4 stages of
 * rates [4, 2, 4, 2] (256 samples per frame), causal encoder with ELU. */
static const char other_yaml[] =
    "model:\n  sample_rate: 16000\n  samples_per_frame: 64\n"
    "  audio_decoder:\n    _target_: a.CausalHiFiGANDecoder\n    up_sample_rates: [4, 2, 4, 2]\n"
    "    input_dim: 12\n    base_channels: 40\n    activation: snake\n"
    "    output_activation: tanh\n    n_groups_equal_to_out_channels: false\n"
    "    resblock_kernel_sizes: [3, 5]\n    resblock_dilation_sizes: [1, 2]\n"
    "    in_kernel_size: 5\n    out_kernel_size: 7\n"
    "  audio_encoder:\n    _target_: a.CausalHiFiGANEncoder\n    down_sample_rates: [2, 4, 2, 4]\n"
    "    encoded_dim: 12\n    base_channels: 6\n    activation: elu\n"
    "  vector_quantizer:\n    _target_: a.GroupFiniteScalarQuantizer\n    num_groups: 3\n"
    "    num_levels_per_group: [5, 4, 3, 9]\n    eps: 0.01\n";

static gp_codec *load_other(bool reference, const char *yaml, gp_error *err) {
    gp_codec_source *src;
    if (gp_codec_synthetic_source(yaml, 5, &src, err)) return NULL;
    gp_codec_options opt;
    gp_codec_options_default(&opt);
    opt.reference = reference;
    /* the f32 SIMD path, not the default's load-time choice: on a busy machine that
     * measurement may take the bf16-weight path (within 60 dB of f32 on these random
     * weights, not within this file's 1e-5; a CI run while the other core built saw
     * 1.2e-3) */
    if (!reference) opt.kernels = GP_CODEC_KERNELS_F32;
    gp_codec *c = NULL;
    gp_codec_load_source(src, &opt, &c, err);
    gp_codec_source_free(src);
    return c;
}

TEST(codec_other_shapes_stream_and_fast_path) {
    gp_error err;
    gp_codec *ref = load_other(true, other_yaml, &err), *fast = load_other(false, other_yaml, &err);
    REQUIRE_MSG(ref && fast, "%s", err.message);
    CHECK_EQ_INT(ref->fsq.channels, 12);
    const size_t T = 11, spf = 64, C = 12;
    int32_t codes[11 * 12];
    for (size_t i = 0; i < T * C; i++)
        codes[i] = (int32_t)((i * 5 + 1) % (size_t)gp_fsq_levels(&ref->fsq, (int)(i % C)));
    float a[11 * 64], b[11 * 64], s[11 * 64];
    REQUIRE_OK(gp_codec_decode(ref, codes, T, a, &err), &err);
    REQUIRE_OK(gp_codec_decode(fast, codes, T, b, &err), &err);
    double e = test_rel_error(b, a, T * spf);
    test_note("other-shape decoder: fast vs reference relative error %.3g (tolerance 1e-5)", e);
    CHECK(e <= 1e-5);
    gp_codec_code_stream *st;
    REQUIRE_OK(gp_codec_code_stream_create(fast, &st, &err), &err);
    for (size_t f = 0; f < T; f += 2) {
        size_t n = T - f < 2 ? T - f : 2;
        REQUIRE_OK(gp_codec_code_stream_push(st, codes + f * C, n, s + f * spf, &err), &err);
    }
    CHECK(memcmp(s, b, sizeof s) == 0);
    gp_codec_code_stream_free(st);
    /* encoder: causal, both paths, quantised codes in range */
    float audio[700];
    for (int i = 0; i < 700; i++) audio[i] = 0.5f * sinf(0.05f * i);
    int32_t *k1, *k2;
    float *l1, *l2;
    size_t t1, t2;
    REQUIRE_OK(gp_codec_encode(ref, audio, 700, &k1, &t1, &l1, &err), &err);
    REQUIRE_OK(gp_codec_encode(fast, audio, 700, &k2, &t2, &l2, &err), &err);
    CHECK(t1 == 11 && t2 == 11);
    CHECK(test_rel_error(l2, l1, t1 * C) <= 1e-5);
    REQUIRE_OK(gp_fsq_check_codes(&ref->fsq, k1, t1, &err), &err);
    free(k1);
    free(k2);
    free(l1);
    free(l2);
    gp_codec_free(ref);
    gp_codec_free(fast);
}

TEST(codec_reflect_padding_encoder) {
    char yaml[2048];
    snprintf(yaml, sizeof yaml, "%s", other_yaml);
    char *t = strstr(yaml, "a.CausalHiFiGANEncoder");
    memmove(t + 2, t + 8, strlen(t + 8) + 1); /* "a.HiFiGANEncoder": non-causal, reflect */
    gp_error err;
    gp_codec *c = load_other(false, yaml, &err);
    REQUIRE_MSG(c, "%s", err.message);
    CHECK(c->cfg.enc.pad_mode == GP_PAD_REFLECT && !c->cfg.enc.causal);
    float audio[64 * 12];
    for (int i = 0; i < 64 * 12; i++) audio[i] = 0.3f * sinf(0.1f * i);
    int32_t *k;
    size_t T;
    REQUIRE_OK(gp_codec_encode(c, audio, 64 * 12, &k, &T, NULL, &err), &err);
    CHECK_EQ_INT(T, 12);
    free(k);
    /* one frame is too short for reflect padding deep in the encoder: an error, no crash */
    CHECK_ERR_CONTAINS(gp_codec_encode(c, audio, 10, &k, &T, NULL, &err), &err, "too short");
    gp_codec_free(c);
}
