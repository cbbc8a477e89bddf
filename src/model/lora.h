/* lora.h — LoRA adapters (MODEL.md §F): loading, merging into the weights at
 * load time, and applying per stream at run time.
 *
 * An adapter is a set of low-rank updates y += (alpha/r)·B(A·x) on the
 * backbone's linear layers (q/k/v/o projections and the MLP), optionally
 * with a replacement stop head (DPO adapters). Sources: the upstream
 * `lora_adapter.pt` (torch.save of name → fp32 tensor), DPO `adapter-*.pt`
 * ({"lora": {...}, "stop_head": {...}}) and the same names in .safetensors.
 * alpha is not stored upstream; it comes from the caller, the safetensors
 * metadata ("alpha"), or defaults to 2·rank.
 */
#ifndef GP_MODEL_LORA_H
#define GP_MODEL_LORA_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "io/safetensors.h"

typedef enum gp_lora_target {
    GP_LORA_Q = 0,
    GP_LORA_K,
    GP_LORA_V,
    GP_LORA_O,
    GP_LORA_GATE,
    GP_LORA_UP,
    GP_LORA_DOWN,
    GP_LORA_TARGETS
} gp_lora_target;

typedef struct gp_lora_module {
    int rank; /* 0 = this linear is not adapted */
    int in, out;
    float scale; /* alpha / rank */
    float *A;    /* [rank][in] */
    float *B;    /* [out][rank] */
} gp_lora_module;

typedef struct gp_lora_adapter {
    uint64_t id; /* unique for the life of the process (device caches key on it) */
    char *origin;
    int num_layers;
    gp_lora_module *modules; /* [num_layers][GP_LORA_TARGETS] */
    int rank;                /* the largest rank present */
    double alpha;
    bool has_stop_head;
    float *stop_weight; /* [H] */
    float stop_bias;
} gp_lora_adapter;

struct gp_model;

/* Load an adapter file (.pt or .safetensors). alpha <= 0 means "from the
 * file's metadata, else 2·rank". Shapes are checked against the model. */
int gp_lora_load(const char *path, const struct gp_model *model, double alpha,
                 gp_lora_adapter **out, gp_error *err);
/* Build an adapter from already-read tensors (names as in the files). */
int gp_lora_from_tensors(const gp_st_tensor *tensors, size_t count, const char *origin,
                         const struct gp_model *model, double alpha, gp_lora_adapter **out,
                         gp_error *err);
void gp_lora_free(gp_lora_adapter *adapter);

/* The module adapting (layer, target), or NULL. */
const gp_lora_module *gp_lora_module_for(const gp_lora_adapter *adapter, int layer,
                                         gp_lora_target target);

/* Fold the adapter into the model's weights: W += (alpha/r)·B·A, in f32,
 * re-encoding each matrix in the model's weight format; replaces the stop
 * head if the adapter carries one. */
int gp_lora_merge(struct gp_model *model, const gp_lora_adapter *adapter, gp_error *err);

/* Run-time update of n rows: y[j] += scale · B (A x[j]). `tmp` holds rank
 * floats. */
void gp_lora_apply(const gp_lora_module *mod, const float *x, int n, int ldx, float *y, int ldy,
                   float *tmp);

/* Merge helper for un-merged training checkpoints: w[rows][cols] (f32) +=
 * (alpha/r)·B·A from the tensors `a` [r, cols] and `b` [rows, r]; alpha <= 0
 * means 2·r. `prefix` names the module in messages. */
int gp_lora_merge_tensors(float *w, int rows, int cols, const gp_st_tensor *a,
                          const gp_st_tensor *b, double alpha, const char *prefix, gp_error *err);

#endif
