/* cuda_launch.cuh — programmatic dependent launch (Hopper) for chains of
 * small kernels.
 *
 * A lone stream's codec frame is ~70 kernels in a row, each waiting on the
 * one before; between two of them the GPU spends a few microseconds
 * retiring the first grid and launching the second. With programmatic
 * stream serialization the next kernel is launched while the previous one
 * still runs: its blocks become resident and stop at `griddepcontrol.wait`,
 * which returns once every grid it depends on has completed and its memory
 * is visible. Each kernel launched this way therefore calls
 * gp_pdl_enter() before it touches global memory (reads and writes: the
 * grid before may still be reading what this one overwrites); what it
 * computes is unchanged, bit for bit.
 *
 * When the next grid may launch is the grid's choice. By default a grid
 * lets it launch when its blocks exit (the implicit trigger): on the H200
 * the codec gained 1-4 % at every batch size (one stream 0.71 -> 0.68 ms per
 * frame, 256 streams 49.6-50.2k -> 49.8-50.2k frames/s, 1024 50.5-51.0k ->
 * 51.1-51.4k). GEPARD_CUDA_PDL_EARLY=1 lets it launch as soon as all of this
 * grid's blocks have started: one stream 0.65 ms, but the waiting blocks
 * hold multiprocessors that the residual branches' concurrent kernels need
 * (16 streams 17.2k -> 15.2k frames/s, 256 streams 49.1k -> 47.5k).
 *
 * Inside CUDA graphs the attribute becomes a programmatic edge. Kernels from
 * libraries (cuBLASLt) know nothing of it and keep ordinary edges.
 * GEPARD_CUDA_PDL=0 launches everything without it (read when a GPU codec
 * is made), for measurements; griddepcontrol is then a no-op. */
#pragma once

#include <cuda_runtime.h>

#include <utility>

/* Whether a grid lets the next one launch as soon as its blocks have all
 * started (1), or only when they exit (0). One copy per translation unit,
 * set by gp_pdl_set_trigger in its init (GEPARD_CUDA_PDL_EARLY). */
static __constant__ int gp_pdl_trigger_early;

/* Wait for the grids this one depends on (their writes are visible after). */
__device__ __forceinline__ void gp_pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
/* Let the next grid launch once every block of this one has called it (or exited). */
__device__ __forceinline__ void gp_pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
/* Wait for the grids this one depends on, then let the next one launch. */
__device__ __forceinline__ void gp_pdl_enter() {
    gp_pdl_wait();
    if (gp_pdl_trigger_early) gp_pdl_launch_dependents();
}

/* Whether launches carry the attribute (gp_cuda_pdl_init: GEPARD_CUDA_PDL). */
extern bool gp_cuda_pdl, gp_cuda_pdl_early;
void gp_cuda_pdl_init(void);

/* This translation unit's copy of gp_pdl_trigger_early (after gp_cuda_pdl_init). */
static inline cudaError_t gp_pdl_set_trigger(void) {
    const int early = gp_cuda_pdl_early ? 1 : 0;
    return cudaMemcpyToSymbol(gp_pdl_trigger_early, &early, sizeof early);
}

/* kernel<<<grid, block, smem, s>>>(args...) with programmatic stream
 * serialization when gp_cuda_pdl. A launch error is returned and, as for
 * <<<>>>, left for cudaGetLastError. */
template <typename... Params, typename... Args>
static inline cudaError_t gp_launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                                    cudaStream_t s, Args &&...args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = gp_cuda_pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}
