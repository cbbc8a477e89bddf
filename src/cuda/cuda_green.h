/* cuda_green.h — a green context (cuda_green.cu): a share of the GPU's
 * multiprocessors to which the work of its streams is confined, for the
 * codec's light-load calls (GEPARD_CUDA_CODEC_GREEN, cuda_codec.cu). */
#ifndef GP_CUDA_GREEN_H
#define GP_CUDA_GREEN_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct gp_cuda_green {
    void *green;    /* CUgreenCtx, or NULL */
    void *ctx;      /* its CUcontext (cuCtxFromGreenCtx) */
    int sms;        /* the multiprocessors it holds */
    int device_sms; /* of the whole GPU */
} gp_cuda_green;

/* A green context of at least `sms` multiprocessors (rounded up to the
 * GPU's partition step) on `device`: true, or false with *g empty. `why`
 * says what was made, or what is missing. */
bool gp_cuda_green_create(int device, int sms, gp_cuda_green *g, char *why, size_t why_size);
void gp_cuda_green_destroy(gp_cuda_green *g);
/* A non-blocking stream of the green context at the device's least priority. */
cudaError_t gp_cuda_green_stream(const gp_cuda_green *g, cudaStream_t *s);
/* The green context made current on this thread (the runtime calls made
 * until the pop use it: events created then belong to it). */
bool gp_cuda_green_push(const gp_cuda_green *g);
void gp_cuda_green_pop(const gp_cuda_green *g);

#endif
