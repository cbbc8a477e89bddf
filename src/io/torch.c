/* torch.c — torch.save zip checkpoints to a flat list of tensors (see torch.h). */
#include "io/torch.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "io/pickle.h"
#include "io/zip.h"

#define TORCH_MAX_NAME 1024
#define TORCH_MAX_DEPTH 32
#define TORCH_MAX_LEAVES (1u << 22)

static const unsigned char legacy_magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                             0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

int gp_torch_is_legacy(const void *data, size_t size) {
    return size >= sizeof legacy_magic && memcmp(data, legacy_magic, sizeof legacy_magic) == 0;
}

typedef struct torch_reader {
    gp_torch_file *file;
    const gp_zip *zip;
    const gp_pickle *pk;
    char prefix[TORCH_MAX_NAME];
    size_t tensors_cap, scalars_cap;
    gp_error *err;
} torch_reader;

/* The bytes of a storage's record, checked against the element count the pickle declares. */
static int torch_storage_bytes(torch_reader *r, const gp_pickle_value *s, const char *tensor,
                               const unsigned char **out, gp_error *err) {
    char record[TORCH_MAX_NAME + 64];
    snprintf(record, sizeof record, "%sdata/%s", r->prefix, s->str);
    const gp_zip_entry *e = gp_zip_find(r->zip, record);
    if (!e)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: tensor %s: storage record %s is missing — the file is truncated or "
                       "corrupt",
                       r->file->origin, tensor, record);
    size_t es = gp_dtype_size(s->dtype), want;
    if (gp_mul_size((size_t)s->i, es, &want) != 0 || want != e->size)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: tensor %s: storage %s holds %zu bytes but the checkpoint declares %lld "
                       "%s elements (%zu bytes) — the file is corrupt",
                       r->file->origin, tensor, record, e->size, (long long)s->i,
                       gp_dtype_name(s->dtype), want);
    return gp_zip_entry_data(r->zip, e, out, err);
}

/* Materialise a strided view into contiguous memory. */
static int torch_copy_view(gp_torch_tensor *t, const unsigned char *base, const gp_pickle_value *v,
                           gp_error *err) {
    size_t es = gp_dtype_size(t->dtype);
    t->owned = gp_aligned_alloc(t->nbytes ? t->nbytes : 1);
    if (!t->owned) return gp_fail_oom(err, t->name, t->nbytes);
    int64_t idx[GP_TORCH_MAX_DIMS] = {0};
    unsigned char *dst = t->owned;
    for (size_t n = 0; n < t->numel; n++) {
        int64_t off = v->offset;
        for (int d = 0; d < v->ndim; d++) off += idx[d] * v->stride[d];
        memcpy(dst + n * es, base + (size_t)off * es, es);
        for (int d = v->ndim - 1; d >= 0; d--) {
            if (++idx[d] < v->shape[d]) break;
            idx[d] = 0;
        }
    }
    t->data = t->owned;
    return GEPARD_OK;
}

