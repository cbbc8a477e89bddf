/* onednn_matmul.c — prefill through oneDNN's bf16 matmul with the
 * activations split into three bf16 terms (onednn_matmul.h). */
#include "compute/onednn_matmul.h"

#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/log.h"
#include "base/timing.h"

/* One row count's primitive over a slice. */
typedef struct onednn_prim {
    int rows; /* terms × n; 0 = unused */
    dnnl_primitive_t prim;
    dnnl_memory_t src, dst; /* data handles set per call */
    unsigned long last_use;
} onednn_prim;

typedef struct onednn_slice {
    int r0, r1;             /* output rows of the matrix */
    dnnl_memory_desc_t wmd; /* the weights' blocked layout */
    void *weights;          /* in that layout, owned */
    dnnl_memory_t wmem;
    onednn_prim prims[GP_ONEDNN_PRIMITIVES];
} onednn_slice;

struct gp_onednn_matrix {
    int cols, n_slices;
    onednn_slice *slices;
    unsigned long uses;
    pthread_mutex_t lock; /* one call at a time (a model shared by two engines) */
};

/* libgomp's (oneDNN's threading runtime; declared here rather than through
 * omp.h, which not every compiler ships) */
void omp_set_num_threads(int n);

/* ---- the engine (one per process) and a stream per thread ---- */

static dnnl_engine_t engine;
static int engine_status = -1; /* -1 not tried, 0 ready, 1 failed */
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static pthread_key_t stream_key;

static pthread_key_t scratch_key;

static void stream_destroy(void *s) { dnnl_stream_destroy((dnnl_stream_t)s); }

/* A thread's scratch: the split inputs (on the calling thread) and a slice's
 * three results (on a worker), kept between calls — fresh allocations of
 * this size are fresh pages, faulted in on every call. */
typedef struct thread_scratch {
    void *buf[2];
    size_t cap[2];
} thread_scratch;

static void scratch_destroy(void *p) {
    thread_scratch *t = p;
    free(t->buf[0]);
    free(t->buf[1]);
    free(t);
}

static void engine_init(void) {
    engine_status = dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success &&
                            pthread_key_create(&stream_key, stream_destroy) == 0 &&
                            pthread_key_create(&scratch_key, scratch_destroy) == 0
                        ? 0
                        : 1;
}

/* This thread's scratch buffer `which` (0 inputs, 1 results) of at least `bytes`. */
static void *thread_buffer(int which, size_t bytes) {
    thread_scratch *t = pthread_getspecific(scratch_key);
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t || pthread_setspecific(scratch_key, t)) {
            free(t);
            return NULL;
        }
    }
    if (t->cap[which] < bytes) {
        free(t->buf[which]);
        t->buf[which] = malloc(bytes);
        t->cap[which] = t->buf[which] ? bytes : 0;
    }
    return t->buf[which];
}

static int engine_ready(void) {
    pthread_once(&engine_once, engine_init);
    return engine_status == 0;
}

/* This thread's stream, with oneDNN single-threaded on it (the pool owns the
 * parallelism). */
static dnnl_stream_t thread_stream(void) {
    dnnl_stream_t s = pthread_getspecific(stream_key);
    if (s) return s;
    omp_set_num_threads(1);
    if (dnnl_stream_create(&s, engine, dnnl_stream_default_flags) != dnnl_success) return NULL;
    pthread_setspecific(stream_key, s);
    return s;
}

dnnl_engine_t gp_onednn_engine(void) { return engine_ready() ? engine : NULL; }
dnnl_stream_t gp_onednn_thread_stream(void) { return engine_ready() ? thread_stream() : NULL; }
void *gp_onednn_thread_buffer(int which, size_t bytes) {
    return engine_ready() ? thread_buffer(which, bytes) : NULL;
}

/* ---- building ---- */

static dnnl_status_t matmul_pd(int rows, int K, int N, const dnnl_memory_desc_t *wmd,
                               dnnl_primitive_desc_t *pd) {
    dnnl_memory_desc_t src, wei, dst;
    dnnl_dims_t sd = {rows, K}, wd = {K, N}, dd = {rows, N};
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(&src, 2, sd, dnnl_bf16, dnnl_ab);
    if (st == dnnl_success && wmd)
        wei = *wmd;
    else if (st == dnnl_success)
        st = dnnl_memory_desc_init_by_tag(&wei, 2, wd, dnnl_bf16, dnnl_format_tag_any);
    if (st == dnnl_success) st = dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t md;
    if (st == dnnl_success) st = dnnl_matmul_desc_init(&md, &src, &wei, NULL, &dst);
    if (st == dnnl_success) st = dnnl_primitive_desc_create(pd, &md, NULL, engine, NULL);
    return st;
}

