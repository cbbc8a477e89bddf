/* synth.h — synthetic Gepard checkpoints with real shapes and file formats
 * (random weights, seeded and reproducible) for benchmarks and memory tests:
 * gepard_config.json, config.json, a bf16 model.safetensors and a synthetic
 * tokenizer.json whose special tokens sit at the real ids. Never a real
 * model: the audio it produces is noise. */
#ifndef GP_MODEL_SYNTH_H
#define GP_MODEL_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

typedef struct gp_synth_model_spec {
    int hidden, layers, heads, kv_heads, head_dim, intermediate;
    int64_t vocab;
    int audio_embed_dim;
    int codec_groups;
    int levels[4];
    int vc_queries, vc_layers, vc_heads, vc_ffn_multiplier;
    int tokenizer_merges;
    double partial_rotary_factor; /* 0 means 1.0 */
    bool attention_bias;          /* also write q/k/v/o biases */
    bool no_repetition;           /* text_repetition disabled */
    int stop_after_frames;        /* > 0: fit the stop head to fire after about this many
                                     frames (synth_stop.c); 0: biased never to fire */
} gp_synth_model_spec;

/* Presets: "gepard-1.0" (the real sizes; its stop head never fires, so a
 * run lasts max_frames) and "tiny" (for tests and trying the program; its
 * stop head is fitted to fire after ~3 s). Returns 0, or -1 for an unknown
 * name. */
int gp_synth_model_preset(const char *name, gp_synth_model_spec *spec);

/* Write the checkpoint into `dir` (created if needed). */
int gp_synth_model_write(const char *dir, const gp_synth_model_spec *spec, uint64_t seed,
                         gp_error *err);

/* Run the checkpoint in `dir` and choose a stop head (weight[hidden], bias)
 * that fires after about target_frames frames (synth_stop.c). */
int gp_synth_fit_stop_head(const char *dir, int target_frames, uint64_t seed, float *weight,
                           float *bias, gp_error *err);

#endif
