/* synthetic.h — a codec state dict of random weights built in memory from a config, for
 * benchmarks and tests at real sizes without the real checkpoint.
 *
 * gp_codec_synthetic_source produces a gp_codec_source (codec/source.h) holding every
 * tensor the loader expects for `yaml` (folded `weight` spelling, Snake alphas near 1,
 * weights scaled 1/sqrt(fan-in) so activations stay bounded); gp_codec_load_source
 * then builds a codec from it like from a file.
 */
#ifndef GP_CODEC_SYNTHETIC_H
#define GP_CODEC_SYNTHETIC_H

#include <stdint.h>

#include "codec/source.h"

/* The published NanoCodec 22 kHz 21.5 fps configuration (CODEC.md §1). */
extern const char gp_codec_nano_22khz_yaml[];

int gp_codec_synthetic_source(const char *yaml, uint64_t seed, gp_codec_source **out,
                              gp_error *err);
/* (free the result with gp_codec_source_free) */

/* Write a synthetic codec directory: DIR/model_config.yaml (`yaml`) and
 * DIR/model_weights.safetensors, loadable with gepard_codec_load(DIR). */
int gp_codec_synthetic_write(const char *dir, const char *yaml, uint64_t seed, gp_error *err);

#endif
