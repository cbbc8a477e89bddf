/* golden.h — helpers for tests that compare against the shared fixtures'
 * golden.json / golden.safetensors files. */
#ifndef GEPARD_TEST_GOLDEN_H
#define GEPARD_TEST_GOLDEN_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "io/safetensors.h"

typedef struct golden {
    cJSON *json;
    gp_st_file *tensors;
} golden;

/* Load <fixture_dir>/golden.json and golden.safetensors; 0 on success. */
int golden_open(golden *g, const char *fixture_dir);
void golden_close(golden *g);
/* A float tensor as a malloc'ed f32 array (NULL if missing); *numel set. */
float *golden_f32(const golden *g, const char *name, size_t *numel);
/* An integer tensor as malloc'ed int32 (NULL if missing); shape in dims. */
int32_t *golden_i32(const golden *g, const char *name, int64_t *dims, int *ndim);
/* The case object with "key" == key inside the array `section`. */
const cJSON *golden_case(const golden *g, const char *section, const char *key);
/* A JSON array of integers as malloc'ed int32; *n set. */
int32_t *golden_int_array(const cJSON *array, size_t *n);

#endif
