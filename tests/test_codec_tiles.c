/* test_codec_tiles.c — the codec's residual convolutions on AMX tiles (GP_DCONV_TILES,
 * stage mix letter 't'): streaming equals one-shot decoding bit for bit, 1 and 2 threads
 * give the same samples, and the samples stay within budget of the f32 decoder. On every
 * CPU through the emulated tiles (GEPARD_TILES=emulate) on a narrow synthetic codec (base
 * 96 channels: padded channel blocks in every stage); where the CPU has the tile unit,
 * also on the unit and on the real-size synthetic codec against the 60 dB budget. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "codec/synthetic.h"
#include "codec_paths.h"
#include "compute/conv_direct.h"
#include "gepard.h"
#include "test.h"

/* One-shot and frame-by-frame samples of `frames` frames. */
static int ct_decode(const gp_codec *c, const int32_t *codes, int frames, float *oneshot,
                     float *streamed, gp_error *err) {
    const size_t C = (size_t)c->fsq.channels, spf = (size_t)c->cfg.samples_per_frame;
    int rc = gp_codec_decode(c, codes, (size_t)frames, oneshot, err);
    gp_codec_code_stream *s = NULL;
    if (!rc) rc = gp_codec_code_stream_create(c, &s, err);
    for (int f = 0; !rc && f < frames; f++)
        rc =
            gp_codec_code_stream_push(s, codes + (size_t)f * C, 1, streamed + (size_t)f * spf, err);
    gp_codec_code_stream_free(s);
    return rc;
}

