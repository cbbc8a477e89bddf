/* overlay.h — the TTS overlay around the backbone (MODEL.md §D.5, §E.1):
 * the audio-frame embedding that turns 32 codes into an input row, the 32
 * codebook heads and the stop head that read a hidden state. */
#ifndef GP_MODEL_OVERLAY_H
#define GP_MODEL_OVERLAY_H

#include "base/pool.h"
#include "model/model.h"

/* Check that every code of n frames ([n][C], frame-major) is within its
 * channel's vocabulary; the message names frame, channel and range. */
int gp_overlay_check_codes(const gp_model *model, const int32_t *codes, int n, gp_error *err);

/* Input rows for n frames: 32 table lookups → Linear → GELU(erf) → Linear →
 * LayerNorm (no affine, eps 1e-5) → × audio_embed_scale. `work` holds
 * n · max(C·E, H) floats. Codes must have been checked. */
void gp_overlay_embed_frames(const gp_model *model, const int32_t *codes, int n, float *out,
                             float *work, gp_pool *pool);

/* All heads' logits (bias included) for n hidden states: [n][total_logits]. */
void gp_overlay_heads(const gp_model *model, const float *hidden, int n, float *logits,
                      gp_pool *pool);

/* sigmoid(stop_head · h + b); `weight`/`bias` override the model's stop head
 * when weight is non-NULL (DPO adapters). */
float gp_overlay_stop_probability(const gp_model *model, const float *hidden, const float *weight,
                                  float bias);

#endif
