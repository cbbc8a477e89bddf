/* lora.c — LoRA adapter loading, merging and run-time application (see
 * lora.h). */
#include "model/lora.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "compute/bf16_packed.h"
#include "compute/onednn_matmul.h"
#include "io/file.h"
#include "io/torch.h"
#include "model/device.h"
#include "model/model.h"

static const char *target_names[GP_LORA_TARGETS] = {
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};

void gp_lora_apply(const gp_lora_module *mod, const float *x, int n, int ldx, float *y, int ldy,
                   float *tmp) {
    for (int j = 0; j < n; j++) {
        const float *xj = x + (size_t)j * ldx;
        for (int k = 0; k < mod->rank; k++) {
            const float *a = mod->A + (size_t)k * mod->in;
            float acc = 0;
            for (int i = 0; i < mod->in; i++) acc += a[i] * xj[i];
            tmp[k] = acc * mod->scale;
        }
        float *yj = y + (size_t)j * ldy;
        for (int o = 0; o < mod->out; o++) {
            const float *b = mod->B + (size_t)o * mod->rank;
            float acc = 0;
            for (int k = 0; k < mod->rank; k++) acc += b[k] * tmp[k];
            yj[o] += acc;
        }
    }
}

int gp_lora_merge_tensors(float *w, int rows, int cols, const gp_st_tensor *a,
                          const gp_st_tensor *b, double alpha, const char *prefix, gp_error *err) {
    if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != cols || b->shape[0] != rows ||
        b->shape[1] != a->shape[0] || a->shape[0] < 1)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "LoRA %s: lora_A must be [r, %d] and lora_B [%d, r] with the same r", prefix,
                       cols, rows);
    int r = (int)a->shape[0];
    float *A, *B;
    int rc = gp_st_load_f32(a, &A, err);
    if (rc) return rc;
    if ((rc = gp_st_load_f32(b, &B, err))) {
        gp_aligned_free(A);
        return rc;
    }
    float scale = (float)((alpha > 0 ? alpha : 2.0 * r) / r);
    for (int o = 0; o < rows; o++)
        for (int i = 0; i < cols; i++) {
            float acc = 0;
            for (int k = 0; k < r; k++) acc += B[(size_t)o * r + k] * A[(size_t)k * cols + i];
            w[(size_t)o * cols + i] += scale * acc;
        }
    gp_aligned_free(A);
    gp_aligned_free(B);
    return GEPARD_OK;
}

/* "model.layers.3.self_attn.q_proj.lora_A" (optionally prefixed "lora." or
 * "base_model.model.", optionally suffixed ".weight") → layer, target, A/B. */
static bool parse_lora_name(const char *name, int *layer, int *target, int *is_b) {
    const char *prefixes[] = {"lora.", "base_model.model.", ""};
    for (size_t p = 0; p < 3; p++) {
        size_t n = strlen(prefixes[p]);
        if (strncmp(name, prefixes[p], n) == 0) {
            name += n;
            break;
        }
    }
    if (strncmp(name, "model.layers.", 13) != 0) return false;
    char *end;
    long l = strtol(name + 13, &end, 10);
    if (end == name + 13 || *end != '.' || l < 0 || l > 100000) return false;
    const char *rest = end + 1;
    for (int t = 0; t < GP_LORA_TARGETS; t++) {
        size_t n = strlen(target_names[t]);
        if (strncmp(rest, target_names[t], n) != 0 || rest[n] != '.') continue;
        const char *kind = rest + n + 1;
        if (strcmp(kind, "lora_A") == 0 || strcmp(kind, "lora_A.weight") == 0)
            *is_b = 0;
        else if (strcmp(kind, "lora_B") == 0 || strcmp(kind, "lora_B.weight") == 0)
            *is_b = 1;
        else
            return false;
        *layer = (int)l;
        *target = t;
        return true;
    }
    return false;
}

static void module_dims(const gp_model *m, int target, int *in, int *out) {
    const gp_backbone_config *bb = &m->cfg.backbone;
    const int H = bb->hidden_size, D = bb->head_dim;
    switch (target) {
    case GP_LORA_Q: *in = H, *out = 2 * bb->num_heads * D; break;
    case GP_LORA_K:
    case GP_LORA_V: *in = H, *out = bb->num_kv_heads * D; break;
    case GP_LORA_O: *in = bb->num_heads * D, *out = H; break;
    case GP_LORA_GATE:
    case GP_LORA_UP: *in = H, *out = bb->intermediate_size; break;
    default: *in = bb->intermediate_size, *out = H; break;
    }
}

