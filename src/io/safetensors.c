/* safetensors.c — validating mmap reader and atomic writer (see safetensors.h). */
#include "io/safetensors.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "io/json.h"

/* Headers beyond this are not real checkpoints (real ones are < 1 MB). */
#define ST_MAX_HEADER_BYTES (100u * 1024u * 1024u)

static int tensor_name_cmp(const void *a, const void *b) {
    return strcmp(((const gp_st_tensor *)a)->name, ((const gp_st_tensor *)b)->name);
}

static int tensor_offset_cmp(const void *a, const void *b) {
    const gp_st_tensor *x = *(const gp_st_tensor *const *)a, *y = *(const gp_st_tensor *const *)b;
    if (x->data != y->data) return (const char *)x->data < (const char *)y->data ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

const char *gp_st_shape_string(int ndim, const int64_t *shape, char *buf, size_t size) {
    size_t used = 0;
    used += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used +=
            (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

static int st_parse_metadata(gp_st_file *f, const cJSON *meta, gp_error *err) {
    if (!cJSON_IsObject(meta))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: \"__metadata__\" must be an object of strings",
                       f->path);
    size_t n = (size_t)cJSON_GetArraySize(meta);
    f->metadata_keys = calloc(n ? n : 1, sizeof(char *));
    f->metadata_values = calloc(n ? n : 1, sizeof(char *));
    if (!f->metadata_keys || !f->metadata_values) return gp_fail_oom(err, "metadata", n);
    const cJSON *item;
    cJSON_ArrayForEach(item, meta) {
        if (!cJSON_IsString(item))
            return gp_fail(err, GEPARD_ERR_FORMAT, "%s: metadata \"%s\" must be a string", f->path,
                           item->string);
        f->metadata_keys[f->metadata_count] = strdup(item->string);
        f->metadata_values[f->metadata_count] = strdup(item->valuestring);
        f->metadata_count++;
        if (!f->metadata_keys[f->metadata_count - 1] || !f->metadata_values[f->metadata_count - 1])
            return gp_fail_oom(err, "metadata", strlen(item->valuestring));
    }
    return GEPARD_OK;
}

static int st_parse_tensor(gp_st_file *f, const cJSON *entry, const unsigned char *data_start,
                           size_t data_size, gp_st_tensor *t, gp_error *err) {
    const char *name = entry->string;
    t->name = strdup(name);
    if (!t->name) return gp_fail_oom(err, "tensor name", strlen(name));
    if (!cJSON_IsObject(entry))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: entry for tensor %s is not an object", f->path,
                       name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
    if (!cJSON_IsString(dtype) || !cJSON_IsArray(shape) || !cJSON_IsArray(offsets))
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: tensor %s lacks a string \"dtype\", an array \"shape\" or an array "
                       "\"data_offsets\"",
                       f->path, name);
    t->dtype = gp_dtype_from_name(dtype->valuestring);
    if (t->dtype == GP_DTYPE_INVALID)
        return gp_fail(
            err, GEPARD_ERR_UNSUPPORTED,
            "%s: tensor %s has dtype \"%s\", which this engine does not read (supported: "
            "F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL)",
            f->path, name, dtype->valuestring);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > GP_ST_MAX_DIMS)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED, "%s: tensor %s has %d dimensions (at most %d)",
                       f->path, name, ndim, GP_ST_MAX_DIMS);
    t->ndim = ndim;
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        const cJSON *dim = cJSON_GetArrayItem(shape, i);
        if (!gp_json_is_integer(dim) || dim->valuedouble < 0)
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: tensor %s has a shape entry that is not a non-negative integer",
                           f->path, name);
        t->shape[i] = (int64_t)dim->valuedouble;
        if (gp_mul_size(numel, (size_t)t->shape[i], &numel) != 0)
            return gp_fail(err, GEPARD_ERR_FORMAT, "%s: tensor %s has an impossibly large shape",
                           f->path, name);
    }
    t->numel = numel;
    if (cJSON_GetArraySize(offsets) != 2)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: tensor %s: data_offsets must be [begin, end]",
                       f->path, name);
    const cJSON *b = cJSON_GetArrayItem(offsets, 0), *e = cJSON_GetArrayItem(offsets, 1);
    if (!gp_json_is_integer(b) || !gp_json_is_integer(e) || b->valuedouble < 0 ||
        e->valuedouble < b->valuedouble)
        return gp_fail(
            err, GEPARD_ERR_FORMAT,
            "%s: tensor %s: data_offsets must be non-negative integers with begin <= end", f->path,
            name);
    size_t begin = (size_t)b->valuedouble, end = (size_t)e->valuedouble;
    size_t expected;
    if (gp_mul_size(numel, gp_dtype_size(t->dtype), &expected) != 0 || expected != end - begin) {
        char sbuf[160];
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: tensor %s: shape %s of %s needs %zu bytes but data_offsets span %zu",
                       f->path, name, gp_st_shape_string(ndim, t->shape, sbuf, sizeof sbuf),
                       gp_dtype_name(t->dtype), expected, end - begin);
    }
    if (end > data_size)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: tensor %s: data_offsets [%zu, %zu) run past the end of the data (%zu "
                       "bytes) — the file is truncated or corrupt; download it again",
                       f->path, name, begin, end, data_size);
    t->nbytes = end - begin;
    t->data = data_start + begin;
    return GEPARD_OK;
}

