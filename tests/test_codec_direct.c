/* test_codec_direct.c — the decoder on the direct SIMD kernels: against the reference
 * decoder (a same-structure codec at 1/9 width, 3 channels in the last stage), chunked
 * streaming bit-identical to one-shot, several streams per call equal to each alone, and
 * the signal-to-noise ratio of every fast path at the real width and on the tiny fixture. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "codec/codec.h"
#include "codec_paths.h"
#include "compute/conv_direct.h"
#include "test.h"

#define N_PATHS 3
static const gp_codec_kernels paths[N_PATHS] = {GP_CODEC_KERNELS_F32, GP_CODEC_KERNELS_MIXED,
                                                GP_CODEC_KERNELS_BF16};

static gp_codec *load_nano(int base, gp_codec_kernels kernels, int threads, gp_error *err) {
    gp_codec_source *src = codec_paths_source(base, err);
    gp_codec *c = src ? codec_paths_load(src, kernels, NULL, threads, err) : NULL;
    gp_codec_source_free(src);
    return c;
}

static int32_t *random_codes(const gp_codec *codec, size_t T, uint64_t seed) {
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    size_t C = (size_t)codec->fsq.channels;
    int32_t *codes = malloc(T * C * sizeof(int32_t));
    for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < C; c++)
            codes[t * C + c] = (int32_t)(gp_rng_uniform(&rng) * gp_fsq_levels(&codec->fsq, (int)c));
    return codes;
}

TEST(codec_direct_matches_reference) {
    gp_error err;
    const size_t T = 5, spf = 1024;
    gp_codec *ref = load_nano(96, GP_CODEC_KERNELS_REFERENCE, 1, &err);
    REQUIRE_MSG(ref, "%s", err.message);
    int32_t *codes = random_codes(ref, T, 1);
    float *want = malloc(T * spf * 4), *got = malloc(T * spf * 4);
    REQUIRE_OK(gp_codec_decode(ref, codes, T, want, &err), &err);
    for (int p = 0; p < N_PATHS; p++) {
        gp_codec *c = load_nano(96, paths[p], p == 1 ? 2 : 1, &err);
        REQUIRE_MSG(c, "%s", err.message);
        REQUIRE_OK(gp_codec_decode(c, codes, T, got, &err), &err);
        double e = test_rel_error(got, want, T * spf), snr = codec_paths_snr(want, got, T * spf);
        test_note("base 96, %s (ran as %s): relative error %.3g, SNR %.1f dB vs reference",
                  gp_codec_kernels_name(paths[p]), gp_codec_kernels_name(c->dec.kernels), e, snr);
        if (c->dec.kernels == GP_CODEC_KERNELS_F32 || c->dec.kernels == GP_CODEC_KERNELS_BLAS)
            CHECK(e <= 1e-5); /* f32: summation order only */
        else
            CHECK(snr >= 40); /* bf16 weights: a working path, not the budget (see below) */
        gp_codec_free(c);
    }
    free(codes);
    free(want);
    free(got);
    gp_codec_free(ref);
}

/* Pushing frames in chunks of 1, 3, 8 + 1 and all gives the one-shot samples exactly. */
TEST(codec_direct_chunking_is_bit_exact) {
    gp_error err;
    const size_t T = 13, spf = 1024;
    for (int p = 0; p < N_PATHS; p++) {
        gp_codec *c = load_nano(96, paths[p], p == 2 ? 2 : 1, &err);
        REQUIRE_MSG(c, "%s", err.message);
        const size_t C = (size_t)c->fsq.channels;
        int32_t *codes = random_codes(c, T, 7);
        float *whole = malloc(T * spf * 4), *part = malloc(T * spf * 4);
        REQUIRE_OK(gp_codec_decode(c, codes, T, whole, &err), &err);
        gp_codec_code_stream *s;
        REQUIRE_OK(gp_codec_code_stream_create(c, &s, &err), &err);
        const size_t chunks[] = {1, 3, 9};
        for (size_t k = 0; k < 3; k++) {
            gp_codec_code_stream_reset(s);
            for (size_t f = 0; f < T; f += chunks[k]) {
                size_t n = T - f < chunks[k] ? T - f : chunks[k];
                REQUIRE_OK(gp_codec_code_stream_push(s, codes + f * C, n, part + f * spf, &err),
                           &err);
            }
            CHECK_MSG(memcmp(part, whole, T * spf * 4) == 0, "%s chunk %zu: not bit-identical",
                      gp_codec_kernels_name(c->dec.kernels), chunks[k]);
        }
        gp_codec_code_stream_free(s);
        free(codes);
        free(whole);
        free(part);
        gp_codec_free(c);
    }
}

/* N (3 or 4) streams at different points of their utterances, decoded together two frames
 * per call, give each stream's own samples bit for bit. (4 streams on 2 threads take the
 * convolutions' signal groups, 3 their spans of time.) */
