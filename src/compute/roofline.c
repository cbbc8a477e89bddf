/* roofline.c — running the roofline probes on every pool thread (see
 * roofline.h). */
#include "compute/roofline.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/timing.h"
#include "compute/matrix.h"

/* The probes measure the machine at the instruction set the kernels use: its
 * best, or less when GEPARD_KERNELS caps it (GEPARD_KERNELS=avx2 on an
 * AVX-512 CPU gives its AVX2 FMA peak and no bf16 dot peak, so fractions of
 * peak compare like with like). */
static gp_kernel_level cpu_level(void) { return gp_kernels_active(); }

typedef struct probe_job {
    const float *data;
    size_t n;
    int parts;
    long iterations;
    int kind; /* 0 sum, 1 fma, 2 bf16 */
    double result[256];
} probe_job;

static void probe_task(void *ctx, int task, int worker) {
    (void)worker;
    probe_job *j = ctx;
    gp_kernel_level level = cpu_level();
    if (j->kind == 0) {
        long b, e;
        gp_split_range((long)j->n, j->parts, task, 1024, &b, &e);
        j->result[task] =
            level >= GP_KERNELS_AVX512 ? gp_roofline_sum_avx512(j->data + b, (size_t)(e - b))
            : level >= GP_KERNELS_AVX2 ? gp_roofline_sum_avx2(j->data + b, (size_t)(e - b))
                                       : 0;
        if (level == GP_KERNELS_SCALAR) {
            double s = 0;
            for (long i = b; i < e; i++) s += j->data[i];
            j->result[task] = s;
        }
    } else if (j->kind == 1) {
        j->result[task] = level >= GP_KERNELS_AVX512 ? gp_roofline_fma_loop_avx512(j->iterations)
                          : level >= GP_KERNELS_AVX2 ? gp_roofline_fma_loop_avx2(j->iterations)
                                                     : 0;
    } else {
        j->result[task] =
            level >= GP_KERNELS_AVX512 ? gp_roofline_bf16_loop_avx512(j->iterations) : 0;
    }
}

double gp_roofline_read_bandwidth(gp_pool *pool, size_t bytes) {
    size_t n = bytes / sizeof(float);
    float *x = gp_aligned_alloc(n * sizeof(float));
    if (!x) return 0;
    for (size_t i = 0; i < n; i++) x[i] = (float)(i & 1023) * 1e-3f; /* fault the pages in */
    int parts = gp_pool_size(pool);
    if (parts > 256) parts = 256;
    probe_job *job = calloc(1, sizeof *job);
    double best = 0;
    if (job) {
        *job = (probe_job){.data = x, .n = n, .parts = parts, .kind = 0};
        for (int pass = 0; pass < 5; pass++) {
            uint64_t t0 = gp_now_ns();
            gp_pool_parallel_for(pool, parts, probe_task, job);
            double s = (double)(gp_now_ns() - t0) * 1e-9;
            double gbs = (double)(n * sizeof(float)) / s / 1e9;
            if (gbs > best) best = gbs;
        }
        free(job);
    }
    gp_aligned_free(x);
    return best;
}

static double peak(gp_pool *pool, int kind) {
    if (cpu_level() == GP_KERNELS_SCALAR) return 0;
    int parts = gp_pool_size(pool);
    if (parts > 256) parts = 256;
    probe_job *job = calloc(1, sizeof *job);
    if (!job) return 0;
    double best = 0;
    *job = (probe_job){.parts = parts, .iterations = 2000000, .kind = kind};
    for (int pass = 0; pass < 3; pass++) {
        uint64_t t0 = gp_now_ns();
        gp_pool_parallel_for(pool, parts, probe_task, job);
        double s = (double)(gp_now_ns() - t0) * 1e-9;
        double flops = 0;
        for (int i = 0; i < parts; i++) flops += job->result[i];
        if (flops / s / 1e9 > best) best = flops / s / 1e9;
    }
    free(job);
    return best;
}

double gp_roofline_fma_f32(gp_pool *pool) { return peak(pool, 1); }

double gp_roofline_dot_bf16(gp_pool *pool) {
    return cpu_level() >= GP_KERNELS_AVX512 ? peak(pool, 2) : 0;
}
