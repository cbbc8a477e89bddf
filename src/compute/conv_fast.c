/* conv_fast.c — the fast paths beside conv.c: im2col + OpenBLAS sgemm convolution and a
 * vectorised Snake (see conv.h).
 *
 * Convolution: for a block of output columns [n0, n0 + nb) the input windows are laid
 * out as B[(c*k + t)][j] = x[c][(n0 + j)*stride + t*dilation] (im2col); since PyTorch's
 * weight layout [Co][Ci][k] is already the row-major matrix W[Co][Ci*k], the block is
 * one sgemm Y[:, block] = bias + W * B. Blocks keep B around 1 MB. OpenBLAS is pinned to
 * one thread (its own threads would fight the engine's); parallelism, when wanted, comes
 * from splitting the output channels over a gp_pool. OpenBLAS picks different kernels
 * (and so summation orders) for different matrix shapes; a caller that needs results
 * independent of how a signal is chunked (the streaming decoder) passes a fixed block —
 * one codec frame's worth of columns — so every sgemm call has the same shape and the
 * same inputs for the same frame, whatever the chunking.
 *
 * Snake: sin(a*x)^2 = sin(r)^2 with r = a*x - k*pi reduced into [-pi/2, pi/2] (Cody-Waite,
 * three-part pi) and a degree-11 odd polynomial; written with GCC vector extensions so it
 * compiles to SIMD on the baseline target. Arguments beyond |x| > 2^13*pi (never seen in
 * practice) fall back to sinf.
 */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "compute/conv.h"

#define FAST_BLOCK_TARGET_FLOATS (256u * 1024u) /* im2col block: ~1 MB */

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_single_thread(void) { openblas_set_num_threads(1); }

/* Output columns per im2col block for a conv. */
static size_t fast_block_cols(const gp_conv1d *conv) {
    size_t rows = (size_t)conv->c_in * (size_t)conv->kernel;
    size_t cols = FAST_BLOCK_TARGET_FLOATS / (rows ? rows : 1);
    if (cols < 32) cols = 32;
    if (cols > 2048) cols = 2048;
    return cols / 16 * 16;
}

size_t gp_conv1d_fast_scratch(const gp_conv1d *conv, size_t block) {
    return (size_t)conv->c_in * (size_t)conv->kernel * (block ? block : fast_block_cols(conv));
}

int gp_conv_scratch_reserve(gp_conv_scratch *s, size_t floats, gp_error *err) {
    if (floats <= s->cap) return GEPARD_OK;
    float *p = gp_aligned_alloc(floats * sizeof(float));
    if (!p) return gp_fail_oom(err, "convolution scratch", floats * sizeof(float));
    gp_aligned_free(s->buf);
    s->buf = p;
    s->cap = floats;
    return GEPARD_OK;
}

void gp_conv_scratch_free(gp_conv_scratch *s) {
    gp_aligned_free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}

typedef struct fast_gemm_job {
    const gp_conv1d *conv;
    const float *cols; /* im2col block [Ci*k][nb] */
    float *y;          /* output at column n0 */
    size_t ys, nb;
    int parts;
} fast_gemm_job;

/* Y[o0:o1, block] = bias + W[o0:o1] * B. */
static void fast_gemm_rows(const fast_gemm_job *job, int o0, int o1) {
    const gp_conv1d *conv = job->conv;
    const int kk = conv->c_in * conv->kernel;
    if (o1 <= o0) return;
    for (int o = o0; o < o1; o++) {
        float *yo = job->y + (size_t)o * job->ys;
        for (size_t j = 0; j < job->nb; j++) yo[j] = conv->bias[o];
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, o1 - o0, (int)job->nb, kk, 1.0f,
                conv->weight + (size_t)o0 * kk, kk, job->cols, (int)job->nb, 1.0f,
                job->y + (size_t)o0 * job->ys, (int)job->ys);
}

static void fast_gemm_task(void *ctx, int task, int worker) {
    (void)worker;
    const fast_gemm_job *job = ctx;
    long b, e;
    gp_split_range(job->conv->c_out, job->parts, task, 8, &b, &e);
    fast_gemm_rows(job, (int)b, (int)e);
}

