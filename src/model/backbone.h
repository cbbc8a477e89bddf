/* backbone.h — the Qwen3.5 full-attention backbone forward pass (MODEL.md §C).
 *
 * One call runs a batch of rows from several sequences through every layer:
 * prefill chunks (many rows of one sequence) and decode steps (one row each
 * of many sequences) go through the same code. Each sequence appends its rows
 * to its own paged KV cache at positions kv->length, kv->length+1, ... and
 * attends causally over everything it has cached. The output is the
 * final-normed hidden state of the last row of every sequence.
 */
#ifndef GP_MODEL_BACKBONE_H
#define GP_MODEL_BACKBONE_H

#include "base/pool.h"
#include "compute/kv_cache.h"
#include "model/lora.h"
#include "model/model.h"

typedef struct gp_backbone_seq {
    gp_kv_seq *kv; /* blocks must already cover kv->length + n_rows positions */
    int n_rows;
    const gp_lora_adapter *lora; /* run-time adapter for this sequence, or NULL */
} gp_backbone_seq;

/* Working memory of a forward pass, grown on demand and reused; one per
 * thread that runs forwards. */
typedef struct gp_forward_scratch {
    size_t capacity_rows;
    float *x, *a, *qg, *q, *k, *v, *att, *gate, *up, *tmp;
    int *row_seq, *row_pos;
    float *rope_cos, *rope_sin; /* [rows][rotary_dim / 2] */
    float *scores;              /* [threads][score_capacity] */
    size_t score_capacity;
    int score_threads;
} gp_forward_scratch;

/* Optional debugging output: layer_out[0] receives the input rows, layer_out[l]
 * the residual stream after layer l, layer_out[NL+1] every row after the
 * final norm; each [total_rows][H]. Entries may be NULL. */
typedef struct gp_backbone_debug {
    float **layer_out;
} gp_backbone_debug;

void gp_forward_scratch_init(gp_forward_scratch *s);
void gp_forward_scratch_free(gp_forward_scratch *s);

int gp_backbone_forward(const gp_model *model, gp_kv_pool *kv, gp_forward_scratch *scratch,
                        const gp_backbone_seq *seqs, int n_seqs, const float *x_in, float *h_last,
                        const gp_backbone_debug *debug, gp_pool *pool, gp_error *err);

/* Zero-centred RMSNorm of n rows of width `width` with gain (1 + w) already
 * folded into `gain`. */
void gp_rmsnorm_rows(const float *x, int n, int width, const float *gain, float eps, float *y);

#endif