static void prim_clear(onednn_prim *p) {
    if (p->prim) dnnl_primitive_destroy(p->prim);
    if (p->src) dnnl_memory_destroy(p->src);
    if (p->dst) dnnl_memory_destroy(p->dst);
    memset(p, 0, sizeof *p);
}

static void slice_clear(onednn_slice *s) {
    for (int i = 0; i < GP_ONEDNN_PRIMITIVES; i++) prim_clear(&s->prims[i]);
    if (s->wmem) dnnl_memory_destroy(s->wmem);
    free(s->weights);
    memset(s, 0, sizeof *s);
}

/* The slice's weights, rows r0 .. r1 of m as [N][K] bf16 ("ba" for K × N),
 * reordered into the layout a matmul of 96 rows asks for (the same for every
 * row count). */
static dnnl_status_t slice_build(const gp_matrix *m, onednn_slice *s, uint16_t *plain) {
    const int K = m->cols, N = s->r1 - s->r0;
    const uint16_t *data = m->data;
    for (int r = s->r0; r < s->r1; r++) /* the tiled rows' 16-column chunks, as stored */
        for (int c = 0; c < K; c += 16)
            memcpy(plain + (size_t)(r - s->r0) * K + c, data + gp_matrix_index(m, r, c),
                   (size_t)(K - c < 16 ? K - c : 16) * sizeof *plain);
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st = matmul_pd(96, K, N, NULL, &pd);
    if (st != dnnl_success) return st;
    s->wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_primitive_desc_destroy(pd);
    s->weights = malloc(dnnl_memory_desc_get_size(&s->wmd));
    if (!s->weights) return dnnl_out_of_memory;
    dnnl_memory_desc_t pmd;
    dnnl_dims_t wd = {K, N};
    st = dnnl_memory_desc_init_by_tag(&pmd, 2, wd, dnnl_bf16, dnnl_ba);
    dnnl_memory_t pmem = NULL;
    if (st == dnnl_success) st = dnnl_memory_create(&pmem, &pmd, engine, plain);
    if (st == dnnl_success) st = dnnl_memory_create(&s->wmem, &s->wmd, engine, s->weights);
    dnnl_primitive_desc_t rpd = NULL;
    if (st == dnnl_success)
        st = dnnl_reorder_primitive_desc_create(&rpd, &pmd, engine, &s->wmd, engine, NULL);
    dnnl_primitive_t reorder = NULL;
    if (st == dnnl_success) st = dnnl_primitive_create(&reorder, rpd);
    dnnl_stream_t stream = st == dnnl_success ? thread_stream() : NULL;
    if (st == dnnl_success && !stream) st = dnnl_runtime_error;
    if (st == dnnl_success) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, pmem}, {DNNL_ARG_TO, s->wmem}};
        st = dnnl_primitive_execute(reorder, stream, 2, args);
        if (st == dnnl_success) st = dnnl_stream_wait(stream);
    }
    if (reorder) dnnl_primitive_destroy(reorder);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (pmem) dnnl_memory_destroy(pmem);
    return st;
}

void gp_onednn_detach(gp_matrix *m) {
    gp_onednn_matrix *o = m->onednn;
    if (!o) return;
    for (int i = 0; i < o->n_slices; i++) slice_clear(&o->slices[i]);
    free(o->slices);
    pthread_mutex_destroy(&o->lock);
    free(o);
    m->onednn = NULL;
}

/* Output rows per slice: GP_ONEDNN_SLICE, or GEPARD_ONEDNN_SLICE (a multiple
 * of 16 up to 4096) for measurements. */
static int slice_rows(void) {
    const char *env = getenv("GEPARD_ONEDNN_SLICE");
    const int v = env ? atoi(env) : 0;
    return v >= 16 && v <= 4096 && v % 16 == 0 ? v : GP_ONEDNN_SLICE;
}

