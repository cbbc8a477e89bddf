/* sampler.c — per-channel sampling in the reference order (see sampler.h). */
#include "model/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int gp_sampler_argmax(const float *v, int L) {
    int best = 0;
    for (int i = 1; i < L; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

static int compare_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* The k-th largest value of z (1 <= k < L): insertion into a small sorted
 * list for the usual small k, a sorted copy otherwise. */
static float kth_largest(const float *z, int L, int k) {
    if (k > 64) {
        float *copy = malloc((size_t)L * sizeof(float));
        if (!copy) return -INFINITY; /* keep everything rather than fail */
        memcpy(copy, z, (size_t)L * sizeof(float));
        qsort(copy, (size_t)L, sizeof(float), compare_desc);
        float tau = copy[k - 1];
        free(copy);
        return tau;
    }
    float top[64];
    int n = 0;
    for (int i = 0; i < L; i++) {
        float v = z[i];
        if (n < k) {
            int j = n++;
            while (j > 0 && top[j - 1] < v) {
                top[j] = top[j - 1];
                j--;
            }
            top[j] = v;
        } else if (v > top[k - 1]) {
            int j = k - 1;
            while (j > 0 && top[j - 1] < v) {
                top[j] = top[j - 1];
                j--;
            }
            top[j] = v;
        }
    }
    return top[k - 1];
}

void gp_sampler_probs(float *z, int L, const gp_sampler_params *p, const bool *penalize) {
    if (penalize && p->repetition_penalty != 1.0f) {
        for (int k = 0; k < L; k++) {
            if (!penalize[k]) continue;
            z[k] = z[k] > 0 ? z[k] / p->repetition_penalty : z[k] * p->repetition_penalty;
        }
    }
    if (p->temperature <= 0) {
        int best = gp_sampler_argmax(z, L);
        for (int k = 0; k < L; k++) z[k] = k == best ? 1.0f : 0.0f;
        return;
    }
    if (p->temperature != 1.0f)
        for (int k = 0; k < L; k++) z[k] = z[k] / p->temperature;
    if (p->top_k > 0 && p->top_k < L) {
        float tau = kth_largest(z, L, p->top_k);
        for (int k = 0; k < L; k++)
            if (z[k] < tau) z[k] = -INFINITY;
    }
    float max = -INFINITY;
    for (int k = 0; k < L; k++)
        if (z[k] > max) max = z[k];
    float sum = 0;
    for (int k = 0; k < L; k++) {
        z[k] = expf(z[k] - max);
        sum += z[k];
    }
    for (int k = 0; k < L; k++) z[k] /= sum;
}

int gp_sampler_draw(const float *probs, int L, double u) {
    double total = 0;
    for (int k = 0; k < L; k++) total += probs[k];
    double target = u * total, cumulative = 0;
    int last_positive = 0;
    for (int k = 0; k < L; k++) {
        if (probs[k] <= 0) continue;
        last_positive = k;
        cumulative += probs[k];
        if (cumulative > target) return k;
    }
    return last_positive;
}
