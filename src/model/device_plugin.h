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
 * The codec's decoder has its own handle (gp_dev_codec): the core describes
 * its layers once (host f32 weights, the CPU decoder's layouts), opens one
 * state slot per stream (the causal left context of every convolution, kept
 * on the device) and decodes the newest frames of many streams per call.
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

#define GP_DEVICE_PLUGIN_ABI 5
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
    /* The most rows the caller's steps may ever have (0: unknown). A runner
     * that must grow its buffers grows them to this at once: growing frees
     * every captured graph, so a server that grew step by step through its
     * warm-up lost the graphs it had captured there. */
    int reserve_rows;
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

/* ---- the codec decoder (NanoCodec's CausalHiFiGANDecoder, CODEC.md §A) ---- */

typedef enum gp_dev_codec_precision {
    GP_DEV_CODEC_TF32 = 0, /* f32 signals, convolutions on TF32 tensor cores (f32 sums) */
    GP_DEV_CODEC_F32 = 1,  /* f32 throughout on the CUDA cores: the exactness path */
    GP_DEV_CODEC_F16 = 2,  /* f32 signals, convolutions on FP16 tensor cores (f32 sums) */
} gp_dev_codec_precision;

/* The same values as compute/conv.h's gp_act_kind. */
typedef enum gp_dev_act_kind {
    GP_DEV_ACT_IDENTITY = 0,
    GP_DEV_ACT_LRELU,
    GP_DEV_ACT_SNAKE,
    GP_DEV_ACT_HALF_SNAKE,
    GP_DEV_ACT_ELU,
} gp_dev_act_kind;

typedef struct gp_dev_codec_act {
    int kind, channels, n_snake; /* Snake on channels [0, n_snake) */
    float slope;                 /* LeakyReLU */
    const float *alpha;          /* [n_snake] */
    const float *inv_alpha;      /* [n_snake]: 1 / (alpha + 1e-9) */
} gp_dev_codec_act;

/* Convolution: weight [c_out][c_in][kernel], bias [c_out]; the decoder's are
 * causal with stride 1, the encoder's padded (see gp_dev_codec_enc_desc). */
typedef struct gp_dev_codec_conv {
    int c_in, c_out, kernel, dilation;
    const float *weight, *bias;
    int stride;
} gp_dev_codec_conv;

/* Causal grouped transposed convolution (output trimmed to n_in·stride):
 * weight [c_in][c_out / groups][kernel], bias [c_out]. */
typedef struct gp_dev_codec_convt {
    int c_in, c_out, kernel, stride, groups;
    const float *weight, *bias;
} gp_dev_codec_convt;

typedef struct gp_dev_codec_block { /* ResidualBlock: x + conv(act(conv(act(x)))) */
    gp_dev_codec_act in_act, skip_act;
    gp_dev_codec_conv in_conv, skip_conv;
} gp_dev_codec_block;

typedef struct gp_dev_codec_stage {
    gp_dev_codec_act act;             /* before the up-sampling convolution */
    gp_dev_codec_convt up;            /* rate = up.stride */
    const gp_dev_codec_block *blocks; /* [n_kernels][n_dilations] */
} gp_dev_codec_stage;

#define GP_DEV_CODEC_MAX_STAGES 8

typedef struct gp_dev_codec_enc_stage { /* residual layer, activation, down-sampling conv */
    const gp_dev_codec_block *blocks;   /* [n_kernels][n_dilations] */
    gp_dev_codec_act act;
    gp_dev_codec_conv down; /* stride = the stage's rate */
} gp_dev_codec_enc_stage;

/* The encoder (HiFiGANEncoder, CODEC.md §D): each conv's input padded on both
 * sides by pad_mode (non-causal) or with zeros on the left (causal). */
typedef struct gp_dev_codec_enc_desc {
    int present; /* 0: the encoder stays on the CPU */
    int causal;
    int pad_mode; /* compute/conv.h's gp_pad_mode: 0 zeros, 1 replicate, 2 reflect */
    int encoded_dim, n_stages;
    gp_dev_codec_conv pre;
    gp_dev_codec_enc_stage stages[GP_DEV_CODEC_MAX_STAGES];
    gp_dev_codec_act post_act;
    gp_dev_codec_conv post;
} gp_dev_codec_enc_desc;

typedef struct gp_dev_codec_desc {
    int device;
    gp_dev_codec_precision precision;
    int input_dim, samples_per_frame;
    int n_stages, n_kernels, n_dilations;
    int clamp_output; /* 1: clamp to [-1, 1]; 0: tanh */
    gp_dev_codec_conv pre;
    gp_dev_codec_stage stages[GP_DEV_CODEC_MAX_STAGES];
    gp_dev_codec_act post_act;
    gp_dev_codec_conv post;
    gp_dev_codec_enc_desc enc;
} gp_dev_codec_desc;

typedef struct gp_dev_codec gp_dev_codec;

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

    /* The decoder's weights on the device (copied from the host arrays). */
    int (*codec_create)(const gp_dev_codec_desc *desc, gp_dev_codec **out, gp_dev_status *st);
    void (*codec_free)(gp_dev_codec *c);
    size_t (*codec_bytes)(const gp_dev_codec *c);
    /* A stream's state on the device, all zeros (a new utterance); thread-safe. */
    int (*codec_slot_open)(gp_dev_codec *c, int *slot, gp_dev_status *st);
    int (*codec_slot_reset)(gp_dev_codec *c, int slot, gp_dev_status *st);
    void (*codec_slot_close)(gp_dev_codec *c, int slot);
    /* Decode `frames` frames for each of n streams (distinct slots, each at
     * its own position): latent [n][frames][input_dim] host f32, frame-major;
     * pcm[i] receives frames · samples_per_frame samples. Synchronous;
     * calls from several threads are serialised. */
    int (*codec_decode)(gp_dev_codec *c, int n, const int *slots, int frames, const float *latent,
                        float *const *pcm, gp_dev_status *st);
    /* GPU time of the last decode call (all its pieces), ms. */
    double (*codec_gpu_ms)(gp_dev_codec *c);
    /* The same decode queued without waiting for it: the latents are copied
     * before it returns, the samples reach pcm[i] in codec_decode_collect. One
     * decode is queued at a time (a second submit, a codec_decode, waits for
     * the first); a call larger than the plugin queues (CUDA: 4 pieces of
     * 512 frame columns) is decoded at once and is collected at once. A slot
     * closed while queued loses only its own samples. */
    int (*codec_decode_submit)(gp_dev_codec *c, int n, const int *slots, int frames,
                               const float *latent, float *const *pcm, gp_dev_status *st);
    /* *done = 1 when nothing is queued any more (the queued samples are now in
     * their pcm), 0 when the GPU is still on it (wait = 0); wait = 1 blocks. */
    int (*codec_decode_collect)(gp_dev_codec *c, int wait, int *done, gp_dev_status *st);
    /* Encode n samples (a positive multiple of samples_per_frame) into latent
     * [encoded_dim][n / samples_per_frame] (host), in f32 whatever the
     * decoder's precision. Needs desc.enc.present. Synchronous. */
    int (*codec_encode)(gp_dev_codec *c, const float *audio, size_t n, float *latent,
                        gp_dev_status *st);
    /* Measured ceiling of the codec's arithmetic: TF32 (or f32 FMA) GEMM rate. */
    int (*codec_measure)(int device, gp_dev_codec_precision precision, double *tflops,
                         gp_dev_status *st);
} gp_dev_plugin;

typedef const gp_dev_plugin *(*gp_dev_plugin_entry)(void);

#ifdef __cplusplus
}
#endif

#endif
