/* kernels_avx2.c — the AVX2+FMA kernel table (built with -mavx2 -mfma
 * -mf16c because of the file name, called only after matrix.c's CPU check).
 *
 * Same structure as kernels_avx512.c with 8-float vectors and 16 registers:
 * a tile of 4 weight rows (one sequential stream in the tiled layout) times
 * up to 2 input rows, each weight vector widened once; one accumulator per
 * (weight row, input row), so results do not depend on the batch size;
 * input rows in L2-sized chunks. Batches of 3 or more rows (prefill) run a
 * cache-blocked variant with the same arithmetic (4 weight rows × 3 input
 * rows, 512-column blocks reused from L1 — bf16 blocks widened to f32 once
 * for all input rows — the next block prefetched). f32 / bf16 / int8 multiply
 * exact f32 activations; q4 uses the int8 activation rows of kernels_q8.h with VPMADDUBSW/VPMADDWD,
 * which give the same integer sums as AVX-512 VNNI.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "compute/attention.h"
#include "compute/bf16_packed.h"
#include "compute/cpu/kernels_q8.h"
#include "compute/kernels.h"

#define INLINE static inline __attribute__((always_inline))

#define TILE_X 2
#define X_CHUNK_BYTES (256 * 1024)
#define DECODE_STREAMS 3 /* weight streams of the row-by-row kernel for one input row */

/* K_F32S: f32 weights with int8's per-row scales applied at the store — an
 * int8 block widened once for the blocked prefill kernel. */
enum { K_F32, K_BF16, K_I8, K_F32S };

/* {Σa, Σb, Σc, Σd} of four vectors; each sum uses the same order. */
INLINE __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

INLINE float hsum(__m256 a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Store a tile's four sums for one input row: rows 4t + i inside [r0, r1). */
INLINE void store_tile(float *y, size_t t, __m128 s, int r0, int r1) {
    const int first = (int)t * GP_TILE_ROWS;
    if (first >= r0 && first + GP_TILE_ROWS <= r1) {
        _mm_storeu_ps(y + first, s);
        return;
    }
    float v[GP_TILE_ROWS];
    _mm_storeu_ps(v, s);
    for (int i = 0; i < GP_TILE_ROWS; i++)
        if (first + i >= r0 && first + i < r1) y[first + i] = v[i];
}

/* ---- f32 / bf16 / int8 ---- */

INLINE size_t elem_size(int kind) {
    return kind == K_F32 || kind == K_F32S ? 4 : kind == K_BF16 ? 2 : 1;
}
INLINE bool scaled(int kind) { return kind == K_I8 || kind == K_F32S; }

/* 8 weights as f32. */
INLINE __m256 load_w(int kind, const unsigned char *p) {
    if (kind == K_F32 || kind == K_F32S) return _mm256_loadu_ps((const float *)(const void *)p);
    if (kind == K_BF16)
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const void *)p)), 16));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const void *)p)));
}

/* 8 activations from column c, zero past cols (weights there are zero). */
INLINE __m256 load_x(const float *x, size_t c, size_t cols) {
    if (cols - c >= 8) return _mm256_loadu_ps(x + c);
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(cols - c)), lanes);
    return _mm256_maskload_ps(x + c, mask);
}

INLINE void dense_tile(int kind, const gp_matrix *w, size_t t, const float *x, int ldx, int nb,
                       float *y, int ldy, int r0, int r1, size_t pf) {
    const size_t cols = (size_t)w->cols, esz = elem_size(kind);
    const unsigned char *p =
        (const unsigned char *)w->data + t * GP_TILE_ROWS * gp_matrix_padded_cols(w) * esz;
    __m256 acc[GP_TILE_ROWS][TILE_X];
#pragma GCC unroll 4
    for (int i = 0; i < GP_TILE_ROWS; i++)
#pragma GCC unroll 2
        for (int j = 0; j < nb; j++) acc[i][j] = _mm256_setzero_ps();
    /* a chunk is 16 columns: two 8-wide halves per row */
    for (size_t c = 0; c < cols; c += 8) {
        const unsigned char *q = p + (c / 16) * GP_TILE_ROWS * 16 * esz + (c % 16) * esz;
        if (pf && c % 16 == 0) /* the weight stream `pf` bytes ahead (tiles are contiguous) */
            for (size_t b = 0; b < GP_TILE_ROWS * 16 * esz; b += 64)
                _mm_prefetch((const char *)q + pf + b, _MM_HINT_T0);
        __m256 xv[TILE_X];
#pragma GCC unroll 2
        for (int j = 0; j < nb; j++) xv[j] = load_x(x + (size_t)j * ldx, c, cols);
#pragma GCC unroll 4
        for (int i = 0; i < GP_TILE_ROWS; i++) {
            __m256 wv = load_w(kind, q + (size_t)i * 16 * esz);
#pragma GCC unroll 2
            for (int j = 0; j < nb; j++) acc[i][j] = _mm256_fmadd_ps(wv, xv[j], acc[i][j]);
        }
    }
    const __m128 sc = kind == K_I8 ? _mm_loadu_ps(w->scales + t * GP_TILE_ROWS) : _mm_set1_ps(1);
#pragma GCC unroll 2
    for (int j = 0; j < nb; j++) {
        __m128 s = hsum4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]);
        if (kind == K_I8) s = _mm_mul_ps(s, sc);
        store_tile(y + (size_t)j * ldy, t, s, r0, r1);
    }
}

/* S tiles ts[0 .. S) against one input row at once, 8 columns at a time: S weight
 * streams from S places of the matrix (why: kernels_avx512.c's dense_tiles). Each
 * tile keeps its own accumulators and sees dense_tile's FMAs in the same order:
 * bitwise S calls of dense_tile. */
