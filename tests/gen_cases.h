/* gen_cases.h — helpers the generation tests share (test_generate.c on the
 * CPU, test_cuda.c on the GPU): a model-tiny golden case's layout ids and
 * sampling options, and running streams to completion through gp_gen_step. */
#ifndef GEPARD_TEST_GEN_CASES_H
#define GEPARD_TEST_GEN_CASES_H

#include "golden.h"
#include "model/generate.h"

/* Layout ids of a fixture text, taken from the teacher_forced cases (the
 * tokenizer has its own tests); NULL when the text is not there. */
int32_t *gen_case_layout(const golden *g, const char *text, size_t *n);
/* A case's "options" object as generation parameters. */
gp_gen_params gen_case_params(const cJSON *options);
/* Reserve KV for every stream and step them together until none works,
 * with at most max_rows rows per step (small values chunk the prefill). */
int gen_run_streams(gp_gen_stream **streams, int n, gp_kv_pool *kv, int max_rows, gp_error *err);

#endif
