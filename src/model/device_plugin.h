/* device_plugin.h — the boundary between the engine and a compute backend
 * that lives in its own shared library (today: the CUDA backend,
 * libgepard-cuda.so, built from src/cuda/).
 *
 * The core never links a GPU library: model/device.c opens the plugin with
 * dlopen at run time and reaches everything through the function table
 * below, so a `gepard` binary built with the backend still starts on a machine
 * without a GPU, driver or CUDA libraries. This header is plain C with no GPU
 * types; the plugin includes it from its CUDA sources. Device memory stays
 * behind the opaque handles.
 *
 * The level of the seam is "upload this model", "give me a KV cache of N
 * blocks", "run this batched step": the scheduler, sampler, loaders and model
 * description stay in the core and are shared with the CPU path. A step takes
 * the rows the core planned (decode frames to embed, prefill rows, each
 * sequence's KV block table) and returns, per sequence, the final-normed
 * hidden state of its last row and the heads' logits for it.
 *
 * Every fallible call returns 0 or a GEPARD_ERR_* code and fills a
 * gp_dev_status with a sentence for the user.
 */
#ifndef GP_MODEL_DEVICE_PLUGIN_H
#define GP_MODEL_DEVICE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GP_DEVICE_PLUGIN_ABI 1
#define GP_DEVICE_PLUGIN_SYMBOL "gp_device_plugin_v1"

typedef struct gp_dev_status {
    int code;
    char message[512];
} gp_dev_status;

/* Arithmetic of the projections (everything else runs in f32). */
typedef enum gp_dev_precision {
    GP_DEV_BF16 = 0, /* bf16 weights and GEMM inputs, f32 accumulation, bf16 KV cache */
    GP_DEV_F32 = 1,  /* f32 weights, activations and KV cache (no TF32): the exactness path */
} gp_dev_precision;

/* Source element types of uploaded matrices. */
typedef enum gp_dev_dtype { GP_DEV_DT_F32 = 0, GP_DEV_DT_BF16 = 1, GP_DEV_DT_F16 = 2 } gp_dev_dtype;

/* Backbone matrices of one layer, as stored upstream ([out][in], row-major). */
typedef enum gp_dev_matrix {
    GP_DEV_Q = 0, /* [2·NH·D][H]: per head D query rows then D gate rows */
    GP_DEV_K,
    GP_DEV_V,
    GP_DEV_O,
    GP_DEV_GATE,
    GP_DEV_UP,
    GP_DEV_DOWN,
    GP_DEV_MATRICES
} gp_dev_matrix;

typedef struct gp_dev_model_desc {
    int hidden, layers, heads, kv_heads, head_dim, intermediate, rotary_dim;
    int channels, embed_dim, total_logits;
    float rms_eps;
    gp_dev_precision precision;
    int device; /* CUDA device index */
    /* Host f32 arrays copied at gp_dev_model_finish (all but the backbone
     * matrices, which are uploaded one by one while loading). */
    const float *rope_inv_freq; /* [rotary_dim / 2] */
    const float *final_norm;    /* [H], 1 + w */
    const float *audio_tables;  /* [total_logits][E] */
    const int *channel_offset;  /* [C] first row of each channel in audio_tables */
    const float *embed_proj0;   /* [H][C·E] row-major */
    const float *embed_proj0_b; /* [H] */
    const float *embed_proj2;   /* [H][H] */
    const float *embed_proj2_b; /* [H] */
    float audio_embed_scale;
    const float *head_weights;  /* [total_logits][H] */
    const float *head_biases;   /* [total_logits] */
    const float *const *norms;  /* [layers][4]: input, post, q, k (1 + w) */
    const float *const *biases; /* [layers][4]: q, k, v, o biases, or NULL */
} gp_dev_model_desc;

/* One batched step, planned by the core (model/generate_step.c). Rows are
 * ordered sequence by sequence; the first n_decode_rows rows are audio-frame
 * embeddings of `codes` (row r uses frame decode_row_frame[r]), the rest are
 * prefill rows given as f32. */
typedef struct gp_dev_step {
    int n_rows, n_seqs;
    int n_frames;                 /* frames to embed */
    const int32_t *codes;         /* [n_frames][C] */
    int n_decode_rows;            /* rows taken from frame embeddings */
    const int *decode_row_frame;  /* [n_decode_rows] */
    const float *prefill_rows;    /* [n_rows - n_decode_rows][H] */
    const int *seq_rows;          /* [n_seqs] rows of each sequence */
    const int *seq_start;         /* [n_seqs] positions already cached */
    const int *const *seq_blocks; /* [n_seqs] the sequence's KV block ids */
    const int *seq_n_blocks;      /* [n_seqs] */
    int graph_ok;                 /* the caller allows a captured graph for this shape */
    const uint64_t *seq_lora;     /* [n_seqs] run-time adapter (lora_upload id) or 0; may be NULL */
} gp_dev_step;

