/* kernels_bench.c — hand-run micro-benchmark of the matrix kernels
 * (`make bench-kernels`, not part of `make test`).
 *
 * Times one backbone decode step's worth of matrix products at the real
 * Gepard-1.0 sizes (14 layers of q 4096x1024, k/v 512x1024, o 1024x2048,
 * gate/up 3584x1024, down 1024x3584; random weights) for each weight format,
 * n = 1, 4, 16 input rows and 1 and 2 threads, and prints ms per frame, the
 * weight bandwidth achieved and its share of the machine's read bandwidth,
 * which it measures first with a streaming-read loop (four streams per thread). It also measures
 * the fixed cost of one gp_pool_parallel_for and one frame of cached
 * attention (14 layers × 8 query heads over 2 KV heads of 256, contexts 512
 * and 2048) with the scalar and the active kernels, one call per query head
 * and grouped (one call per KV head, gp_attend_cached_group).
 *
 *   kernels-bench [--formats f32,bf16,int8,q4] [--n 1,4,16] [--threads 1,2]
 *                 [--reps 7] [--layers 14] [--level scalar|avx2|avx512] [--tiles 1]
 *
 * --tiles 1 gives the bf16 matrices their AMX tile copies (compute/matmul_tiles.h),
 * which serve products of 8 or more rows: prefill's matrix products alone.
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/alloc.h"
#include "base/pool.h"
#include "base/rng.h"
#include "base/timing.h"
#include "compute/kernels.h"
#include "compute/kv_cache.h"
#include "compute/matmul_tiles.h"
#include "compute/matrix.h"

#define MAX_LIST 8
#define NOMINAL_GBS 29.0

typedef struct list {
    int v[MAX_LIST];
    int n;
} list;

static list parse_list(const char *s) {
    list l = {{0}, 0};
    while (*s && l.n < MAX_LIST) {
        if (strncmp(s, "f32", 3) == 0 || strncmp(s, "bf16", 4) == 0 || strncmp(s, "int8", 4) == 0 ||
            strncmp(s, "q4", 2) == 0) {
            char name[8] = {0};
            size_t k = strcspn(s, ",");
            memcpy(name, s, k < 7 ? k : 7);
            l.v[l.n++] = gp_weight_format_parse(name);
            s += k;
        } else {
            l.v[l.n++] = (int)strtol(s, (char **)&s, 10);
        }
        if (*s == ',')
            s++;
        else if (*s)
            break;
    }
    return l;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- streaming read bandwidth ---- */

typedef struct stream_job {
    const unsigned char *buf;
    size_t bytes;
    int parts;
    long long sink[16];
} stream_job;

/* Four streams, one per quarter, 128 bytes of each in turn: the decode kernels'
 * way of reading (kernels.h, gp_decode_streams). */
__attribute__((target("avx2"))) static long long read_sum(const unsigned char *p, size_t bytes) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    const size_t q = bytes / 4 / 128 * 128;
    for (size_t i = 0; i < q; i += 128)
        for (int k = 0; k < 4; k++) {
            const unsigned char *r = p + (size_t)k * q + i;
            a = _mm256_add_epi64(a, _mm256_loadu_si256((const void *)r));
            b = _mm256_add_epi64(b, _mm256_loadu_si256((const void *)(r + 32)));
            c = _mm256_add_epi64(c, _mm256_loadu_si256((const void *)(r + 64)));
            d = _mm256_add_epi64(d, _mm256_loadu_si256((const void *)(r + 96)));
        }
    a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
    long long t[4];
    _mm256_storeu_si256((void *)t, a);
    return t[0] + t[1] + t[2] + t[3];
}

static void stream_task(void *ctx, int task, int worker) {
    stream_job *job = ctx;
    long b, e;
    gp_split_range((long)job->bytes, job->parts, task, 4096, &b, &e);
    job->sink[task & 15] += read_sum(job->buf + b, (size_t)(e - b));
    (void)worker;
}

