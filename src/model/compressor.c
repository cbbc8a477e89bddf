/* compressor.c — the Q-Former style RefCompressor in f32 (see compressor.h):
 * dequantised codes → input projection + sinusoidal positions → K learned
 * queries refined by self-attention, cross-attention over the reference and
 * a SwiGLU FFN per block → plain RMSNorm → × output_scale. */
#include "model/compressor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "model/overlay.h"

/* Plain RMSNorm (gain w, not 1 + w), eps 1e-6. */
static void rms_norm_plain(const float *x, int n, int width, const float *w, float *y) {
    for (int r = 0; r < n; r++) {
        double sum = 0;
        for (int i = 0; i < width; i++)
            sum += (double)x[(size_t)r * width + i] * x[(size_t)r * width + i];
        float inv = 1.0f / sqrtf((float)(sum / width) + 1e-6f);
        for (int i = 0; i < width; i++)
            y[(size_t)r * width + i] = (x[(size_t)r * width + i] * inv) * w[i];
    }
}

typedef struct mha_buffers {
    float *q, *k, *v, *o, *scores;
} mha_buffers;

/* out[nq][d] = MHA(query rows a, key/value rows z) through the four projections. */
static void multi_head_attention(const gp_matrix *wq, const gp_matrix *wk, const gp_matrix *wv,
                                 const gp_matrix *wo, const float *a, int nq, const float *z,
                                 int nk, int d, int heads, mha_buffers *b, float *out,
                                 gp_pool *pool) {
    const int dh = d / heads;
    gp_matmul(wq, a, nq, d, b->q, d, pool);
    gp_matmul(wk, z, nk, d, b->k, d, pool);
    gp_matmul(wv, z, nk, d, b->v, d, pool);
    const float scale = 1.0f / sqrtf((float)dh);
    for (int h = 0; h < heads; h++) {
        for (int i = 0; i < nq; i++) {
            const float *qi = b->q + (size_t)i * d + (size_t)h * dh;
            float max_score = -INFINITY;
            for (int j = 0; j < nk; j++) {
                const float *kj = b->k + (size_t)j * d + (size_t)h * dh;
                float dot = 0;
                for (int t = 0; t < dh; t++) dot += qi[t] * kj[t];
                b->scores[j] = dot * scale;
                if (b->scores[j] > max_score) max_score = b->scores[j];
            }
            float sum = 0;
            for (int j = 0; j < nk; j++) {
                b->scores[j] = expf(b->scores[j] - max_score);
                sum += b->scores[j];
            }
            float *oi = b->o + (size_t)i * d + (size_t)h * dh;
            memset(oi, 0, (size_t)dh * sizeof(float));
            for (int j = 0; j < nk; j++) {
                const float *vj = b->v + (size_t)j * d + (size_t)h * dh;
                float w = b->scores[j] / sum;
                for (int t = 0; t < dh; t++) oi[t] += w * vj[t];
            }
        }
    }
    gp_matmul(wo, b->o, nq, d, out, d, pool);
}

/* e[t] = input_proj · dequant(codes[t]) + bias + sinusoidal position t. */
static void embed_reference(const gp_model *m, const int32_t *codes, int T, float *e, float *x,
                            gp_pool *pool) {
    const gp_compressor *c = &m->compressor;
    const int C = m->cfg.num_channels, d = m->cfg.voice_cloning.d_model;
    for (int t = 0; t < T; t++)
        for (int ch = 0; ch < C; ch++) {
            int half = m->cfg.channel_vocab[ch] / 2;
            if (half < 1) half = 1;
            x[(size_t)t * C + ch] = (float)(codes[(size_t)t * C + ch] - half) / (float)half;
        }
    gp_matmul(&c->input_proj, x, T, C, e, d, pool);
    /* The sinusoidal table is a non-persistent buffer that upstream casts
     * to the model dtype (bf16) with the rest of the model: round it too. */
    const float step = (float)(-log(10000.0) / d);
    for (int t = 0; t < T; t++) {
        float *row = e + (size_t)t * d;
        for (int i = 0; i < d; i++) row[i] += c->input_bias[i];
        for (int i = 0; i < d / 2; i++) {
            float freq = expf((float)(2 * i) * step);
            float angle = (float)t * freq;
            row[2 * i] += gp_bf16_to_f32(gp_f32_to_bf16((float)sin((double)angle)));
            row[2 * i + 1] += gp_bf16_to_f32(gp_f32_to_bf16((float)cos((double)angle)));
        }
    }
}

