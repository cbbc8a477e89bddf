/* cuda_green.cu — a green context: a share of the GPU's multiprocessors that
 * the work of its streams is confined to.
 *
 * Why: a lone stream's single-row step is one persistent kernel of 15
 * clusters of 8 blocks (120 of the H200's 132 multiprocessors), and its
 * queued codec call (16 frames, ~1.4 ms of GPU) runs beside the next steps.
 * The codec's kernels spread over every multiprocessor that is free when they
 * launch, so a step launched after them waits for their blocks to drain: the
 * step went 0.44 -> 0.48 ms with the codec beside it (NOTES, 2026-12-04,
 * fourth part). Confined to a few multiprocessors, the codec still finishes
 * its chunk well inside the next 16 steps, and the step keeps the rest.
 *
 * The driver's green-context calls are reached through
 * cudaGetDriverEntryPointByVersion (as the tensor maps are), so the plugin
 * still links no libcuda; a driver without them (before CUDA 12.5) gets a
 * clear reason and the caller keeps its ordinary streams. */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_green.h"

namespace {

typedef CUresult (*get_device_fn)(CUdevice *, int);
typedef CUresult (*get_resource_fn)(CUdevice, CUdevResource *, CUdevResourceType);
typedef CUresult (*split_fn)(CUdevResource *, unsigned int *, const CUdevResource *,
                             CUdevResource *, unsigned int, unsigned int);
typedef CUresult (*generate_fn)(CUdevResourceDesc *, CUdevResource *, unsigned int);
typedef CUresult (*create_fn)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned int);
typedef CUresult (*destroy_fn)(CUgreenCtx);
typedef CUresult (*to_ctx_fn)(CUcontext *, CUgreenCtx);
typedef CUresult (*stream_fn)(CUstream *, CUgreenCtx, unsigned int, int);
typedef CUresult (*push_fn)(CUcontext);
typedef CUresult (*pop_fn)(CUcontext *);

struct green_api {
    get_device_fn get_device;
    get_resource_fn get_resource;
    split_fn split;
    generate_fn generate;
    create_fn create;
    destroy_fn destroy;
    to_ctx_fn to_ctx;
    stream_fn stream;
    push_fn push;
    pop_fn pop;
};

void *entry(const char *name, int version) {
    void *fn = NULL;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return fn;
}

/* The driver's calls, or false (the first one missing named in *missing). */
bool load_api(green_api *a, const char **missing) {
    struct {
        const char *name;
        int version;
        void **slot;
    } calls[] = {
        {"cuDeviceGet", 2000, (void **)&a->get_device},
        {"cuDeviceGetDevResource", 12040, (void **)&a->get_resource},
        {"cuDevSmResourceSplitByCount", 12040, (void **)&a->split},
        {"cuDevResourceGenerateDesc", 12040, (void **)&a->generate},
        {"cuGreenCtxCreate", 12040, (void **)&a->create},
        {"cuGreenCtxDestroy", 12040, (void **)&a->destroy},
        {"cuCtxFromGreenCtx", 12040, (void **)&a->to_ctx},
        {"cuGreenCtxStreamCreate", 12050, (void **)&a->stream},
        {"cuCtxPushCurrent", 4000, (void **)&a->push},
        {"cuCtxPopCurrent", 4000, (void **)&a->pop},
    };
    for (auto &c : calls)
        if (!(*c.slot = entry(c.name, c.version))) {
            *missing = c.name;
            return false;
        }
    return true;
}

green_api api;
bool api_loaded;

} // namespace

bool gp_cuda_green_create(int device, int sms, gp_cuda_green *g, char *why, size_t why_size) {
    memset(g, 0, sizeof *g);
    const char *missing = NULL;
    if (!api_loaded && !load_api(&api, &missing)) {
        snprintf(why, why_size, "the driver has no %s (green contexts need CUDA 12.5+)", missing);
        return false;
    }
    api_loaded = true;
    CUdevice dev = 0;
    CUdevResource all, part[1], rest;
    memset(&all, 0, sizeof all);
    memset(part, 0, sizeof part);
    memset(&rest, 0, sizeof rest);
    unsigned int groups = 1;
    CUresult r = api.get_device(&dev, device);
    if (r == CUDA_SUCCESS) r = api.get_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM);
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_size, "the GPU's multiprocessors could not be listed (CUresult %d)",
                 (int)r);
        return false;
    }
    if (sms <= 0 || (unsigned)sms >= all.sm.smCount) {
        snprintf(why, why_size, "%d multiprocessors asked of the %u this GPU has", sms,
                 all.sm.smCount);
        return false;
    }
    r = api.split(part, &groups, &all, &rest, 0, (unsigned)sms);
    CUdevResourceDesc desc = NULL;
    if (r == CUDA_SUCCESS && groups == 1) r = api.generate(&desc, part, 1);
    CUgreenCtx green = NULL;
    if (r == CUDA_SUCCESS && groups == 1)
        r = api.create(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM);
    CUcontext ctx = NULL;
    if (r == CUDA_SUCCESS && green) r = api.to_ctx(&ctx, green);
    if (r != CUDA_SUCCESS || groups != 1 || !green) {
        if (green) api.destroy(green);
        snprintf(why, why_size,
                 "no green context of %d multiprocessors (minimum %u, in steps of %u; CUresult "
                 "%d)",
                 sms, all.sm.minSmPartitionSize, all.sm.smCoscheduledAlignment, (int)r);
        return false;
    }
    g->green = green;
    g->ctx = ctx;
    g->sms = (int)part[0].sm.smCount;
    g->device_sms = (int)all.sm.smCount;
    snprintf(why, why_size, "a green context of %d of the GPU's %d multiprocessors", g->sms,
             g->device_sms);
    return true;
}

void gp_cuda_green_destroy(gp_cuda_green *g) {
    if (g->green && api_loaded) api.destroy((CUgreenCtx)g->green);
    memset(g, 0, sizeof *g);
}

cudaError_t gp_cuda_green_stream(const gp_cuda_green *g, cudaStream_t *s) {
    int least = 0, greatest = 0;
    if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess) {
        cudaGetLastError();
        least = 0;
    }
    CUstream cs = NULL;
    const CUresult r = api.stream(&cs, (CUgreenCtx)g->green, CU_STREAM_NON_BLOCKING, least);
    *s = (cudaStream_t)cs;
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

bool gp_cuda_green_push(const gp_cuda_green *g) {
    return g->ctx && api.push((CUcontext)g->ctx) == CUDA_SUCCESS;
}

void gp_cuda_green_pop(const gp_cuda_green *g) {
    CUcontext was = NULL;
    if (g->ctx) api.pop(&was);
}
