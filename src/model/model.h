/* model.h — a loaded Gepard model: config, backbone weights, the TTS overlay
 * (audio embeddings, projection MLP, heads, stop head) and the voice-cloning
 * compressor.
 *
 * Weights are read from model.safetensors once: backbone matrices into the
 * chosen weight format (f32 reference, bf16, int8, q4), everything small
 * (norms, overlay, heads) into f32. The text embedding table stays in the
 * file mapping in its stored dtype and only looked-up rows are converted.
 * Zero-centred RMSNorm weights are stored with the +1 already added. The
 * model is immutable after loading and may be shared by many threads.
 */
#ifndef GP_MODEL_MODEL_H
#define GP_MODEL_MODEL_H

#include <pthread.h>
#include <stdbool.h>

#include "base/error.h"
#include "compute/matrix.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/device.h"

typedef struct gp_layer {
    float *input_norm; /* [H], 1 + w */
    float *post_norm;  /* [H], 1 + w */
    float *q_norm;     /* [D], 1 + w */
    float *k_norm;     /* [D], 1 + w */
    gp_matrix q_proj;  /* [2·NH·D, H]: per head, D query rows then D gate rows */
    gp_matrix k_proj;  /* [NKV·D, H] */
    gp_matrix v_proj;  /* [NKV·D, H] */
    gp_matrix o_proj;  /* [H, NH·D] */
    gp_matrix gate_proj;
    gp_matrix up_proj;
    gp_matrix down_proj;
    float *q_bias, *k_bias, *v_bias, *o_bias; /* only with attention_bias */
} gp_layer;

/* The layer's seven Linear matrices, in LoRA target order (model/lora.h:
 * q, k, v, o, gate, up, down). */
#define GP_LAYER_MATRICES 7
static inline void gp_layer_matrices(gp_layer *L, gp_matrix *out[GP_LAYER_MATRICES]) {
    out[0] = &L->q_proj;
    out[1] = &L->k_proj;
    out[2] = &L->v_proj;
    out[3] = &L->o_proj;
    out[4] = &L->gate_proj;
    out[5] = &L->up_proj;
    out[6] = &L->down_proj;
}

typedef struct gp_compressor_block {
    float *norm_self, *norm_cross, *norm_ffn; /* plain RMSNorm gains [d] */
    gp_matrix self_q, self_k, self_v, self_out;
    gp_matrix cross_q, cross_k, cross_v, cross_out;
    gp_matrix ffn_gate, ffn_up, ffn_down;
} gp_compressor_block;

typedef struct gp_compressor {
    gp_matrix input_proj; /* [d, C] */
    float *input_bias;    /* [d] */
    float *queries;       /* [K][d] */
    gp_compressor_block *blocks;
    float *final_norm; /* [d] */
    float output_scale;
} gp_compressor;

typedef struct gp_model_load_options {
    gp_weight_format weight_format; /* backbone matrices (CPU) */
    gp_device_spec device;          /* CPU, or CUDA: backbone matrices go to the GPU only */
    int packed_weights;             /* gepard_load_params.packed_weights */
} gp_model_load_options;

typedef struct gp_model {
    gp_model_config cfg;
    gp_weight_format weight_format;
    /* Prefill's matrix products through oneDNN (compute/onednn_matmul.h), and
     * why or why not, for `gepard bench`. */
    bool prefill_onednn;
    bool prefill_tiles; /* ... or through our AMX tile loop (compute/matmul_tiles.h) */
    char prefill_why[400];
    /* How the decode step reads the backbone's bf16 weights (compute/bf16_packed.h:
     * the 12-bit lossless copies where they measure faster), for `gepard bench`. */
    char decode_weights_why[300];
    char *dir;
    gp_st_file *file;
    const gp_st_tensor *embed; /* [V, H] inside the mapping */

    gp_layer *layers;
    float *final_norm;    /* [H], 1 + w */
    float *rope_inv_freq; /* [rotary_dim / 2] */

    float *audio_tables;   /* [total_logits][E]: channel c's rows start at channel_offset[c] */
    gp_matrix embed_proj0; /* [H, C·E] */
    gp_matrix embed_proj2; /* [H, H] */
    float *embed_proj0_bias, *embed_proj2_bias;
    float audio_embed_scale;
    gp_matrix heads;    /* [total_logits, H], all codebook heads stacked in channel order */
    float *heads_bias;  /* [total_logits] */
    float *stop_weight; /* [H] */
    float stop_bias;

    bool has_voice_cloning; /* config enabled and all ref_compressor.* present */
    pthread_mutex_t compressor_lock;
    bool compressor_loaded;
    gp_compressor compressor; /* loaded on first use */
    float *null_prefix;       /* [K][H] or NULL */
    size_t weight_bytes;      /* resident weight memory */
    /* With a device, the backbone's matrices live only there (the gp_layer
     * matrices stay empty) and every forward runs on it. */
    gp_device_model *device;
} gp_model;

gp_model_load_options gp_model_load_default_options(void);
int gp_model_load(const char *dir, const gp_model_load_options *options, gp_model **out,
                  gp_error *err);
void gp_model_free(gp_model *model);

/* Load the compressor weights if not yet loaded (thread-safe). */
int gp_model_ensure_compressor(gp_model *model, gp_error *err);

/* Copy the embedding row of token `id` into dst[H] as f32. */
int gp_model_embed_token(const gp_model *model, int32_t id, float *dst, gp_error *err);

#endif
