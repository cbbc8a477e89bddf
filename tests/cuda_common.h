/* cuda_common.h — helpers shared by the GPU tests (test_cuda.c,
 * test_cuda_real_size.c, test_cuda_codec.c): skipping visibly without a GPU,
 * a model on a device, a KV pool. (The real-size
 * checkpoint comes from gen_cases.h's gen_realsize_dir.) */
#ifndef GEPARD_TEST_CUDA_COMMON_H
#define GEPARD_TEST_CUDA_COMMON_H

#include "golden.h"
#include "model/device.h"
#include "model/generate.h"
#include "model/model.h"

/* End the test as "skipped (no CUDA device: …)" unless a GPU is usable. */
void require_cuda(void);
/* The model in `dir` (f32 weights) on the CPU or GPU 0 at `precision`;
 * fails the test when it does not load. */
gp_model *cuda_test_model(const char *dir, gp_device_kind kind, gp_dev_precision precision);
/* "f32" or "bf16". */
const char *cuda_test_precision_name(gp_dev_precision p);
/* A KV pool of `blocks` blocks of 16 positions for m; fails the test on error. */
gp_kv_pool *cuda_test_kv_pool(const gp_model *m, int blocks);

#endif