int gp_compressor_run(gp_model *m, const int32_t *codes, int T, float *prefix, gp_pool *pool,
                      gp_error *err) {
    int rc = gp_model_ensure_compressor(m, err);
    if (rc) return rc;
    if (T < 1)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "the reference clip has no frames; use at least one frame (ideally 3-15 s "
                       "of speech)");
    if ((rc = gp_overlay_check_codes(m, codes, T, err)))
        return gp_error_prefix(err, "reference codes: ");
    const gp_voice_cloning_config *vc = &m->cfg.voice_cloning;
    const gp_compressor *c = &m->compressor;
    const int K = vc->num_queries, d = vc->d_model, F = vc->ffn_hidden_size;
    const int C = m->cfg.num_channels;
    const int rows = T > K ? T : K;
    float *e = gp_aligned_alloc((size_t)T * d * 4);
    float *x = gp_aligned_alloc((size_t)T * C * 4);
    float *q = gp_aligned_alloc((size_t)K * d * 4);
    float *a = gp_aligned_alloc((size_t)K * d * 4);
    float *delta = gp_aligned_alloc((size_t)K * d * 4);
    float *gate = gp_aligned_alloc((size_t)K * F * 4);
    float *up = gp_aligned_alloc((size_t)K * F * 4);
    mha_buffers b = {gp_aligned_alloc((size_t)K * d * 4), gp_aligned_alloc((size_t)rows * d * 4),
                     gp_aligned_alloc((size_t)rows * d * 4), gp_aligned_alloc((size_t)K * d * 4),
                     gp_aligned_alloc((size_t)rows * 4)};
    if (!e || !x || !q || !a || !delta || !gate || !up || !b.q || !b.k || !b.v || !b.o ||
        !b.scores) {
        rc = gp_fail_oom(err, "voice compressor", (size_t)T * d * 4);
        goto done;
    }
    embed_reference(m, codes, T, e, x, pool);
    memcpy(q, c->queries, (size_t)K * d * 4);
    for (int l = 0; l < vc->num_layers; l++) {
        const gp_compressor_block *blk = &c->blocks[l];
        rms_norm_plain(q, K, d, blk->norm_self, a);
        multi_head_attention(&blk->self_q, &blk->self_k, &blk->self_v, &blk->self_out, a, K, a, K,
                             d, vc->num_heads, &b, delta, pool);
        for (size_t i = 0; i < (size_t)K * d; i++) q[i] += delta[i];
        rms_norm_plain(q, K, d, blk->norm_cross, a);
        multi_head_attention(&blk->cross_q, &blk->cross_k, &blk->cross_v, &blk->cross_out, a, K, e,
                             T, d, vc->num_heads, &b, delta, pool);
        for (size_t i = 0; i < (size_t)K * d; i++) q[i] += delta[i];
        rms_norm_plain(q, K, d, blk->norm_ffn, a);
        gp_matmul(&blk->ffn_gate, a, K, d, gate, F, pool);
        gp_matmul(&blk->ffn_up, a, K, d, up, F, pool);
        for (size_t i = 0; i < (size_t)K * F; i++)
            gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
        gp_matmul(&blk->ffn_down, gate, K, F, delta, d, pool);
        for (size_t i = 0; i < (size_t)K * d; i++) q[i] += delta[i];
    }
    rms_norm_plain(q, K, d, c->final_norm, prefix);
    for (size_t i = 0; i < (size_t)K * d; i++) prefix[i] *= c->output_scale;
done:
    gp_aligned_free(e);
    gp_aligned_free(x);
    gp_aligned_free(q);
    gp_aligned_free(a);
    gp_aligned_free(delta);
    gp_aligned_free(gate);
    gp_aligned_free(up);
    gp_aligned_free(b.q);
    gp_aligned_free(b.k);
    gp_aligned_free(b.v);
    gp_aligned_free(b.o);
    gp_aligned_free(b.scores);
    return rc;
}