static int st_parse(gp_st_file *f, const unsigned char *data, size_t size, gp_error *err) {
    if (size < 8)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: only %zu bytes — too short to be a safetensors file (truncated?)",
                       f->path, size);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = (header_len << 8) | data[i];
    if (header_len > size - 8)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: header length %llu exceeds the file size %zu — the file is truncated "
                       "or not a safetensors file",
                       f->path, (unsigned long long)header_len, size);
    if (header_len > ST_MAX_HEADER_BYTES || header_len < 2)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: implausible header length %llu — not a safetensors file?", f->path,
                       (unsigned long long)header_len);
    const char *header = (const char *)data + 8;
    if (header[0] != '{')
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: header does not start with '{' — not a safetensors file", f->path);
    cJSON *root;
    char origin[512];
    snprintf(origin, sizeof origin, "%s (header)", f->path);
    int rc = gp_json_parse(header, (size_t)header_len, origin, &root, err);
    if (rc) return rc;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: header is not a JSON object", f->path);
    }
    const unsigned char *data_start = data + 8 + header_len;
    size_t data_size = size - 8 - (size_t)header_len;
    size_t n = 0;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, root) n++;
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    if (!f->tensors) {
        cJSON_Delete(root);
        return gp_fail_oom(err, "tensor table", n * sizeof *f->tensors);
    }
    cJSON_ArrayForEach(entry, root) {
        if (strcmp(entry->string, "__metadata__") == 0) {
            rc = st_parse_metadata(f, entry, err);
        } else {
            rc = st_parse_tensor(f, entry, data_start, data_size, &f->tensors[f->count], err);
            f->count++;
        }
        if (rc) {
            cJSON_Delete(root);
            return rc;
        }
    }
    cJSON_Delete(root);
    qsort(f->tensors, f->count, sizeof *f->tensors, tensor_name_cmp);
    for (size_t i = 1; i < f->count; i++)
        if (strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0)
            return gp_fail(err, GEPARD_ERR_FORMAT, "%s: tensor %s is listed twice", f->path,
                           f->tensors[i].name);
    /* Overlap check over tensors sorted by data position. */
    const gp_st_tensor **by_offset = malloc((f->count ? f->count : 1) * sizeof *by_offset);
    if (!by_offset) return gp_fail_oom(err, "tensor table", f->count * sizeof *by_offset);
    for (size_t i = 0; i < f->count; i++) by_offset[i] = &f->tensors[i];
    qsort(by_offset, f->count, sizeof *by_offset, tensor_offset_cmp);
    for (size_t i = 1; i < f->count; i++) {
        const gp_st_tensor *prev = by_offset[i - 1], *cur = by_offset[i];
        if (prev->nbytes && cur->nbytes &&
            (const char *)prev->data + prev->nbytes > (const char *)cur->data) {
            gp_fail(err, GEPARD_ERR_FORMAT,
                    "%s: tensors %s and %s overlap in the data region — the file is corrupt",
                    f->path, prev->name, cur->name);
            free(by_offset);
            return GEPARD_ERR_FORMAT;
        }
    }
    free(by_offset);
    return GEPARD_OK;
}

