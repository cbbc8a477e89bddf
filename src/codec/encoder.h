/* encoder.h — NeMo's HiFiGANEncoder (non-causal, CODEC.md §D) and CausalHiFiGANEncoder.
 *
 * audio [1][N] (N a multiple of samples_per_frame) -> pre_conv -> per stage: residual
 * layer, activation, strided down-sampling conv -> post activation -> post_conv ->
 * latent [encoded_dim][N / samples_per_frame].
 *
 * The non-causal encoder pads each convolution's input symmetrically with the
 * configured mode (replicate / reflect / zeros); the causal variant pads zeros on the
 * left (and, for strided convs, on the right up to a whole step). It runs over the whole
 * signal at once (it is a one-off per voice reference) with buffers sized per call.
 */
#ifndef GP_CODEC_ENCODER_H
#define GP_CODEC_ENCODER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/pool.h"
#include "codec/config.h"
#include "codec/source.h"
#include "compute/conv.h"

typedef struct gp_codec_enc_block {
    gp_act in_act, skip_act;
    gp_conv1d in_conv, skip_conv;
} gp_codec_enc_block;

typedef struct gp_codec_enc_stage {
    int c_in, c_out, rate;
    gp_codec_enc_block *blocks; /* [n_kernels][n_dilations] over c_in channels */
    gp_act act;
    gp_conv1d down; /* c_in -> c_out, kernel 2*rate, stride rate */
} gp_codec_enc_stage;

typedef struct gp_codec_encoder {
    gp_codec_encoder_config cfg;
    int samples_per_frame;
    gp_conv1d pre;
    gp_codec_enc_stage stages[GP_CODEC_MAX_STAGES];
    gp_act post_act;
    gp_conv1d post;
    bool reference;
    gp_pool *pool; /* not owned */
} gp_codec_encoder;

int gp_codec_encoder_load(gp_codec_encoder *enc, const gp_codec_config *cfg,
                          const gp_codec_source *src, gp_error *err);
void gp_codec_encoder_free(gp_codec_encoder *enc);

/* Encode n_samples (a multiple of samples_per_frame, > 0) into latent rows
 * [encoded_dim] of n_samples / samples_per_frame floats (row stride = that count). */
int gp_codec_encoder_run(const gp_codec_encoder *enc, const float *audio, size_t n_samples,
                         float *latent, gp_error *err);

#endif