/* Best of 5 passes over 1 GiB (far beyond the caches), in 2 MiB pages like
 * the weight matrices (matrix.c asks for transparent huge pages). */
static double stream_bandwidth(gp_pool *pool, int threads) {
    const size_t bytes = (size_t)1 << 30;
    void *mem = NULL;
    if (posix_memalign(&mem, (size_t)2 << 20, bytes) != 0) return 0;
    unsigned char *buf = mem;
#ifdef MADV_HUGEPAGE
    (void)madvise(buf, bytes, MADV_HUGEPAGE);
#endif
    memset(buf, 1, bytes);
    stream_job job = {buf, bytes, threads, {0}};
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        uint64_t t0 = gp_now_ns();
        gp_pool_parallel_for(pool, threads, stream_task, &job);
        double gbs = (double)bytes / (double)(gp_now_ns() - t0);
        if (gbs > best) best = gbs;
    }
    free(buf);
    return best;
}

/* ---- pool and driver overhead ---- */

static void noop_task(void *ctx, int task, int worker) {
    (void)ctx;
    (void)task;
    (void)worker;
}

static void overheads(gp_pool *pool) {
    const int calls = 200000;
    uint64_t t0 = gp_now_ns();
    for (int i = 0; i < calls; i++) gp_pool_parallel_for(pool, gp_pool_size(pool), noop_task, NULL);
    double pf = (double)(gp_now_ns() - t0) / calls;
    printf("  gp_pool_parallel_for (%d empty tasks): %.0f ns per call\n", gp_pool_size(pool), pf);
}

/* ---- attention ---- */

typedef struct attn_job {
    const gp_kernel_table *table;
    int grouped;
    gp_kv_pool *kv;
    gp_kv_seq *seq;
    int layer, positions;
    const float *q;
    float *out, *scores;
} attn_job;

static void attn_task(void *ctx, int task, int worker) {
    attn_job *job = ctx;
    const int D = job->kv->head_dim;
    if (job->grouped) { /* task = KV head: its 4 query heads in one pass */
        job->table->attend_group(job->kv, job->seq, job->layer, task, job->q + (size_t)task * 4 * D,
                                 D, 4, job->positions, 0.0625f, job->out + (size_t)task * 4 * D, D,
                                 job->scores + (size_t)worker * 4 * job->positions);
        return;
    }
    job->table->attend(job->kv, job->seq, job->layer, task / 4, job->q + (size_t)task * D,
                       job->positions, 0.0625f, job->out + (size_t)task * D,
                       job->scores + (size_t)worker * job->positions);
}

/* ms for 14 layers × 8 heads at `positions` cached positions (best of 5),
 * one task per query head or (grouped) per KV head. */
static double attention_frame(const gp_kernel_table *table, int grouped, int positions,
                              gp_pool *pool) {
    const int layers = 14, kv_heads = 2, heads = 8, D = 256, bs = 16;
    gp_kv_pool *kv;
    gp_error err;
    if (gp_kv_pool_create(layers, kv_heads, D, bs, (positions + bs - 1) / bs, &kv, &err)) return 0;
    gp_kv_seq seq;
    gp_kv_seq_init(&seq);
    gp_kv_seq_reserve(kv, &seq, positions, &err);
    gp_rng rng;
    gp_rng_seed(&rng, 3);
    for (int l = 0; l < layers; l++)
        for (int h = 0; h < kv_heads; h++)
            for (int p = 0; p < positions; p++)
                for (int v = 0; v < 2; v++) {
                    float *dst = gp_kv_at(kv, &seq, l, v, h, p);
                    for (int d = 0; d < D; d++) dst[d] = (float)(gp_rng_uniform(&rng) - 0.5);
                }
    float *q = gp_aligned_alloc((size_t)heads * D * sizeof(float));
    float *out = gp_aligned_alloc((size_t)heads * D * sizeof(float));
    float *scores = gp_aligned_alloc((size_t)gp_pool_size(pool) * 4 * positions * sizeof(float));
    for (int i = 0; i < heads * D; i++) q[i] = (float)(gp_rng_uniform(&rng) - 0.5);
    attn_job job = {table, grouped, kv, &seq, 0, positions, q, out, scores};
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        uint64_t t0 = gp_now_ns();
        for (job.layer = 0; job.layer < layers; job.layer++)
            gp_pool_parallel_for(pool, grouped ? kv_heads : heads, attn_task, &job);
        double ms = (double)(gp_now_ns() - t0) * 1e-6;
        if (ms < best) best = ms;
    }
    gp_aligned_free(q);
    gp_aligned_free(out);
    gp_aligned_free(scores);
    gp_kv_seq_release(kv, &seq);
    gp_kv_pool_free(kv);
    return best;
}