void gp_conv1d_fast(const gp_conv1d *conv, const float *x, size_t xs, float *y, size_t ys,
                    size_t n_out, size_t block, gp_conv_scratch *scratch, gp_pool *pool) {
    pthread_once(&blas_once, blas_single_thread);
    const int ci = conv->c_in, k = conv->kernel;
    const size_t d = (size_t)conv->dilation, s = (size_t)conv->stride;
    if (block == 0) block = fast_block_cols(conv);
    int parts = gp_pool_size(pool);
    if (parts > 1 && conv->c_out < 16 * parts) parts = 1; /* too few rows to be worth it */
    for (size_t n0 = 0; n0 < n_out; n0 += block) {
        const size_t nb = n_out - n0 < block ? n_out - n0 : block;
        float *cols = scratch->buf;
        for (int c = 0; c < ci; c++) {
            const float *xc = x + (size_t)c * xs + n0 * s;
            for (int t = 0; t < k; t++) {
                float *row = cols + ((size_t)c * k + t) * nb;
                const float *src = xc + (size_t)t * d;
                if (s == 1) {
                    memcpy(row, src, nb * sizeof(float));
                } else {
                    for (size_t j = 0; j < nb; j++) row[j] = src[j * s];
                }
            }
        }
        fast_gemm_job job = {conv, cols, y + n0, ys, nb, parts};
        if (parts > 1)
            gp_pool_parallel_for(pool, parts, fast_gemm_task, &job);
        else
            fast_gemm_rows(&job, 0, conv->c_out);
    }
}

/* ---- vectorised sin^2 ---- */

typedef float v8f __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));

#define SIN2_MAX_ARG 25735.93f /* 2^13 * pi: k * PI_A stays exact below this */

/* sin(x)^2 for 8 lanes; lanes beyond the polynomial's range fall back to sinf one by one,
 * so every element's result depends on its own value only (not on its neighbours). */
static void sin2_lanes(const float *in, float *result) {
    v8f v;
    memcpy(&v, in, sizeof v);
    const float inv_pi = 0.318309886183790671538f;
    const float pi_a = 3.140625f, pi_b = 9.67502593994140625e-4f, pi_c = 1.509957990978376432e-7f;
    /* Taylor coefficients of sin up to r^11: error < 6e-8 on [-pi/2, pi/2]. */
    const float c3 = -1.0f / 6, c5 = 1.0f / 120, c7 = -1.0f / 5040, c9 = 1.0f / 362880,
                c11 = -1.0f / 39916800;
    const float round_magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    v8f kf = (v * inv_pi + round_magic) - round_magic;
    v8f r = ((v - kf * pi_a) - kf * pi_b) - kf * pi_c;
    v8f r2 = r * r;
    v8f p = ((((c11 * r2 + c9) * r2 + c7) * r2 + c5) * r2 + c3) * r2;
    v8f sr = r + r * p;
    v8f out = sr * sr;
    v8f a = (v8f)((v8i)v & 0x7fffffff); /* |x| */
    v8i outside = (a > SIN2_MAX_ARG) | (v != v);
    for (int l = 0; l < 8; l++) {
        if (outside[l]) {
            float sv = sinf(v[l]);
            out[l] = sv * sv;
        }
    }
    memcpy(result, &out, sizeof out);
}

void gp_sin2_fast(const float *x, float *y, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) sin2_lanes(x + i, y + i);
    if (i < n) { /* the tail goes through the same polynomial */
        float in[8] = {0}, out[8];
        memcpy(in, x + i, (n - i) * sizeof(float));
        sin2_lanes(in, out);
        memcpy(y + i, out, (n - i) * sizeof(float));
    }
}

void gp_act_fast(const gp_act *act, const float *x, size_t xs, float *y, size_t ys, size_t n) {
    float tmp[512];
    for (int c = 0; c < act->channels; c++) {
        const float *xc = x + (size_t)c * xs;
        float *yc = y + (size_t)c * ys;
        if (c >= act->n_snake) {
            if (act->kind == GP_ACT_LRELU || act->kind == GP_ACT_HALF_SNAKE) {
                const float slope = act->slope;
                for (size_t i = 0; i < n; i++) yc[i] = xc[i] > 0.0f ? xc[i] : slope * xc[i];
            } else {
                gp_act_ref(&(gp_act){.kind = act->kind, .channels = 1, .slope = act->slope}, xc, xs,
                           yc, ys, n);
            }
            continue;
        }
        const float a = act->alpha[c], r = act->inv_alpha[c];
        for (size_t i0 = 0; i0 < n; i0 += 512) {
            size_t m = n - i0 < 512 ? n - i0 : 512;
            for (size_t i = 0; i < m; i++) tmp[i] = a * xc[i0 + i];
            gp_sin2_fast(tmp, tmp, m);
            for (size_t i = 0; i < m; i++) yc[i0 + i] = xc[i0 + i] + r * tmp[i];
        }
    }
}
