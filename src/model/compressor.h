/* compressor.h — the voice-cloning RefCompressor (MODEL.md §J, CODEC.md §G):
 * reference codes [T_ref][C] → K speaker-prefix rows of width H, placed
 * before the text rows of the prefill. Computed once per voice. */
#ifndef GP_MODEL_COMPRESSOR_H
#define GP_MODEL_COMPRESSOR_H

#include "base/pool.h"
#include "model/model.h"

/* prefix: [K][H] floats. Loads the compressor weights on first use. Codes are
 * range-checked (the message names the offending frame and channel). */
int gp_compressor_run(gp_model *model, const int32_t *ref_codes, int n_frames, float *prefix,
                      gp_pool *pool, gp_error *err);

#endif