static int torch_add_tensor(torch_reader *r, const char *name, const gp_pickle_value *v) {
    gp_torch_file *f = r->file;
    gp_error *err = r->err;
    if (f->count == r->tensors_cap) {
        size_t cap = r->tensors_cap ? r->tensors_cap * 2 : 64;
        gp_torch_tensor *p = realloc(f->tensors, cap * sizeof *p);
        if (!p) return gp_fail_oom(err, "tensor table", cap * sizeof *p);
        f->tensors = p;
        r->tensors_cap = cap;
    }
    gp_torch_tensor *t = &f->tensors[f->count];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) return gp_fail_oom(err, "tensor name", strlen(name));
    f->count++;
    const gp_pickle_value *s = &r->pk->values[v->storage];
    t->dtype = s->dtype;
    t->ndim = v->ndim;
    size_t numel = 1, es = gp_dtype_size(t->dtype);
    uint64_t last = (uint64_t)v->offset; /* highest element index the view touches */
    bool contiguous = true;
    int64_t expect_stride = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        t->shape[d] = v->shape[d];
        if (gp_mul_size(numel, (size_t)v->shape[d], &numel) != 0)
            return gp_fail(err, GEPARD_ERR_FORMAT, "%s: tensor %s has an impossibly large shape",
                           f->origin, name);
        if (v->shape[d] > 1 && v->stride[d] != expect_stride) contiguous = false;
        if (v->shape[d] > 0 && __builtin_mul_overflow(expect_stride, v->shape[d], &expect_stride))
            expect_stride = INT64_MAX;
        uint64_t span;
        if (v->shape[d] > 0 &&
            (__builtin_mul_overflow((uint64_t)(v->shape[d] - 1), (uint64_t)v->stride[d], &span) ||
             __builtin_add_overflow(last, span, &last)))
            return gp_fail(err, GEPARD_ERR_FORMAT, "%s: tensor %s has impossible strides",
                           f->origin, name);
    }
    t->numel = numel;
    if (gp_mul_size(numel, es, &t->nbytes) != 0)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: tensor %s is impossibly large", f->origin,
                       name);
    const unsigned char *base;
    int rc = torch_storage_bytes(r, s, name, &base, err);
    if (rc) return rc;
    if (numel > 0 && last >= (uint64_t)s->i)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: tensor %s reaches element %llu of a storage of %lld elements — the "
                       "storage is shorter than its tensor; the file is corrupt",
                       f->origin, name, (unsigned long long)last, (long long)s->i);
    if (numel == 0 || contiguous) {
        t->data = base + (size_t)v->offset * es * (numel > 0);
        return GEPARD_OK;
    }
    return torch_copy_view(t, base, v, err);
}

static int torch_add_scalar(torch_reader *r, const char *name, const gp_pickle_value *v) {
    gp_torch_file *f = r->file;
    if (f->scalar_count == r->scalars_cap) {
        size_t cap = r->scalars_cap ? r->scalars_cap * 2 : 16;
        gp_torch_scalar *p = realloc(f->scalars, cap * sizeof *p);
        if (!p) return gp_fail_oom(r->err, "scalar table", cap * sizeof *p);
        f->scalars = p;
        r->scalars_cap = cap;
    }
    gp_torch_scalar *s = &f->scalars[f->scalar_count];
    memset(s, 0, sizeof *s);
    s->name = strdup(name);
    if (!s->name) return gp_fail_oom(r->err, "scalar name", strlen(name));
    f->scalar_count++;
    s->is_float = v->kind == GP_PK_FLOAT;
    s->i = v->i;
    s->f = s->is_float ? v->f : (double)v->i;
    return GEPARD_OK;
}

/* Append ".key" (or "key" at the top) to name; returns the new length or -1. */
static int torch_join_key(torch_reader *r, char *name, size_t len, const gp_pickle_value *key) {
    char num[32];
    const char *k = key->str;
    if (key->kind == GP_PK_INT) {
        snprintf(num, sizeof num, "%lld", (long long)key->i);
        k = num;
    } else if (key->kind != GP_PK_STR) {
        return -gp_fail(r->err, GEPARD_ERR_FORMAT, "%s: a dict key is a %s, expected a string",
                        r->file->origin, gp_pickle_kind_name(key->kind));
    }
    int n = snprintf(name + len, TORCH_MAX_NAME - len, "%s%s", len ? "." : "", k);
    if (n < 0 || (size_t)n >= TORCH_MAX_NAME - len)
        return -gp_fail(r->err, GEPARD_ERR_FORMAT, "%s: a tensor name is longer than %d bytes",
                        r->file->origin, TORCH_MAX_NAME);
    return (int)(len + (size_t)n);
}

typedef struct torch_frame {
    int dict, next;  /* dict value index, next pair to visit */
    size_t name_len; /* length of the name prefix of this dict */
} torch_frame;