int gp_onednn_attach(gp_matrix *m, gp_error *err) {
    if (m->format != GP_WEIGHTS_BF16)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED, "oneDNN prefill needs bf16 weights");
    if (!engine_ready())
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED, "oneDNN has no CPU engine here");
    gp_onednn_detach(m);
    gp_onednn_matrix *o = calloc(1, sizeof *o);
    const int width = slice_rows();
    const int n_slices = (m->rows + width - 1) / width;
    uint16_t *plain = malloc((size_t)width * m->cols * sizeof *plain);
    if (o) o->slices = calloc((size_t)n_slices, sizeof *o->slices);
    if (!o || !o->slices || !plain) {
        free(plain);
        if (o) free(o->slices);
        free(o);
        return gp_fail_oom(err, "oneDNN weights", (size_t)m->rows * m->cols * 2);
    }
    pthread_mutex_init(&o->lock, NULL);
    o->cols = m->cols;
    o->n_slices = n_slices;
    m->onednn = o;
    dnnl_status_t st = dnnl_success;
    for (int i = 0; i < n_slices && st == dnnl_success; i++) {
        onednn_slice *s = &o->slices[i];
        s->r0 = i * width;
        s->r1 = s->r0 + width < m->rows ? s->r0 + width : m->rows;
        st = slice_build(m, s, plain);
    }
    free(plain);
    if (st != dnnl_success) {
        gp_onednn_detach(m);
        return st == dnnl_out_of_memory
                   ? gp_fail_oom(err, "oneDNN weights", (size_t)m->rows * m->cols * 2)
                   : gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                             "oneDNN cannot build a bf16 matmul of %d × %d here (status %d)",
                             m->rows, m->cols, (int)st);
    }
    return GEPARD_OK;
}

/* ---- running ---- */

/* The slice's primitive for `rows` (terms × n) input rows: remembered, or built with
 * the slice's weight layout, replacing the least recently used. */
static onednn_prim *slice_prim(onednn_slice *s, int rows, int K, unsigned long use) {
    onednn_prim *oldest = &s->prims[0];
    for (int i = 0; i < GP_ONEDNN_PRIMITIVES; i++) {
        onednn_prim *p = &s->prims[i];
        if (p->rows == rows) {
            p->last_use = use;
            return p;
        }
        if (p->last_use < oldest->last_use) oldest = p;
    }
    prim_clear(oldest);
    const int N = s->r1 - s->r0;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st = matmul_pd(rows, K, N, &s->wmd, &pd);
    if (st == dnnl_success) st = dnnl_primitive_create(&oldest->prim, pd);
    if (st == dnnl_success)
        st =
            dnnl_memory_create(&oldest->src, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0),
                               engine, DNNL_MEMORY_NONE);
    if (st == dnnl_success)
        st =
            dnnl_memory_create(&oldest->dst, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0),
                               engine, DNNL_MEMORY_NONE);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success) {
        prim_clear(oldest);
        return NULL;
    }
    oldest->rows = rows;
    oldest->last_use = use;
    return oldest;
}

typedef struct onednn_job {
    gp_onednn_matrix *o;
    const uint16_t *terms; /* [nt][n][K] bf16: hi, mid, lo (nt = 3) or hi, lo (nt = 2) */
    int nt, n, ldy;
    float *y;
    unsigned long use;
    int failed;
} onednn_job;

static void slice_task(void *ctx, int task, int worker) {
    (void)worker;
    onednn_job *job = ctx;
    onednn_slice *s = &job->o->slices[task];
    const int n = job->n, N = s->r1 - s->r0;
    dnnl_stream_t stream = thread_stream();
    const int nt = job->nt;
    onednn_prim *p = stream ? slice_prim(s, nt * n, job->o->cols, job->use) : NULL;
    float *out = thread_buffer(1, (size_t)nt * n * N * sizeof(float));
    dnnl_status_t st = p && out ? dnnl_success : dnnl_out_of_memory;
    if (st == dnnl_success) st = dnnl_memory_set_data_handle(p->src, (void *)job->terms);
    if (st == dnnl_success) st = dnnl_memory_set_data_handle(p->dst, out);
    if (st == dnnl_success) {
        dnnl_exec_arg_t args[3] = {
            {DNNL_ARG_SRC, p->src}, {DNNL_ARG_WEIGHTS, s->wmem}, {DNNL_ARG_DST, p->dst}};
        st = dnnl_primitive_execute(p->prim, stream, 3, args);
        if (st == dnnl_success) st = dnnl_stream_wait(stream);
    }
    if (st == dnnl_success) {
        /* y = (hi·W + mid·W) + lo·W (or hi·W + lo·W), in this order for every row */
        for (int j = 0; j < n; j++) {
            const float *a = out + (size_t)j * N, *b = out + (size_t)(n + j) * N,
                        *c = out + (size_t)(2 * n + j) * N;
            float *yj = job->y + (size_t)j * job->ldy + s->r0;
            if (nt == 3)
                for (int r = 0; r < N; r++) yj[r] = (a[r] + b[r]) + c[r];
            else
                for (int r = 0; r < N; r++) yj[r] = a[r] + b[r];
        }
    } else {
        __atomic_store_n(&job->failed, 1, __ATOMIC_RELAXED);
    }
}

