/* codec_paths.h — helpers the codec decoder tests share (test_codec_direct.c,
 * test_codec_onednn.c, test_codec_tiles.c): synthetic codecs of the published
 * configuration at a chosen width, loading one on a given path and stage mix,
 * and the signal-to-noise ratio of one decode against another. */
#ifndef GEPARD_TEST_CODEC_PATHS_H
#define GEPARD_TEST_CODEC_PATHS_H

#include <stddef.h>

#include "codec/codec.h"

/* Random weights for the published configuration with decoder base_channels `base` (864
 * is the real width) and a small encoder (these tests decode only); NULL on error. */
gp_codec_source *codec_paths_source(int base, gp_error *err);
/* `src` decoded by `kernels` (REFERENCE: the reference kernels) with per-stage residual
 * weight letters `stage_types` (NULL: by `kernels`) on `threads` threads; NULL on error. */
gp_codec *codec_paths_load(const gp_codec_source *src, gp_codec_kernels kernels,
                           const char *stage_types, int threads, gp_error *err);
/* 10 log10(|ref|^2 / |ref - x|^2): +inf when equal, -inf when x holds a NaN. */
double codec_paths_snr(const float *ref, const float *x, size_t n);

#endif