INLINE void dense_tiles(int kind, const gp_matrix *w, int S, const size_t *ts, const float *x,
                        float *y, int r0, int r1, size_t pf) {
    const size_t cols = (size_t)w->cols, esz = elem_size(kind);
    const size_t tile_bytes = GP_TILE_ROWS * gp_matrix_padded_cols(w) * esz;
    const unsigned char *p[DECODE_STREAMS];
    __m256 acc[DECODE_STREAMS][GP_TILE_ROWS];
#pragma GCC unroll 4
    for (int s = 0; s < S; s++) {
        p[s] = (const unsigned char *)w->data + ts[s] * tile_bytes;
#pragma GCC unroll 4
        for (int i = 0; i < GP_TILE_ROWS; i++) acc[s][i] = _mm256_setzero_ps();
    }
    for (size_t c = 0; c < cols; c += 8) {
        const size_t off = (c / 16) * GP_TILE_ROWS * 16 * esz + (c % 16) * esz;
        if (pf && c % 16 == 0)
#pragma GCC unroll 4
            for (int s = 0; s < S; s++)
                for (size_t b = 0; b < GP_TILE_ROWS * 16 * esz; b += 64)
                    _mm_prefetch((const char *)p[s] + off + pf + b, _MM_HINT_T0);
        const __m256 xv = load_x(x, c, cols);
#pragma GCC unroll 4
        for (int s = 0; s < S; s++)
#pragma GCC unroll 4
            for (int i = 0; i < GP_TILE_ROWS; i++)
                acc[s][i] =
                    _mm256_fmadd_ps(load_w(kind, p[s] + off + (size_t)i * 16 * esz), xv, acc[s][i]);
    }
#pragma GCC unroll 4
    for (int s = 0; s < S; s++) {
        __m128 v = hsum4(acc[s][0], acc[s][1], acc[s][2], acc[s][3]);
        if (scaled(kind)) v = _mm_mul_ps(v, _mm_loadu_ps(w->scales + ts[s] * GP_TILE_ROWS));
        store_tile(y, ts[s], v, r0, r1);
    }
}

/* Tiles [t0, t1) against one input row as DECODE_STREAMS streams (12
 * accumulators), each a contiguous part of the range; the tiles the parts leave
 * over go one at a time. */
INLINE void dense_streams(int kind, const gp_matrix *w, size_t t0, size_t t1, const float *x,
                          float *y, int r0, int r1, size_t pf) {
    const size_t len = (t1 - t0) / DECODE_STREAMS;
    size_t ts[DECODE_STREAMS];
    for (size_t k = 0; k < len; k++) {
        for (int s = 0; s < DECODE_STREAMS; s++) ts[s] = t0 + (size_t)s * len + k;
        dense_tiles(kind, w, DECODE_STREAMS, ts, x, y, r0, r1, pf);
    }
    for (size_t t = t0 + DECODE_STREAMS * len; t < t1; t++)
        dense_tile(kind, w, t, x, 0, 1, y, 0, r0, r1, pf);
}

INLINE void dense_rows(int kind, const gp_matrix *w, const float *x, int n, int ldx, float *y,
                       int ldy, int r0, int r1) {
    int chunk = (int)(X_CHUNK_BYTES / ((size_t)w->cols * sizeof(float) + 1)) & ~(TILE_X - 1);
    if (chunk < TILE_X) chunk = TILE_X;
    const size_t pf = gp_decode_prefetch_bytes();
    const size_t t0 = (size_t)r0 / GP_TILE_ROWS,
                 t1 = ((size_t)r1 + GP_TILE_ROWS - 1) / GP_TILE_ROWS;
    if (n == 1 && gp_decode_streams()) {
        dense_streams(kind, w, t0, t1, x, y, r0, r1, pf);
        return;
    }
    for (int j0 = 0; j0 < n; j0 += chunk) {
        const int j1 = n - j0 < chunk ? n : j0 + chunk;
        for (size_t t = t0; t < t1; t++)
            for (int j = j0; j < j1; j += TILE_X) {
                const float *xj = x + (size_t)j * ldx;
                float *yj = y + (size_t)j * ldy;
                if (j1 - j == 1)
                    dense_tile(kind, w, t, xj, ldx, 1, yj, ldy, r0, r1, pf);
                else
                    dense_tile(kind, w, t, xj, ldx, 2, yj, ldy, r0, r1, pf);
            }
    }
}

/* ---- f32 / bf16 / int8, batches of rows (prefill) ---- */

/* Batches of at least BLOCK_MIN_ROWS input rows: one tile (4 weight rows) ×
 * BLOCK_X input rows of accumulators, the columns in blocks of BLOCK_COLS
 * whose weights stay in L1 while every group of input rows passes over them,
 * the first group prefetching the next block. Each group's accumulators are
 * parked between column blocks and reloaded unchanged, so every output sees
 * the FMAs of dense_tile in the same order: bitwise the row-by-row result. */
#define BLOCK_MIN_ROWS 3
#define BLOCK_X 3
#define BLOCK_COLS 512
#define BLOCK_GROUPS 32

typedef struct block_acc {
    __m256 v[GP_TILE_ROWS][BLOCK_X];
} block_acc;

/* Columns [c0, c1) of tile t against input rows x[0 .. nb): the
 * accumulators start at zero (c0 == 0) or from acc and are parked in acc
 * again, or summed into y after the last column. The weights are read in
 * format `kind` from p (tile t at column c0): the matrix itself, or a block
 * of it already widened to f32. pf: the next block's weights to prefetch, or
 * NULL. */
