/* matmul_tiles.c — prefill's matrix products y = x·Wᵀ on the AMX tile unit (issue 15),
 * the codec's tile loop (conv_tiles.c) applied to the backbone's bf16 weights.
 *
 * The weights are bf16 already, so their products are exact; each f32 activation is
 * split into two bf16 terms hi + lo (~16 bits; relative error ≤ 2^-17 per input, as
 * oneDNN's two-term path, whose codes matched the real-size goldens) and every weight
 * tile meets the hi tile and then the lo tile of the activations. The weights get a
 * second copy in tile order (16 column pairs x 16 outputs per 1 KB tile, VNNI), as
 * oneDNN's path keeps its own. Output blocks are shared out to the pool; a row's results
 * are summed in one order whatever rows it is batched with. Chosen at load by timing
 * against the native kernels (compute/onednn_matmul.c's gp_onednn_choose runs the
 * probe), or GEPARD_PREFILL=tiles; decode (fewer than GP_TILES_MIN_ROWS rows) stays on
 * the native kernels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/dtype.h"
#include "base/timing.h"
#include "compute/conv_direct.h"
#include "compute/cpu/conv_tiles_kernels.h"
#include "compute/matmul_tiles.h"
#include "compute/onednn_matmul.h"

struct gp_tiles_matrix {
    int nb; /* output blocks of 16, even */
    int kb; /* column blocks of 32 */
    uint32_t *b;
};

/* Tiles of output blocks [jb0, jb1): a tile's row r holds column pair (32k + 2r, 32k +
 * 2r + 1) of its 16 outputs, which is word r of each output's 32 columns as stored (two
 * 16-column pieces of the 4-row layout, low column in the low half): a 16 x 16
 * transpose of 32-bit words. Padding outputs and columns are zero. */
static void fill_tiles(const gp_matrix *m, gp_tiles_matrix *t, int jb0, int jb1) {
    const uint16_t *w = m->data;
    const int padded_cols = (int)gp_matrix_padded_cols(m);
    for (int jb = jb0; jb < jb1; jb++)
        for (int k = 0; k < t->kb; k++) {
            uint32_t *o = t->b + ((size_t)jb * t->kb + k) * GP_AMX_WORDS;
            for (int c = 0; c < 16; c++) {
                const int n = jb * 16 + c;
                for (int half = 0; half < 2; half++) {
                    const int col = k * 32 + half * 16;
                    uint32_t words[8] = {0};
                    if (n < m->rows && col < padded_cols)
                        memcpy(words, w + gp_matrix_index(m, n, col), sizeof words);
                    for (int r = 0; r < 8; r++) o[(half * 8 + r) * 16 + c] = words[r];
                }
            }
        }
}

typedef struct fill_job {
    const gp_matrix *m;
    gp_tiles_matrix *t;
    int parts;
} fill_job;

static void fill_part(void *ctx, int i) {
    const fill_job *j = ctx;
    fill_tiles(j->m, j->t, (int)((long)j->t->nb * i / j->parts),
               (int)((long)j->t->nb * (i + 1) / j->parts));
}

int gp_tiles_attach(gp_matrix *m, gp_error *err) {
    if (m->format != GP_WEIGHTS_BF16)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED, "the tile prefill needs bf16 weights");
    if (!gp_dconv_tiles_mode())
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED, "this CPU has no AMX tile unit");
    gp_tiles_detach(m);
    gp_tiles_matrix *t = calloc(1, sizeof *t);
    if (!t) return gp_fail_oom(err, "tile weights", sizeof *t);
    t->nb = ((m->rows + 15) / 16 + 1) / 2 * 2;
    t->kb = (m->cols + 31) / 32;
    const size_t words = (size_t)t->nb * t->kb * GP_AMX_WORDS;
    t->b = gp_aligned_alloc(words * 4);
    if (!t->b) {
        free(t);
        return gp_fail_oom(err, "tile weights", words * 4);
    }
    /* the backbone's ~0.5 GB of copies took a second of loading on one core: large
     * matrices are shared out to threads by output blocks (the same words either way) */
    fill_job job = {m, t, gp_threads_for_bytes(words * 4, t->nb)};
    gp_run_threads(job.parts, fill_part, &job);
    m->tiles = t;
    return GEPARD_OK;
}

