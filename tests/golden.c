/* golden.c — loading golden.json / golden.safetensors for the tests. */
#include "golden.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "test.h"

int golden_open(golden *g, const char *fixture_dir) {
    memset(g, 0, sizeof *g);
    char path[1024];
    gp_error err;
    snprintf(path, sizeof path, "%s/golden.json", test_fixture(fixture_dir));
    if (gp_json_load_file(path, 64u << 20, &g->json, &err)) {
        test_note("%s", err.message);
        return -1;
    }
    snprintf(path, sizeof path, "%s/golden.safetensors", test_fixture(fixture_dir));
    if (gp_st_open(path, &g->tensors, &err)) {
        test_note("%s", err.message);
        golden_close(g);
        return -1;
    }
    return 0;
}

void golden_close(golden *g) {
    cJSON_Delete(g->json);
    gp_st_close(g->tensors);
    memset(g, 0, sizeof *g);
}

float *golden_f32(const golden *g, const char *name, size_t *numel) {
    const gp_st_tensor *t = gp_st_find(g->tensors, name);
    if (!t) return NULL;
    float *out = malloc(t->numel * sizeof(float) + 4);
    for (size_t i = 0; i < t->numel; i++)
        out[i] = (float)gp_dtype_read_double(t->dtype, t->data, i);
    if (numel) *numel = t->numel;
    return out;
}

int32_t *golden_i32(const golden *g, const char *name, int64_t *dims, int *ndim) {
    const gp_st_tensor *t = gp_st_find(g->tensors, name);
    if (!t) return NULL;
    int32_t *out = malloc(t->numel * sizeof(int32_t) + 4);
    for (size_t i = 0; i < t->numel; i++) out[i] = (int32_t)gp_dtype_read_int(t->dtype, t->data, i);
    if (dims)
        for (int i = 0; i < t->ndim; i++) dims[i] = t->shape[i];
    if (ndim) *ndim = t->ndim;
    return out;
}

const cJSON *golden_case(const golden *g, const char *section, const char *key) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(g->json, section);
    const cJSON *c;
    cJSON_ArrayForEach(c, arr) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(c, "key");
        if (cJSON_IsString(k) && strcmp(k->valuestring, key) == 0) return c;
    }
    return NULL;
}

int32_t *golden_int_array(const cJSON *array, size_t *n) {
    size_t count = (size_t)cJSON_GetArraySize(array);
    int32_t *out = malloc((count + 1) * sizeof(int32_t));
    size_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, array) out[i++] = (int32_t)v->valuedouble;
    *n = count;
    return out;
}