INLINE void block_cols(int kind, const gp_matrix *w, size_t t, const unsigned char *p,
                       const float *x, int ldx, int nb, size_t c0, size_t c1, block_acc *acc,
                       float *y, int ldy, int r0, int r1, const unsigned char *pf) {
    const size_t cols = (size_t)w->cols, esz = elem_size(kind), step = GP_TILE_ROWS * 16 * esz;
    __m256 a[GP_TILE_ROWS][BLOCK_X];
#pragma GCC unroll 4
    for (int i = 0; i < GP_TILE_ROWS; i++)
#pragma GCC unroll 3
        for (int j = 0; j < nb; j++) a[i][j] = c0 ? acc->v[i][j] : _mm256_setzero_ps();
    const float *xr[BLOCK_X];
#pragma GCC unroll 3
    for (int j = 0; j < nb; j++) xr[j] = x + (size_t)j * ldx;
    size_t c = c0;
    /* whole 16-column chunks, both halves per pass: no bounds or chunk tests
     * per half (on a Sapphire Rapids those, not the FMAs, set the pace);
     * every accumulator still sees its columns in order */
    for (; c + 16 <= c1; c += 16) {
        const unsigned char *q = p + (c - c0) / 16 * step;
        if (pf)
#pragma GCC unroll 4
            for (size_t b = 0; b < step; b += 64)
                _mm_prefetch((const char *)pf + (c - c0) / 16 * step + b, _MM_HINT_T0);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256 xv[BLOCK_X];
#pragma GCC unroll 3
            for (int j = 0; j < nb; j++) xv[j] = _mm256_loadu_ps(xr[j] + c + 8 * h);
#pragma GCC unroll 4
            for (int i = 0; i < GP_TILE_ROWS; i++) {
                __m256 wv = load_w(kind, q + (size_t)i * 16 * esz + (size_t)h * 8 * esz);
#pragma GCC unroll 3
                for (int j = 0; j < nb; j++) a[i][j] = _mm256_fmadd_ps(wv, xv[j], a[i][j]);
            }
        }
    }
    for (; c < c1; c += 8) { /* the matrix's last columns */
        const unsigned char *q = p + (c - c0) / 16 * step + (c % 16) * esz;
        if (pf && c % 16 == 0)
#pragma GCC unroll 4
            for (size_t b = 0; b < step; b += 64)
                _mm_prefetch((const char *)pf + (c - c0) / 16 * step + b, _MM_HINT_T0);
        __m256 xv[BLOCK_X];
#pragma GCC unroll 3
        for (int j = 0; j < nb; j++) xv[j] = load_x(xr[j], c, cols);
#pragma GCC unroll 4
        for (int i = 0; i < GP_TILE_ROWS; i++) {
            __m256 wv = load_w(kind, q + (size_t)i * 16 * esz);
#pragma GCC unroll 3
            for (int j = 0; j < nb; j++) a[i][j] = _mm256_fmadd_ps(wv, xv[j], a[i][j]);
        }
    }
    if (c1 < cols) {
#pragma GCC unroll 4
        for (int i = 0; i < GP_TILE_ROWS; i++)
#pragma GCC unroll 3
            for (int j = 0; j < nb; j++) acc->v[i][j] = a[i][j];
        return;
    }
    const __m128 sc = scaled(kind) ? _mm_loadu_ps(w->scales + t * GP_TILE_ROWS) : _mm_set1_ps(1);
#pragma GCC unroll 3
    for (int j = 0; j < nb; j++) {
        __m128 s = hsum4(a[0][j], a[1][j], a[2][j], a[3][j]);
        if (scaled(kind)) s = _mm_mul_ps(s, sc);
        store_tile(y + (size_t)j * ldy, t, s, r0, r1);
    }
}

/* block_cols specialised per format and row count (out of line, so that
 * the accumulators stay in registers). */
typedef void (*block_fn)(const gp_matrix *w, size_t t, const unsigned char *p, const float *x,
                         int ldx, size_t c0, size_t c1, block_acc *acc, float *y, int ldy, int r0,
                         int r1, const unsigned char *pf);
#define BLOCK_FN(KIND, NB)                                                                         \
    static __attribute__((noinline)) void block_##KIND##_##NB(                                     \
        const gp_matrix *w, size_t t, const unsigned char *p, const float *x, int ldx, size_t c0,  \
        size_t c1, block_acc *acc, float *y, int ldy, int r0, int r1, const unsigned char *pf) {   \
        block_cols(KIND, w, t, p, x, ldx, NB, c0, c1, acc, y, ldy, r0, r1, pf);                    \
    }
#define BLOCK_FNS(KIND) BLOCK_FN(KIND, 1) BLOCK_FN(KIND, 2) BLOCK_FN(KIND, 3)
BLOCK_FNS(K_F32)
BLOCK_FNS(K_BF16)
BLOCK_FNS(K_I8)
BLOCK_FNS(K_F32S)
static const block_fn block_fns[4][BLOCK_X] = {{block_K_F32_1, block_K_F32_2, block_K_F32_3},
                                               {block_K_BF16_1, block_K_BF16_2, block_K_BF16_3},
                                               {block_K_I8_1, block_K_I8_2, block_K_I8_3},
                                               {block_K_F32S_1, block_K_F32S_2, block_K_F32S_3}};

/* bf16 and int8 blocks widened to f32 once per pass, for every group of
 * input rows (the widening is exact, so the products are those of load_w's;
 * int8's scales are still applied to the sums). */
static _Thread_local float widened[(BLOCK_COLS / 16) * GP_TILE_ROWS * 16]
    __attribute__((aligned(32)));

/* Tile t of a bf16 or int8 matrix's data, columns [c0, c1), into `widened`
 * in the same chunk order, prefetching pf (the next block) as block_cols
 * would. */
