/* matrix.c — weight matrix construction (f32, bf16, int8, q4), kernel level
 * selection and the threaded gp_matmul driver (see matrix.h). */
#include "compute/matrix.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "base/alloc.h"
#include "base/log.h"
#include "base/pool.h"
#include "base/timing.h"
#include "compute/bf16_packed.h"
#include "compute/kernels.h"
#include "compute/matmul_tiles.h"
#include "compute/onednn_matmul.h"

int gp_weight_format_parse(const char *name) {
    if (!name) return -1;
    if (strcmp(name, "f32") == 0 || strcmp(name, "fp32") == 0) return GP_WEIGHTS_F32;
    if (strcmp(name, "bf16") == 0) return GP_WEIGHTS_BF16;
    if (strcmp(name, "int8") == 0 || strcmp(name, "q8") == 0) return GP_WEIGHTS_INT8;
    if (strcmp(name, "q4") == 0 || strcmp(name, "int4") == 0) return GP_WEIGHTS_Q4;
    return -1;
}

const char *gp_weight_format_name(gp_weight_format format) {
    static const char *names[] = {"f32", "bf16", "int8", "q4"};
    return (unsigned)format < 4 ? names[format] : "?";
}

/* Bytes of the data array and of the scale array (padded layout). */
static size_t data_bytes(const gp_matrix *m) {
    size_t n = gp_matrix_padded_rows(m) * gp_matrix_padded_cols(m);
    switch (m->format) {
    case GP_WEIGHTS_F32: return n * 4;
    case GP_WEIGHTS_BF16: return n * 2;
    case GP_WEIGHTS_INT8: return n;
    case GP_WEIGHTS_Q4: return n / 2;
    }
    return 0;
}

static size_t scale_bytes(const gp_matrix *m) {
    if (m->format == GP_WEIGHTS_INT8) return gp_matrix_padded_rows(m) * sizeof(float);
    if (m->format == GP_WEIGHTS_Q4)
        return gp_matrix_padded_rows(m) * gp_matrix_padded_cols(m) / GP_Q4_GROUP * 2;
    return 0;
}

size_t gp_matrix_bytes(const gp_matrix *m) { return data_bytes(m) + scale_bytes(m); }

size_t gp_matrix_decode_bytes(const gp_matrix *m) {
    return gp_bf16_packed_reads(m) && gp_kernels_active() >= GP_KERNELS_AVX2 ? m->packed->bytes
                                                                             : gp_matrix_bytes(m);
}

void gp_matrix_free(gp_matrix *m) {
    if (!m) return;
    gp_onednn_detach(m);
    gp_tiles_detach(m);
    gp_bf16_packed_detach(m);
    gp_aligned_free(m->data);
    gp_aligned_free(m->scales);
    gp_aligned_free(m->gscales);
    memset(m, 0, sizeof *m);
}

/* Weight arrays of 2 MiB or more start on a 2 MiB boundary and ask for
 * transparent huge pages over their whole 2 MiB pages: the kernels stream
 * them once per step, and with 4 KiB pages the hardware prefetchers restart
 * at every page boundary (and the TLB misses on every page). Smaller arrays
 * and the tail keep ordinary pages; freeing is plain gp_aligned_free. */
#define HUGE_PAGE ((size_t)2 << 20)

static void *weights_alloc(size_t bytes) {
    if (bytes < HUGE_PAGE) return gp_aligned_alloc(bytes);
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, bytes) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE); /* a hint; failure is harmless */
#endif
    return p;
}

