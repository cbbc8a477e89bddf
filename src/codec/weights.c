/* weights.c — state-dict tensors to folded f32 layers (see weights.h). */
#include "codec/weights.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

#define WEIGHT_NAME_MAX 512

static const char *shape_str(int ndim, const int64_t *shape, char *buf, size_t size) {
    return gp_st_shape_string(ndim, shape, buf, size);
}

/* Look up `name` and check dtype (float) and shape. Missing is reported only when
 * `required` (otherwise *out = NULL). */
static int ld_tensor(const gp_codec_loader *ld, const char *name, int ndim, const int64_t *shape,
                     bool required, const gp_codec_tensor **out) {
    *out = gp_codec_source_find(ld->src, name);
    const gp_codec_tensor *t = *out;
    char want[128], got[128];
    if (!t) {
        if (!required) return GEPARD_OK;
        return gp_fail(ld->err, GEPARD_ERR_FORMAT,
                       "%s: tensor %s is missing (expected shape %s%s%s)", ld->src->weights_origin,
                       name, shape_str(ndim, shape, want, sizeof want), ld->hint ? " from " : "",
                       ld->hint ? ld->hint : "");
    }
    if (!gp_dtype_is_float(t->dtype))
        return gp_fail(ld->err, GEPARD_ERR_FORMAT,
                       "%s: tensor %s has dtype %s, expected a float type", ld->src->weights_origin,
                       name, gp_dtype_name(t->dtype));
    bool ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == shape[i];
    if (!ok)
        return gp_fail(ld->err, GEPARD_ERR_FORMAT,
                       "%s: tensor %s has shape %s, expected %s%s%s — does model_config.yaml "
                       "belong to these weights?",
                       ld->src->weights_origin, name, shape_str(t->ndim, t->shape, got, sizeof got),
                       shape_str(ndim, shape, want, sizeof want), ld->hint ? " from " : "",
                       ld->hint ? ld->hint : "");
    *out = t;
    return GEPARD_OK;
}

static int ld_f32(const gp_codec_loader *ld, const gp_codec_tensor *t, float **out) {
    *out = gp_aligned_alloc(t->numel * sizeof(float));
    if (!*out) return gp_fail_oom(ld->err, t->name, t->numel * sizeof(float));
    gp_convert_to_f32(t->dtype, t->data, *out, t->numel);
    return GEPARD_OK;
}

/* W = g * v / ||v|| per index of dim 0 (rows of `row` elements), in double. */
static int ld_fold(const gp_codec_loader *ld, const gp_codec_tensor *g, const gp_codec_tensor *v,
                   size_t rows, size_t row, float *w) {
    for (size_t a = 0; a < rows; a++) {
        double sum = 0;
        for (size_t j = 0; j < row; j++) {
            double x = gp_dtype_read_double(v->dtype, v->data, a * row + j);
            sum += x * x;
        }
        double norm = sqrt(sum);
        if (!(norm > 0) || !isfinite(norm))
            return gp_fail(ld->err, GEPARD_ERR_FORMAT,
                           "%s: tensor %s has an all-zero (or non-finite) row %zu, so weight "
                           "normalisation is undefined — the checkpoint is corrupt",
                           ld->src->weights_origin, v->name, a);
        float scale = (float)gp_dtype_read_double(g->dtype, g->data, a) / (float)norm;
        for (size_t j = 0; j < row; j++)
            w[a * row + j] = (float)gp_dtype_read_double(v->dtype, v->data, a * row + j) * scale;
    }
    return GEPARD_OK;
}