static void widen_block(int kind, const unsigned char *data, size_t t, size_t tile_bytes, size_t c0,
                        size_t c1, const unsigned char *pf) {
    const size_t esz = elem_size(kind), step = GP_TILE_ROWS * 16 * esz,
                 chunks = (c1 - c0 + 15) / 16;
    const unsigned char *src = data + t * tile_bytes + c0 / 16 * step;
    float *dst = widened;
    for (size_t ch = 0; ch < chunks; ch++, src += step, dst += GP_TILE_ROWS * 16) {
        if (pf)
            for (size_t b = 0; b < step; b += 64)
                _mm_prefetch((const char *)pf + ch * step + b, _MM_HINT_T0);
#pragma GCC unroll 8
        for (int h = 0; h < 2 * GP_TILE_ROWS; h++)
            _mm256_store_ps(dst + h * 8, load_w(kind, src + (size_t)h * 8 * esz));
    }
}

static void block_rows(int kind, const gp_matrix *w, const float *x, int n, int ldx, float *y,
                       int ldy, int r0, int r1) {
    block_acc acc[BLOCK_GROUPS];
    /* bf16 and int8 are widened once per block for all groups (int8 keeps
     * its per-row scales for the store); f32 is read as stored */
    const bool widen = kind == K_BF16 || kind == K_I8;
    const int run_kind = kind == K_BF16 ? K_F32 : kind == K_I8 ? K_F32S : kind;
    const size_t cols = (size_t)w->cols, t0 = (size_t)r0 / GP_TILE_ROWS,
                 t1 = ((size_t)r1 + GP_TILE_ROWS - 1) / GP_TILE_ROWS;
    const size_t esz = elem_size(kind), step = GP_TILE_ROWS * 16 * esz;
    const size_t tile_bytes = GP_TILE_ROWS * gp_matrix_padded_cols(w) * esz;
    const unsigned char *data = w->data;
    for (int j0 = 0; j0 < n; j0 += BLOCK_GROUPS * BLOCK_X) {
        const int j1 = n - j0 < BLOCK_GROUPS * BLOCK_X ? n : j0 + BLOCK_GROUPS * BLOCK_X;
        for (size_t t = t0; t < t1; t++)
            for (size_t c0 = 0; c0 < cols; c0 += BLOCK_COLS) {
                const size_t c1 = cols - c0 < BLOCK_COLS ? cols : c0 + BLOCK_COLS;
                /* the tile's stream continues into the next tile */
                const unsigned char *pf =
                    c1 < cols || t + 1 < t1 ? data + t * tile_bytes + (c1 + 15) / 16 * step : NULL;
                const unsigned char *p = data + t * tile_bytes + c0 / 16 * step;
                if (widen) {
                    widen_block(kind, data, t, tile_bytes, c0, c1, pf);
                    p = (const unsigned char *)widened;
                    pf = NULL;
                }
                for (int j = j0, g = 0, nb; j < j1; j += nb, g++) {
                    /* 3 rows at a time; 4 left go as 2 + 2 rather than 3 + 1 */
                    nb = j1 - j == 4 ? 2 : j1 - j < BLOCK_X ? j1 - j : BLOCK_X;
                    block_fns[run_kind][nb - 1](w, t, p, x + (size_t)j * ldx, ldx, c0, c1, &acc[g],
                                                y + (size_t)j * ldy, ldy, r0, r1, g ? NULL : pf);
                }
            }
    }
}

static void matmul_rows_f32(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                            int r0, int r1) {
    if (n >= BLOCK_MIN_ROWS)
        block_rows(K_F32, w, x, n, ldx, y, ldy, r0, r1);
    else
        dense_rows(K_F32, w, x, n, ldx, y, ldy, r0, r1);
}

/* ---- bf16 through the 12-bit packed copy (bf16_packed.h), 1-2 input rows ---- */

/* Half h (columns 8h .. 8h + 7) of a packed tile's chunk k, its 4 rows as
 * f32: the codes become exponents through a 16-entry table (the base minus
 * the code; code 15: exponent 0), each (mantissa << 1 | sign) byte meets its
 * exponent in a 16-bit word by a byte interleave, a rotate by one puts the
 * sign on top (the bf16 value), and the even and odd words widen by a shift
 * and a mask: gp_bf16_packed_byte_of's order. */
INLINE void packed_half(const gp_bf16_packed *pk, const unsigned char *tile, size_t k, int h,
                        __m256 wv[GP_TILE_ROWS]) {
    const int base = tile[k];
    const unsigned char *rec = tile + pk->chunks + k * GP_PACKED_RECORD;
    if (__builtin_expect(base != 0, 1)) {
        const __m256i iota = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0,
                                              0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0);
        const __m256i code15 = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0,
                                                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1);
        const __m256i low4 = _mm256_set1_epi8(15), high = _mm256_set1_epi32((int)0xFFFF0000u);
        const __m256i table =
            _mm256_andnot_si256(code15, _mm256_sub_epi8(_mm256_set1_epi8((char)base), iota));
        const __m256i nibbles = _mm256_loadu_si256((const void *)(rec + 64));
        const __m256i codes = _mm256_and_si256(h ? _mm256_srli_epi16(nibbles, 4) : nibbles, low4);
        const __m256i e = _mm256_shuffle_epi8(table, codes);
        const __m256i sm = _mm256_loadu_si256((const void *)(rec + 32 * h));
        const __m256i a = _mm256_unpacklo_epi8(sm, e), b = _mm256_unpackhi_epi8(sm, e);
        const __m256i av = _mm256_or_si256(_mm256_srli_epi16(a, 1), _mm256_slli_epi16(a, 15));
        const __m256i bv = _mm256_or_si256(_mm256_srli_epi16(b, 1), _mm256_slli_epi16(b, 15));
        wv[0] = _mm256_castsi256_ps(_mm256_slli_epi32(av, 16));
        wv[1] = _mm256_castsi256_ps(_mm256_and_si256(av, high));
        wv[2] = _mm256_castsi256_ps(_mm256_slli_epi32(bv, 16));
        wv[3] = _mm256_castsi256_ps(_mm256_and_si256(bv, high));
    } else { /* kept whole */
        uint32_t index;
        memcpy(&index, rec, sizeof index);
        const unsigned char *q = (const unsigned char *)(pk->raw + (size_t)index * 64);
#pragma GCC unroll 4
        for (int i = 0; i < GP_TILE_ROWS; i++) wv[i] = load_w(K_BF16, q + (size_t)i * 32 + 16 * h);
    }
}

