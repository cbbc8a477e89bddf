/* sampler.h — turning one channel's logits into a code (MODEL.md §E.2):
 * repetition penalty over the distinct codes of a window (applied once per
 * code), temperature, top-k keeping ties, f32 softmax, multinomial draw. */
#ifndef GP_MODEL_SAMPLER_H
#define GP_MODEL_SAMPLER_H

#include <stdbool.h>

typedef struct gp_sampler_params {
    float temperature;        /* <= 0: greedy arg-max (engine extension) */
    int top_k;                /* 0 = off */
    float repetition_penalty; /* 1 = off */
} gp_sampler_params;

/* In place: logits z[L] → probabilities. `penalize[k]` marks the distinct
 * codes of the penalty window (NULL = none). With temperature <= 0 the result
 * is one-hot on the (penalised) arg-max. */
void gp_sampler_probs(float *z, int L, const gp_sampler_params *params, const bool *penalize);

/* The first index whose cumulative probability exceeds u · Σp, u in [0, 1). */
int gp_sampler_draw(const float *probs, int L, double u);

/* Index of the largest value (the first one on ties). */
int gp_sampler_argmax(const float *v, int L);

#endif