int gp_st_open_memory(const void *data, size_t size, const char *origin, gp_st_file **out,
                      gp_error *err) {
    *out = NULL;
    gp_st_file *f = calloc(1, sizeof *f);
    if (!f) return gp_fail_oom(err, "safetensors file", sizeof *f);
    f->path = strdup(origin ? origin : "(memory)");
    if (!f->path) {
        free(f);
        return gp_fail_oom(err, "path", 64);
    }
    int rc = st_parse(f, data, size, err);
    if (rc) {
        gp_st_close(f);
        return rc;
    }
    *out = f;
    return GEPARD_OK;
}

int gp_st_open(const char *path, gp_st_file **out, gp_error *err) {
    *out = NULL;
    gp_mapped_file map;
    int rc = gp_map_file(path, &map, err);
    if (rc) return rc;
    gp_st_file *f = NULL;
    rc = gp_st_open_memory(map.data, map.size, path, &f, err);
    if (rc) {
        gp_unmap_file(&map);
        return rc;
    }
    f->map = map;
    *out = f;
    return GEPARD_OK;
}

bool gp_st_looks_like(const unsigned char *head, size_t n) {
    return n >= 9 && head[6] == 0 && head[7] == 0 && head[8] == '{';
}

bool gp_st_path_looks_like(const char *path) {
    unsigned char head[9];
    FILE *fp = fopen(path, "rb");
    if (!fp) return false;
    size_t n = fread(head, 1, sizeof head, fp);
    fclose(fp);
    return gp_st_looks_like(head, n);
}

void gp_st_drop_pages(const gp_st_file *f, const gp_st_tensor *t) {
    if (!f->map.data || !f->map.size || !t->nbytes) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t begin = ((uintptr_t)t->data + page - 1) / page * page;
    uintptr_t end = ((uintptr_t)t->data + t->nbytes) / page * page;
    uintptr_t map_begin = (uintptr_t)f->map.data, map_end = map_begin + f->map.size;
    if (begin < map_begin || end > map_end || end <= begin) return;
    madvise((void *)begin, end - begin, MADV_DONTNEED);
}

void gp_st_close(gp_st_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->count; i++) free(f->tensors[i].name);
    free(f->tensors);
    for (size_t i = 0; i < f->metadata_count; i++) {
        free(f->metadata_keys[i]);
        free(f->metadata_values[i]);
    }
    free(f->metadata_keys);
    free(f->metadata_values);
    gp_unmap_file(&f->map);
    free(f->path);
    free(f);
}

const gp_st_tensor *gp_st_find(const gp_st_file *f, const char *name) {
    gp_st_tensor key = {.name = (char *)name};
    return bsearch(&key, f->tensors, f->count, sizeof *f->tensors, tensor_name_cmp);
}

const char *gp_st_metadata(const gp_st_file *f, const char *key) {
    for (size_t i = 0; i < f->metadata_count; i++)
        if (strcmp(f->metadata_keys[i], key) == 0) return f->metadata_values[i];
    return NULL;
}

int gp_st_expect(const gp_st_file *f, const char *name, int ndim, const int64_t *shape,
                 const char *hint, const gp_st_tensor **out, gp_error *err) {
    *out = NULL;
    const gp_st_tensor *t = gp_st_find(f, name);
    const char *sep = hint ? " — " : "";
    if (!hint) hint = "";
    if (!t)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: tensor %s is missing%s%s", f->path, name, sep,
                       hint);
    if (!gp_dtype_is_float(t->dtype))
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: tensor %s has dtype %s, expected a float type (F32, F16 or BF16)%s%s",
                       f->path, name, gp_dtype_name(t->dtype), sep, hint);
    if (ndim >= 0) {
        bool ok = t->ndim == ndim;
        for (int i = 0; ok && i < ndim; i++) ok = shape[i] < 0 || shape[i] == t->shape[i];
        if (!ok) {
            char got[160], want[160];
            return gp_fail(err, GEPARD_ERR_FORMAT, "%s: tensor %s has shape %s, expected %s%s%s",
                           f->path, name, gp_st_shape_string(t->ndim, t->shape, got, sizeof got),
                           gp_st_shape_string(ndim, shape, want, sizeof want), sep, hint);
        }
    }
    *out = t;
    return GEPARD_OK;
}