/* Walk nested dicts without recursion, emitting tensors and scalars. */
static int torch_flatten(torch_reader *r, int root) {
    const gp_pickle *pk = r->pk;
    if (pk->values[root].kind != GP_PK_DICT)
        return gp_fail(r->err, GEPARD_ERR_FORMAT,
                       "%s: the checkpoint holds a %s, expected a dict of tensors (a state dict)",
                       r->file->origin, gp_pickle_kind_name(pk->values[root].kind));
    torch_frame stack[TORCH_MAX_DEPTH];
    int depth = 0;
    char name[TORCH_MAX_NAME] = "";
    stack[depth++] = (torch_frame){root, 0, 0};
    size_t leaves = 0;
    while (depth > 0) {
        torch_frame *top = &stack[depth - 1];
        const gp_pickle_value *d = &pk->values[top->dict];
        if (top->next >= d->n) {
            depth--;
            continue;
        }
        int i = top->next++;
        const gp_pickle_value *key = &pk->values[d->items[2 * i]];
        const gp_pickle_value *val = &pk->values[d->items[2 * i + 1]];
        int len = torch_join_key(r, name, top->name_len, key);
        if (len < 0) return -len;
        if (++leaves > TORCH_MAX_LEAVES)
            return gp_fail(r->err, GEPARD_ERR_FORMAT, "%s: more than %u entries in the checkpoint",
                           r->file->origin, TORCH_MAX_LEAVES);
        int rc = GEPARD_OK;
        switch (val->kind) {
        case GP_PK_TENSOR: rc = torch_add_tensor(r, name, val); break;
        case GP_PK_INT:
        case GP_PK_BOOL:
        case GP_PK_FLOAT: rc = torch_add_scalar(r, name, val); break;
        case GP_PK_DICT:
            if (depth >= TORCH_MAX_DEPTH)
                return gp_fail(r->err, GEPARD_ERR_FORMAT, "%s: dicts nested more than %d deep",
                               r->file->origin, TORCH_MAX_DEPTH);
            stack[depth++] = (torch_frame){d->items[2 * i + 1], 0, (size_t)len};
            break;
        default: break; /* strings, None, lists: not weights */
        }
        if (rc) return rc;
    }
    return GEPARD_OK;
}

typedef struct torch_name_ref {
    const char *name;
    size_t index;
} torch_name_ref;

static int torch_name_cmp(const void *a, const void *b) {
    return strcmp(((const torch_name_ref *)a)->name, ((const torch_name_ref *)b)->name);
}

/* Fill f->sorted with tensor indices in name order. */
static int torch_sort_names(gp_torch_file *f, gp_error *err) {
    size_t n = f->count ? f->count : 1;
    torch_name_ref *refs = malloc(n * sizeof *refs);
    f->sorted = malloc(n * sizeof *f->sorted);
    if (!refs || !f->sorted) {
        free(refs);
        return gp_fail_oom(err, "tensor index", n * sizeof *refs);
    }
    for (size_t i = 0; i < f->count; i++) refs[i] = (torch_name_ref){f->tensors[i].name, i};
    qsort(refs, f->count, sizeof *refs, torch_name_cmp);
    for (size_t i = 0; i < f->count; i++) f->sorted[i] = refs[i].index;
    free(refs);
    return GEPARD_OK;
}