/* S packed tiles ts[0 .. S) against nb input rows (S · nb <= 2: the
 * registers), each accumulator seeing dense_tile's FMAs in its order: 8
 * columns at a time, the halves past the last column skipped as there. */
INLINE void packed_tiles(const gp_matrix *w, int S, const size_t *ts, const float *x, int ldx,
                         int nb, float *y, int ldy, int r0, int r1, size_t pf) {
    const gp_bf16_packed *pk = w->packed;
    const size_t cols = (size_t)w->cols;
    const unsigned char *tile[2];
    __m256 acc[2][GP_TILE_ROWS][TILE_X];
#pragma GCC unroll 2
    for (int s = 0; s < S; s++) {
        tile[s] = pk->tiles + ts[s] * pk->tile_bytes;
#pragma GCC unroll 4
        for (int i = 0; i < GP_TILE_ROWS; i++)
#pragma GCC unroll 2
            for (int j = 0; j < nb; j++) acc[s][i][j] = _mm256_setzero_ps();
    }
    for (size_t c = 0, k = 0; c < cols; c += 16, k++) {
        if (pf)
#pragma GCC unroll 2
            for (int s = 0; s < S; s++) {
                const char *rec = (const char *)tile[s] + pk->chunks + k * GP_PACKED_RECORD;
                _mm_prefetch(rec + pf, _MM_HINT_T0);
                _mm_prefetch(rec + pf + 64, _MM_HINT_T0);
            }
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            if (c + 8 * h >= cols) break;
            __m256 xv[TILE_X];
#pragma GCC unroll 2
            for (int j = 0; j < nb; j++) xv[j] = load_x(x + (size_t)j * ldx, c + 8 * h, cols);
#pragma GCC unroll 2
            for (int s = 0; s < S; s++) {
                __m256 wv[GP_TILE_ROWS];
                packed_half(pk, tile[s], k, h, wv);
#pragma GCC unroll 4
                for (int i = 0; i < GP_TILE_ROWS; i++)
#pragma GCC unroll 2
                    for (int j = 0; j < nb; j++)
                        acc[s][i][j] = _mm256_fmadd_ps(wv[i], xv[j], acc[s][i][j]);
            }
        }
    }
#pragma GCC unroll 2
    for (int s = 0; s < S; s++)
#pragma GCC unroll 2
        for (int j = 0; j < nb; j++)
            store_tile(y + (size_t)j * ldy, ts[s],
                       hsum4(acc[s][0][j], acc[s][1][j], acc[s][2][j], acc[s][3][j]), r0, r1);
}

/* Rows [r0, r1) for 1-2 input rows through the packed copy: one input row
 * as two weight streams (halves of the range), two rows a tile at a time. */
static void packed_rows(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                        int r0, int r1) {
    const size_t pf = gp_decode_prefetch_bytes();
    const size_t t0 = (size_t)r0 / GP_TILE_ROWS,
                 t1 = ((size_t)r1 + GP_TILE_ROWS - 1) / GP_TILE_ROWS;
    size_t t = t0;
    if (n == 1 && gp_decode_streams()) {
        const size_t len = (t1 - t0) / 2;
        for (size_t k = 0; k < len; k++) {
            const size_t ts[2] = {t0 + k, t0 + len + k};
            packed_tiles(w, 2, ts, x, ldx, 1, y, ldy, r0, r1, pf);
        }
        t = t0 + 2 * len;
    }
    for (; t < t1; t++)
        if (n == 1)
            packed_tiles(w, 1, &t, x, ldx, 1, y, ldy, r0, r1, pf);
        else
            packed_tiles(w, 1, &t, x, ldx, 2, y, ldy, r0, r1, pf);
}

static void matmul_rows_bf16(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                             int r0, int r1) {
    if (n >= BLOCK_MIN_ROWS)
        block_rows(K_BF16, w, x, n, ldx, y, ldy, r0, r1);
    else if (gp_bf16_packed_reads(w))
        packed_rows(w, x, n, ldx, y, ldy, r0, r1);
    else
        dense_rows(K_BF16, w, x, n, ldx, y, ldy, r0, r1);
}

static void matmul_rows_int8(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                             int r0, int r1) {
    if (n >= BLOCK_MIN_ROWS)
        block_rows(K_I8, w, x, n, ldx, y, ldy, r0, r1);
    else
        dense_rows(K_I8, w, x, n, ldx, y, ldy, r0, r1);
}

/* ---- q4 ---- */

/* Same rounding as the AVX-512 version (kernels_q8.h), so both levels see
 * identical int8 rows. */