/* The folded weight of `prefix`.conv with shape [d0][d1][k], in any of the three spellings. */
static int ld_weight(const gp_codec_loader *ld, const char *prefix, int64_t d0, int64_t d1,
                     int64_t k, float **out) {
    static const char *const spellings[][2] = {
        {"parametrizations.weight.original0", "parametrizations.weight.original1"},
        {"weight_g", "weight_v"},
    };
    const int64_t vshape[3] = {d0, d1, k}, gshape[3] = {d0, 1, 1};
    char gname[WEIGHT_NAME_MAX], vname[WEIGHT_NAME_MAX];
    const gp_codec_tensor *g, *v;
    int rc;
    *out = NULL;
    for (int s = 0; s < 2; s++) {
        snprintf(gname, sizeof gname, "%s.conv.%s", prefix, spellings[s][0]);
        snprintf(vname, sizeof vname, "%s.conv.%s", prefix, spellings[s][1]);
        if ((rc = ld_tensor(ld, vname, 3, vshape, false, &v))) return rc;
        if (!v) continue;
        if ((rc = ld_tensor(ld, gname, 3, gshape, true, &g))) return rc;
        *out = gp_aligned_alloc(v->numel * sizeof(float));
        if (!*out) return gp_fail_oom(ld->err, vname, v->numel * sizeof(float));
        rc = ld_fold(ld, g, v, (size_t)d0, (size_t)(d1 * k), *out);
        if (rc) {
            gp_aligned_free(*out);
            *out = NULL;
        }
        return rc;
    }
    snprintf(vname, sizeof vname, "%s.conv.weight", prefix);
    if ((rc = ld_tensor(ld, vname, 3, vshape, false, &v))) return rc;
    if (!v) {
        char want[128];
        return gp_fail(ld->err, GEPARD_ERR_FORMAT,
                       "%s: tensor %s.conv.parametrizations.weight.original1 (or .weight_v, or "
                       ".weight) is missing (expected shape %s%s%s)",
                       ld->src->weights_origin, prefix, shape_str(3, vshape, want, sizeof want),
                       ld->hint ? " from " : "", ld->hint ? ld->hint : "");
    }
    return ld_f32(ld, v, out);
}

static int ld_bias(const gp_codec_loader *ld, const char *prefix, int c_out, float **out) {
    char name[WEIGHT_NAME_MAX];
    snprintf(name, sizeof name, "%s.conv.bias", prefix);
    const int64_t shape[1] = {c_out};
    const gp_codec_tensor *t;
    int rc = ld_tensor(ld, name, 1, shape, true, &t);
    return rc ? rc : ld_f32(ld, t, out);
}

int gp_codec_load_conv(const gp_codec_loader *ld, const char *prefix, int c_out, int c_in,
                       int kernel, int dilation, int stride, gp_conv1d *out) {
    memset(out, 0, sizeof *out);
    out->c_in = c_in;
    out->c_out = c_out;
    out->kernel = kernel;
    out->dilation = dilation;
    out->stride = stride;
    int rc = ld_weight(ld, prefix, c_out, c_in, kernel, &out->weight);
    if (rc == GEPARD_OK) rc = ld_bias(ld, prefix, c_out, &out->bias);
    if (rc) gp_conv1d_free(out);
    return rc;
}

int gp_codec_load_convt(const gp_codec_loader *ld, const char *prefix, int c_in, int c_out,
                        int kernel, int stride, int groups, gp_convt1d *out) {
    memset(out, 0, sizeof *out);
    if (groups < 1 || c_in % groups || c_out % groups)
        return gp_fail(ld->err, GEPARD_ERR_FORMAT,
                       "%s: %s: %d input and %d output channels cannot be split into %d groups%s%s",
                       ld->src->weights_origin, prefix, c_in, c_out, groups,
                       ld->hint ? " — check " : "", ld->hint ? ld->hint : "");
    out->c_in = c_in;
    out->c_out = c_out;
    out->kernel = kernel;
    out->stride = stride;
    out->groups = groups;
    int rc = ld_weight(ld, prefix, c_in, c_out / groups, kernel, &out->weight);
    if (rc == GEPARD_OK) rc = ld_bias(ld, prefix, c_out, &out->bias);
    if (rc) gp_convt1d_free(out);
    return rc;
}

int gp_codec_load_act(const gp_codec_loader *ld, const char *prefix, gp_act_kind kind, int channels,
                      gp_act *out) {
    memset(out, 0, sizeof *out);
    if (kind != GP_ACT_SNAKE && kind != GP_ACT_HALF_SNAKE)
        return gp_act_init(out, kind, channels, NULL, ld->err);
    int n = kind == GP_ACT_SNAKE ? channels : channels / 2;
    char name[WEIGHT_NAME_MAX];
    snprintf(name, sizeof name, "%s.activation.%salpha", prefix,
             kind == GP_ACT_HALF_SNAKE ? "snake_act." : "");
    const int64_t shape[3] = {1, n, 1};
    const gp_codec_tensor *t;
    float *alpha = NULL;
    int rc = n > 0 ? ld_tensor(ld, name, 3, shape, true, &t) : GEPARD_OK;
    if (rc == GEPARD_OK && n > 0) rc = ld_f32(ld, t, &alpha);
    if (rc == GEPARD_OK) rc = gp_act_init(out, kind, channels, alpha, ld->err);
    gp_aligned_free(alpha);
    return rc;
}
