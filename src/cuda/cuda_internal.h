/* cuda_internal.h — what the CUDA backend's files share: the device-side
 * model, KV cache and runner structures behind device_plugin.h's opaque
 * handles, the status helpers, and the kernels' launch functions
 * (cuda_kernels.cu). Nothing outside src/cuda/ includes this file. */
#ifndef GP_CUDA_INTERNAL_H
#define GP_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>

#include "gepard.h"
#include "model/device_plugin.h"

int gp_cuda_fail(gp_dev_status *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Turn a CUDA error into a status naming the operation; out-of-memory
 * errors become GEPARD_ERR_NOMEM. */
int gp_cuda_check(cudaError_t e, const char *what, gp_dev_status *st);
int gp_cuda_blas_check(cublasStatus_t s, const char *what, gp_dev_status *st);

/* Which work a CUDA stream carries, for its scheduling priority: the
 * backbone's step is a chain of short, latency-bound kernels whose end the
 * step thread waits for; the codec's kernels are many wide ones that fill
 * the GPU. With the step's stream at the device's greatest priority, the
 * block scheduler dispatches its blocks first as multiprocessors free up,
 * so a step queued beside a codec call is not held back by it.
 * GEPARD_CUDA_PRIORITIES=0 gives every stream the default priority (for
 * measurements). */
typedef enum { GP_CUDA_STREAM_STEP, GP_CUDA_STREAM_BULK } gp_cuda_stream_kind;
cudaError_t gp_cuda_stream_create(cudaStream_t *s, gp_cuda_stream_kind kind);

#define GP_CUDA_TRY(call, what)                                                                    \
    do {                                                                                           \
        int rc_ = gp_cuda_check((call), (what), st);                                               \
        if (rc_) return rc_;                                                                       \
    } while (0)

typedef struct gp_cuda_layer {
    void *qkv;       /* [(2NH + 2NKV)·D][H]: q/gate rows, k rows, v rows */
    void *o;         /* [H][NH·D] */
    void *gu;        /* [2I][H]: gate rows then up rows */
    void *down;      /* [H][I] */
    float *norms;    /* [2H + 2D]: input, post, q, k gains */
    float *qkv_bias; /* [(2NH + 2NKV)·D] or NULL */
    float *o_bias;   /* [H] or NULL */
} gp_cuda_layer;

struct gp_dev_model {
    gp_dev_model_desc d; /* the host pointers are not kept valid */
    int device;
    bool wide;            /* f32 weights / activations (GP_DEV_F32) */
    cudaDataType_t wtype; /* CUDA_R_16BF or CUDA_R_32F */
    size_t welem;         /* bytes per weight / GEMM-input element */
    int qkv_rows;         /* (2NH + 2NKV)·D */
    int multiprocessors;
    gp_cuda_layer *layers;
    float *rope_inv_freq, *final_norm, *audio_tables;
    float *proj0, *proj0_b, *proj2, *proj2_b, *heads, *heads_b;
    int *channel_offset; /* [C] first row of each channel in audio_tables */
    size_t bytes;
    void *staging; /* upload conversion buffer */
    size_t staging_bytes;
    cudaStream_t upload_stream;
    cublasHandle_t upload_blas;
};

struct gp_dev_kv {
    gp_dev_model *model;
    int block_size, blocks; /* + 1 spare block that padded rows write into */
    size_t block_elems;     /* elements per block: layers·2·NKV·block_size·D */
    void *data;             /* bf16 or f32 by model precision */
};

/* A captured decode step for one padded batch shape. */
typedef struct gp_cuda_graph {
    int rows, splits, bt_stride;
    const void *kv_data; /* the KV storage the graph's kernels address */
    int kv_blocks;
    cudaGraphExec_t exec;
    unsigned long long last_use; /* the runner's launch count at its last launch */
} gp_cuda_graph;

#define GP_CUDA_MAX_GRAPHS 128
/* The most rows a runner reserves ahead of its steps (gp_dev_step.reserve_rows). */
#define GP_CUDA_RESERVE_ROWS_MAX 4096
/* GEPARD_CUDA_GRAPH_LOG=1: a line on stderr per captured graph (what, size,
 * context splits, graphs held, host ms); gp_cuda_host_ms: a steady clock. */
void gp_cuda_graph_note(const char *what, int size, int splits, int held, double ms);
double gp_cuda_host_ms(void);
/* Decode steps of this many rows or more attend by tiles (cuda_attention_tiles.cu). */
#define GP_CUDA_ATTN_TILE_ROWS 128

/* A run-time LoRA adapter on the device (per runner). */
typedef struct gp_cuda_lora_module {
    int layer, which, rank, in, out;
    float scale;
    float *A, *B; /* device f32 */
} gp_cuda_lora_module;
typedef struct gp_cuda_lora {
    uint64_t id;
    int n;
    gp_cuda_lora_module *mods;
    int *index; /* [layers][GP_DEV_MATRICES]: module of (layer, matrix) or -1 */
} gp_cuda_lora;
/* Rows [row0, row0 + rows) of this step use adapter `lora` (index). */
typedef struct gp_cuda_lora_use {
    int row0, rows, lora;
} gp_cuda_lora_use;

struct gp_dev_runner {
    gp_dev_model *m;
    cudaStream_t stream;
    bool profiling; /* this step runs inside cudaProfilerStart/Stop (cuda_runner.cu) */
    cublasHandle_t blas;
    void *blas_workspace;
    size_t blas_workspace_bytes;
    /* capacities */
    int cap_rows, cap_seqs, cap_frames, bt_stride;
    /* device activations */
    float *x;           /* [rows][H] residual stream */
    void *a;            /* [rows][max(H, NH·D, I)] GEMM input (wtype) */
    float *qkv;         /* [rows][qkv_rows] */
    float *q;           /* [rows][NH][D] normed, rotated queries */
    float *gu;          /* [rows][2I] */
    float *rope;        /* [rows][rotary_dim] cos then sin */
    float *part;        /* attention partials [rows][NKV][splits][G] (m, l) + acc */
    unsigned *counters; /* [rows][NKV] split tickets, zero between steps */
    float *emb_z;       /* [frames][C·E] */
    float *emb_t;       /* [frames][H] */
    float *emb;         /* [frames][H] */
    float *hidden;      /* [seqs][H] */
    float *logits;      /* [seqs][total] */
    /* step metadata on the device: one upload per step */
    int *meta;      /* row_seq, row_pos, seq_last, decode_row_frame, codes, block tables */
    int meta_rows;  /* the rows whose layout the metadata has now (gp_cuda_meta_layout_for) */
    float *prefill; /* [rows][H] */
    /* pinned host mirrors */
    int *h_meta;
    float *h_prefill, *h_hidden, *h_logits;
    /* the step in flight */
    int n_rows, n_seqs, n_frames, n_decode_rows, splits;
    bool launched;
    bool no_skinny;   /* GEPARD_CUDA_SKINNY=0 */
    bool no_fused;    /* GEPARD_CUDA_FUSED_ATTENTION=0 */
    bool mixed_tiles; /* GEPARD_CUDA_MIXED_TILES=1: a mixed step's decode rows by tiles */
    long mixed_steps, mixed_tiled_steps; /* steps with prefill rows; of them by tiles */
    int tile_rows;     /* decode steps of this many rows or more attend by tiles (0: never) */
    bool pow2_buckets; /* GEPARD_CUDA_GRAPH_BUCKETS=pow2: graphs for powers of two only */
    bool graphs_ahead; /* every tile size's graph captured with the first (launch_graph) */
    cudaEvent_t done;
    cudaEvent_t t_start, t_end; /* timing of the step in flight */
    double last_gpu_ms;
    gp_cuda_graph graphs[GP_CUDA_MAX_GRAPHS];
    int n_graphs, max_graphs;
    unsigned long long graph_clock; /* graph launches so far (gp_cuda_graph.last_use) */
    gp_cuda_lora *loras;            /* adapters uploaded so far */
    int n_loras;
    gp_cuda_lora_use *uses; /* this step's sequences with an adapter */
    int n_uses, cap_uses;
    /* the single-row step kernel (cuda_decode1.cu) */
    bool d1_ok;           /* usable for this model (and not switched off) */
    void *d1_layers;      /* device table of the layers' weights */
    unsigned *d1_barrier; /* grid barrier: arrived, generation */
    size_t d1_smem, d1_a_elems;
    int d1_units;  /* cap on attention units per kv head (0: as kernel by kernel) */
    int d1_pieces; /* weight copies in 1-3 pieces (GEPARD_CUDA_DECODE1_PIECES) */
    bool d1_regs;  /* inputs in registers for K = 1024 (GEPARD_CUDA_DECODE1_REGS=0: off) */
    unsigned long long *d1_prof; /* phase times (GEPARD_CUDA_DECODE1_PROFILE=1) or NULL */
    int d1c_size;     /* the cluster kernel's blocks per cluster (cuda_decode1c.cu), 0: not used */
    int d1c_clusters; /* its clusters */
    bool d1c_fused;   /* gate/up and down in one phase */
    void *d1c_omaps;  /* host array of the o projections' tensor maps, or NULL */
    bool d1c_embed;   /* the audio frame's embedding inside the cluster kernel */
};

/* Offsets of the metadata arrays inside runner->meta (ints), for the rows of
 * the step being filled or enqueued (runner->meta_rows). */
typedef struct gp_cuda_meta_layout {
    size_t row_seq, row_pos, seq_last, decode_row_frame, codes, block_table, total;
} gp_cuda_meta_layout;
gp_cuda_meta_layout gp_cuda_meta_layout_for(const gp_dev_runner *r);

/* ---- kernels (cuda_kernels.cu); all launch on `s` ---- */
void gp_cuda_convert(const void *src, gp_dev_dtype src_type, void *dst, bool dst_f32, size_t n,
                     cudaStream_t s);
void gp_cuda_add_scaled_f32_to_weight(void *w, bool w_f32, const float *delta, size_t n,
                                      cudaStream_t s);
void gp_cuda_rmsnorm(const float *x, int ldx, const int *row_index, int rows, int width,
                     const float *gain, float eps, void *y, bool y_f32, int ldy, cudaStream_t s);
void gp_cuda_rope_table(const int *row_pos, int rows, const float *inv_freq, int half, float *rope,
                        cudaStream_t s);
typedef struct gp_cuda_attn_args {
    const gp_dev_model *m;
    const gp_dev_kv *kv;
    int layer, rows, splits, bt_stride;
    const int *row_seq, *row_pos, *block_table;
    unsigned *counters; /* [rows][NKV] zeros: splits finished (last one merges) */
    bool tiles;         /* decode attention by tiles (gp_cuda_decode_attention_tiles) */
} gp_cuda_attn_args;
void gp_cuda_qkv_post(const gp_cuda_attn_args *a, float *qkv, const float *qkv_bias,
                      const float *q_norm, const float *k_norm, const float *rope, float *q,
                      cudaStream_t s);
void gp_cuda_attention(const gp_cuda_attn_args *a, const float *q, const float *qkv, float *part,
                       void *out, cudaStream_t s);
/* Decode rows only (every sequence one row): q/k norm + RoPE, the cache
 * write and attention in one kernel, a merge kernel after it. Needs
 * head_dim 256 (gp_cuda_decode_attention_fits). `splits` blocks of 4
 * single-warp units per (row, kv head). */
bool gp_cuda_decode_attention_fits(const gp_dev_model *m);
void gp_cuda_decode_attention(const gp_cuda_attn_args *a, const float *qkv, const float *q_norm,
                              const float *k_norm, const float *rope, float *part, void *out,
                              cudaStream_t s);
/* The same for big batches (cuda_attention_tiles.cu): one block per (row, kv
 * head) over tiles of 32 positions, merged and gated in the block — no
 * partials, no merge kernel, no splits. */
void gp_cuda_decode_attention_tiles(const gp_cuda_attn_args *a, const float *qkv,
                                    const float *q_norm, const float *k_norm, const float *rope,
                                    void *out, cudaStream_t s);
/* y[row][o] += scale · Σ_k B[o][k] · (A x[row])_k for rows [row0, row0+rows);
 * x of the weight type (the GEMM's input), y f32. rank <= 256. */
void gp_cuda_lora_apply(const void *x, bool x_f32, int ldx, int row0, int rows,
                        const gp_cuda_lora_module *mod, float *y, int ldy, cudaStream_t s);
void gp_cuda_silu_mul(const float *gu, int rows, int inter, void *out, bool out_f32,
                      cudaStream_t s);
void gp_cuda_add_bias(float *y, int rows, int width, const float *bias, cudaStream_t s);
void gp_cuda_embed_gather(const int32_t *codes, int frames, const gp_dev_model *m, float *z,
                          cudaStream_t s);
void gp_cuda_bias_gelu(float *y, int rows, int width, const float *bias, cudaStream_t s);
void gp_cuda_bias_layernorm(float *y, int rows, int width, const float *bias, float scale,
                            cudaStream_t s);
void gp_cuda_build_rows(const float *emb, const int *decode_row_frame, int n_decode_rows,
                        const float *prefill, int rows, int width, float *x, cudaStream_t s);

/* Skinny products for steps of at most GP_CUDA_GEMV_MAX_ROWS rows (one:
 * measured on an H200, cuBLAS is faster from two rows on): one
 * kernel reads each weight once for every row, with the RMSNorm or SwiGLU
 * that makes its input fused in front and the residual add behind. The
 * inputs are rounded to the weight type as on the GEMM path. */
#define GP_CUDA_GEMV_MAX_ROWS 1
enum { GP_GEMV_NORM = 0, GP_GEMV_SILU = 1, GP_GEMV_PLAIN = 2 };
typedef struct gp_cuda_gemv {
    const void *W; /* [N][K], K a multiple of 8 and at most 4096 */
    int N, K, rows, mode;
    const float *x, *gain; /* NORM: rows of x [rows][K] and the (1 + w) gain */
    float eps;
    const void *src; /* SILU: f32 [rows][2K] gate|up; PLAIN: weight-type [rows][K] */
    float *out;      /* [rows][ldo] */
    int ldo;
    bool add;       /* out += instead of out = */
    int max_blocks; /* grid cap (the multiprocessor count), 0 = none */
} gp_cuda_gemv;
void gp_cuda_gemv_run(const gp_cuda_gemv *g, bool f32_weights, cudaStream_t s);

/* The single-row decode step as one persistent kernel (cuda_decode1.cu):
 * prepare at runner creation (decides d1_ok, uploads the layer table),
 * launch in place of the layers + heads of a one-row decode step. */
int gp_cuda_decode1_prepare(gp_dev_runner *r, gp_dev_status *st);
void gp_cuda_decode1_release(gp_dev_runner *r);
/* false: not for this step (take the kernels); `embed`: the kernel also
 * computes the step's one audio frame embedding, x and the RoPE row
 * (only where gp_cuda_decode1_embeds says it can) */
bool gp_cuda_decode1_launch(gp_dev_runner *r, const gp_cuda_attn_args *args, bool embed,
                            cudaStream_t s);
bool gp_cuda_decode1_embeds(const gp_dev_runner *r);
/* The cluster form of that kernel (cuda_decode1c.cu): plan (sets d1c_size,
 * d1c_clusters, d1_smem, d1_a_elems; false when it does not fit) and launch. */
bool gp_cuda_decode1c_plan(gp_dev_runner *r);
bool gp_cuda_decode1c_launch(gp_dev_runner *r, const gp_cuda_attn_args *args, bool embed,
                             cudaStream_t s);

#endif