int gp_st_read_f32(const gp_st_tensor *t, float *dst, gp_error *err) {
    if (!gp_dtype_is_float(t->dtype))
        return gp_fail(err, GEPARD_ERR_FORMAT, "tensor %s has dtype %s, expected a float type",
                       t->name, gp_dtype_name(t->dtype));
    gp_convert_to_f32(t->dtype, t->data, dst, t->numel);
    return GEPARD_OK;
}

int gp_st_load_f32(const gp_st_tensor *t, float **out, gp_error *err) {
    *out = gp_aligned_alloc(t->numel * sizeof(float));
    if (!*out) return gp_fail_oom(err, t->name, t->numel * sizeof(float));
    int rc = gp_st_read_f32(t, *out, err);
    if (rc) {
        gp_aligned_free(*out);
        *out = NULL;
    }
    return rc;
}

/* ---------------- writer ---------------- */

typedef struct st_writer_entry {
    char *name;
    gp_dtype dtype;
    int ndim;
    int64_t shape[GP_ST_MAX_DIMS];
    size_t nbytes;
    const void *data;
    void *owned;
} st_writer_entry;

struct gp_st_writer {
    st_writer_entry *entries;
    size_t count, cap;
    char **meta_keys, **meta_values;
    size_t meta_count, meta_cap;
};

gp_st_writer *gp_st_writer_create(void) { return calloc(1, sizeof(gp_st_writer)); }

void gp_st_writer_free(gp_st_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->count; i++) {
        free(w->entries[i].name);
        free(w->entries[i].owned);
    }
    for (size_t i = 0; i < w->meta_count; i++) {
        free(w->meta_keys[i]);
        free(w->meta_values[i]);
    }
    free(w->meta_keys);
    free(w->meta_values);
    free(w->entries);
    free(w);
}

int gp_st_writer_add(gp_st_writer *w, const char *name, gp_dtype dtype, int ndim,
                     const int64_t *shape, const void *data, gp_error *err) {
    if (ndim < 0 || ndim > GP_ST_MAX_DIMS || gp_dtype_size(dtype) == 0)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "safetensors writer: bad tensor %s", name);
    for (size_t i = 0; i < w->count; i++)
        if (strcmp(w->entries[i].name, name) == 0)
            return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                           "safetensors writer: tensor %s added twice", name);
    if (w->count == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        st_writer_entry *p = realloc(w->entries, cap * sizeof *p);
        if (!p) return gp_fail_oom(err, "safetensors writer", cap * sizeof *p);
        w->entries = p;
        w->cap = cap;
    }
    st_writer_entry *e = &w->entries[w->count];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    if (!e->name) return gp_fail_oom(err, "tensor name", strlen(name));
    e->dtype = dtype;
    e->ndim = ndim;
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        e->shape[i] = shape[i];
        if (shape[i] < 0 || gp_mul_size(numel, (size_t)shape[i], &numel) != 0) {
            free(e->name);
            return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "safetensors writer: bad shape for %s",
                           name);
        }
    }
    e->nbytes = numel * gp_dtype_size(dtype);
    e->data = data;
    w->count++;
    return GEPARD_OK;
}

int gp_st_writer_add_copy(gp_st_writer *w, const char *name, gp_dtype dtype, int ndim,
                          const int64_t *shape, const void *data, gp_error *err) {
    int rc = gp_st_writer_add(w, name, dtype, ndim, shape, data, err);
    if (rc) return rc;
    st_writer_entry *e = &w->entries[w->count - 1];
    e->owned = malloc(e->nbytes ? e->nbytes : 1);
    if (!e->owned) {
        free(e->name);
        w->count--;
        return gp_fail_oom(err, name, e->nbytes);
    }
    memcpy(e->owned, data, e->nbytes);
    e->data = e->owned;
    return GEPARD_OK;
}

