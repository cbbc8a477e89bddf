/* resample.h — sample-rate conversion with libsoxr (high quality), and
 * down-mixing to mono: how reference clips of any rate and layout reach the
 * codec's 22.05 kHz mono. */
#ifndef GP_IO_RESAMPLE_H
#define GP_IO_RESAMPLE_H

#include <stddef.h>

#include "base/error.h"

/* Average `channels` interleaved channels into a new mono buffer. */
int gp_downmix_mono(const float *interleaved, size_t frames, int channels, float **mono,
                    gp_error *err);

/* Resample mono `in` from in_rate to out_rate into a new buffer (*out, *n_out).
 * Equal rates copy. */
int gp_resample(const float *in, size_t n, int in_rate, int out_rate, float **out, size_t *n_out,
                gp_error *err);

/* A streaming mono resampler (libsoxr, high quality): feed chunks as they
 * come, then flush once at the end for the filter's tail. */
typedef struct gp_resampler gp_resampler;

int gp_resampler_create(int in_rate, int out_rate, gp_resampler **out, gp_error *err);
/* Resample `n` samples (or, with in == NULL, flush the tail) and append the
 * output to *buf (grown with realloc; *len and *cap track it). */
int gp_resampler_process(gp_resampler *r, const float *in, size_t n, float **buf, size_t *len,
                         size_t *cap, gp_error *err);
void gp_resampler_free(gp_resampler *r);

#endif
