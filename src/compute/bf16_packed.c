/* bf16_packed.c — building and reading the 12-bit lossless form of a bf16
 * matrix (bf16_packed.h has the why and the layout). */
#include "compute/bf16_packed.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "compute/matrix.h"

static atomic_bool packed_on = false;

void gp_bf16_packed_set(bool on) { atomic_store(&packed_on, on); }
bool gp_bf16_packed_on(void) { return atomic_load_explicit(&packed_on, memory_order_relaxed); }

bool gp_bf16_packed_reads(const gp_matrix *m) { return m->packed && gp_bf16_packed_on(); }

static int exponent_of(uint16_t w) { return (w >> 7) & 0xFF; }

/* gp_bf16_packed_byte_of for the 64 weights of a chunk in tiled order. */
static unsigned char byte_of[64];
static void byte_of_init(void) {
    for (int i = 0; i < 4; i++)
        for (int c = 0; c < 16; c++)
            byte_of[i * 16 + c] = (unsigned char)gp_bf16_packed_byte_of(i, c);
}

/* Pack one chunk into rec with its base: true, or false (nothing usable
 * written) when it must be kept whole — a weight more than 14 binades below
 * the largest (exponent 0 has its own code) or an Inf/NaN (exponent 255). */
static bool pack_chunk(const uint16_t *w, unsigned char *base_out, unsigned char *rec) {
    int top = 0;
    for (int i = 0; i < 64; i++) {
        const int e = exponent_of(w[i]);
        top = e > top ? e : top;
    }
    if (top == 255) return false;
    const int base = top ? top : 1; /* all zero or subnormal: every code 15 */
    unsigned char codes[64];
    bool far = false;
    for (int i = 0; i < 64; i++) {
        const int e = exponent_of(w[i]), d = base - e;
        far |= e != 0 && d > 14;
        codes[i] = (unsigned char)(e == 0 ? 15 : d);
    }
    if (far) return false;
    memset(rec + 64, 0, 32);
    for (int i = 0; i < 64; i++) {
        const int b = byte_of[i];
        rec[b] = (unsigned char)(((w[i] & 0x7F) << 1) | (w[i] >> 15));
        rec[64 + b % 32] |= (unsigned char)(b < 32 ? codes[i] : codes[i] << 4);
    }
    *base_out = (unsigned char)base;
    return true;
}

/* Pass one packs every chunk of its tiles and copies the chunks kept whole
 * to a list of its own (their records hold the index in that list); the
 * caller then joins the lists and moves those indices past the tasks before. */
typedef struct pack_job {
    const gp_matrix *m;
    gp_bf16_packed *p;
    size_t tiles, per_task;
    uint16_t **kept; /* [task]: 64 values per chunk kept whole */
    size_t *n_kept, *cap_kept;
    bool failed;
} pack_job;

static void pack_task(void *ctx, int task, int thread) {
    (void)thread;
    pack_job *j = ctx;
    const size_t t0 = (size_t)task * j->per_task;
    const size_t t1 = t0 + j->per_task < j->tiles ? t0 + j->per_task : j->tiles;
    const uint16_t *data = j->m->data;
    const size_t pc = gp_matrix_padded_cols(j->m);
    for (size_t t = t0; t < t1; t++) {
        unsigned char *tile = j->p->tiles + t * j->p->tile_bytes;
        for (size_t k = 0; k < j->p->chunks; k++) {
            const uint16_t *w = data + (t * pc + k * 16) * GP_TILE_ROWS;
            unsigned char *rec = tile + j->p->chunks + k * GP_PACKED_RECORD;
            if (pack_chunk(w, tile + k, rec)) continue;
            if (j->n_kept[task] == j->cap_kept[task]) {
                const size_t cap = j->cap_kept[task] ? 2 * j->cap_kept[task] : 64;
                uint16_t *grown = realloc(j->kept[task], cap * 64 * sizeof(uint16_t));
                if (!grown) {
                    j->failed = true;
                    return;
                }
                j->kept[task] = grown;
                j->cap_kept[task] = cap;
            }
            const uint32_t index = (uint32_t)j->n_kept[task]++;
            memcpy(j->kept[task] + (size_t)index * 64, w, 64 * sizeof(uint16_t));
            tile[k] = 0;
            memset(rec, 0, GP_PACKED_RECORD);
            memcpy(rec, &index, sizeof index);
        }
    }
}

#define PACK_TASKS 64

static void pack_job_free(pack_job *j) {
    for (int t = 0; j->kept && t < PACK_TASKS; t++) free(j->kept[t]);
    free(j->kept);
    free(j->n_kept);
    free(j->cap_kept);
}

