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
} tiles_matmul_job;

static void tiles_matmul_task(void *ctx, int task, int worker) {
    (void)worker;
    const tiles_matmul_job *tj = ctx;
    gp_matmul_tiles_job j = tj->base;
    float c[32 * 32];
    j.c = c;
    j.j0 = 2 * (tj->pairs * task / tj->tasks);
    j.j1 = 2 * (tj->pairs * (task + 1) / tj->tasks);
    if (j.j1 <= j.j0) return;
    if (tj->amx)
        gp_matmul_tiles_amx(&j);
    else
        gp_matmul_tiles_emulated(&j);
}

static void split_plain(const float *x, int n, int ldx, int K, int rows, int kpad, uint16_t *hi,
                        uint16_t *lo) {
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < kpad; i++) {
            const float v = r < n && i < K ? x[(size_t)r * ldx + i] : 0.0f;
            gp_tiles_terms(v, &hi[(size_t)r * kpad + i], &lo[(size_t)r * kpad + i]);
        }
}

int gp_tiles_matmul(const gp_matrix *m, const float *x, int n, int ldx, float *y, int ldy,
                    gp_pool *pool) {
    const gp_tiles_matrix *t = m->tiles;
    const char *mode = gp_dconv_tiles_mode();
    if (!t || !mode || n <= 0) return GEPARD_ERR_UNSUPPORTED;
    /* a row of terms is kb·32 columns and 32 more: a power-of-two stride (2 or 4 KB
     * for the backbone's 1024 and 2048 columns) put an activation tile's 16 rows in
     * one or two L1 sets, so every tile load missed L1 */
    const int kpad = t->kb * 32 + 32, rblocks = (n + 15) / 16, rows = rblocks * 16;
    /* buffer 0 of this thread's scratch: the activations' terms, used only in this call */
    uint16_t *hi = gp_onednn_thread_buffer(0, (size_t)rows * kpad * 4);
    if (!hi) return GEPARD_ERR_NOMEM;
    uint16_t *lo = hi + (size_t)rows * kpad;
    const bool amx = !strcmp(mode, "amx");
    if (amx)
        gp_matmul_tiles_split_avx512(x, n, ldx, m->cols, rows, kpad, hi, lo);
    else
        split_plain(x, n, ldx, m->cols, rows, kpad, hi, lo);
    tiles_matmul_job tj;
    memset(&tj, 0, sizeof tj);
    tj.base = (gp_matmul_tiles_job){t->b, t->kb,   0, 0,       hi, lo,  kpad,
                                    0,    rblocks, n, m->rows, y,  ldy, NULL};
    tj.pairs = t->nb / 2;
    tj.amx = amx;
    const int threads = gp_pool_size(pool);
    tj.tasks = threads * 4 < tj.pairs ? threads * 4 : tj.pairs;
    gp_pool_parallel_for(pool, tj.tasks, tiles_matmul_task, &tj);
    return GEPARD_OK;
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