int gp_st_writer_set_metadata(gp_st_writer *w, const char *key, const char *value, gp_error *err) {
    for (size_t i = 0; i < w->meta_count; i++) {
        if (strcmp(w->meta_keys[i], key) == 0) {
            char *v = strdup(value);
            if (!v) return gp_fail_oom(err, "metadata", strlen(value));
            free(w->meta_values[i]);
            w->meta_values[i] = v;
            return GEPARD_OK;
        }
    }
    if (w->meta_count == w->meta_cap) {
        size_t cap = w->meta_cap ? w->meta_cap * 2 : 8;
        char **k = realloc(w->meta_keys, cap * sizeof *k);
        if (!k) return gp_fail_oom(err, "metadata", cap);
        w->meta_keys = k;
        char **v = realloc(w->meta_values, cap * sizeof *v);
        if (!v) return gp_fail_oom(err, "metadata", cap);
        w->meta_values = v;
        w->meta_cap = cap;
    }
    w->meta_keys[w->meta_count] = strdup(key);
    w->meta_values[w->meta_count] = strdup(value);
    if (!w->meta_keys[w->meta_count] || !w->meta_values[w->meta_count])
        return gp_fail_oom(err, "metadata", strlen(value));
    w->meta_count++;
    return GEPARD_OK;
}

static int entry_name_cmp(const void *a, const void *b) {
    return strcmp(((const st_writer_entry *)a)->name, ((const st_writer_entry *)b)->name);
}

int gp_st_writer_write(gp_st_writer *w, const char *path, gp_error *err) {
    qsort(w->entries, w->count, sizeof *w->entries, entry_name_cmp);
    gp_buf header;
    gp_buf_init(&header);
    int oom = gp_buf_append_str(&header, "{");
    bool first = true;
    if (w->meta_count) {
        oom |= gp_buf_append_str(&header, "\"__metadata__\":{");
        for (size_t i = 0; i < w->meta_count; i++) {
            if (i) oom |= gp_buf_append_str(&header, ",");
            oom |= gp_json_append_string(&header, w->meta_keys[i]);
            oom |= gp_buf_append_str(&header, ":");
            oom |= gp_json_append_string(&header, w->meta_values[i]);
        }
        oom |= gp_buf_append_str(&header, "}");
        first = false;
    }
    size_t offset = 0;
    for (size_t i = 0; i < w->count; i++) {
        const st_writer_entry *e = &w->entries[i];
        if (!first) oom |= gp_buf_append_str(&header, ",");
        first = false;
        oom |= gp_json_append_string(&header, e->name);
        oom |= gp_buf_printf(&header, ":{\"dtype\":\"%s\",\"shape\":[", gp_dtype_name(e->dtype));
        for (int d = 0; d < e->ndim; d++)
            oom |= gp_buf_printf(&header, "%s%lld", d ? "," : "", (long long)e->shape[d]);
        oom |= gp_buf_printf(&header, "],\"data_offsets\":[%zu,%zu]}", offset, offset + e->nbytes);
        offset += e->nbytes;
    }
    oom |= gp_buf_append_str(&header, "}");
    while (!oom && header.len % 8) oom |= gp_buf_append_str(&header, " ");
    if (oom) {
        gp_buf_free(&header);
        return gp_fail_oom(err, "safetensors header", header.len);
    }
    gp_atomic_file af;
    int rc = gp_atomic_file_open(&af, path, err);
    if (rc) {
        gp_buf_free(&header);
        return rc;
    }
    unsigned char len_bytes[8];
    uint64_t n = header.len;
    for (int i = 0; i < 8; i++) len_bytes[i] = (unsigned char)(n >> (8 * i));
    bool ok = gp_atomic_file_write(&af, len_bytes, 8) == 0 &&
              gp_atomic_file_write(&af, header.data, header.len) == 0;
    for (size_t i = 0; ok && i < w->count; i++)
        ok = gp_atomic_file_write(&af, w->entries[i].data, w->entries[i].nbytes) == 0;
    gp_buf_free(&header);
    return gp_atomic_file_commit(&af, err); /* reports a failed write with its reason */
}