static void check_multi_n(gp_codec_kernels kernels, int threads, int N) {
    gp_error err;
    gp_codec *c = load_nano(96, kernels, threads, &err);
    REQUIRE_MSG(c, "%s", err.message);
    const size_t T = 7, spf = 1024, C = (size_t)c->fsq.channels, lead[4] = {0, 3, 5, 1};
    int32_t *codes[4];
    float *alone[4], *multi[4];
    gp_codec_code_stream *s[4];
    for (int i = 0; i < N; i++) {
        codes[i] = random_codes(c, lead[i] + T, 30 + (uint64_t)i);
        alone[i] = malloc((lead[i] + T) * spf * 4);
        multi[i] = malloc((lead[i] + T) * spf * 4);
        REQUIRE_OK(gp_codec_decode(c, codes[i], lead[i] + T, alone[i], &err), &err);
        REQUIRE_OK(gp_codec_code_stream_create(c, &s[i], &err), &err);
        if (lead[i])
            REQUIRE_OK(gp_codec_code_stream_push(s[i], codes[i], lead[i], multi[i], &err), &err);
    }
    for (size_t f = 0; f < T; f += 2) {
        const size_t n = T - f < 2 ? T - f : 2;
        const int32_t *cp[4];
        float *pp[4];
        for (int i = 0; i < N; i++) {
            cp[i] = codes[i] + (lead[i] + f) * C;
            pp[i] = multi[i] + (lead[i] + f) * spf;
        }
        REQUIRE_OK(gp_codec_decode_frames_multi(c, s, cp, N, n, pp, &err), &err);
    }
    for (int i = 0; i < N; i++)
        CHECK_MSG(memcmp(alone[i], multi[i], (lead[i] + T) * spf * 4) == 0,
                  "%s, %d streams: stream %d differs when decoded with others",
                  gp_codec_kernels_name(c->dec.kernels), N, i);
    /* a bad code in one stream: an error naming it, nothing decoded */
    int32_t bad[64];
    memcpy(bad, codes[1], C * sizeof(int32_t));
    bad[2] = 99;
    const int32_t *cp[3] = {codes[0], bad, codes[2]};
    float *pp[3] = {multi[0], multi[1], multi[2]};
    memset(multi[0], 0, spf * 4);
    CHECK_ERR_CONTAINS(gp_codec_decode_frames_multi(c, s, cp, 3, 1, pp, &err), &err, "stream 1");
    CHECK(multi[0][0] == 0.0f && multi[0][spf - 1] == 0.0f);
    for (int i = 0; i < N; i++) {
        gp_codec_code_stream_free(s[i]);
        free(codes[i]);
        free(alone[i]);
        free(multi[i]);
    }
    gp_codec_free(c);
}

static void check_multi(gp_codec_kernels kernels, int threads) {
    check_multi_n(kernels, threads, 3);
    if (threads > 1) check_multi_n(kernels, threads, 4);
}

TEST(codec_direct_multi_stream_equals_single) {
    check_multi(GP_CODEC_KERNELS_F32, 2);
    check_multi(GP_CODEC_KERNELS_MIXED, 1);
    check_multi(GP_CODEC_KERNELS_BF16, 2);
    check_multi(GP_CODEC_KERNELS_REFERENCE, 1);
}

/* The budget: a fast path within 60 dB SNR of the f32 decoder. At the real width (random
 * weights, 864 channels) the default path is f32 (its agreement with the reference is
 * checked above at 1/9 width, through the same code; bench/codec_bench checks it at the
 * real width); MIXED must stay in budget; BF16 is reported. Four frames keep the test
 * short under ASan; the SNR falls for the first ~25 frames as the decoder's memory fills
 * (BF16: ~63 dB here, ~59 dB from 16 frames on — see bench/codec_bench). */
TEST(codec_direct_real_width_snr) {
    gp_error err;
    const size_t T = 4, spf = 1024;
    gp_codec_source *src = codec_paths_source(864, &err);
    REQUIRE_MSG(src, "%s", err.message);
    gp_codec *f32 = codec_paths_load(src, GP_CODEC_KERNELS_F32, NULL, 2, &err);
    REQUIRE_MSG(f32, "%s", err.message);
    int32_t *codes = random_codes(f32, T, 5);
    float *want = malloc(T * spf * 4), *got = malloc(T * spf * 4);
    REQUIRE_OK(gp_codec_decode(f32, codes, T, want, &err), &err);
    double snr;
    for (int p = 1; p < N_PATHS; p++) {
        gp_codec *c = codec_paths_load(src, paths[p], NULL, 2, &err);
        REQUIRE_MSG(c, "%s", err.message);
        if (c->dec.kernels == f32->dec.kernels) {
            gp_codec_free(c);
            continue; /* this CPU cannot run the path */
        }
        REQUIRE_OK(gp_codec_decode(c, codes, T, got, &err), &err);
        snr = codec_paths_snr(want, got, T * spf);
        test_note("real width, %s vs f32 over %zu frames: SNR %.1f dB (budget 60)",
                  gp_codec_kernels_name(c->dec.kernels), T, snr);
        CHECK(snr >= (c->dec.kernels == GP_CODEC_KERNELS_MIXED ? 60 : 50));
        gp_codec_free(c);
    }
    free(codes);
    free(want);
    free(got);
    gp_codec_free(f32);
    gp_codec_source_free(src);
}