/* ---- one decode step of matrix products ---- */

enum { N_MATS = 7 };
static const int mat_rows[N_MATS] = {4096, 512, 512, 1024, 3584, 3584, 1024};
static const int mat_cols[N_MATS] = {1024, 1024, 1024, 2048, 1024, 1024, 3584};

static int build_layers(gp_matrix *mats, int layers, gp_weight_format format) {
    gp_rng rng;
    gp_rng_seed(&rng, 1234);
    float *src = gp_aligned_alloc((size_t)4096 * 3584 * sizeof(float));
    if (!src) return -1;
    for (int l = 0; l < layers; l++)
        for (int m = 0; m < N_MATS; m++) {
            size_t count = (size_t)mat_rows[m] * mat_cols[m];
            for (size_t i = 0; i < count; i++) src[i] = (float)(gp_rng_uniform(&rng) - 0.5) * 0.06f;
            gp_error err;
            if (gp_matrix_from_f32(&mats[l * N_MATS + m], format, mat_rows[m], mat_cols[m], src,
                                   &err)) {
                fprintf(stderr, "kernels-bench: %s\n", err.message);
                gp_aligned_free(src);
                return -1;
            }
        }
    gp_aligned_free(src);
    return 0;
}

static double time_frame(const gp_matrix *mats, int layers, const float *x, float *y, int n,
                         gp_pool *pool) {
    uint64_t t0 = gp_now_ns();
    for (int l = 0; l < layers; l++)
        for (int m = 0; m < N_MATS; m++) {
            const gp_matrix *w = &mats[l * N_MATS + m];
            gp_matmul(w, x, n, w->cols, y, w->rows, pool);
        }
    return (double)(gp_now_ns() - t0) * 1e-6;
}