static void q8_quantize_row(const float *x, int cols, const gp_q8_row *out) {
    const int groups = cols / GP_Q4_GROUP, padded = (groups + 3) & ~3;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256i pack_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int g = 0; g < padded; g++) {
        int8_t *lo = out->q + (g >> 2) * 128 + (g & 3) * 16;
        int32_t *corr = out->corr + (g >> 2) * 16 + (g & 3) * 4;
        float *xs = out->xs + (g >> 2) * 16 + (g & 3) * 4;
        if (g >= groups) {
            memset(lo, 0, 16);
            memset(lo + 64, 0, 16);
            memset(corr, 0, 4 * sizeof *corr);
            memset(xs, 0, 4 * sizeof *xs);
            continue;
        }
        const float *xg = x + g * GP_Q4_GROUP;
        __m256 v[4], m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(xg + 8 * k);
            m = _mm256_max_ps(m, _mm256_and_ps(v[k], abs_mask));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        float s = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
        __m256i iv[4], sum = _mm256_setzero_si256();
        for (int k = 0; k < 4; k++) {
            iv[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], _mm256_set1_ps(inv)));
            sum = _mm256_add_epi32(sum, iv[k]);
        }
        /* int32 → int16 → int8 packs work per 128-bit lane; undo the lane
         * interleave with one dword permutation. */
        __m256i w16 = _mm256_packs_epi32(iv[0], iv[1]);
        __m256i w16b = _mm256_packs_epi32(iv[2], iv[3]);
        __m256i b8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w16, w16b), pack_order);
        _mm_storeu_si128((void *)lo, _mm256_castsi256_si128(b8));
        _mm_storeu_si128((void *)(lo + 64), _mm256_extracti128_si256(b8, 1));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
        corr[0] = -8 * _mm_cvtsi128_si32(s4);
        corr[1] = corr[2] = corr[3] = 0;
        xs[0] = xs[1] = xs[2] = xs[3] = s;
    }
}

/* The f16 scales of groups g and g + 1 of one row (lanes 0, 1). */
INLINE __m128 scales2(const uint16_t *p) {
    uint32_t s;
    memcpy(&s, p, sizeof s);
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)s));
}

/* Half h (groups 2h, 2h+1) of block b of one weight row: wv holds its 32
 * nibble bytes, s2 the two scales; acc[j] += that part of row · x_j. */
INLINE void q4_pair(__m256i wv, __m128 s2, const gp_q8_row *xr, int nb, size_t b, size_t h,
                    __m256 *acc) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    const __m256i lo = _mm256_and_si256(wv, low4);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(wv, 4), low4);
    const __m256 sc = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(s2), spread);
#pragma GCC unroll 2
    for (int j = 0; j < nb; j++) {
        const int8_t *q = xr[j].q + b * 128 + h * 32;
        __m256i p =
            _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_load_si256((const void *)q)),
                             _mm256_maddubs_epi16(hi, _mm256_load_si256((const void *)(q + 64))));
        __m256i d =
            _mm256_add_epi32(_mm256_madd_epi16(p, ones),
                             _mm256_load_si256((const void *)(xr[j].corr + b * 16 + h * 8)));
        __m256 xs = _mm256_load_ps(xr[j].xs + b * 16 + h * 8);
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(sc, xs), acc[j]);
    }
}

INLINE void q4_tile(const gp_matrix *w, size_t t, const gp_q8_row *xr, int nb, float *y, int ldy,
                    int r0, int r1) {
    const size_t blocks = gp_matrix_padded_cols(w) / 128;
    const uint8_t *p = (const uint8_t *)w->data + t * blocks * 256;
    const uint16_t *sc16 = w->gscales + t * blocks * 16;
    __m256 acc[GP_TILE_ROWS][TILE_X];
#pragma GCC unroll 4
    for (int i = 0; i < GP_TILE_ROWS; i++)
#pragma GCC unroll 2
        for (int j = 0; j < nb; j++) acc[i][j] = _mm256_setzero_ps();
    for (size_t b = 0; b < blocks; b++)
        for (size_t h = 0; h < 2; h++)
#pragma GCC unroll 4
            for (int i = 0; i < GP_TILE_ROWS; i++) {
                __m256i wv = _mm256_loadu_si256((const void *)(p + b * 256 + i * 64 + h * 32));
                q4_pair(wv, scales2(sc16 + b * 16 + i * 4 + h * 2), xr, nb, b, h, acc[i]);
            }
#pragma GCC unroll 2
    for (int j = 0; j < nb; j++)
        store_tile(y + (size_t)j * ldy, t, hsum4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]), r0,
                   r1);
}

#define Q4_STREAMS 2 /* 8 accumulators: q4_pair's temporaries need the rest */

/* Q4_STREAMS tiles ts[..] against one input row at once, block by block: several
 * weight streams per core (as dense_tiles), each tile's sums as q4_tile's. */
INLINE void q4_tiles(const gp_matrix *w, const size_t *ts, const gp_q8_row *xr, float *y, int r0,
                     int r1) {
    const size_t blocks = gp_matrix_padded_cols(w) / 128;
    const uint8_t *p[Q4_STREAMS];
    const uint16_t *sc16[Q4_STREAMS];
    __m256 acc[Q4_STREAMS][GP_TILE_ROWS][TILE_X];
#pragma GCC unroll 2
    for (int s = 0; s < Q4_STREAMS; s++) {
        p[s] = (const uint8_t *)w->data + ts[s] * blocks * 256;
        sc16[s] = w->gscales + ts[s] * blocks * 16;
#pragma GCC unroll 4
        for (int i = 0; i < GP_TILE_ROWS; i++) acc[s][i][0] = _mm256_setzero_ps();
    }
    for (size_t b = 0; b < blocks; b++)
        for (size_t h = 0; h < 2; h++)
#pragma GCC unroll 2
            for (int s = 0; s < Q4_STREAMS; s++)
#pragma GCC unroll 4
                for (int i = 0; i < GP_TILE_ROWS; i++) {
                    __m256i wv =
                        _mm256_loadu_si256((const void *)(p[s] + b * 256 + i * 64 + h * 32));
                    q4_pair(wv, scales2(sc16[s] + b * 16 + i * 4 + h * 2), xr, 1, b, h, acc[s][i]);
                }
#pragma GCC unroll 2
    for (int s = 0; s < Q4_STREAMS; s++)
        store_tile(y, ts[s], hsum4(acc[s][0][0], acc[s][1][0], acc[s][2][0], acc[s][3][0]), r0, r1);
}

