/* gen_cases.h — helpers the generation tests share (test_generate.c on the
 * CPU, test_cuda.c on the GPU, test_real_size.c): a model-tiny golden
 * case's layout ids and sampling options, running streams to completion
 * through gp_gen_step, and the real-size synthetic checkpoint. */
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
/* The same on a thread pool. */
int gen_run_streams_on(gp_gen_stream **streams, int n, gp_kv_pool *kv, int max_rows, gp_pool *pool,
                       gp_error *err);
/* The same with a device's step buffers reserved for reserve_rows rows at the
 * first step (gp_gen_workspace.device_reserve_rows; 0: grown as needed). */
int gen_run_streams_reserved(gp_gen_stream **streams, int n, gp_kv_pool *kv, int max_rows,
                             int reserve_rows, gp_pool *pool, gp_error *err);
/* The synthetic real-size checkpoint the ../shared/fixtures/real-size goldens
 * were computed on: $GEPARD_REALSIZE_DIR, or written now with `gepard synth
 * --preset gepard-1.0 --seed 1` ($GEPARD_RELEASE_BIN when set, else the
 * ASan binary); its model weights' sha256 must match the golden's, else
 * the test fails and NULL comes back. */
const char *gen_realsize_dir(const golden *g);
/* Its model folder (gen_realsize_dir + "/model"), or NULL as above. */
const char *gen_realsize_model_dir(const golden *g);
/* A real-size case's layout ids (*n_ids of them) and its golden codes
 * (*codes [*frames][C]); the caller frees both. NULL (and *codes NULL)
 * when either is missing. */
int32_t *gen_realsize_case(const golden *g, const cJSON *c, size_t *n_ids, int32_t **codes,
                           int *frames);

#endif