static void quantize_row_int8(const float *src, int cols, int8_t *dst, float *scale) {
    float amax = 0;
    for (int i = 0; i < cols; i++) amax = fmaxf(amax, fabsf(src[i]));
    float s = amax / 127.0f;
    float inv = s > 0 ? 1.0f / s : 0;
    for (int i = 0; i < cols; i++) {
        long q = lrintf(src[i] * inv);
        dst[i] = (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
    }
    *scale = s;
}

/* Groups of GP_Q4_GROUP values share an f16 scale; value = (nibble - 8) *
 * scale. Byte k of a group holds element k in its low nibble and element
 * k+16 in its high nibble, which lets SIMD kernels unpack with one shift.
 * Writes the row's groups one after another (the caller places them). */
static void quantize_row_q4(const float *src, int cols, uint8_t *dst, uint16_t *scales) {
    for (int g = 0; g < cols / GP_Q4_GROUP; g++) {
        const float *x = src + g * GP_Q4_GROUP;
        float amax = 0, signed_max = 0;
        for (int i = 0; i < GP_Q4_GROUP; i++)
            if (fabsf(x[i]) > amax) {
                amax = fabsf(x[i]);
                signed_max = x[i];
            }
        /* Map the largest magnitude to -8 so the full [-8, 7] range is used. */
        float s = signed_max / -8.0f;
        /* Round the scale to f16 first so the nibbles fit the stored scale. */
        if (s > 65504.0f) s = 65504.0f;
        if (s < -65504.0f) s = -65504.0f;
        uint16_t s16 = gp_f32_to_f16(s);
        s = gp_f16_to_f32(s16);
        float inv = s != 0 ? 1.0f / s : 0;
        uint8_t *out = dst + g * (GP_Q4_GROUP / 2);
        for (int i = 0; i < GP_Q4_GROUP / 2; i++) {
            long lo = lrintf(x[i] * inv), hi = lrintf(x[i + GP_Q4_GROUP / 2] * inv);
            lo = lo < -8 ? -8 : lo > 7 ? 7 : lo;
            hi = hi < -8 ? -8 : hi > 7 ? 7 : hi;
            out[i] = (uint8_t)((lo + 8) | ((hi + 8) << 4));
        }
        scales[g] = s16;
    }
}

/* Store one converted row (f32 values in `row`, scratch `tmp` of cols
 * bytes / halves / f16 scales) into its tiled place. */
static void store_row(gp_matrix *m, int r, const float *row, void *tmp) {
    const int cols = m->cols;
    switch (m->format) {
    case GP_WEIGHTS_F32:
        for (int c = 0; c < cols; c += 16)
            memcpy((float *)m->data + gp_matrix_index(m, r, c), row + c,
                   (size_t)(cols - c < 16 ? cols - c : 16) * sizeof(float));
        break;
    case GP_WEIGHTS_BF16:
        for (int c = 0; c < cols; c += 16) {
            uint16_t *dst = (uint16_t *)m->data + gp_matrix_index(m, r, c);
            for (int k = 0; k < 16 && c + k < cols; k++) dst[k] = gp_f32_to_bf16(row[c + k]);
        }
        break;
    case GP_WEIGHTS_INT8: {
        int8_t *q = tmp;
        quantize_row_int8(row, cols, q, &m->scales[r]);
        for (int c = 0; c < cols; c += 16)
            memcpy((int8_t *)m->data + gp_matrix_index(m, r, c), q + c,
                   (size_t)(cols - c < 16 ? cols - c : 16));
        break;
    }
    case GP_WEIGHTS_Q4: {
        uint8_t *q = tmp;
        uint16_t *sc = (uint16_t *)(void *)(q + cols / 2);
        quantize_row_q4(row, cols, q, sc);
        for (int g = 0; g < cols / GP_Q4_GROUP; g++) {
            memcpy((uint8_t *)m->data + gp_q4_byte_index(m, r, g * GP_Q4_GROUP),
                   q + g * (GP_Q4_GROUP / 2), GP_Q4_GROUP / 2);
            m->gscales[gp_q4_scale_index(m, r, g * GP_Q4_GROUP)] = sc[g];
        }
        break;
    }
    }
}

int gp_matrix_from_f32(gp_matrix *m, gp_weight_format format, int rows, int cols, const float *src,
                       gp_error *err) {
    return gp_matrix_from_data(m, format, rows, cols, GP_F32, src, err);
}

/* Rows [r0, r1) of the source into the matrix: one thread's share of the
 * conversion (rows write disjoint bytes and scales, so shares never touch). */
typedef struct convert_job {
    gp_matrix *m;
    gp_dtype src_dtype;
    const void *src;
    int r0, r1;
    int status; /* 0, or out of memory */
} convert_job;

static void convert_rows(void *ctx, int i) {
    convert_job *j = (convert_job *)ctx + i;
    gp_matrix *m = j->m;
    const int cols = m->cols;
    if (j->src_dtype == GP_BF16 && m->format == GP_WEIGHTS_BF16) {
        /* the stored values as they are: 16-column pieces copied into the tiles */
        for (int r = j->r0; r < j->r1; r++) {
            const uint16_t *in = (const uint16_t *)j->src + (size_t)r * cols;
            for (int c = 0; c < cols; c += 16)
                memcpy((uint16_t *)m->data + gp_matrix_index(m, r, c), in + c,
                       (size_t)(cols - c < 16 ? cols - c : 16) * sizeof(uint16_t));
        }
        return;
    }
    const size_t elem = gp_dtype_size(j->src_dtype);
    float *row = gp_aligned_alloc((size_t)cols * sizeof(float));
    void *tmp = gp_aligned_alloc((size_t)cols * 2);
    if (!row || !tmp) {
        j->status = GEPARD_ERR_NOMEM;
    } else {
        for (int r = j->r0; r < j->r1; r++) {
            gp_convert_to_f32(j->src_dtype, (const unsigned char *)j->src + (size_t)r * cols * elem,
                              row, (size_t)cols);
            store_row(m, r, row, tmp);
        }
    }
    gp_aligned_free(row);
    gp_aligned_free(tmp);
}

int gp_matrix_from_data(gp_matrix *m, gp_weight_format format, int rows, int cols,
                        gp_dtype src_dtype, const void *src, gp_error *err) {
    memset(m, 0, sizeof *m);
    if (rows < 0 || cols < 0)
        return gp_fail(err, GEPARD_ERR_INTERNAL, "a weight matrix cannot be %dx%d", rows, cols);
    if (format == GP_WEIGHTS_Q4 && cols % GP_Q4_GROUP) {
        GP_WARN("a %dx%d matrix cannot use q4 (columns not a multiple of %d); using int8", rows,
                cols, GP_Q4_GROUP);
        format = GP_WEIGHTS_INT8;
    }
    m->format = format;
    m->rows = rows;
    m->cols = cols;
    const size_t dbytes = data_bytes(m), sbytes = scale_bytes(m);
    m->data = weights_alloc(dbytes);
    if (sbytes && format == GP_WEIGHTS_INT8) m->scales = gp_aligned_alloc(sbytes);
    if (sbytes && format == GP_WEIGHTS_Q4) m->gscales = gp_aligned_alloc(sbytes);
    if (!m->data || (sbytes && !m->scales && !m->gscales)) {
        gp_matrix_free(m);
        return gp_fail_oom(err, "weight matrix", dbytes + sbytes);
    }
    /* padding rows and columns stay zero (q4: zero scales, so zero values); a
     * matrix without padding is written whole below, so it is not zeroed first
     * (for the real model every matrix: loading skips a pass over ~1 GB) */
    if ((size_t)rows != gp_matrix_padded_rows(m) || (size_t)cols != gp_matrix_padded_cols(m))
        memset(m->data, 0, dbytes);
    if (m->scales) memset(m->scales, 0, sbytes);
    if (m->gscales) memset(m->gscales, 0, sbytes);
    /* Large matrices are converted by several threads (loading is otherwise one
     * core copying and quantising ~1 GB while the others wait); the result does
     * not depend on how the rows are shared. */
    const int tiles = (rows + GP_TILE_ROWS - 1) / GP_TILE_ROWS;
    const int n = gp_threads_for_bytes(dbytes, rows / GP_TILE_ROWS);
    convert_job jobs[GP_RUN_THREADS_MAX];
    for (int i = 0; i < n; i++) {
        /* shares of whole tiles of rows */
        const int t0 = (int)((long)tiles * i / n), t1 = (int)((long)tiles * (i + 1) / n);
        jobs[i] = (convert_job){m,
                                src_dtype,
                                src,
                                t0 * GP_TILE_ROWS,
                                t1 * GP_TILE_ROWS < rows ? t1 * GP_TILE_ROWS : rows,
                                0};
    }
    gp_run_threads(n, convert_rows, jobs);
    int rc = 0;
    for (int i = 0; i < n; i++)
        if (jobs[i].status) rc = jobs[i].status;
    if (rc) {
        gp_matrix_free(m);
        return gp_fail_oom(err, "weight conversion", (size_t)cols * sizeof(float));
    }
    return GEPARD_OK;
}

void gp_matrix_row_f32(const gp_matrix *m, int r, float *dst) {
    const int cols = m->cols;
    switch (m->format) {
    case GP_WEIGHTS_F32:
        for (int c = 0; c < cols; c++) dst[c] = ((const float *)m->data)[gp_matrix_index(m, r, c)];
        break;
    case GP_WEIGHTS_BF16:
        for (int c = 0; c < cols; c++)
            dst[c] = gp_bf16_to_f32(((const uint16_t *)m->data)[gp_matrix_index(m, r, c)]);
        break;
    case GP_WEIGHTS_INT8:
        for (int c = 0; c < cols; c++)
            dst[c] = (float)((const int8_t *)m->data)[gp_matrix_index(m, r, c)] * m->scales[r];
        break;
    case GP_WEIGHTS_Q4:
        for (int c = 0; c < cols; c++) {
            uint8_t b = ((const uint8_t *)m->data)[gp_q4_byte_index(m, r, c)];
            int q = (c % GP_Q4_GROUP < GP_Q4_GROUP / 2 ? b & 15 : b >> 4) - 8;
            dst[c] = (float)q * gp_f16_to_f32(m->gscales[gp_q4_scale_index(m, r, c)]);
        }
        break;
    }
}

/* ---- kernel level selection ---- */

static const gp_kernel_table *level_tables[3] = {&gp_kernels_scalar, &gp_kernels_avx2,
                                                 &gp_kernels_avx512};
static int active_level = -1;
static const char *active_reason = "set by the program";

#if defined(__x86_64__)
/* F16C from CPUID leaf 1 (ECX bit 29): clang before 15 has no "f16c" for
 * __builtin_cpu_supports, and the fuzzing build (fuzz/) uses clang. */
static bool cpu_has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
#endif

static bool cpu_supports(gp_kernel_level level) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (level == GP_KERNELS_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    if (level == GP_KERNELS_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vnni");
#endif
    return level == GP_KERNELS_SCALAR;
}

gp_kernel_level gp_kernels_best(void) {
    for (int l = 2; l > 0; l--)
        if (level_tables[l] && cpu_supports((gp_kernel_level)l)) return (gp_kernel_level)l;
    return GP_KERNELS_SCALAR;
}

gp_kernel_level gp_kernels_set(gp_kernel_level level) {
    int l = (int)level;
    while (l > 0 && (!level_tables[l] || !cpu_supports((gp_kernel_level)l))) l--;
    active_level = l;
    return (gp_kernel_level)l;
}

size_t gp_decode_prefetch_bytes(void) {
    static atomic_long bytes = -1;
    long b = atomic_load_explicit(&bytes, memory_order_relaxed);
    if (b < 0) {
        const char *env = getenv("GEPARD_DECODE_PREFETCH");
        b = env ? atol(env) : GP_DECODE_PREFETCH_DEFAULT;
        if (b < 0 || b > (1l << 20)) b = 0;
        b &= ~63l; /* whole cache lines */
        atomic_store_explicit(&bytes, b, memory_order_relaxed);
    }
    return (size_t)b;
}

static atomic_int decode_streams_on = -1;

void gp_decode_streams_set(int on) {
    atomic_store_explicit(&decode_streams_on, on < 0 ? -1 : on > 0, memory_order_relaxed);
}

bool gp_decode_streams(void) {
    int v = atomic_load_explicit(&decode_streams_on, memory_order_relaxed);
    if (v < 0) {
        const char *env = getenv("GEPARD_DECODE_STREAMS");
        v = !(env && !strcmp(env, "0"));
        atomic_store_explicit(&decode_streams_on, v, memory_order_relaxed);
    }
    return v;
}

gp_kernel_level gp_kernels_active(void) {
    if (active_level < 0) {
        const char *env = getenv("GEPARD_KERNELS");
        gp_kernel_level want = gp_kernels_best();
        if (env && strcmp(env, "scalar") == 0) want = GP_KERNELS_SCALAR;
        if (env && strcmp(env, "avx2") == 0) want = GP_KERNELS_AVX2;
        if (env && strcmp(env, "avx512") == 0) want = GP_KERNELS_AVX512;
        gp_kernels_set(want);
        active_reason = env && (strcmp(env, "scalar") == 0 || strcmp(env, "avx2") == 0 ||
                                strcmp(env, "avx512") == 0)
                            ? (active_level == (int)want ? "GEPARD_KERNELS in the environment"
                                                         : "GEPARD_KERNELS asked for more than "
                                                           "this CPU has")
                        : active_level == GP_KERNELS_AVX512
                            ? "the CPU has AVX-512 F/BW/DQ/VL with BF16 and VNNI"
                        : active_level == GP_KERNELS_AVX2
                            ? "the CPU has AVX2, FMA and F16C but not all of AVX-512 "
                              "F/BW/DQ/VL/BF16/VNNI"
                            : "the CPU lacks AVX2/FMA/F16C";
    }
    return (gp_kernel_level)active_level;
}

const char *gp_kernel_level_name(gp_kernel_level level) {
    static const char *names[] = {"scalar", "avx2", "avx512"};
    return (unsigned)level < 3 ? names[level] : "?";
}

const char *gp_kernels_reason(void) {
    gp_kernels_active();
    return active_reason;
}

const gp_kernel_table *gp_kernel_table_active(void) { return level_tables[gp_kernels_active()]; }

const gp_kernel_table *gp_kernel_table_for(gp_kernel_level level) {
    if ((unsigned)level > GP_KERNELS_AVX512 || !cpu_supports(level)) return NULL;
    return level_tables[level];
}

/* ---- threaded driver ---- */

typedef struct matmul_job {
    const gp_matrix *w;
    const float *x;
    int n, ldx, ldy;
    float *y;
    int parts;
    gp_matmul_rows_fn fn;
} matmul_job;

static void matmul_task(void *ctx, int task, int worker) {
    (void)worker;
    const matmul_job *job = ctx;
    long r0, r1;
    gp_split_range(job->w->rows, job->parts, task, 16, &r0, &r1);
    if (r1 > r0) job->fn(job->w, job->x, job->n, job->ldx, job->y, job->ldy, (int)r0, (int)r1);
}

float *gp_matmul_trial_input(int rows, int cols) {
    float *x = malloc((size_t)rows * cols * sizeof *x);
    for (size_t i = 0; x && i < (size_t)rows * cols; i++)
        x[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    return x;
}

bool gp_matmul_race(const gp_matrix *m, int rows, gp_pool *pool, gp_matmul_alt_fn alt,
                    double *native_s, double *alt_s) {
    float *x = gp_matmul_trial_input(rows, m->cols);
    float *y = malloc((size_t)rows * m->rows * sizeof *y);
    bool ok = x && y;
    *native_s = *alt_s = 1e30;
    for (int rep = 0; ok && rep < 4; rep++) { /* the first of each warms up */
        const double t0 = gp_now_s();
        gp_matmul_native(m, x, rows, m->cols, y, m->rows, pool);
        const double t1 = gp_now_s();
        ok = alt(m, x, rows, m->cols, y, m->rows, pool) == GEPARD_OK;
        const double t2 = gp_now_s();
        if (rep > 0 && t1 - t0 < *native_s) *native_s = t1 - t0;
        if (rep > 0 && t2 - t1 < *alt_s) *alt_s = t2 - t1;
    }
    free(x);
    free(y);
    return ok;
}

void gp_matmul(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
               gp_pool *pool) {
    if (w->tiles && n >= GP_TILES_MIN_ROWS && gp_onednn_enabled() &&
        gp_tiles_matmul(w, x, n, ldx, y, ldy, pool) == GEPARD_OK)
        return;
    if (w->onednn && n >= GP_ONEDNN_MIN_ROWS && gp_onednn_enabled() &&
        gp_onednn_matmul(w, x, n, ldx, y, ldy, pool) == GEPARD_OK)
        return;
    gp_matmul_native(w, x, n, ldx, y, ldy, pool);
}

void gp_matmul_native(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                      gp_pool *pool) {
    if (n <= 0 || w->rows <= 0) return;
    const gp_kernel_table *table = gp_kernel_table_active();
    gp_matmul_rows_fn fn = table->matmul_rows[w->format];
    if (!fn) fn = gp_kernels_scalar.matmul_rows[w->format];
    int threads = gp_pool_size(pool);
    /* Tiny matrices are not worth waking the pool for. */
    long work = (long)w->rows * w->cols * n;
    int parts = work < 65536 ? 1 : threads;
    if (parts > (w->rows + 15) / 16) parts = (w->rows + 15) / 16;
    matmul_job job = {w, x, n, ldx, ldy, y, parts, fn};
    if (parts <= 1)
        fn(w, x, n, ldx, y, ldy, 0, w->rows);
    else
        gp_pool_parallel_for(pool, parts, matmul_task, &job);
}
