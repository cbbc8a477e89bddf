/* config.h — the Gepard model configuration, resolved from gepard_config.json.
 *
 * gepard_config.json is authoritative (MODEL.md §A.2): a nested Qwen3.5
 * backbone config plus every TTS shape driver. A legacy directory with only
 * config.json is read as a backbone config with Gepard-1.0's overlay
 * defaults. Parsing applies the upstream defaults and resolution rules
 * (partial_rotary_factor precedence, audio head order by numeric suffix,
 * repetition disabled when absent) and refuses what the engine cannot run,
 * with a sentence saying why.
 */
#ifndef GP_MODEL_CONFIG_H
#define GP_MODEL_CONFIG_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

#define GP_MAX_CHANNELS 256
#define GP_MAX_FSQ_LEVELS 16

typedef struct gp_backbone_config {
    int hidden_size;       /* H */
    int num_layers;        /* NL */
    int num_heads;         /* NH query heads */
    int num_kv_heads;      /* NKV */
    int head_dim;          /* D */
    int intermediate_size; /* I */
    int64_t vocab_size;    /* embedding rows */
    double rms_norm_eps;
    double rope_theta;
    double partial_rotary_factor; /* resolved, MODEL.md §A.4 */
    int rotary_dim;               /* floor(D * prf), even */
    bool attention_bias;
    int64_t max_position_embeddings;
} gp_backbone_config;

typedef struct gp_special_tokens {
    int32_t start_of_text;
    int32_t end_of_text;
    int32_t start_of_speech;
    int32_t end_of_speech;
    int32_t tts_pad;
} gp_special_tokens;

typedef struct gp_repetition_config {
    bool enabled;
    int target_text_tokens;
    int apply_below;
    int max_repeats;
} gp_repetition_config;

typedef struct gp_voice_cloning_config {
    bool enabled;
    int num_queries; /* K prefix rows */
    int num_layers;  /* compressor blocks */
    int num_heads;
    int d_model; /* must equal the backbone hidden size */
    int ffn_hidden_size;
} gp_voice_cloning_config;

typedef struct gp_codec_geometry {
    bool present;
    int num_layers; /* codec groups */
    int num_levels; /* entries in fsq_levels */
    int fsq_levels[GP_MAX_FSQ_LEVELS];
    bool do_unfold;
    double frame_rate_hz;
    int sample_rate;
    char codec_id[256];
} gp_codec_geometry;

typedef struct gp_model_config {
    gp_backbone_config backbone;
    int num_channels;                    /* C audio heads */
    int channel_vocab[GP_MAX_CHANNELS];  /* L_c in channel order */
    int channel_offset[GP_MAX_CHANNELS]; /* start of channel c in the 216 concatenated logits */
    int total_logits;                    /* sum of L_c */
    int audio_embed_dim;                 /* E */
    gp_special_tokens special;
    gp_repetition_config repetition;
    gp_voice_cloning_config voice_cloning;
    gp_codec_geometry codec;
    char model_dtype[32];
    bool legacy; /* read from config.json only */
} gp_model_config;

/* Load <dir>/gepard_config.json (or, failing that, <dir>/config.json). */
int gp_model_config_load(const char *model_dir, gp_model_config *out, gp_error *err);

/* Parse an already-read gepard_config.json document; `origin` names it in
 * messages. */
int gp_model_config_parse_gepard(const cJSON *root, const char *origin, gp_model_config *out,
                                 gp_error *err);

/* Parse a backbone-only config (config.json or the nested backbone_config).
 * `gepard_prf` < 0 when gepard_config.json has no partial_rotary_factor. */
int gp_backbone_config_parse(const cJSON *root, const char *origin, double gepard_prf,
                             gp_backbone_config *out, gp_error *err);

#endif