/* The same paths on the tiny fixture, whose random weights (gain 1.6) amplify small
 * errors: why bf16 is not the default. Reported, not asserted beyond "it runs". */
TEST(codec_direct_tiny_fixture_snr) {
    gp_error err;
    const size_t T = 20, spf = 1024;
    gp_codec *c[N_PATHS];
    for (int p = 0; p < N_PATHS; p++) {
        gp_codec_options opt;
        gp_codec_options_default(&opt);
        opt.kernels = paths[p];
        REQUIRE_OK(gp_codec_load(test_fixture("codec-tiny/nano-tiny.nemo"), &opt, &c[p], &err),
                   &err);
    }
    int32_t *codes = random_codes(c[0], T, 9);
    float *want = malloc(T * spf * 4), *got = malloc(T * spf * 4);
    REQUIRE_OK(gp_codec_decode(c[0], codes, T, want, &err), &err);
    for (int p = 1; p < N_PATHS; p++) {
        REQUIRE_OK(gp_codec_decode(c[p], codes, T, got, &err), &err);
        double snr = codec_paths_snr(want, got, T * spf);
        test_note("tiny fixture, %s vs f32: SNR %.1f dB", gp_codec_kernels_name(c[p]->dec.kernels),
                  snr);
        CHECK(snr > 10);
    }
    for (int p = 0; p < N_PATHS; p++) gp_codec_free(c[p]);
    free(codes);
    free(want);
    free(got);
}

/* The same decoder on the AVX2 kernels (GEPARD_KERNELS=avx2 caps the instruction set; the
 * test runs in its own process): f32 against the reference, chunking, several streams. */
TEST(codec_direct_avx2_kernels) {
    setenv("GEPARD_KERNELS", "avx2", 1);
    if (gp_dconv_best_isa() != GP_DCONV_AVX2) {
        test_note("no AVX2 on this CPU: skipped");
        return;
    }
    gp_error err;
    const size_t T = 5, spf = 1024;
    gp_codec *ref = load_nano(96, GP_CODEC_KERNELS_REFERENCE, 1, &err);
    REQUIRE_MSG(ref, "%s", err.message);
    int32_t *codes = random_codes(ref, T, 4);
    float *want = malloc(T * spf * 4), *got = malloc(T * spf * 4), *part = malloc(T * spf * 4);
    REQUIRE_OK(gp_codec_decode(ref, codes, T, want, &err), &err);
    /* f32, and bf16, which falls back to MIXED (bf16-stored first-stage weights, f32
     * arithmetic) without AVX512-BF16 */
    const gp_codec_kernels asked[2] = {GP_CODEC_KERNELS_F32, GP_CODEC_KERNELS_BF16},
                           runs[2] = {GP_CODEC_KERNELS_F32, GP_CODEC_KERNELS_MIXED};
    for (int k = 0; k < 2; k++) {
        gp_codec *c = load_nano(96, asked[k], 2, &err);
        REQUIRE_MSG(c, "%s", err.message);
        CHECK(c->dec.kernels == runs[k]);
        REQUIRE_OK(gp_codec_decode(c, codes, T, got, &err), &err);
        const double e = test_rel_error(got, want, T * spf),
                     snr = codec_paths_snr(want, got, T * spf);
        test_note("AVX2 %s decoder vs reference: relative error %.3g, SNR %.1f dB",
                  gp_codec_kernels_name(c->dec.kernels), e, snr);
        if (runs[k] == GP_CODEC_KERNELS_F32)
            CHECK(e <= 1e-5); /* f32: summation order only */
        else
            CHECK(snr >= 60); /* bf16-rounded first-stage weights (69 dB on AVX-512 too) */
        gp_codec_code_stream *s;
        REQUIRE_OK(gp_codec_code_stream_create(c, &s, &err), &err);
        for (size_t f = 0; f < T; f++)
            REQUIRE_OK(gp_codec_code_stream_push(s, codes + f * 32, 1, part + f * spf, &err), &err);
        CHECK(memcmp(part, got, T * spf * 4) == 0);
        gp_codec_code_stream_free(s);
        gp_codec_free(c);
    }
    free(codes);
    free(want);
    free(got);
    free(part);
    gp_codec_free(ref);
    check_multi(GP_CODEC_KERNELS_F32, 2);
    check_multi(GP_CODEC_KERNELS_MIXED, 2);
}