/* The checks on one codec: returns the SNR of the tile path against f32. */
static double ct_check(const gp_codec_source *src, int frames, const char *mode) {
    gp_error err;
    double snr = -INFINITY;
    gp_codec *f32 = codec_paths_load(src, GP_CODEC_KERNELS_F32, NULL, 1, &err);
    if (!f32) {
        test_fail(__FILE__, __LINE__, "%s", err.message);
        return snr;
    }
    const size_t C = (size_t)f32->fsq.channels, spf = (size_t)f32->cfg.samples_per_frame;
    const size_t n = (size_t)frames * spf;
    int32_t *codes = malloc((size_t)frames * C * sizeof *codes);
    float *want = malloc(n * 4), *one[2] = {malloc(n * 4), malloc(n * 4)},
          *str[2] = {malloc(n * 4), malloc(n * 4)};
    if (!codes || !want || !one[0] || !one[1] || !str[0] || !str[1]) {
        test_fail(__FILE__, __LINE__, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < (size_t)frames * C; i++)
        codes[i] =
            (int32_t)((i * 2654435761u >> 7) % (size_t)gp_fsq_levels(&f32->fsq, (int)(i % C)));
    if (gp_codec_decode(f32, codes, (size_t)frames, want, &err)) {
        test_fail(__FILE__, __LINE__, "%s", err.message);
        goto done;
    }
    for (int t = 0; t < 2; t++) {
        gp_codec *c = codec_paths_load(src, GP_CODEC_KERNELS_BF16, "ttttt", t + 1, &err);
        if (!c) {
            test_fail(__FILE__, __LINE__, "tiles (%s): %s", mode, err.message);
            goto done;
        }
        const int rc = ct_decode(c, codes, frames, one[t], str[t], &err);
        gp_codec_free(c);
        if (rc) {
            test_fail(__FILE__, __LINE__, "tiles (%s): %s", mode, err.message);
            goto done;
        }
        CHECK_MSG(!memcmp(one[t], str[t], n * 4),
                  "tiles (%s), %d thread(s): streamed differs from one-shot", mode, t + 1);
    }
    CHECK_MSG(!memcmp(one[0], one[1], n * 4), "tiles (%s): 1 and 2 threads differ", mode);
    snr = codec_paths_snr(want, one[1], n);
done:
    gp_codec_free(f32);
    free(codes);
    free(want);
    for (int t = 0; t < 2; t++) {
        free(one[t]);
        free(str[t]);
    }
    return snr;
}

TEST(codec_tiles_streaming_threads_and_accuracy) {
    gp_error err;
    /* the real-size configuration at base 96 (48 .. 3 channels per stage) */
    gp_codec_source *src = codec_paths_source(96, &err);
    REQUIRE_MSG(src, "%s", err.message);
    setenv("GEPARD_TILES", "emulate", 1);
    const double snr = ct_check(src, 4, "emulated");
    unsetenv("GEPARD_TILES");
    test_note("emulated tiles, base-96 codec, 4 frames: SNR %.1f dB vs f32 (bound 50: bf16 "
              "weights on a random narrow codec); streamed = one-shot and 1 = 2 threads, bit "
              "for bit",
              snr);
    CHECK_MSG(snr >= 50, "emulated tiles: SNR %.1f dB < 50", snr);
    if (gp_dconv_tiles_mode()) {
        const double s2 = ct_check(src, 4, "amx");
        test_note("AMX tiles, base-96 codec: SNR %.1f dB", s2);
        CHECK_MSG(s2 >= 50, "AMX tiles: SNR %.1f dB < 50", s2);
    }
    gp_codec_source_free(src);
}

TEST(codec_tiles_real_size_within_budget) {
    if (!gp_dconv_tiles_mode()) {
        test_note("skipped: no AMX tile unit on this CPU (the emulation is too slow for the "
                  "real-size codec; codec_tiles_streaming_threads_and_accuracy covers it)");
        return;
    }
    gp_error err;
    gp_codec_source *src;
    REQUIRE_MSG(!gp_codec_synthetic_source(gp_codec_nano_22khz_yaml, 1, &src, &err), "%s",
                err.message);
    const double snr = ct_check(src, 6, "amx");
    test_note("AMX tiles, real-size synthetic codec, 6 frames: SNR %.1f dB vs f32 (budget 60); "
              "streamed = one-shot and 1 = 2 threads, bit for bit",
              snr);
    CHECK_MSG(snr >= 60, "AMX tiles: SNR %.1f dB < 60", snr);
    gp_codec_source_free(src);
}

/* GP_CODEC_KERNELS_AUTO: the loader decodes GP_CODEC_CHOICE_FRAMES frames with f32 and
 * with the bf16-weight path the CPU has (AMX tiles, else mixed) and keeps f32 unless the
 * candidate is within budget and faster. Without tiles (GEPARD_TILES=off) it measures
 * mixed: the tiny fixture's weights put it far below the 60 dB budget, so f32 stays; on
 * the base-96 codec either may win (a matter of this CPU's speed), and whichever did is
 * what the codec decodes with and what kernels_why says. Emulated tiles (slow, and ~60 dB
 * on the narrow codec) must lose, and on the AMX unit the real-size codec takes the tiles
 * and then decodes exactly as a codec loaded with them. */
TEST(codec_auto_choice_measures_the_tiles) {
    gp_error err;
    gp_codec_source *src = codec_paths_source(96, &err);
    REQUIRE_MSG(src, "%s", err.message);
    setenv("GEPARD_TILES", "off", 1);
    gp_codec *c = codec_paths_load(src, GP_CODEC_KERNELS_AUTO, NULL, 2, &err);
    REQUIRE_MSG(c, "%s", err.message);
    const char *chosen = gp_codec_kernels_name(c->dec.kernels);
    test_note("no tiles, base-96 codec, AUTO -> %s (%s)", chosen, c->kernels_why);
    if (!strcmp(chosen, "mixed"))
        CHECK_MSG(!strncmp(c->kernels_why, "mixed (bf16-stored first-stage weights) measured", 48),
                  "why: %s", c->kernels_why);
    else
        CHECK_MSG(!strcmp(chosen, "f32") && !strncmp(c->kernels_why, "f32: the mixed path", 19),
                  "%s: %s", chosen, c->kernels_why);
    gp_codec_free(c);
    gp_codec_options opt;
    gp_codec_options_default(&opt);
    opt.n_threads = 2;
    REQUIRE_OK(gp_codec_load(test_fixture("codec-tiny/nano-tiny.nemo"), &opt, &c, &err), &err);
    test_note("no tiles, tiny fixture, AUTO -> %s (%s)", gp_codec_kernels_name(c->dec.kernels),
              c->kernels_why);
    CHECK(!strcmp(gp_codec_kernels_name(c->dec.kernels), "f32"));
    CHECK_MSG(strstr(c->kernels_why, "below the 60 dB budget"), "why: %s", c->kernels_why);
    gp_codec_free(c);
    setenv("GEPARD_TILES", "emulate", 1);
    c = codec_paths_load(src, GP_CODEC_KERNELS_AUTO, NULL, 2, &err);
    unsetenv("GEPARD_TILES");
    REQUIRE_MSG(c, "%s", err.message);
    test_note("emulated tiles, base-96 codec, AUTO -> %s (%s)",
              gp_codec_kernels_name(c->dec.kernels), c->kernels_why);
    CHECK(!strcmp(gp_codec_kernels_name(c->dec.kernels), "f32"));
    CHECK_MSG(!strncmp(c->kernels_why, "f32: the AMX tile path measured", 31), "why: %s",
              c->kernels_why);
    gp_codec_free(c);
    gp_codec_source_free(src);
    if (!gp_dconv_tiles_mode()) {
        test_note("no AMX tile unit here: the choice in favour of the tiles is checked on "
                  "AMX CPUs only");
        return;
    }
    REQUIRE_MSG(!gp_codec_synthetic_source(gp_codec_nano_22khz_yaml, 1, &src, &err), "%s",
                err.message);
    c = codec_paths_load(src, GP_CODEC_KERNELS_AUTO, NULL, 2, &err);
    REQUIRE_MSG(c, "%s", err.message);
    gp_codec *t = codec_paths_load(src, GP_CODEC_KERNELS_TILES, NULL, 2, &err);
    REQUIRE_MSG(t, "%s", err.message);
    test_note("AMX, real-size synthetic codec: %s: %s", gp_codec_kernels_name(c->dec.kernels),
              c->kernels_why);
    CHECK(!strcmp(gp_codec_kernels_name(c->dec.kernels), "tiles"));
    const size_t C = (size_t)c->fsq.channels, spf = (size_t)c->cfg.samples_per_frame;
    int32_t codes[3 * 32];
    for (size_t i = 0; i < 3 * C && i < 96; i++)
        codes[i] = (int32_t)(i * 7 % (size_t)gp_fsq_levels(&c->fsq, (int)(i % C)));
    float *a = malloc(3 * spf * 4), *b = malloc(3 * spf * 4);
    REQUIRE(a && b && C <= 32);
    REQUIRE_OK(gp_codec_decode(c, codes, 3, a, &err), &err);
    REQUIRE_OK(gp_codec_decode(t, codes, 3, b, &err), &err);
    CHECK_MSG(!memcmp(a, b, 3 * spf * 4), "the chosen tiles decode differently from the tiles");
    free(a);
    free(b);
    gp_codec_free(t);
    gp_codec_free(c);
    gp_codec_source_free(src);
}

/* Asking for what cannot run says so: the 't' stage letter where the CPU has no tiles
 * (GEPARD_TILES=off stands in for such a CPU), and an unknown GEPARD_CODEC_PRECISION. */
TEST(codec_tiles_refusals_are_clear) {
    gp_error err;
    gp_codec_source *src = codec_paths_source(96, &err);
    REQUIRE_MSG(src, "%s", err.message);
    setenv("GEPARD_TILES", "off", 1);
    gp_codec *c = codec_paths_load(src, GP_CODEC_KERNELS_BF16, "ttttt", 1, &err);
    unsetenv("GEPARD_TILES");
    CHECK_MSG(!c && err.code == GEPARD_ERR_UNSUPPORTED && strstr(err.message, "AMX"),
              "stage letter 't' without tiles: %s", c ? "loaded" : err.message);
    gp_codec_free(c);
    gp_codec_source_free(src);
    setenv("GEPARD_CODEC_PRECISION", "fast", 1);
    gepard_codec *gc = NULL;
    const gepard_status st = gepard_codec_load(test_fixture("codec-tiny/nano-tiny.nemo"), &gc);
    unsetenv("GEPARD_CODEC_PRECISION");
    CHECK_MSG(st == GEPARD_ERR_INVALID_ARGUMENT && !gc &&
                  strstr(gepard_last_error(), "GEPARD_CODEC_PRECISION=fast") &&
                  strstr(gepard_last_error(), "tiles"),
              "unknown GEPARD_CODEC_PRECISION: status %d, %s", (int)st, gepard_last_error());
    gepard_codec_free(gc);
}
