/* conv.c — reference convolution, padding and activation kernels (see conv.h).
 *
 * Plain loops over f32 data, written to be read. Convolutions accumulate in
 * double (the reference is meant to be the most exact path; on the fixture it
 * halves the distance to PyTorch). Every output sample is accumulated in a
 * fixed order (bias, then input channels, then taps) that does not depend on
 * how many samples a call produces — the property the streaming decoder's
 * bit-exactness rests on.
 */
#include "compute/conv.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"

#define CONV_REF_BLOCK 256 /* output samples accumulated at a time */

int gp_act_init(gp_act *act, gp_act_kind kind, int channels, const float *alpha, gp_error *err) {
    memset(act, 0, sizeof *act);
    act->kind = kind;
    act->channels = channels;
    act->slope = 0.01f;
    act->n_snake = kind == GP_ACT_SNAKE ? channels : kind == GP_ACT_HALF_SNAKE ? channels / 2 : 0;
    if (act->n_snake == 0) return GEPARD_OK;
    act->alpha = gp_aligned_alloc((size_t)act->n_snake * sizeof(float));
    act->inv_alpha = gp_aligned_alloc((size_t)act->n_snake * sizeof(float));
    if (!act->alpha || !act->inv_alpha) {
        gp_act_free(act);
        return gp_fail_oom(err, "Snake alpha", (size_t)act->n_snake * sizeof(float));
    }
    for (int c = 0; c < act->n_snake; c++) {
        act->alpha[c] = alpha[c];
        act->inv_alpha[c] = 1.0f / (alpha[c] + 1e-9f);
    }
    return GEPARD_OK;
}

void gp_act_free(gp_act *act) {
    gp_aligned_free(act->alpha);
    gp_aligned_free(act->inv_alpha);
    act->alpha = act->inv_alpha = NULL;
}

void gp_conv1d_free(gp_conv1d *conv) {
    gp_aligned_free(conv->weight);
    gp_aligned_free(conv->bias);
    conv->weight = conv->bias = NULL;
}

void gp_convt1d_free(gp_convt1d *conv) {
    gp_aligned_free(conv->weight);
    gp_aligned_free(conv->bias);
    conv->weight = conv->bias = NULL;
}

int gp_convt1d_history(const gp_convt1d *conv) { return (conv->kernel - 1) / conv->stride; }

void gp_pad1d_fill(float *buf, size_t stride, int channels, size_t left, size_t n, size_t right,
                   gp_pad_mode mode) {
    for (int c = 0; c < channels; c++) {
        float *row = buf + (size_t)c * stride, *centre = row + left;
        for (size_t i = 0; i < left; i++) {
            size_t back = left - i; /* distance before the first centre sample */
            row[i] = mode == GP_PAD_ZEROS       ? 0.0f
                     : mode == GP_PAD_REPLICATE ? centre[0]
                                                : centre[back];
        }
        for (size_t i = 0; i < right; i++) {
            row[left + n + i] = mode == GP_PAD_ZEROS       ? 0.0f
                                : mode == GP_PAD_REPLICATE ? centre[n - 1]
                                                           : centre[n - 2 - i];
        }
    }
}

void gp_conv1d_ref(const gp_conv1d *conv, const float *x, size_t xs, float *y, size_t ys,
                   size_t n_out) {
    const int ci = conv->c_in, k = conv->kernel;
    const size_t d = (size_t)conv->dilation, s = (size_t)conv->stride;
    double acc[CONV_REF_BLOCK]; /* double accumulators keep the reference close to exact */
    for (int o = 0; o < conv->c_out; o++) {
        for (size_t n0 = 0; n0 < n_out; n0 += CONV_REF_BLOCK) {
            const size_t nb = n_out - n0 < CONV_REF_BLOCK ? n_out - n0 : CONV_REF_BLOCK;
            for (size_t n = 0; n < nb; n++) acc[n] = conv->bias[o];
            for (int c = 0; c < ci; c++) {
                const float *xc = x + (size_t)c * xs + n0 * s;
                const float *w = conv->weight + ((size_t)o * ci + c) * k;
                for (int t = 0; t < k; t++) {
                    const double wt = w[t];
                    const float *xt = xc + (size_t)t * d;
                    for (size_t n = 0; n < nb; n++) acc[n] += wt * xt[n * s];
                }
            }
            float *yo = y + (size_t)o * ys + n0;
            for (size_t n = 0; n < nb; n++) yo[n] = (float)acc[n];
        }
    }
}

void gp_convt1d_ref(const gp_convt1d *conv, const float *x, size_t xs, size_t n_in, float *y,
                    size_t ys) {
    gp_convt1d_rows(conv, x, xs, n_in, y, ys, 0, conv->c_out);
}

void gp_convt1d_rows(const gp_convt1d *conv, const float *x, size_t xs, size_t n_in, float *y,
                     size_t ys, int o0, int o1) {
    const int s = conv->stride, k = conv->kernel, hist = gp_convt1d_history(conv);
    const int ci_g = conv->c_in / conv->groups, co_g = conv->c_out / conv->groups;
    for (int o = o0; o < o1; o++) {
        const int g = o / co_g, ol = o % co_g;
        float *yo = y + (size_t)o * ys;
        for (size_t q = 0; q < n_in; q++) {
            for (int u = 0; u < s; u++) {
                float acc = conv->bias[o];
                for (int c = g * ci_g; c < (g + 1) * ci_g; c++) {
                    const float *xc = x + (size_t)c * xs + hist + q; /* current input sample */
                    const float *w = conv->weight + ((size_t)c * co_g + ol) * k;
                    for (int m = 0; m <= hist && u + m * s < k; m++) acc += xc[-m] * w[u + m * s];
                }
                yo[q * (size_t)s + (size_t)u] = acc;
            }
        }
    }
}

static inline float act_snake(float x, float alpha, float inv_alpha) {
    float v = sinf(alpha * x);
    return x + inv_alpha * (v * v);
}

static inline float act_pointwise(gp_act_kind kind, float x, float slope) {
    switch (kind) {
    case GP_ACT_LRELU:
    case GP_ACT_HALF_SNAKE: return x > 0.0f ? x : slope * x;
    case GP_ACT_ELU: return x > 0.0f ? x : expm1f(x);
    default: return x;
    }
}

void gp_act_ref(const gp_act *act, const float *x, size_t xs, float *y, size_t ys, size_t n) {
    for (int c = 0; c < act->channels; c++) {
        const float *xc = x + (size_t)c * xs;
        float *yc = y + (size_t)c * ys;
        if (c < act->n_snake) {
            const float a = act->alpha[c], r = act->inv_alpha[c];
            for (size_t i = 0; i < n; i++) yc[i] = act_snake(xc[i], a, r);
        } else {
            for (size_t i = 0; i < n; i++) yc[i] = act_pointwise(act->kind, xc[i], act->slope);
        }
    }
}
