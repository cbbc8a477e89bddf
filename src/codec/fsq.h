/* fsq.h — finite scalar quantisation (NeMo GroupFiniteScalarQuantizer), CODEC.md §C.
 *
 * Gepard works on unfolded per-dimension codes: channel c belongs to group
 * c / n_levels and dimension d = c % n_levels, and holds a code in [0, L_d).
 *   decode: value = (k - h) / h,  h = max(1, L // 2)                      (fp32)
 *   encode: k = round_half_even(S * tanh(x + sigma) - o) + h, with
 *           S = (L - 1)/2 * (1 - eps), o = 0.5 for even L else 0, sigma = tan(o / S),
 *           all computed in fp32 as NeMo does.
 * NeMo's packed group index is the mixed-radix number sum_d k_d * prod_{e<d} L_e.
 * Codes are frame-major [T][C] (as the public API passes them); latents channel-major
 * [C][T] with a row stride (as the decoder and encoder hold them).
 */
#ifndef GP_CODEC_FSQ_H
#define GP_CODEC_FSQ_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "codec/config.h"

typedef struct gp_fsq {
    int num_groups, n_levels, channels;
    int levels[GP_CODEC_MAX_LEVELS];
    int half[GP_CODEC_MAX_LEVELS];     /* h = max(1, L // 2) */
    int32_t base[GP_CODEC_MAX_LEVELS]; /* mixed-radix weights */
    float scale[GP_CODEC_MAX_LEVELS], offset[GP_CODEC_MAX_LEVELS], shift[GP_CODEC_MAX_LEVELS];
} gp_fsq;

void gp_fsq_init(gp_fsq *fsq, const gp_codec_fsq_config *cfg);
/* Number of codes channel c takes (L of its dimension). */
int gp_fsq_levels(const gp_fsq *fsq, int channel);
/* Fail naming the first code out of range: frame, channel, value and allowed range. */
int gp_fsq_check_codes(const gp_fsq *fsq, const int32_t *codes, size_t frames, gp_error *err);
/* codes [T][C] -> latent rows [C] of `ld` floats (frames 0..T-1). Codes must be valid. */
void gp_fsq_dequantize(const gp_fsq *fsq, const int32_t *codes, size_t frames, float *latent,
                       size_t ld);
/* codes [T][C] -> latent [T][C] (frame-major, the layout of the GPU decoder's input). */
void gp_fsq_dequantize_frames(const gp_fsq *fsq, const int32_t *codes, size_t frames,
                              float *latent);
/* latent rows [C] (stride ld) -> codes [T][C]. */
void gp_fsq_quantize(const gp_fsq *fsq, const float *latent, size_t ld, size_t frames,
                     int32_t *codes);
/* The pre-rounding value S*tanh(x+sigma)-o for channel c (used to spot rounding ties). */
float gp_fsq_compress(const gp_fsq *fsq, int channel, float x);
/* codes [T][C] -> packed group indices [T][num_groups]. */
void gp_fsq_pack(const gp_fsq *fsq, const int32_t *codes, size_t frames, int32_t *packed);

#endif
