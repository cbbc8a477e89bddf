/* overlay.c — audio-frame embedding, codebook heads and stop head (see
 * overlay.h). */
#include "model/overlay.h"

#include <math.h>
#include <string.h>

int gp_overlay_check_codes(const gp_model *m, const int32_t *codes, int n, gp_error *err) {
    const int C = m->cfg.num_channels;
    for (int t = 0; t < n; t++)
        for (int c = 0; c < C; c++) {
            int32_t v = codes[(size_t)t * C + c];
            if (v < 0 || v >= m->cfg.channel_vocab[c])
                return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                               "frame %d, channel %d: code %d is out of range [0, %d)", t, c, v,
                               m->cfg.channel_vocab[c]);
        }
    return GEPARD_OK;
}

static void layer_norm_no_affine(float *y, int width, float scale) {
    double mean = 0;
    for (int i = 0; i < width; i++) mean += y[i];
    mean /= width;
    double var = 0;
    for (int i = 0; i < width; i++) var += ((double)y[i] - mean) * ((double)y[i] - mean);
    var /= width;
    float inv = 1.0f / sqrtf((float)var + 1e-5f);
    float mu = (float)mean;
    for (int i = 0; i < width; i++) y[i] = ((y[i] - mu) * inv) * scale;
}

void gp_overlay_embed_frames(const gp_model *m, const int32_t *codes, int n, float *out,
                             float *work, gp_pool *pool) {
    const gp_model_config *cfg = &m->cfg;
    const int C = cfg->num_channels, E = cfg->audio_embed_dim, H = cfg->backbone.hidden_size;
    const int CE = C * E;
    /* z = concatenated per-channel embeddings, [n][C·E]. */
    for (int t = 0; t < n; t++)
        for (int c = 0; c < C; c++) {
            int row = cfg->channel_offset[c] + codes[(size_t)t * C + c];
            memcpy(work + (size_t)t * CE + (size_t)c * E, m->audio_tables + (size_t)row * E,
                   (size_t)E * sizeof(float));
        }
    gp_matmul(&m->embed_proj0, work, n, CE, out, H, pool);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < H; i++) {
            float v = out[(size_t)t * H + i] + m->embed_proj0_bias[i];
            out[(size_t)t * H + i] = 0.5f * v * (1.0f + erff(v * (float)M_SQRT1_2));
        }
    gp_matmul(&m->embed_proj2, out, n, H, work, H, pool);
    for (int t = 0; t < n; t++) {
        float *y = work + (size_t)t * H;
        for (int i = 0; i < H; i++) y[i] += m->embed_proj2_bias[i];
        layer_norm_no_affine(y, H, m->audio_embed_scale);
        memcpy(out + (size_t)t * H, y, (size_t)H * sizeof(float));
    }
}

void gp_overlay_heads(const gp_model *m, const float *hidden, int n, float *logits, gp_pool *pool) {
    const int total = m->cfg.total_logits, H = m->cfg.backbone.hidden_size;
    gp_matmul(&m->heads, hidden, n, H, logits, total, pool);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < total; i++) logits[(size_t)t * total + i] += m->heads_bias[i];
}

float gp_overlay_stop_probability(const gp_model *m, const float *h, const float *weight,
                                  float bias) {
    const int H = m->cfg.backbone.hidden_size;
    if (!weight) {
        weight = m->stop_weight;
        bias = m->stop_bias;
    }
    double acc = 0;
    for (int i = 0; i < H; i++) acc += (double)weight[i] * h[i];
    float s = (float)acc + bias;
    return 1.0f / (1.0f + expf(-s));
}