static void matmul_rows_q4(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                           int r0, int r1) {
    const size_t row_bytes = gp_q8_row_bytes(w->cols);
    if (w->cols % GP_Q4_GROUP || row_bytes > GP_Q8_SCRATCH) {
        gp_kernels_scalar.matmul_rows[GP_WEIGHTS_Q4](w, x, n, ldx, y, ldy, r0, r1);
        return;
    }
    _Alignas(64) unsigned char scratch[GP_Q8_SCRATCH];
    gp_q8_row xr[GP_Q8_MAX_ROWS];
    int chunk = (int)(GP_Q8_SCRATCH / row_bytes);
    if (chunk > GP_Q8_MAX_ROWS) chunk = GP_Q8_MAX_ROWS;
    const size_t t0 = (size_t)r0 / GP_TILE_ROWS,
                 t1 = ((size_t)r1 + GP_TILE_ROWS - 1) / GP_TILE_ROWS;
    for (int j0 = 0; j0 < n; j0 += chunk) {
        const int jn = n - j0 < chunk ? n - j0 : chunk;
        for (int j = 0; j < jn; j++) {
            xr[j] = gp_q8_row_at(scratch + (size_t)j * row_bytes, w->cols);
            q8_quantize_row(x + (size_t)(j0 + j) * ldx, w->cols, &xr[j]);
        }
        size_t t = t0;
        if (jn == 1 && gp_decode_streams()) { /* one row: several streams */
            const size_t len = (t1 - t0) / Q4_STREAMS;
            size_t ts[Q4_STREAMS];
            for (size_t k = 0; k < len; k++) {
                for (int s = 0; s < Q4_STREAMS; s++) ts[s] = t0 + (size_t)s * len + k;
                q4_tiles(w, ts, xr, y + (size_t)j0 * ldy, r0, r1);
            }
            t = t0 + Q4_STREAMS * len;
        }
        for (; t < t1; t++)
            for (int j = 0; j < jn; j += TILE_X) {
                float *yj = y + (size_t)(j0 + j) * ldy;
                if (jn - j == 1)
                    q4_tile(w, t, xr + j, 1, yj, ldy, r0, r1);
                else
                    q4_tile(w, t, xr + j, 2, yj, ldy, r0, r1);
            }
    }
}

/* ---- attention ---- */

/* e^x for x <= 0, as in kernels_avx512.c; 2^n is built in the exponent
 * field, so arguments are clamped at -86 (n >= -125 stays normal). */
INLINE __m256 exp_neg(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-86.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f) /* ln 2, high bits */, x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.1219444005469e-4f) /* ln 2 - high */, r);
    /* Taylor series to r^7 / 7!: |r| <= ln2 / 2 leaves a truncation error
     * below 5e-9, under f32 rounding */
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
}

#define HEAD_SET 2 /* query heads per pass over a block (16 registers) */

/* 8 floats at p of which `left` are valid (a masked load/store in the
 * head-dimension tail, plain ones elsewhere). */
INLINE __m256 load8(const float *p, int left) {
    if (left >= 8) return _mm256_loadu_ps(p);
    return _mm256_maskload_ps(
        p, _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

INLINE void store8(float *p, __m256 v, int left) {
    if (left >= 8) {
        _mm256_storeu_ps(p, v);
        return;
    }
    _mm256_maskstore_ps(
        p, _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
        v);
}

/* scores[h·ss + j] = scale · q_h·K_j for one block and nh <= HEAD_SET heads,
 * four keys at a time (each key vector loaded once for all heads). */
INLINE void group_scores(const float *q, int qs, int nh, const float *keys, int count, int D,
                         float scale, float *scores, int ss) {
    int j = 0;
    for (; j + 4 <= count; j += 4) {
        const float *k = keys + (size_t)j * D;
        __m256 a[HEAD_SET][4];
#pragma GCC unroll 2
        for (int h = 0; h < nh; h++)
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) a[h][p] = _mm256_setzero_ps();
        for (int d = 0; d < D; d += 8) {
            __m256 kv[4];
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) kv[p] = load8(k + (size_t)p * D + d, D - d);
#pragma GCC unroll 2
            for (int h = 0; h < nh; h++) {
                __m256 qv = load8(q + (size_t)h * qs + d, D - d);
#pragma GCC unroll 4
                for (int p = 0; p < 4; p++) a[h][p] = _mm256_fmadd_ps(qv, kv[p], a[h][p]);
            }
        }
#pragma GCC unroll 2
        for (int h = 0; h < nh; h++)
            _mm_storeu_ps(
                scores + (size_t)h * ss + j,
                _mm_mul_ps(hsum4(a[h][0], a[h][1], a[h][2], a[h][3]), _mm_set1_ps(scale)));
    }
    for (; j < count; j++)
        for (int h = 0; h < nh; h++) {
            __m256 a = _mm256_setzero_ps();
            for (int d = 0; d < D; d += 8) {
                a = _mm256_fmadd_ps(load8(q + (size_t)h * qs + d, D - d),
                                    load8(keys + (size_t)j * D + d, D - d), a);
            }
            scores[(size_t)h * ss + j] = hsum(a) * scale;
        }
}

/* out_h[D] += Σ_j p_h[j] · V_j for one block and nh <= HEAD_SET heads. */
INLINE void group_values(const float *values, const float *p, int ss, int nh, int count, int D,
                         float *out, int os) {
    int j = 0;
    for (; j + 4 <= count; j += 4) {
        const float *v = values + (size_t)j * D;
        __m256 w[HEAD_SET][4];
#pragma GCC unroll 2
        for (int h = 0; h < nh; h++)
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) w[h][k] = _mm256_set1_ps(p[(size_t)h * ss + j + k]);
        for (int d = 0; d < D; d += 8) {
            __m256 vv[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) vv[k] = load8(v + (size_t)k * D + d, D - d);
#pragma GCC unroll 2
            for (int h = 0; h < nh; h++) {
                float *o = out + (size_t)h * os + d;
                __m256 acc = load8(o, D - d);
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) acc = _mm256_fmadd_ps(w[h][k], vv[k], acc);
                store8(o, acc, D - d);
            }
        }
    }
    for (; j < count; j++)
        for (int h = 0; h < nh; h++) {
            const __m256 wj = _mm256_set1_ps(p[(size_t)h * ss + j]);
            float *o = out + (size_t)h * os;
            for (int d = 0; d < D; d += 8) {
                __m256 acc = _mm256_fmadd_ps(wj, load8(values + (size_t)j * D + d, D - d),
                                             load8(o + d, D - d));
                store8(o + d, acc, D - d);
            }
        }
}

