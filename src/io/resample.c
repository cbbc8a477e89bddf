/* resample.c — libsoxr one-shot and streaming resampling, and mono down-mix
 * (see resample.h). */
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

struct gp_resampler {
    soxr_t soxr;
    double ratio;
};

int gp_resampler_create(int in_rate, int out_rate, gp_resampler **out, gp_error *err) {
    *out = NULL;
    if (in_rate < 1000 || in_rate > 768000 || out_rate < 1000 || out_rate > 768000)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "cannot resample from %d Hz to %d Hz (rates must be 1 kHz - 768 kHz)",
                       in_rate, out_rate);
    gp_resampler *r = calloc(1, sizeof *r);
    if (!r) return gp_fail_oom(err, "resampler", sizeof *r);
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    soxr_error_t e = NULL;
    r->soxr = soxr_create((double)in_rate, (double)out_rate, 1, &e, &io, &q, NULL);
    if (e || !r->soxr) {
        free(r);
        return gp_fail(err, GEPARD_ERR_INTERNAL, "cannot set up resampling from %d Hz to %d Hz: %s",
                       in_rate, out_rate, e ? soxr_strerror(e) : "unknown error");
    }
    r->ratio = (double)out_rate / in_rate;
    *out = r;
    return GEPARD_OK;
}

static int reserve(float **buf, size_t *cap, size_t need, gp_error *err) {
    if (need <= *cap) return GEPARD_OK;
    size_t c = *cap ? *cap : 4096;
    while (c < need) c *= 2;
    float *p = realloc(*buf, c * sizeof(float));
    if (!p) return gp_fail_oom(err, "resampled audio", c * sizeof(float));
    *buf = p;
    *cap = c;
    return GEPARD_OK;
}

int gp_resampler_process(gp_resampler *r, const float *in, size_t n, float **buf, size_t *len,
                         size_t *cap, gp_error *err) {
    size_t fed = 0;
    for (int guard = 0; guard < 100000; guard++) {
        size_t room = (size_t)((double)(n - fed) * r->ratio) + 1024;
        int rc = reserve(buf, cap, *len + room, err);
        if (rc) return rc;
        size_t idone = 0, odone = 0;
        soxr_error_t e = soxr_process(r->soxr, in ? in + fed : NULL, in ? n - fed : 0,
                                      in ? &idone : NULL, *buf + *len, room, &odone);
        if (e) return gp_fail(err, GEPARD_ERR_INTERNAL, "resampling failed: %s", soxr_strerror(e));
        fed += idone;
        *len += odone;
        if (in ? fed >= n && odone < room : odone == 0) return GEPARD_OK;
    }
    return gp_fail(err, GEPARD_ERR_INTERNAL, "resampling made no progress");
}

void gp_resampler_free(gp_resampler *r) {
    if (!r) return;
    soxr_delete(r->soxr);
    free(r);
}
