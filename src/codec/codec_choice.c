/* codec_choice.c — which decoder path a codec loaded with GP_CODEC_KERNELS_AUTO runs on
 * (issue 15: kernel choice by measurement, not by CPU flags).
 *
 * The candidates store weights as bf16: AMX tiles (GP_DCONV_TILES) for the residual
 * convolutions on CPUs that have them, else MIXED (the first stage's weights, 94 MB per
 * frame in f32, read as bf16 and widened in registers; f32 arithmetic). How much that costs
 * depends on how much a codec's weights amplify small errors: the tiles 62-65 dB and mixed
 * ~69 dB against the f32 decoder on the random real-size codec, 23-39 dB on the random tiny
 * test codec. So the loader measures it on the weights it loaded: both paths decode the
 * same GP_CODEC_CHOICE_FRAMES frames of fixed pseudo-random codes, frame by frame as a
 * stream does, and the candidate is kept when it stays within GP_CODEC_TILES_MIN_SNR dB of
 * f32 and is faster (the tiles under 0.9 of f32's median time per frame, mixed under
 * 0.95). It costs that many frames of each at load (~0.4 s on two Xeon cores, ~0.15 s on
 * sixteen). Measured on the Xeon host at two cores with AVX2 kernels (codec_bench 16 2 1):
 * mixed 16.4-17.9 ms per frame against f32 19.1-20.1; on the Zen 5 VM they measure alike,
 * so there it stays f32. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timing.h"
#include "codec/codec.h"

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Decode `frames` frames of `codes` one by one into pcm; the median ms per frame. */
static int choice_decode(const gp_codec *c, const int32_t *codes, int frames, float *pcm,
                         double *median_ms, gp_error *err) {
    const size_t C = (size_t)c->fsq.channels, spf = (size_t)c->cfg.samples_per_frame;
    gp_codec_code_stream *s = NULL;
    int rc = gp_codec_code_stream_create(c, &s, err);
    double ms[GP_CODEC_CHOICE_FRAMES];
    for (int f = 0; rc == GEPARD_OK && f < frames; f++) {
        const uint64_t t0 = gp_now_ns();
        rc = gp_codec_code_stream_push(s, codes + (size_t)f * C, 1, pcm + (size_t)f * spf, err);
        ms[f] = (double)(gp_now_ns() - t0) * 1e-6;
    }
    gp_codec_code_stream_free(s);
    if (rc) return rc;
    qsort(ms, (size_t)frames, sizeof ms[0], cmp_double);
    *median_ms = ms[frames / 2];
    return GEPARD_OK;
}

static double choice_snr(const float *ref, const float *x, size_t n) {
    double s = 0, e = 0;
    for (size_t i = 0; i < n; i++) {
        s += (double)ref[i] * ref[i];
        e += ((double)ref[i] - x[i]) * ((double)ref[i] - x[i]);
    }
    return isnan(e) ? -INFINITY : e > 0 ? 10 * log10(s / e) : INFINITY;
}

int gp_codec_choose_kernels(gp_codec *c, const gp_codec_source *src, const gp_codec_options *opt,
                            gp_codec_kernels candidate, gp_error *err) {
    const int F = GP_CODEC_CHOICE_FRAMES;
    const bool tiles = candidate == GP_CODEC_KERNELS_TILES;
    const char *what = tiles ? "the AMX tile path" : "the mixed path (bf16-stored weights)";
    const char *name = tiles ? "AMX tiles" : "mixed (bf16-stored first-stage weights)";
    const double faster_than = tiles ? 0.9 : 0.95;
    gp_codec_options topt = *opt;
    topt.kernels = candidate;
    topt.skip_encoder = true;
    gp_codec *t = NULL;
    gp_error terr;
    gp_error_clear(&terr);
    if (gp_codec_load_source(src, &topt, &t, &terr)) { /* keep f32, say why */
        snprintf(c->kernels_why, sizeof c->kernels_why, "the default: %s did not load (%.150s)",
                 what, terr.message);
        return GEPARD_OK;
    }
    const size_t C = (size_t)c->fsq.channels, spf = (size_t)c->cfg.samples_per_frame;
    const size_t n = (size_t)F * spf;
    int32_t *codes = malloc((size_t)F * C * sizeof *codes);
    float *ref = malloc(n * sizeof *ref), *got = malloc(n * sizeof *got);
    int rc = codes && ref && got ? GEPARD_OK : gp_fail_oom(err, "codec path choice", n * 8);
    uint32_t x = 12345u;
    for (size_t i = 0; rc == GEPARD_OK && i < (size_t)F * C; i++) {
        x = x * 1664525u + 1013904223u;
        codes[i] = (int32_t)((x >> 8) % (uint32_t)gp_fsq_levels(&c->fsq, (int)(i % C)));
    }
    double ms_f32 = 0, ms_cand = 0;
    if (rc == GEPARD_OK) rc = choice_decode(c, codes, F, ref, &ms_f32, err);
    if (rc == GEPARD_OK) rc = choice_decode(t, codes, F, got, &ms_cand, err);
    if (rc == GEPARD_OK) {
        const double snr = choice_snr(ref, got, n);
        const bool accurate = snr >= GP_CODEC_TILES_MIN_SNR,
                   faster = ms_cand < faster_than * ms_f32;
        if (accurate && faster)
            snprintf(c->kernels_why, sizeof c->kernels_why,
                     "%s measured on these weights: %.1f dB against f32 over %d frames "
                     "(budget %.0f), %.2f against %.2f ms per frame",
                     name, snr, F, GP_CODEC_TILES_MIN_SNR, ms_cand, ms_f32);
        else if (!accurate)
            snprintf(c->kernels_why, sizeof c->kernels_why,
                     "f32: %s measured %.1f dB against f32 over %d frames on these weights, "
                     "below the %.0f dB budget",
                     what, snr, F, GP_CODEC_TILES_MIN_SNR);
        else
            snprintf(c->kernels_why, sizeof c->kernels_why,
                     "f32: %s measured %.2f against %.2f ms per frame (%.1f dB; needs under "
                     "%.2f of f32's time)",
                     what, ms_cand, ms_f32, snr, faster_than);
        if (accurate && faster) { /* take the candidate's decoder; t frees the f32 one */
            gp_codec_decoder tmp = c->dec;
            c->dec = t->dec;
            t->dec = tmp;
            c->dec.pool = c->pool;
            t->dec.pool = t->pool;
        }
    }
    gp_codec_free(t);
    free(codes);
    free(ref);
    free(got);
    return rc;
}
