/* test_codec_onednn.c — the codec's residual convolutions through oneDNN's
 * bf16 convolution (GP_DCONV_ONEDNN, stage mix letter 'o'), on the
 * real-size synthetic codec: within the 60 dB budget of the f32 decoder,
 * the same samples at 1 and 2 threads (time split between workers),
 * streaming within 1e-6 of one-shot decoding (oneDNN may sum a layer in
 * another order for another length: stated, not bit-exact), and one pass
 * with two input terms. Skipped where oneDNN builds no bf16 convolution. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "codec/synthetic.h"
#include "codec_paths.h"
#include "test.h"

#define OD_FRAMES 6

static double od_max_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, isnan(b[i]) ? INFINITY : fabs((double)a[i] - b[i]));
    return m;
}

/* One-shot and frame-by-frame samples of OD_FRAMES frames. */
static int od_decode(const gp_codec *c, const int32_t *codes, float *oneshot, float *streamed,
                     gp_error *err) {
    const size_t C = (size_t)c->fsq.channels, spf = (size_t)c->cfg.samples_per_frame;
    int rc = gp_codec_decode(c, codes, OD_FRAMES, oneshot, err);
    gp_codec_code_stream *s = NULL;
    if (!rc) rc = gp_codec_code_stream_create(c, &s, err);
    for (size_t f = 0; !rc && f < OD_FRAMES; f++)
        rc = gp_codec_code_stream_push(s, codes + f * C, 1, streamed + f * spf, err);
    gp_codec_code_stream_free(s);
    return rc;
}

TEST(codec_onednn_residual_convs_within_budget) {
    gp_error err;
    gp_codec_source *src;
    REQUIRE_MSG(!gp_codec_synthetic_source(gp_codec_nano_22khz_yaml, 1, &src, &err), "%s",
                err.message);
    gp_codec *f32 = codec_paths_load(src, GP_CODEC_KERNELS_F32, NULL, 1, &err);
    REQUIRE_MSG(f32, "%s", err.message);
    const size_t C = (size_t)f32->fsq.channels, spf = (size_t)f32->cfg.samples_per_frame;
    const size_t n = OD_FRAMES * spf;
    int32_t *codes = malloc(OD_FRAMES * C * sizeof *codes);
    float *want = malloc(n * 4), *one[2] = {malloc(n * 4), malloc(n * 4)},
          *str[2] = {malloc(n * 4), malloc(n * 4)};
    REQUIRE(codes && want && one[0] && one[1] && str[0] && str[1]);
    for (size_t i = 0; i < OD_FRAMES * C; i++)
        codes[i] =
            (int32_t)((i * 2654435761u >> 7) % (size_t)gp_fsq_levels(&f32->fsq, (int)(i % C)));
    REQUIRE_OK(gp_codec_decode(f32, codes, OD_FRAMES, want, &err), &err);
    gp_codec_free(f32);
    for (int t = 0; t < 2; t++) {
        gp_codec *c = codec_paths_load(src, GP_CODEC_KERNELS_BF16, "ooooo", t + 1, &err);
        if (!c && err.code == GEPARD_ERR_UNSUPPORTED) {
            test_note("skipped: %s", err.message);
            goto done;
        }
        REQUIRE_MSG(c, "%s", err.message);
        REQUIRE_OK(od_decode(c, codes, one[t], str[t], &err), &err);
        gp_codec_free(c);
        const double snr = codec_paths_snr(want, one[t], n), sd = od_max_diff(one[t], str[t], n);
        test_note("oneDNN residual convs, %d thread(s): SNR %.1f dB vs f32 over %d frames "
                  "(budget 60), streamed vs one-shot max difference %g (tolerance 1e-6)",
                  t + 1, snr, OD_FRAMES, sd);
        CHECK_MSG(snr >= 60, "SNR %.1f dB < 60", snr);
        CHECK_MSG(sd <= 1e-6, "streamed differs from one-shot by %g", sd);
    }
    CHECK_MSG(memcmp(one[0], one[1], n * 4) == 0, "1 and 2 threads give different samples");
    /* two input terms: a third less work, still within the budget here */
    setenv("GEPARD_ONEDNN_TERMS", "2", 1);
    gp_codec *c2 = codec_paths_load(src, GP_CODEC_KERNELS_BF16, "ooooo", 2, &err);
    unsetenv("GEPARD_ONEDNN_TERMS");
    REQUIRE_MSG(c2, "%s", err.message);
    REQUIRE_OK(gp_codec_decode(c2, codes, OD_FRAMES, one[0], &err), &err);
    gp_codec_free(c2);
    const double snr2 = codec_paths_snr(want, one[0], n);
    test_note("two terms: SNR %.1f dB", snr2);
    CHECK_MSG(snr2 >= 60, "two terms: SNR %.1f dB < 60", snr2);
done:
    free(codes);
    free(want);
    for (int t = 0; t < 2; t++) {
        free(one[t]);
        free(str[t]);
    }
    gp_codec_source_free(src);
}
