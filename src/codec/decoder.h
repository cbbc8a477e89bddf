/* decoder.h — NeMo's CausalHiFiGANDecoder (CODEC.md §A) as a stateful streaming decoder.
 *
 * latent [D][T] -> pre_conv -> per stage: activation, grouped causal transposed conv,
 * residual layer (mean of one residual block chain per kernel size) -> post activation ->
 * post_conv -> clamp or tanh -> samples_per_frame samples per frame.
 *
 * Every convolution is causal, so a decoder that remembers each convolution's last
 * inputs (its left context, CODEC.md §E.3) can take frames in chunks of any size and
 * produce exactly the samples a whole-utterance decode would: a stream keeps that state.
 * The one-shot decode IS a stream fed all frames; internally every push is processed in
 * steps of at most GP_CODEC_STEP_FRAMES frames, which bounds memory, and each output
 * sample is accumulated in an order that does not depend on the chunking, so any
 * chunking gives bit-identical samples. The weights are shared read-only between any
 * number of streams (each used by one thread at a time).
 *
 * Kernels, chosen at load: the plain reference, im2col + OpenBLAS (gp_conv1d_fast), or the
 * direct SIMD convolutions of compute/conv_direct.h with f32 or bf16 weights, which run the
 * residual layers with the element-wise work fused into the convolutions
 * (decoder_direct.c). Several streams can decode the same number of frames in one call:
 * their columns go through the same weights together (what turns the first stage's
 * matrix-vector work into matrix-matrix work on a server), with the samples each stream
 * would get alone.
 */
#ifndef GP_CODEC_DECODER_H
#define GP_CODEC_DECODER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/pool.h"
#include "codec/config.h"
#include "codec/source.h"
#include "compute/conv.h"
#include "compute/conv_direct.h"

#define GP_CODEC_STEP_FRAMES 8

/* A causal layer and where its left context lives in a stream's state. */
typedef struct gp_codec_causal {
    gp_conv1d conv;   /* stride-1 causal conv (when not transposed) */
    gp_convt1d convt; /* transposed conv (when transposed) */
    gp_dconv packed;  /* conv packed for the direct kernels (direct paths only) */
    bool transposed;
    int hist;          /* input samples of left context per input channel */
    size_t state_off;  /* floats into the stream state */
    size_t frame_cols; /* samples per codec frame at this layer: the fast conv's block */
} gp_codec_causal;

typedef struct gp_codec_dec_block { /* ResidualBlock */
    gp_act in_act, skip_act;
    gp_codec_causal in_conv, skip_conv;
} gp_codec_dec_block;

typedef struct gp_codec_dec_stage {
    int c_in, c_out, rate;
    gp_act act;
    gp_codec_causal up;
    gp_codec_dec_block *blocks; /* [n_kernels][n_dilations] */
} gp_codec_dec_stage;

typedef enum gp_codec_kernels {
    GP_CODEC_KERNELS_AUTO = 0, /* the default path (resolved at load: F32 on SIMD CPUs; the
                                  codec loader may then measure its way to TILES) */
    GP_CODEC_KERNELS_REFERENCE,
    GP_CODEC_KERNELS_BLAS,  /* im2col + OpenBLAS sgemm */
    GP_CODEC_KERNELS_F32,   /* direct SIMD convolutions, f32 weights */
    GP_CODEC_KERNELS_MIXED, /* direct, f32 arithmetic; bf16-stored weights in the stages
                               with few samples per frame (memory-bound when streaming) */
    GP_CODEC_KERNELS_BF16,  /* direct, bf16 weights and convolution inputs, f32 accumulation */
    GP_CODEC_KERNELS_TILES, /* direct; the residual convolutions on AMX tiles (bf16 weights,
                               inputs as two bf16 terms), F32 where the CPU has no AMX */
} gp_codec_kernels;

typedef struct gp_codec_decoder {
    gp_codec_decoder_config cfg;
    int samples_per_frame;
    gp_codec_causal pre;
    gp_codec_dec_stage stages[GP_CODEC_MAX_STAGES];
    gp_act post_act;
    gp_codec_causal post;
    size_t state_floats; /* total left context of all layers */
    size_t buf_floats;   /* size of each work buffer for one step */
    size_t scratch_floats;
    gp_codec_kernels kernels; /* never AUTO once loaded */
    void *packed;             /* all packed weights of the direct paths, in the order used */
    gp_dconv_type stage_type[GP_CODEC_MAX_STAGES]; /* direct paths: residual layers' weights */
    gp_pool *pool; /* optional threads for the fast kernels (not owned) */
} gp_codec_decoder;

int gp_codec_decoder_load(gp_codec_decoder *dec, const gp_codec_config *cfg,
                          const gp_codec_source *src, gp_error *err);
void gp_codec_decoder_free(gp_codec_decoder *dec);
/* What `want` becomes on this CPU: AUTO picks the default (F32); BF16 falls back to
 * MIXED without AVX512-BF16, MIXED and F32 to BLAS without AVX2. */
gp_codec_kernels gp_codec_kernels_resolve(gp_codec_kernels want);
const char *gp_codec_kernels_name(gp_codec_kernels kernels);
bool gp_codec_kernels_direct(gp_codec_kernels kernels);
/* Switch to `kernels` (resolved); the direct paths pack their weights here. `stage_types`
 * (NULL: by `kernels`) sets each stage's residual weights on a direct path, one letter per
 * stage: 'f' f32, 'w' bf16-stored (channel-layout stages), 'b' bf16, 'o' oneDNN's bf16 convolution,
 * 't' AMX tiles — for experiments. Call before creating streams. */
int gp_codec_decoder_use_kernels(gp_codec_decoder *dec, gp_codec_kernels kernels,
                                 const char *stage_types, gp_error *err);
/* Multiply-accumulates per frame (for reports). */
double gp_codec_decoder_macs_per_frame(const gp_codec_decoder *dec);

typedef struct gp_codec_stream gp_codec_stream;

int gp_codec_stream_create(const gp_codec_decoder *dec, gp_codec_stream **out, gp_error *err);
void gp_codec_stream_free(gp_codec_stream *s);
/* Forget all context: the next push starts a new utterance. */
void gp_codec_stream_reset(gp_codec_stream *s);
/* Decode `frames` latent frames (rows [input_dim], row stride ld) into
 * frames * samples_per_frame samples at pcm. */
void gp_codec_stream_push_latent(gp_codec_stream *s, const float *latent, size_t ld, size_t frames,
                                 float *pcm);
/* The same for n streams of one decoder at once, `frames` frames each: latent[i], pcm[i]
 * belong to s[i]. Each stream gets exactly the samples it would get alone. */
void gp_codec_stream_push_latent_multi(gp_codec_stream *const *s, int n, const float *const *latent,
                                       size_t ld, size_t frames, float *const *pcm);

#endif
