/* attention.h — causal attention of one query head over a sequence's cached
 * keys and values (MODEL.md §C.2): scores q·K_j·scale for j < n_positions,
 * max-subtracted f32 softmax, weighted sum of V_j. gp_attend_cached runs the
 * active kernel level's version (kernels.h); the scalar reference is here. */
#ifndef GP_COMPUTE_ATTENTION_H
#define GP_COMPUTE_ATTENTION_H

#include "compute/kv_cache.h"

/* out[head_dim] = softmax(q·K/scale) V over positions [0, n_positions) of
 * (layer, kv_head). `scores` holds n_positions floats of scratch. */
void gp_attend_cached(const gp_kv_pool *kv, const gp_kv_seq *seq, int layer, int kv_head,
                      const float *q, int n_positions, float scale, float *out, float *scores);

/* The n_q query heads that share (layer, kv_head) under grouped-query
 * attention, in one pass over the cache: each key and value is read once for
 * the whole group instead of once per head. out + h·out_stride receives what
 * gp_attend_cached gives for q + h·q_stride (h < n_q), up to rounding.
 * `scores` holds n_q · n_positions floats of scratch. */
void gp_attend_cached_group(const gp_kv_pool *kv, const gp_kv_seq *seq, int layer, int kv_head,
                            const float *q, int q_stride, int n_q, int n_positions, float scale,
                            float *out, int out_stride, float *scores);

/* The plain C references the SIMD versions are tested against (the group
 * reference is one gp_attend_cached_scalar per head). */
void gp_attend_cached_scalar(const gp_kv_pool *kv, const gp_kv_seq *seq, int layer, int kv_head,
                             const float *q, int n_positions, float scale, float *out,
                             float *scores);
void gp_attend_cached_group_scalar(const gp_kv_pool *kv, const gp_kv_seq *seq, int layer,
                                   int kv_head, const float *q, int q_stride, int n_q,
                                   int n_positions, float scale, float *out, int out_stride,
                                   float *scores);

#endif