/* Locate data.pkl, check the byte order and run the unpickler. */
static int torch_read_zip(gp_torch_file *f, const gp_zip *zip, gp_error *err) {
    torch_reader r = {.file = f, .zip = zip, .err = err};
    const gp_zip_entry *pkl = NULL;
    for (size_t i = 0; i < zip->count && !pkl; i++) {
        const char *n = zip->entries[i].name;
        size_t len = strlen(n);
        if ((len >= 9 && strcmp(n + len - 9, "/data.pkl") == 0) || strcmp(n, "data.pkl") == 0)
            pkl = &zip->entries[i];
    }
    if (!pkl)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: zip archive without a data.pkl record — not a torch.save checkpoint "
                       "(TorchScript archives are not supported)",
                       f->origin);
    size_t plen = strlen(pkl->name) - 8;
    if (plen >= sizeof r.prefix)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: record name too long", f->origin);
    memcpy(r.prefix, pkl->name, plen);
    r.prefix[plen] = '\0';
    char record[TORCH_MAX_NAME + 16];
    snprintf(record, sizeof record, "%sbyteorder", r.prefix);
    const gp_zip_entry *bo = gp_zip_find(zip, record);
    const unsigned char *bytes;
    if (bo) {
        int rc = gp_zip_entry_data(zip, bo, &bytes, err);
        if (rc) return rc;
        if (!(bo->size == 6 && memcmp(bytes, "little", 6) == 0))
            return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                           "%s: the checkpoint was written on a big-endian machine; re-save it "
                           "on a little-endian one",
                           f->origin);
    }
    int rc = gp_zip_entry_data(zip, pkl, &bytes, err);
    gp_pickle *pk = NULL;
    char origin[TORCH_MAX_NAME + 64];
    snprintf(origin, sizeof origin, "%s: %s", f->origin, pkl->name);
    if (rc == GEPARD_OK) rc = gp_pickle_load(bytes, pkl->size, origin, &pk, err);
    if (rc) return rc;
    r.pk = pk;
    rc = torch_flatten(&r, pk->root);
    gp_pickle_free(pk);
    return rc;
}

int gp_torch_open_memory(const void *data, size_t size, const char *origin, gp_torch_file **out,
                         gp_error *err) {
    *out = NULL;
    if (!origin) origin = "(checkpoint)";
    if (gp_torch_is_legacy(data, size))
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "%s uses the legacy (pre-1.6) torch.save format; re-save it with "
                       "torch.save(..., _use_new_zipfile_serialization=True)",
                       origin);
    if (!gp_zip_looks_like(data, size))
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: not a PyTorch checkpoint (expected the zip archive torch.save writes)",
                       origin);
    gp_torch_file *f = calloc(1, sizeof *f);
    if (!f) return gp_fail_oom(err, "checkpoint", sizeof *f);
    f->origin = strdup(origin);
    gp_zip *zip = NULL;
    int rc = f->origin ? gp_zip_open_memory(data, size, origin, &zip, err)
                       : gp_fail_oom(err, "checkpoint", 64);
    if (rc == GEPARD_OK) rc = torch_read_zip(f, zip, err);
    gp_zip_free(zip);
    if (rc == GEPARD_OK) rc = torch_sort_names(f, err);
    if (rc) {
        gp_torch_close(f);
        return rc;
    }
    *out = f;
    return GEPARD_OK;
}

int gp_torch_open(const char *path, gp_torch_file **out, gp_error *err) {
    *out = NULL;
    gp_mapped_file map;
    int rc = gp_map_file(path, &map, err);
    if (rc) return rc;
    gp_torch_file *f;
    rc = gp_torch_open_memory(map.data, map.size, path, &f, err);
    if (rc) {
        gp_unmap_file(&map);
        return rc;
    }
    f->map = map;
    *out = f;
    return GEPARD_OK;
}

void gp_torch_close(gp_torch_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->count; i++) {
        free(f->tensors[i].name);
        gp_aligned_free(f->tensors[i].owned);
    }
    for (size_t i = 0; i < f->scalar_count; i++) free(f->scalars[i].name);
    free(f->tensors);
    free(f->scalars);
    free(f->sorted);
    gp_unmap_file(&f->map);
    free(f->origin);
    free(f);
}

const gp_torch_tensor *gp_torch_find(const gp_torch_file *f, const char *name) {
    size_t lo = 0, hi = f->count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(f->tensors[f->sorted[mid]].name, name);
        if (c == 0) return &f->tensors[f->sorted[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const gp_torch_scalar *gp_torch_find_scalar(const gp_torch_file *f, const char *name) {
    for (size_t i = 0; i < f->scalar_count; i++)
        if (strcmp(f->scalars[i].name, name) == 0) return &f->scalars[i];
    return NULL;
}