static void block_scores(const float *q, int qs, int n_q, const float *keys, int count, int D,
                         float scale, float *scores, int ss) {
    for (int h = 0; h < n_q; h += HEAD_SET) {
        if (n_q - h == 1)
            group_scores(q + (size_t)h * qs, qs, 1, keys, count, D, scale, scores + (size_t)h * ss,
                         ss);
        else
            group_scores(q + (size_t)h * qs, qs, 2, keys, count, D, scale, scores + (size_t)h * ss,
                         ss);
    }
}

static void block_values(const float *values, const float *p, int ss, int n_q, int count, int D,
                         float *out, int os) {
    for (int h = 0; h < n_q; h += HEAD_SET) {
        if (n_q - h == 1)
            group_values(values, p + (size_t)h * ss, ss, 1, count, D, out + (size_t)h * os, os);
        else
            group_values(values, p + (size_t)h * ss, ss, 2, count, D, out + (size_t)h * os, os);
    }
}

static float softmax_exp(float *scores, int n) {
    float mx = -INFINITY;
    int j = 0;
    if (n >= 8) {
        __m256 vmax = _mm256_loadu_ps(scores);
        for (j = 8; j + 8 <= n; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(scores + j));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        mx = _mm_cvtss_f32(m4);
    }
    for (; j < n; j++) mx = scores[j] > mx ? scores[j] : mx;
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256 sum = _mm256_setzero_ps();
    for (j = 0; j + 8 <= n; j += 8) {
        __m256 e = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(scores + j), vmx));
        _mm256_storeu_ps(scores + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    float total = hsum(sum);
    if (j < n) { /* tail through a padded buffer so every lane uses the same formula */
        float t[8] = {0};
        memcpy(t, scores + j, (size_t)(n - j) * sizeof(float));
        _mm256_storeu_ps(t, exp_neg(_mm256_sub_ps(_mm256_loadu_ps(t), vmx)));
        for (int i = 0; i < n - j; i++) {
            scores[j + i] = t[i];
            total += t[i];
        }
    }
    return total;
}

/* Up to GROUP_MAX heads per pass over the cache (more are done in turns). */
#define GROUP_MAX 16

/* Ask for the next block's run of keys or values while this one is
 * computed (see kernels_avx512.c). */
static void prefetch_run(const float *p, int count, int D) {
    const char *c = (const char *)p, *end = (const char *)(p + (size_t)count * D);
    for (; c < end; c += 64) _mm_prefetch(c, _MM_HINT_T1);
}

static void attend_group(const gp_kv_pool *kv, const gp_kv_seq *seq, int layer, int kv_head,
                         const float *q, int q_stride, int n_q, int n_positions, float scale,
                         float *out, int out_stride, float *scores) {
    const int D = kv->head_dim, bs = kv->block_size, n = n_positions;
    for (int h0 = 0; h0 < n_q; h0 += GROUP_MAX) {
        const int nh = n_q - h0 < GROUP_MAX ? n_q - h0 : GROUP_MAX;
        const float *qg = q + (size_t)h0 * q_stride;
        float *og = out + (size_t)h0 * out_stride, *sg = scores + (size_t)h0 * n;
        for (int start = 0; start < n; start += bs) {
            int count = n - start < bs ? n - start : bs;
            if (start + bs < n)
                prefetch_run(gp_kv_at(kv, seq, layer, 0, kv_head, start + bs),
                             n - start - bs < bs ? n - start - bs : bs, D);
            block_scores(qg, q_stride, nh, gp_kv_at(kv, seq, layer, 0, kv_head, start), count, D,
                         scale, sg + start, n);
        }
        float inv[GROUP_MAX];
        for (int h = 0; h < nh; h++) {
            inv[h] = 1.0f / softmax_exp(sg + (size_t)h * n, n);
            memset(og + (size_t)h * out_stride, 0, (size_t)D * sizeof(float));
        }
        for (int start = 0; start < n; start += bs) {
            int count = n - start < bs ? n - start : bs;
            if (start + bs < n)
                prefetch_run(gp_kv_at(kv, seq, layer, 1, kv_head, start + bs),
                             n - start - bs < bs ? n - start - bs : bs, D);
            block_values(gp_kv_at(kv, seq, layer, 1, kv_head, start), sg + start, n, nh, count, D,
                         og, out_stride);
        }
        for (int h = 0; h < nh; h++)
            for (int d = 0; d < D; d++) og[(size_t)h * out_stride + d] *= inv[h];
    }
}

static void attend(const gp_kv_pool *kv, const gp_kv_seq *seq, int layer, int kv_head,
                   const float *q, int n_positions, float scale, float *out, float *scores) {
    attend_group(kv, seq, layer, kv_head, q, 0, 1, n_positions, scale, out, 0, scores);
}

const gp_kernel_table gp_kernels_avx2 = {
    .name = "avx2",
    .prefill = "cache-blocked, batches of 3+ rows: 4 weight rows x 3 input rows of f32 FMA "
               "accumulators, 512-column blocks reused from L1, next block prefetched",
    .matmul_rows = {matmul_rows_f32, matmul_rows_bf16, matmul_rows_int8, matmul_rows_q4},
    .attend = attend,
    .attend_group = attend_group,
};
