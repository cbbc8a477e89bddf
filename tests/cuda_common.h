/* cuda_common.h — helpers shared by the GPU tests (test_cuda.c,
 * test_cuda_codec.c): skipping visibly without a GPU, and the synthetic
 * real-size checkpoint the real-size goldens were computed on. */
#ifndef GEPARD_TEST_CUDA_COMMON_H
#define GEPARD_TEST_CUDA_COMMON_H

#include "golden.h"

/* End the test as "skipped (no CUDA device: …)" unless a GPU is usable. */
void require_cuda(void);
/* $GEPARD_REALSIZE_DIR, or `gepard synth --preset gepard-1.0 --seed 1` written
 * now; fails the test (NULL) when its weights are not the goldens'. */
const char *realsize_dir(const golden *g);

#endif
