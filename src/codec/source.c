/* source.c — opening a codec from a .nemo, safetensors, torch file or directory
 * (see source.h). */
#include "codec/source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file.h"
#include "io/zip.h"

#define SOURCE_MAX_CONFIG (16u << 20)

typedef enum source_kind { SOURCE_TAR, SOURCE_ZIP, SOURCE_SAFETENSORS } source_kind;

static int source_sniff(const char *path, source_kind *kind, gp_error *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return gp_fail(err, errno == ENOENT ? GEPARD_ERR_NOT_FOUND : GEPARD_ERR_IO,
                       "%s: cannot open: %s", path, strerror(errno));
    unsigned char head[16] = {0};
    size_t n = fread(head, 1, sizeof head, fp);
    fclose(fp);
    if (gp_zip_looks_like(head, n) || gp_torch_is_legacy(head, n))
        *kind = SOURCE_ZIP;
    else if (n >= 9 && head[8] == '{')
        *kind = SOURCE_SAFETENSORS;
    else
        *kind = SOURCE_TAR;
    return GEPARD_OK;
}

static int source_add_view(gp_codec_source *s, const char *name, gp_dtype dtype, int ndim,
                           const int64_t *shape, size_t numel, const void *data) {
    gp_codec_tensor *t = &s->tensors[s->count++];
    t->name = name;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->numel = numel;
    t->data = data;
    return GEPARD_OK;
}

static int source_tensor_cmp(const void *a, const void *b) {
    return strcmp(((const gp_codec_tensor *)a)->name, ((const gp_codec_tensor *)b)->name);
}

static int source_index(gp_codec_source *s, gp_error *err) {
    size_t n = s->torch ? s->torch->count : s->st->count;
    s->tensors = calloc(n ? n : 1, sizeof *s->tensors);
    if (!s->tensors) return gp_fail_oom(err, "tensor table", n * sizeof *s->tensors);
    for (size_t i = 0; i < n; i++) {
        if (s->torch) {
            const gp_torch_tensor *t = &s->torch->tensors[i];
            source_add_view(s, t->name, t->dtype, t->ndim, t->shape, t->numel, t->data);
        } else {
            const gp_st_tensor *t = &s->st->tensors[i];
            source_add_view(s, t->name, t->dtype, t->ndim, t->shape, t->numel, t->data);
        }
    }
    qsort(s->tensors, s->count, sizeof *s->tensors, source_tensor_cmp);
    return GEPARD_OK;
}

static int source_parse_yaml(gp_codec_source *s, const char *text, size_t len, const char *origin,
                             gp_error *err) {
    return gp_yaml_parse(text, len, origin, &s->yaml, err);
}

static int source_config_file(gp_codec_source *s, const char *config_path, gp_error *err) {
    char *text;
    size_t len;
    int rc = gp_read_file(config_path, SOURCE_MAX_CONFIG, &text, &len, err);
    if (rc) {
        if (rc == GEPARD_ERR_NOT_FOUND)
            return gp_fail(err, GEPARD_ERR_NOT_FOUND,
                           "%s: no model_config.yaml next to the weights (%s) — a codec needs its "
                           "NeMo config; pass the .nemo archive or put the config beside the file",
                           s->path, config_path);
        return rc;
    }
    rc = source_parse_yaml(s, text, len, config_path, err);
    free(text);
    return rc;
}

static int source_weights_file(gp_codec_source *s, const char *weights, source_kind kind,
                               gp_error *err) {
    s->weights_origin = strdup(weights);
    if (!s->weights_origin) return gp_fail_oom(err, "path", strlen(weights));
    if (kind == SOURCE_SAFETENSORS) {
        s->container = "safetensors";
        return gp_st_open(weights, &s->st, err);
    }
    s->container = "torch checkpoint";
    return gp_torch_open(weights, &s->torch, err);
}

static int source_open_dir(gp_codec_source *s, gp_error *err) {
    char *config = gp_path_join(s->path, "model_config.yaml");
    char *st = gp_path_join(s->path, "model_weights.safetensors");
    char *ckpt = gp_path_join(s->path, "model_weights.ckpt");
    int rc;
    if (!config || !st || !ckpt) {
        rc = gp_fail_oom(err, "path", strlen(s->path));
    } else if (gp_path_exists(st)) {
        rc = source_weights_file(s, st, SOURCE_SAFETENSORS, err);
    } else if (gp_path_exists(ckpt)) {
        rc = source_weights_file(s, ckpt, SOURCE_ZIP, err);
    } else {
        rc = gp_fail(err, GEPARD_ERR_NOT_FOUND,
                     "%s: directory holds neither model_weights.safetensors nor "
                     "model_weights.ckpt",
                     s->path);
    }
    if (rc == GEPARD_OK) rc = source_config_file(s, config, err);
    free(config);
    free(st);
    free(ckpt);
    return rc;
}

static int source_open_file(gp_codec_source *s, gp_error *err) {
    source_kind kind;
    int rc = source_sniff(s->path, &kind, err);
    if (rc) return rc;
    if (kind == SOURCE_TAR) {
        s->container = "nemo archive";
        if ((rc = gp_nemo_read(s->path, &s->nemo, err))) return rc;
        char origin[1024];
        snprintf(origin, sizeof origin, "%s: model_config.yaml", s->path);
        if ((rc = source_parse_yaml(s, s->nemo.config, s->nemo.config_size, origin, err)))
            return rc;
        snprintf(origin, sizeof origin, "%s: model_weights.ckpt", s->path);
        s->weights_origin = strdup(origin);
        if (!s->weights_origin) return gp_fail_oom(err, "path", strlen(origin));
        return gp_torch_open_memory(s->nemo.weights, s->nemo.weights_size, origin, &s->torch, err);
    }
    if ((rc = source_weights_file(s, s->path, kind, err))) return rc;
    const char *base = gp_path_basename(s->path);
    size_t dir_len = (size_t)(base - s->path);
    char *config = malloc(dir_len + sizeof "model_config.yaml");
    if (!config) return gp_fail_oom(err, "path", dir_len);
    memcpy(config, s->path, dir_len);
    strcpy(config + dir_len, "model_config.yaml");
    rc = source_config_file(s, config, err);
    free(config);
    return rc;
}

int gp_codec_source_open(const char *path, gp_codec_source **out, gp_error *err) {
    *out = NULL;
    gp_codec_source *s = calloc(1, sizeof *s);
    if (!s) return gp_fail_oom(err, "codec source", sizeof *s);
    s->path = strdup(path);
    int rc = !s->path               ? gp_fail_oom(err, "path", strlen(path))
             : gp_path_is_dir(path) ? source_open_dir(s, err)
                                    : source_open_file(s, err);
    if (rc == GEPARD_OK) rc = source_index(s, err);
    if (rc) {
        gp_codec_source_free(s);
        return rc;
    }
    *out = s;
    return GEPARD_OK;
}

void gp_codec_source_free(gp_codec_source *s) {
    if (!s) return;
    free(s->tensors);
    for (gp_codec_block *b = s->blocks; b;) {
        gp_codec_block *next = b->next;
        free(b);
        b = next;
    }
    gp_yaml_free(s->yaml);
    gp_torch_close(s->torch);
    gp_st_close(s->st);
    gp_nemo_free(&s->nemo);
    free(s->weights_origin);
    free(s->path);
    free(s);
}

const gp_codec_tensor *gp_codec_source_find(const gp_codec_source *s, const char *name) {
    gp_codec_tensor key = {.name = name};
    return bsearch(&key, s->tensors, s->count, sizeof *s->tensors, source_tensor_cmp);
}