int gp_lora_from_tensors(const gp_st_tensor *tensors, size_t count, const char *origin,
                         const gp_model *model, double alpha, gp_lora_adapter **out,
                         gp_error *err) {
    *out = NULL;
    const int NL = model->cfg.backbone.num_layers, H = model->cfg.backbone.hidden_size;
    static atomic_uint_fast64_t next_id;
    gp_lora_adapter *ad = calloc(1, sizeof *ad);
    if (ad) ad->id = atomic_fetch_add(&next_id, 1) + 1;
    if (!ad) return gp_fail_oom(err, "LoRA adapter", sizeof *ad);
    ad->origin = strdup(origin);
    ad->num_layers = NL;
    ad->modules = calloc((size_t)NL * GP_LORA_TARGETS, sizeof *ad->modules);
    const gp_st_tensor **pairs = calloc((size_t)NL * GP_LORA_TARGETS * 2, sizeof *pairs);
    int rc = (!ad->origin || !ad->modules || !pairs) ? gp_fail_oom(err, "LoRA adapter", 0) : 0;
    size_t matched = 0;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        const gp_st_tensor *t = &tensors[i];
        int layer, target, is_b;
        if (strcmp(t->name, "stop_head.weight") == 0 || strcmp(t->name, "stop_head.bias") == 0) {
            bool is_w = t->name[10] == 'w';
            if (t->numel != (size_t)(is_w ? H : 1) || !gp_dtype_is_float(t->dtype)) {
                rc = gp_fail(err, GEPARD_ERR_FORMAT,
                             "%s: %s has %zu elements, expected %d for this model", origin, t->name,
                             t->numel, is_w ? H : 1);
                break;
            }
            if (is_w) {
                ad->stop_weight = gp_aligned_alloc((size_t)H * sizeof(float));
                if (!ad->stop_weight) {
                    rc = gp_fail_oom(err, "stop head", (size_t)H * 4);
                    break;
                }
                gp_convert_to_f32(t->dtype, t->data, ad->stop_weight, (size_t)H);
            } else {
                gp_convert_to_f32(t->dtype, t->data, &ad->stop_bias, 1);
                ad->has_stop_head = true;
            }
            continue;
        }
        if (!parse_lora_name(t->name, &layer, &target, &is_b)) {
            GP_DEBUG("%s: ignoring %s", origin, t->name);
            continue;
        }
        if (layer >= NL) {
            rc = gp_fail(err, GEPARD_ERR_FORMAT,
                         "%s: %s adapts layer %d but the model has %d layers — this adapter "
                         "belongs to another model",
                         origin, t->name, layer, NL);
            break;
        }
        pairs[((size_t)layer * GP_LORA_TARGETS + target) * 2 + is_b] = t;
        matched++;
    }
    if (rc == 0 && matched == 0)
        rc = gp_fail(err, GEPARD_ERR_FORMAT,
                     "%s: no LoRA tensors (model.layers.<i>.<module>.lora_A / lora_B) found",
                     origin);
    if (rc == 0 && ad->stop_weight && !ad->has_stop_head)
        rc = gp_fail(err, GEPARD_ERR_FORMAT, "%s: stop_head.weight without stop_head.bias", origin);
    for (int l = 0; rc == 0 && l < NL; l++) {
        for (int tg = 0; rc == 0 && tg < GP_LORA_TARGETS; tg++) {
            const gp_st_tensor *a = pairs[((size_t)l * GP_LORA_TARGETS + tg) * 2];
            const gp_st_tensor *b = pairs[((size_t)l * GP_LORA_TARGETS + tg) * 2 + 1];
            if (!a && !b) continue;
            if (!a || !b) {
                rc = gp_fail(err, GEPARD_ERR_FORMAT,
                             "%s: layer %d %s has only one of lora_A / lora_B", origin, l,
                             target_names[tg]);
                break;
            }
            int in, outd;
            module_dims(model, tg, &in, &outd);
            if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != in || b->shape[0] != outd ||
                a->shape[0] != b->shape[1] || a->shape[0] < 1 || a->shape[0] > 4096 ||
                !gp_dtype_is_float(a->dtype) || !gp_dtype_is_float(b->dtype)) {
                char sa[96], sb[96];
                rc =
                    gp_fail(err, GEPARD_ERR_FORMAT,
                            "%s: layer %d %s: lora_A %s / lora_B %s do not fit the model (expected "
                            "[r, %d] and [%d, r]) — this adapter was trained for another model",
                            origin, l, target_names[tg],
                            gp_st_shape_string(a->ndim, a->shape, sa, sizeof sa),
                            gp_st_shape_string(b->ndim, b->shape, sb, sizeof sb), in, outd);
                break;
            }
            gp_lora_module *mod = &ad->modules[(size_t)l * GP_LORA_TARGETS + tg];
            mod->rank = (int)a->shape[0];
            mod->in = in;
            mod->out = outd;
            if (mod->rank > ad->rank) ad->rank = mod->rank;
            if ((rc = gp_st_load_f32(a, &mod->A, err)) || (rc = gp_st_load_f32(b, &mod->B, err)))
                break;
        }
    }
    free(pairs);
    if (rc) {
        gp_lora_free(ad);
        return rc;
    }
    ad->alpha = alpha > 0 ? alpha : 2.0 * ad->rank;
    for (size_t i = 0; i < (size_t)NL * GP_LORA_TARGETS; i++)
        if (ad->modules[i].rank)
            ad->modules[i].scale =
                (float)((alpha > 0 ? alpha : 2.0 * ad->modules[i].rank) / ad->modules[i].rank);
    *out = ad;
    return GEPARD_OK;
}

