/* cuda_common.h — helpers shared by the GPU tests (test_cuda.c,
 * test_cuda_codec.c): skipping visibly without a GPU. (The real-size
 * checkpoint comes from gen_cases.h's gen_realsize_dir.) */
#ifndef GEPARD_TEST_CUDA_COMMON_H
#define GEPARD_TEST_CUDA_COMMON_H

#include "golden.h"

/* End the test as "skipped (no CUDA device: …)" unless a GPU is usable. */
void require_cuda(void);

#endif