/* One low-rank update y += scale · B (A x) of a backbone matrix (host f32). */
typedef struct gp_dev_lora_module {
    int layer;
    gp_dev_matrix which;
    int rank, in, out;
    float scale;
    const float *A; /* [rank][in] */
    const float *B; /* [out][rank] */
} gp_dev_lora_module;

typedef struct gp_dev_model gp_dev_model;
typedef struct gp_dev_kv gp_dev_kv;
typedef struct gp_dev_runner gp_dev_runner;

typedef struct gp_dev_info {
    char name[256];
    int major, minor, multiprocessors;
    size_t memory_total, memory_free;
    int driver_version, runtime_version;
} gp_dev_info;

typedef struct gp_dev_plugin {
    int abi;
    const char *name; /* "cuda" */
    /* Devices usable now; 0 with a reason when none (no driver, no GPU). */
    int (*device_count)(gp_dev_status *st);
    int (*device_info)(int device, gp_dev_info *info, gp_dev_status *st);

    int (*model_create)(const gp_dev_model_desc *desc, gp_dev_model **out, gp_dev_status *st);
    /* Upload one backbone matrix ([rows][cols] of `dtype`, row-major host
     * memory, e.g. the mapped safetensors); converted on the device. */
    int (*model_upload)(gp_dev_model *m, int layer, gp_dev_matrix which, gp_dev_dtype dtype,
                        const void *data, int rows, int cols, gp_dev_status *st);
    /* Copy the small tensors named in the descriptor; the model is usable after. */
    int (*model_finish)(gp_dev_model *m, const gp_dev_model_desc *desc, gp_dev_status *st);
    /* W += scale · B·A on the device (A [rank][cols], B [rows][rank], f32 host). */
    int (*model_merge_lora)(gp_dev_model *m, int layer, gp_dev_matrix which, int rank,
                            const float *A, const float *B, float scale, gp_dev_status *st);
    size_t (*model_bytes)(const gp_dev_model *m);
    void (*model_free)(gp_dev_model *m);

    /* A paged KV cache of `blocks` blocks of `block_size` positions. */
    int (*kv_create)(gp_dev_model *m, int block_size, int blocks, gp_dev_kv **out,
                     gp_dev_status *st);
    void (*kv_free)(gp_dev_kv *kv);

    /* A runner owns a CUDA stream, BLAS handle, step buffers and graphs; one
     * per thread that runs steps. */
    int (*runner_create)(gp_dev_model *m, gp_dev_runner **out, gp_dev_status *st);
    void (*runner_free)(gp_dev_runner *r);
    /* Queue a step (returns before the GPU finishes). */
    int (*step_launch)(gp_dev_runner *r, gp_dev_kv *kv, const gp_dev_step *step, gp_dev_status *st);
    /* Wait for the queued step; *hidden [n_seqs][H] and *logits
     * [n_seqs][total_logits] point into the runner's pinned memory, valid
     * until the next launch. */
    int (*step_wait)(gp_dev_runner *r, const float **hidden, const float **logits,
                     gp_dev_status *st);
    /* Teacher-forcing and debugging: every row's final-normed hidden state of
     * the last step ([n_rows][H], synchronous). */
    int (*step_all_hidden)(gp_dev_runner *r, float *out, gp_dev_status *st);
    /* Make adapter `id` (unique per adapter for the life of the process)
     * known to the runner; a no-op when it already is. */
    int (*lora_upload)(gp_dev_runner *r, uint64_t id, const gp_dev_lora_module *mods, int n,
                       gp_dev_status *st);
    /* GPU time of the last waited-for step (uploads to downloads), ms. */
    double (*step_gpu_ms)(gp_dev_runner *r);

    /* Measured ceilings of the device: copy bandwidth (read + write) and bf16
     * GEMM rate on an n³ product. */
    int (*measure)(int device, double *bandwidth_gbs, double *bf16_tflops, gp_dev_status *st);
} gp_dev_plugin;

typedef const gp_dev_plugin *(*gp_dev_plugin_entry)(void);

#ifdef __cplusplus
}
#endif

#endif