/* Every activation of the rows as its nt bf16 terms (gp_onednn_split); term
 * t of row j goes to terms[t][j][K]. False at the first non-finite input
 * (the native kernels say what it gives). */
static bool split_terms(const float *x, int n, int ldx, int K, int nt, uint16_t *terms) {
    const size_t plane = (size_t)n * K;
    for (int j = 0; j < n; j++) {
        const float *xj = x + (size_t)j * ldx;
        uint16_t *row = terms + (size_t)j * K;
        for (int k = 0; k < K; k++) {
            if (!isfinite(xj[k])) return false;
            gp_onednn_split(xj[k], nt, row + k, plane);
        }
    }
    return true;
}

int gp_onednn_terms(void) {
    const char *env = getenv("GEPARD_ONEDNN_TERMS");
    return env && !strcmp(env, "2") ? 2 : 3;
}

int gp_onednn_matmul(const gp_matrix *m, const float *x, int n, int ldx, float *y, int ldy,
                     gp_pool *pool) {
    gp_onednn_matrix *o = m->onednn;
    if (!o || n <= 0) return GEPARD_ERR_UNSUPPORTED;
    const int nt = gp_onednn_terms();
    uint16_t *terms = thread_buffer(0, (size_t)nt * n * o->cols * sizeof *terms);
    if (!terms) return GEPARD_ERR_NOMEM;
    if (!split_terms(x, n, ldx, o->cols, nt, terms)) return GEPARD_ERR_UNSUPPORTED;
    pthread_mutex_lock(&o->lock);
    onednn_job job = {o, terms, nt, n, ldy, y, ++o->uses, 0};
    gp_pool_parallel_for(pool, o->n_slices, slice_task, &job);
    pthread_mutex_unlock(&o->lock);
    return job.failed ? GEPARD_ERR_INTERNAL : GEPARD_OK;
}

static _Atomic bool enabled = true;

void gp_onednn_enable(bool on) { enabled = on; }
bool gp_onednn_enabled(void) { return enabled; }

/* ---- choosing ---- */

bool gp_onednn_choose(const gp_matrix *probe, char *why, size_t why_size) {
    const char *env = getenv("GEPARD_PREFILL");
    if (env && !strcmp(env, "native")) {
        snprintf(why, why_size, "GEPARD_PREFILL=native");
        return false;
    }
    const bool forced = env && !strcmp(env, "onednn");
    if (probe->format != GP_WEIGHTS_BF16) {
        snprintf(why, why_size, "oneDNN's path needs bf16 weights");
        return false;
    }
    if (!forced && (size_t)probe->rows * (size_t)probe->cols < ((size_t)1 << 20)) {
        snprintf(why, why_size, "native: matrices of %d x %d are too small for oneDNN to pay",
                 probe->rows, probe->cols);
        return false;
    }
    gp_matrix trial = *probe; /* shares the data; only trial.onednn is its own */
    trial.onednn = NULL;
    gp_error err;
    gp_error_clear(&err);
    if (gp_onednn_attach(&trial, &err)) {
        snprintf(why, why_size, "%s", err.message);
        return false;
    }
    const char *impl = "?";
    dnnl_primitive_desc_t pd = NULL;
    const onednn_slice *first = &trial.onednn->slices[0];
    if (matmul_pd(96, trial.cols, first->r1 - first->r0, &first->wmd, &pd) == dnnl_success)
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    char impl_name[64];
    snprintf(impl_name, sizeof impl_name, "%s", impl);
    if (pd) dnnl_primitive_desc_destroy(pd);
    /* the prefill chunk of a GPU-less server, on as many threads as this
     * process may use (the default of --threads) */
    const int rows = 64;
    gp_pool *pool = NULL;
    if (gp_pool_create(0, &pool, &err)) pool = NULL; /* then one thread */
    const int threads = gp_pool_size(pool);
    double native, onednn;
    const bool ok = gp_matmul_race(&trial, rows, pool, gp_onednn_matmul, &native, &onednn);
    gp_pool_free(pool);
    gp_onednn_detach(&trial);
    if (!ok) {
        snprintf(why, why_size, "oneDNN's matmul failed on a trial");
        return false;
    }
    const double speedup = native / onednn;
    const bool use = forced || speedup >= 1.2;
    snprintf(why, why_size,
             "%s: oneDNN bf16 x%d (%s) %.2f ms, native %.2f ms for %d rows of a %d x %d matrix "
             "on %d threads (%.2fx)",
             forced ? "GEPARD_PREFILL=onednn"
             : use  ? "measured faster"
                    : "measured slower",
             gp_onednn_terms(), impl_name, onednn * 1e3, native * 1e3, rows, trial.rows, trial.cols,
             threads, speedup);
    return use;
}