void gp_lora_free(gp_lora_adapter *ad) {
    if (!ad) return;
    for (size_t i = 0; ad->modules && i < (size_t)ad->num_layers * GP_LORA_TARGETS; i++) {
        gp_aligned_free(ad->modules[i].A);
        gp_aligned_free(ad->modules[i].B);
    }
    free(ad->modules);
    gp_aligned_free(ad->stop_weight);
    free(ad->origin);
    free(ad);
}

const gp_lora_module *gp_lora_module_for(const gp_lora_adapter *ad, int layer,
                                         gp_lora_target target) {
    if (!ad || layer < 0 || layer >= ad->num_layers) return NULL;
    const gp_lora_module *mod = &ad->modules[(size_t)layer * GP_LORA_TARGETS + target];
    return mod->rank ? mod : NULL;
}

_Static_assert(GP_LORA_TARGETS == GP_LAYER_MATRICES, "one LoRA target per layer matrix");

static gp_matrix *layer_matrix(gp_model *m, int layer, int target) {
    gp_matrix *ms[GP_LAYER_MATRICES];
    gp_layer_matrices(&m->layers[layer], ms);
    return ms[target];
}

int gp_lora_merge(gp_model *m, const gp_lora_adapter *ad, gp_error *err) {
    for (int l = 0; l < ad->num_layers; l++) {
        for (int tg = 0; tg < GP_LORA_TARGETS; tg++) {
            const gp_lora_module *mod = gp_lora_module_for(ad, l, (gp_lora_target)tg);
            if (!mod) continue;
            if (m->device) { /* the weights live on the GPU: merge there */
                int rc = gp_device_model_merge_lora(m->device, l, (gp_dev_matrix)tg, mod->rank,
                                                    mod->A, mod->B, mod->scale, err);
                if (rc) return rc;
                continue;
            }
            gp_matrix *w = layer_matrix(m, l, tg);
            size_t n = (size_t)w->rows * (size_t)w->cols;
            float *dense = gp_aligned_alloc(n * sizeof(float));
            if (!dense) return gp_fail_oom(err, "LoRA merge", n * 4);
            for (int r = 0; r < w->rows; r++) gp_matrix_row_f32(w, r, dense + (size_t)r * w->cols);
            for (int o = 0; o < mod->out; o++)
                for (int i = 0; i < mod->in; i++) {
                    float acc = 0;
                    for (int k = 0; k < mod->rank; k++)
                        acc += mod->B[(size_t)o * mod->rank + k] * mod->A[(size_t)k * mod->in + i];
                    dense[(size_t)o * mod->in + i] += mod->scale * acc;
                }
            gp_matrix merged;
            int rc = gp_matrix_from_f32(&merged, w->format, w->rows, w->cols, dense, err);
            gp_aligned_free(dense);
            if (rc) return rc;
            const bool onednn = w->onednn != NULL; /* prefill through oneDNN: keep it so */
            const bool packed = w->packed != NULL; /* the decode step's packed copy too */
            gp_matrix_free(w);
            *w = merged;
            if (onednn && (rc = gp_onednn_attach(w, err))) return rc;
            if (packed && (rc = gp_bf16_packed_attach(w, NULL, err))) return rc;
        }
    }
    if (ad->has_stop_head) {
        memcpy(m->stop_weight, ad->stop_weight,
               (size_t)m->cfg.backbone.hidden_size * sizeof(float));
        m->stop_bias = ad->stop_bias;
    }
    return GEPARD_OK;
}

int gp_lora_load(const char *path, const gp_model *model, double alpha, gp_lora_adapter **out,
                 gp_error *err) {
    *out = NULL;
    if (gp_path_has_suffix(path, ".safetensors")) {
        gp_st_file *f;
        int rc = gp_st_open(path, &f, err);
        if (rc) return rc;
        if (alpha <= 0) {
            const char *meta = gp_st_metadata(f, "alpha");
            if (!meta) meta = gp_st_metadata(f, "lora_alpha");
            if (meta) alpha = atof(meta);
        }
        rc = gp_lora_from_tensors(f->tensors, f->count, path, model, alpha, out, err);
        gp_st_close(f);
        return rc;
    }
    /* Anything else is read as a torch.save checkpoint (lora_adapter.pt,
     * adapter-final.pt); the reader recognises the format from its bytes. */
    gp_torch_file *tf;
    int rc = gp_torch_open(path, &tf, err);
    if (rc) return rc;
    gp_st_tensor *views = calloc(tf->count + 1, sizeof *views);
    if (!views) {
        gp_torch_close(tf);
        return gp_fail_oom(err, "tensor list", tf->count);
    }
    for (size_t i = 0; i < tf->count; i++) {
        const gp_torch_tensor *t = &tf->tensors[i];
        views[i].name = t->name;
        views[i].dtype = t->dtype;
        views[i].ndim = t->ndim;
        memcpy(views[i].shape, t->shape, sizeof views[i].shape);
        views[i].numel = t->numel;
        views[i].nbytes = t->nbytes;
        views[i].data = t->data;
    }
    rc = gp_lora_from_tensors(views, tf->count, path, model, alpha, out, err);
    free(views);
    gp_torch_close(tf);
    return rc;
}
