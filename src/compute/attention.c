/* attention.c — reference causal attention over the paged KV cache (see
 * attention.h) and the dispatch to the active kernel level. Walks the
 * sequence block by block so each block's keys and values are contiguous. */
#include "compute/attention.h"

#include <math.h>
#include <string.h>

#include "compute/kernels.h"

void gp_attend_cached(const gp_kv_pool *kv, const gp_kv_seq *seq, int layer, int kv_head,
                      const float *q, int n_positions, float scale, float *out, float *scores) {
    gp_attend_fn fn = gp_kernel_table_active()->attend;
    if (!fn) fn = gp_attend_cached_scalar;
    fn(kv, seq, layer, kv_head, q, n_positions, scale, out, scores);
}

void gp_attend_cached_group(const gp_kv_pool *kv, const gp_kv_seq *seq, int layer, int kv_head,
                            const float *q, int q_stride, int n_q, int n_positions, float scale,
                            float *out, int out_stride, float *scores) {
    gp_attend_group_fn fn = gp_kernel_table_active()->attend_group;
    if (!fn) fn = gp_attend_cached_group_scalar;
    fn(kv, seq, layer, kv_head, q, q_stride, n_q, n_positions, scale, out, out_stride, scores);
}

void gp_attend_cached_group_scalar(const gp_kv_pool *kv, const gp_kv_seq *seq, int layer,
                                   int kv_head, const float *q, int q_stride, int n_q,
                                   int n_positions, float scale, float *out, int out_stride,
                                   float *scores) {
    for (int h = 0; h < n_q; h++)
        gp_attend_cached_scalar(kv, seq, layer, kv_head, q + (size_t)h * q_stride, n_positions,
                                scale, out + (size_t)h * out_stride,
                                scores + (size_t)h * n_positions);
}

void gp_attend_cached_scalar(const gp_kv_pool *kv, const gp_kv_seq *seq, int layer, int kv_head,
                             const float *q, int n_positions, float scale, float *out,
                             float *scores) {
    const int D = kv->head_dim, bs = kv->block_size;
    float max_score = -INFINITY;
    for (int start = 0; start < n_positions; start += bs) {
        const float *keys = gp_kv_at(kv, seq, layer, 0, kv_head, start);
        int count = n_positions - start < bs ? n_positions - start : bs;
        for (int j = 0; j < count; j++) {
            const float *k = keys + (size_t)j * D;
            float dot = 0;
            for (int d = 0; d < D; d++) dot += q[d] * k[d];
            float sc = dot * scale;
            scores[start + j] = sc;
            if (sc > max_score) max_score = sc;
        }
    }
    float sum = 0;
    for (int j = 0; j < n_positions; j++) {
        scores[j] = expf(scores[j] - max_score);
        sum += scores[j];
    }
    float inv = 1.0f / sum;
    memset(out, 0, (size_t)D * sizeof(float));
    for (int start = 0; start < n_positions; start += bs) {
        const float *values = gp_kv_at(kv, seq, layer, 1, kv_head, start);
        int count = n_positions - start < bs ? n_positions - start : bs;
        for (int j = 0; j < count; j++) {
            const float *v = values + (size_t)j * D;
            float w = scores[start + j] * inv;
            for (int d = 0; d < D; d++) out[d] += w * v[d];
        }
    }
}