void gp_tiles_detach(gp_matrix *m) {
    if (!m->tiles) return;
    gp_aligned_free(m->tiles->b);
    free(m->tiles);
    m->tiles = NULL;
}

typedef struct tiles_matmul_job {
    gp_matmul_tiles_job base;
    int pairs, tasks;
    bool amx;
    int failed; /* a task found no scratch */
} tiles_matmul_job;

/* Row blocks per pass over the weights: two pairs of accumulators, whose chunk of
 * activation tiles (4 row blocks x 2 terms x kc) still fits L1 at kc = 4. */
#define TILES_GROUP_RBLOCKS 4

static void tiles_matmul_task(void *ctx, int task, int worker) {
    (void)worker;
    tiles_matmul_job *tj = ctx;
    gp_matmul_tiles_job j = tj->base;
    j.j0 = 2 * (tj->pairs * task / tj->tasks);
    j.j1 = 2 * (tj->pairs * (task + 1) / tj->tasks);
    if (j.j1 <= j.j0) return;
    const int group = tj->base.r1b < TILES_GROUP_RBLOCKS ? tj->base.r1b : TILES_GROUP_RBLOCKS;
    j.c = gp_onednn_thread_buffer(1, (size_t)(j.j1 - j.j0) / 2 * ((group + 1) / 2) * 4 *
                                         GP_AMX_WORDS * sizeof(float));
    if (!j.c) {
        __atomic_store_n(&tj->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (int r0 = 0; r0 < tj->base.r1b; r0 += group) {
        j.r0b = r0;
        j.r1b = r0 + group < tj->base.r1b ? r0 + group : tj->base.r1b;
        /* 32 KB of activation tiles per chunk: 8 column blocks for two row blocks. A
         * task of fewer than 4 output pairs (many threads) reuses a chunk too few times
         * to pay for storing and reloading its accumulators: one chunk (on 16 cores of
         * a Sapphire Rapids, chunks made prefill 10-15 % slower) */
        j.kc = 16 / (j.r1b - j.r0b) > 1 ? 16 / (j.r1b - j.r0b) : 1;
        if ((j.j1 - j.j0) / 2 < 4) j.kc = j.kb;
        if (tj->amx)
            gp_matmul_tiles_amx(&j);
        else
            gp_matmul_tiles_emulated(&j);
    }
}

/* gp_matmul_tiles_split_avx512 in plain C (the emulated tiles' CPUs may lack AVX-512). */
static void split_plain(const float *x, int n, int ldx, int K, int rblocks, int kb, int r0, int r1,
                        uint16_t *a) {
    const size_t term = (size_t)rblocks * kb * 512;
    for (int r = r0; r < r1; r++)
        for (int i = 0; i < kb * 32; i++) {
            const float v = r < n && i < K ? x[(size_t)r * ldx + i] : 0.0f;
            const size_t at = ((size_t)(r / 16) * kb + i / 32) * 512 + (r % 16) * 32 + i % 32;
            gp_tiles_terms(v, &a[at], &a[at + term]);
        }
}

typedef struct split_job {
    const float *x;
    int n, ldx, K, rblocks, kb, parts;
    bool amx;
    uint16_t *a;
} split_job;

static void split_part(void *ctx, int i, int worker) {
    (void)worker;
    const split_job *s = ctx;
    const int rows = s->rblocks * 16;
    const int r0 = rows * i / s->parts, r1 = rows * (i + 1) / s->parts;
    if (s->amx)
        gp_matmul_tiles_split_avx512(s->x, s->n, s->ldx, s->K, s->rblocks, s->kb, r0, r1, s->a);
    else
        split_plain(s->x, s->n, s->ldx, s->K, s->rblocks, s->kb, r0, r1, s->a);
}

/* Rows split on as many threads as give each at least SPLIT_MIN_WORDS of the terms:
 * on one thread the split was ~0.5 ms of a 26-row prefill, a few % of it on 16 cores. */
#define SPLIT_MIN_WORDS (16 * 1024)

int gp_tiles_matmul(const gp_matrix *m, const float *x, int n, int ldx, float *y, int ldy,
                    gp_pool *pool) {
    const gp_tiles_matrix *t = m->tiles;
    const char *mode = gp_dconv_tiles_mode();
    if (!t || !mode || n <= 0) return GEPARD_ERR_UNSUPPORTED;
    const int rblocks = (n + 15) / 16;
    /* buffer 0 of this thread's scratch: the activations' terms, used only in this call */
    uint16_t *a = gp_onednn_thread_buffer(0, (size_t)rblocks * t->kb * 512 * 2 * 2);
    if (!a) return GEPARD_ERR_NOMEM;
    const bool amx = !strcmp(mode, "amx");
    const int threads = gp_pool_size(pool);
    const long words = (long)rblocks * 16 * t->kb * 32;
    long parts = words / SPLIT_MIN_WORDS < threads ? words / SPLIT_MIN_WORDS : threads;
    if (parts > rblocks * 16) parts = rblocks * 16;
    split_job sj = {x, n, ldx, m->cols, rblocks, t->kb, parts > 1 ? (int)parts : 1, amx, a};
    gp_pool_parallel_for(pool, sj.parts, split_part, &sj); /* one part: on this thread */
    tiles_matmul_job tj;
    memset(&tj, 0, sizeof tj);
    tj.base = (gp_matmul_tiles_job){.b = t->b,
                                    .kb = t->kb,
                                    .a = a,
                                    .rblocks = rblocks,
                                    .r0b = 0,
                                    .r1b = rblocks,
                                    .n = n,
                                    .N = m->rows,
                                    .y = y,
                                    .ldy = ldy};
    tj.pairs = t->nb / 2;
    tj.amx = amx;
    tj.tasks = threads * 4 < tj.pairs ? threads * 4 : tj.pairs;
    gp_pool_parallel_for(pool, tj.tasks, tiles_matmul_task, &tj);
    return tj.failed ? GEPARD_ERR_NOMEM : GEPARD_OK;
}

bool gp_tiles_choose(const gp_matrix *probe, bool forced, char *why, size_t why_size) {
    gp_matrix trial = *probe; /* shares the data; only trial.tiles is its own */
    trial.tiles = NULL;
    trial.onednn = NULL;
    gp_error err;
    gp_error_clear(&err);
    if (gp_tiles_attach(&trial, &err)) {
        snprintf(why, why_size, "native: %s", err.message);
        return false;
    }
    const int rows = 64; /* a prefill chunk, on as many threads as this process may use */
    gp_pool *pool = NULL;
    if (gp_pool_create(0, &pool, &err)) pool = NULL;
    const int threads = gp_pool_size(pool);
    double native, tiles;
    const bool ok = gp_matmul_race(&trial, rows, pool, gp_tiles_matmul, &native, &tiles);
    gp_pool_free(pool);
    gp_tiles_detach(&trial);
    if (!ok) {
        snprintf(why, why_size, "native: the tile matmul failed on a trial");
        return false;
    }
    const bool use = forced || native / tiles >= 1.2;
    snprintf(why, why_size,
             "%s: AMX tiles (bf16 x2 terms) %.2f ms, native %.2f ms for %d rows of a %d x %d "
             "matrix on %d threads (%.2fx)",
             forced ? "GEPARD_PREFILL=tiles"
             : use  ? "tiles measured faster"
                    : "tiles measured slower",
             tiles * 1e3, native * 1e3, rows, trial.rows, trial.cols, threads, native / tiles);
    return use;
}