int gp_bf16_packed_attach(gp_matrix *m, gp_pool *pool, gp_error *err) {
    if (m->packed) return GEPARD_OK;
    if (m->format != GP_WEIGHTS_BF16)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "the 12-bit packed form is for bf16 weights, not %s",
                       gp_weight_format_name(m->format));
    if (!byte_of[1]) byte_of_init(); /* byte_of(0, 1) is 2: 0 only before */
    gp_bf16_packed *p = calloc(1, sizeof *p);
    if (!p) return gp_fail_oom(err, "packed weights", sizeof *p);
    const size_t tiles = gp_matrix_padded_rows(m) / GP_TILE_ROWS;
    p->chunks = gp_matrix_padded_cols(m) / 16;
    p->tile_bytes = p->chunks * (1 + GP_PACKED_RECORD);
    pack_job j = {m, p, tiles, (tiles + PACK_TASKS - 1) / PACK_TASKS, NULL, NULL, NULL, false};
    j.kept = calloc(PACK_TASKS, sizeof *j.kept);
    j.n_kept = calloc(PACK_TASKS, sizeof *j.n_kept);
    j.cap_kept = calloc(PACK_TASKS, sizeof *j.cap_kept);
    p->tiles = gp_huge_alloc(tiles * p->tile_bytes);
    if (!j.kept || !j.n_kept || !j.cap_kept || !p->tiles) goto oom;
    gp_pool_parallel_for(pool, PACK_TASKS, pack_task, &j);
    if (j.failed) goto oom;
    for (int t = 0; t < PACK_TASKS; t++) p->n_raw += j.n_kept[t];
    if (p->n_raw > UINT32_MAX) goto oom;
    p->raw = gp_aligned_alloc((p->n_raw ? p->n_raw : 1) * 64 * sizeof(uint16_t));
    if (!p->raw) goto oom;
    /* join the lists; a kept chunk's index moves past the earlier tasks' */
    size_t first = 0;
    for (int task = 0; task < PACK_TASKS; task++) {
        if (j.n_kept[task])
            memcpy(p->raw + first * 64, j.kept[task], j.n_kept[task] * 64 * sizeof(uint16_t));
        const size_t t0 = (size_t)task * j.per_task;
        const size_t t1 = t0 + j.per_task < tiles ? t0 + j.per_task : tiles;
        for (size_t t = t0; first && j.n_kept[task] && t < t1; t++) {
            unsigned char *tile = p->tiles + t * p->tile_bytes;
            for (size_t k = 0; k < p->chunks; k++) {
                if (tile[k]) continue;
                unsigned char *rec = tile + p->chunks + k * GP_PACKED_RECORD;
                uint32_t index;
                memcpy(&index, rec, sizeof index);
                index += (uint32_t)first;
                memcpy(rec, &index, sizeof index);
            }
        }
        first += j.n_kept[task];
    }
    p->bytes = tiles * p->tile_bytes + p->n_raw * 64 * sizeof(uint16_t);
    pack_job_free(&j);
    m->packed = p;
    return GEPARD_OK;
oom:
    pack_job_free(&j);
    gp_aligned_free(p->tiles);
    gp_aligned_free(p->raw);
    free(p);
    return gp_fail_oom(err, "packed weights", tiles * (1 + GP_PACKED_RECORD) * 16);
}

void gp_bf16_packed_detach(gp_matrix *m) {
    if (!m->packed) return;
    gp_aligned_free(m->packed->tiles);
    gp_aligned_free(m->packed->raw);
    free(m->packed);
    m->packed = NULL;
}

void gp_bf16_packed_chunk(const gp_bf16_packed *p, size_t t, size_t k, uint16_t out[64]) {
    const unsigned char *tile = p->tiles + t * p->tile_bytes;
    const unsigned char *rec = tile + p->chunks + k * GP_PACKED_RECORD;
    const int base = tile[k];
    if (!base) {
        uint32_t index;
        memcpy(&index, rec, sizeof index);
        memcpy(out, p->raw + (size_t)index * 64, 64 * sizeof(uint16_t));
        return;
    }
    for (int i = 0; i < 4; i++)
        for (int c = 0; c < 16; c++) {
            const int b = gp_bf16_packed_byte_of(i, c);
            const int code = b < 32 ? rec[64 + b] & 15 : rec[64 + b - 32] >> 4;
            const int e = code == 15 ? 0 : base - code;
            out[i * 16 + c] = (uint16_t)((rec[b] & 1) << 15 | e << 7 | rec[b] >> 1);
        }
}