int main(int argc, char **argv) {
    list formats = parse_list("f32,bf16,int8,q4"), ns = parse_list("1,4,16");
    list threads = parse_list("1,2");
    int reps = 7, layers = 14, tiles = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--tiles") == 0)
            tiles = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--formats") == 0)
            formats = parse_list(argv[i + 1]);
        else if (strcmp(argv[i], "--n") == 0)
            ns = parse_list(argv[i + 1]);
        else if (strcmp(argv[i], "--threads") == 0)
            threads = parse_list(argv[i + 1]);
        else if (strcmp(argv[i], "--reps") == 0)
            reps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--layers") == 0)
            layers = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--level") == 0) {
            const char *v = argv[i + 1];
            gp_kernels_set(strcmp(v, "scalar") == 0 ? GP_KERNELS_SCALAR
                           : strcmp(v, "avx2") == 0 ? GP_KERNELS_AVX2
                                                    : GP_KERNELS_AVX512);
        } else {
            fprintf(stderr, "kernels-bench: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (layers < 1) layers = 1;
    printf("kernel level: %s\n", gp_kernel_level_name(gp_kernels_active()));

    gp_pool *pools[MAX_LIST] = {0};
    double stream[MAX_LIST] = {0};
    for (int t = 0; t < threads.n; t++) {
        gp_error err;
        if (gp_pool_create(threads.v[t], &pools[t], &err)) {
            fprintf(stderr, "kernels-bench: %s\n", err.message);
            return 1;
        }
        stream[t] = stream_bandwidth(pools[t], threads.v[t]);
        printf("streaming read, %d thread(s): %.1f GB/s\n", threads.v[t], stream[t]);
        overheads(pools[t]);
        const gp_kernel_table *best = gp_kernel_table_active();
        for (int ctx = 512; ctx <= 2048; ctx *= 4)
            printf("  attention, context %4d: scalar %.2f ms, %s %.2f ms per head, %.2f ms "
                   "grouped per frame\n",
                   ctx, attention_frame(&gp_kernels_scalar, 0, ctx, pools[t]), best->name,
                   attention_frame(best, 0, ctx, pools[t]),
                   attention_frame(best, 1, ctx, pools[t]));
    }

    size_t max_cols = 3584, max_rows = 4096, max_n = 1;
    for (int i = 0; i < ns.n; i++)
        if ((size_t)ns.v[i] > max_n) max_n = (size_t)ns.v[i];
    float *x = gp_aligned_alloc(max_n * max_cols * sizeof(float));
    float *y = gp_aligned_alloc(max_n * max_rows * sizeof(float));
    gp_matrix *mats = calloc((size_t)layers * N_MATS, sizeof *mats);
    if (!x || !y || !mats) return 1;
    gp_rng rng;
    gp_rng_seed(&rng, 99);
    for (size_t i = 0; i < max_n * max_cols; i++) x[i] = (float)(gp_rng_uniform(&rng) * 2 - 1);

    printf("\n%-5s %3s %3s  %9s %9s  %7s  %6s  %6s  %7s\n", "fmt", "n", "thr", "best ms",
           "median ms", "GB/s", "%strm", "%29GB", "GFLOP/s");
    for (int f = 0; f < formats.n; f++) {
        if (formats.v[f] < 0) continue;
        gp_weight_format format = (gp_weight_format)formats.v[f];
        if (build_layers(mats, layers, format)) return 1;
        for (int i = 0; tiles && format == GP_WEIGHTS_BF16 && i < layers * N_MATS; i++) {
            gp_error err;
            if (gp_tiles_attach(&mats[i], &err)) {
                fprintf(stderr, "kernels-bench: --tiles: %s\n", err.message);
                return 1;
            }
        }
        double bytes = 0, macs = 0;
        for (int i = 0; i < layers * N_MATS; i++) {
            bytes += (double)gp_matrix_bytes(&mats[i]);
            macs += (double)mats[i].rows * mats[i].cols;
        }
        for (int a = 0; a < ns.n; a++)
            for (int t = 0; t < threads.n; t++) {
                double times[64];
                int count = reps < 64 ? reps : 64;
                time_frame(mats, layers, x, y, ns.v[a], pools[t]); /* warm-up */
                for (int r = 0; r < count; r++)
                    times[r] = time_frame(mats, layers, x, y, ns.v[a], pools[t]);
                qsort(times, (size_t)count, sizeof(double), cmp_double);
                double best = times[0], median = times[count / 2];
                double gbs = bytes / (best * 1e6);
                printf("%-5s %3d %3d  %9.2f %9.2f  %7.1f  %5.0f%%  %5.0f%%  %7.1f\n",
                       gp_weight_format_name(format), ns.v[a], threads.v[t], best, median, gbs,
                       100 * gbs / stream[t], 100 * gbs / NOMINAL_GBS,
                       2 * macs * ns.v[a] / (best * 1e6));
                fflush(stdout);
            }
        printf("      (%.1f MB of weights per frame)\n", bytes / 1e6);
        for (int i = 0; i < layers * N_MATS; i++) gp_matrix_free(&mats[i]);
    }
    free(mats);
    gp_aligned_free(x);
    gp_aligned_free(y);
    for (int t = 0; t < threads.n; t++) gp_pool_free(pools[t]);
    return 0;
}
