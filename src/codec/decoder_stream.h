/* decoder_stream.h — the inside of a decoding stream, shared by decoder.c (reference and
 * BLAS paths) and decoder_direct.c (direct SIMD paths). Not a public interface.
 *
 * A stream owns its state — every causal layer's left context at dec->state_floats
 * offsets (f32 samples; on the bf16 path a residual conv's context is bf16 channel-pair
 * words, which take no more room) — and BUF_COUNT work buffers of dec->buf_floats each.
 */
#ifndef GP_CODEC_DECODER_STREAM_H
#define GP_CODEC_DECODER_STREAM_H

#include "codec/decoder.h"

enum { BUF_SIG, BUF_ACC, BUF_RUN, BUF_TMP, BUF_IN, BUF_COUNT };

#define GP_CODEC_MULTI_MAX 64 /* streams per direct step (more are done in groups) */

struct gp_codec_stream {
    const gp_codec_decoder *dec;
    float *state;
    float *buf[BUF_COUNT];
    gp_conv_scratch scratch;
};

/* Direct-kernel step of at most GP_CODEC_STEP_FRAMES frames for n <= GP_CODEC_MULTI_MAX
 * streams. */
void gp_codec_direct_step(gp_codec_stream *const *s, int n, const float *const *latent, size_t ld,
                          size_t frames, float *const *pcm);

#endif
