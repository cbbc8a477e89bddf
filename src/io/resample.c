/* resample.c — libsoxr one-shot resampling and mono down-mix (see
 * resample.h). */
#include "io/resample.h"

#include <soxr.h>
#include <stdlib.h>
#include <string.h>

int gp_downmix_mono(const float *x, size_t frames, int channels, float **mono, gp_error *err) {
    *mono = NULL;
    if (channels < 1 || channels > 64)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "unsupported channel count %d", channels);
    float *y = malloc((frames ? frames : 1) * sizeof(float));
    if (!y) return gp_fail_oom(err, "audio", frames * 4);
    for (size_t i = 0; i < frames; i++) {
        double sum = 0;
        for (int c = 0; c < channels; c++) sum += x[i * (size_t)channels + (size_t)c];
        y[i] = (float)(sum / channels);
    }
    *mono = y;
    return GEPARD_OK;
}

int gp_resample(const float *in, size_t n, int in_rate, int out_rate, float **out, size_t *n_out,
                gp_error *err) {
    *out = NULL;
    *n_out = 0;
    if (in_rate < 1000 || in_rate > 768000 || out_rate < 1000 || out_rate > 768000)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "cannot resample from %d Hz to %d Hz (rates must be 1 kHz - 768 kHz)",
                       in_rate, out_rate);
    size_t cap = (size_t)((double)n * out_rate / in_rate) + 64;
    float *y = malloc(cap * sizeof(float));
    if (!y) return gp_fail_oom(err, "resampled audio", cap * 4);
    if (in_rate == out_rate) {
        memcpy(y, in, n * sizeof(float));
        *out = y;
        *n_out = n;
        return GEPARD_OK;
    }
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    size_t done = 0;
    soxr_error_t e = soxr_oneshot((double)in_rate, (double)out_rate, 1, in, n, NULL, y, cap, &done,
                                  &io, &q, NULL);
    if (e) {
        free(y);
        return gp_fail(err, GEPARD_ERR_INTERNAL, "resampling failed: %s", soxr_strerror(e));
    }
    *out = y;
    *n_out = done;
    return GEPARD_OK;
}
