/* teacher_forcing.h — running a model on the goldens' reference codes and
 * comparing its distributions with the reference logits: shared by the CUDA
 * tests (test_cuda.c) and the CPU's quantised-weight accuracy report
 * (test_real_size.c). */
#ifndef GP_TESTS_TEACHER_FORCING_H
#define GP_TESTS_TEACHER_FORCING_H

#include "base/pool.h"
#include "model/generate.h"

/* Forces the reference codes (pick hook) and records, per frame, the stop
 * probability of its decode step, the distributions it was drawn from
 * (probs, when set: softmax at temperature 1, on any device) and the logits
 * (logits, when set: a device leaves them in cond.logits; the CPU keeps them
 * in its step workspace, so CPU callers use probs). */
typedef struct tf_forced {
    const int32_t *codes; /* [T][C] frame-major */
    int C, T, calls;
    float *logits; /* [T][total] or NULL */
    float *stop;   /* [T] */
    int total;
    float *probs;       /* [T][total] or NULL */
    const int *offsets; /* the model's channel_offset (for probs) */
} tf_forced;

/* f->codes, C, T and total set; logits and stop allocated by the caller.
 * `pool` may be NULL (the default). */
int tf_run_forced(gp_model *m, const int32_t *ids, int n_ids, const float *prefix, int prefix_rows,
                  tf_forced *f, gp_pool *pool, gp_error *err);
/* Mean over rows × channels of KL(softmax(ref) ‖ softmax(got)) and the max
 * absolute logit difference. */
void tf_compare_logits(const gp_model *m, const float *ref, const float *got, int rows,
                       double *mean_kl, double *max_err);
/* The same against recorded probabilities: mean KL(softmax(ref) ‖ got) and
 * the max absolute probability difference. */
void tf_compare_probs(const gp_model *m, const float *ref_logits, const float *got_probs, int rows,
                      double *mean_kl, double *max_err);

#endif
