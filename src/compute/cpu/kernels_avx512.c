/* kernels_avx512.c — the AVX-512 kernel table (F/BW/DQ/VL with VNNI; built
 * with those flags because of the file name, called only after matrix.c's
 * CPU check).
 *
 * Matrix products walk the tiled layout of matrix.h: a tile of 4 weight rows
 * is one sequential stream, read once; each chunk is widened (or unpacked)
 * once and multiplied into up to 4 input rows held in registers, with one
 * accumulator per (weight row, input row). An output's arithmetic is thus
 * the same for every batch size and every split of rows over threads, so a
 * stream's result does not depend on what it is batched with. Batches of 4
 * or more rows (prefill) run a cache-blocked variant with the same
 * arithmetic: 8 weight rows × 3 input rows of accumulators, the weights of a
 * 512-column block reused from L1 by every group of input rows, the next
 * block prefetched while the first group computes. Where the load-time
 * timing chose it (gp_prefill_widen: faster where widening competes with
 * the FMAs for ports, slower on Zen 4), a bf16 block is widened to f32 once
 * for all groups instead of once per group — bitwise the same products.
 *
 * f32 / bf16 / int8 widen the weights to f32 (bf16 by a 16-bit shift, int8
 * by sign extension and conversion) and multiply by the exact f32
 * activations. q4 rounds each input row to int8 per group of 32 (see
 * kernels.h for the bound on that error) and multiplies nibbles by those
 * bytes with VPDPBUSD; the per-group correction for the +8 nibble offset is
 * precomputed with the activations.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "compute/attention.h"
#include "compute/bf16_packed.h"
#include "compute/cpu/kernels_q8.h"
#include "compute/kernels.h"

#define INLINE static inline __attribute__((always_inline))

#define TILE_X 4    /* input rows per tile (dense formats) */
#define TILE_X_Q4 2 /* input rows per tile (q4: more live vectors per row) */
#define X_CHUNK_BYTES (256 * 1024)
#define DECODE_STREAMS 4 /* weight streams of the row-by-row kernels for one input row */

/* K_BF16P: a bf16 matrix read through its 12-bit packed copy (bf16_packed.h):
 * the same weights, so the same sums as K_BF16. */
enum { K_F32, K_BF16, K_I8, K_BF16P };

/* {Σa, Σb, Σc, Σd} of four vectors; each sum uses the same order. */
INLINE __m128 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
    __m256 a8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m256 b8 = _mm256_add_ps(_mm512_castps512_ps256(b), _mm512_extractf32x8_ps(b, 1));
    __m256 c8 = _mm256_add_ps(_mm512_castps512_ps256(c), _mm512_extractf32x8_ps(c, 1));
    __m256 d8 = _mm256_add_ps(_mm512_castps512_ps256(d), _mm512_extractf32x8_ps(d, 1));
    __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a8, b8), _mm256_hadd_ps(c8, d8));
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
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

INLINE size_t elem_size(int kind) { return kind == K_F32 ? 4 : kind == K_BF16 ? 2 : 1; }

/* The 16 weights of one row's chunk, as f32. */
INLINE __m512 load_w(int kind, const unsigned char *p) {
    if (kind == K_F32) return _mm512_loadu_ps(p);
    if (kind == K_BF16)
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)p)), 16));
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const void *)p)));
}

/* The 4 rows × 16 weights of chunk k of a packed tile, as f32: the codes
 * become exponents through a 16-entry table (the chunk's base minus the
 * code; code 15: exponent 0), each byte of (mantissa << 1 | sign) meets its
 * exponent in a 16-bit word by a byte interleave, a rotate by one puts the
 * sign on top (the bf16 value), and the even and odd words widen to f32 by a
 * shift and a mask — which is the order gp_bf16_packed_byte_of stores. */
INLINE void packed_rows(const gp_bf16_packed *pk, const unsigned char *tile, size_t k,
                        __m512 wv[GP_TILE_ROWS]) {
    const int base = tile[k];
    const unsigned char *rec = tile + pk->chunks + k * GP_PACKED_RECORD;
    if (__builtin_expect(base != 0, 1)) {
        const __m512i iota = _mm512_broadcast_i32x4(
            _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0));
        const __m512i table =
            _mm512_maskz_sub_epi8(0x7FFF7FFF7FFF7FFFull, _mm512_set1_epi8((char)base), iota);
        const __m256i nibbles = _mm256_loadu_si256((const void *)(rec + 64));
        const __m256i low4 = _mm256_set1_epi8(15);
        const __m512i codes =
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(nibbles, low4)),
                               _mm256_and_si256(_mm256_srli_epi16(nibbles, 4), low4), 1);
        const __m512i e = _mm512_shuffle_epi8(table, codes);
        const __m512i sm = _mm512_loadu_si512((const void *)rec);
        const __m512i a = _mm512_unpacklo_epi8(sm, e), b = _mm512_unpackhi_epi8(sm, e);
        const __m512i av = _mm512_or_si512(_mm512_srli_epi16(a, 1), _mm512_slli_epi16(a, 15));
        const __m512i bv = _mm512_or_si512(_mm512_srli_epi16(b, 1), _mm512_slli_epi16(b, 15));
        const __m512i high = _mm512_set1_epi32((int)0xFFFF0000u);
        wv[0] = _mm512_castsi512_ps(_mm512_slli_epi32(av, 16));
        wv[1] = _mm512_castsi512_ps(_mm512_and_si512(av, high));
        wv[2] = _mm512_castsi512_ps(_mm512_slli_epi32(bv, 16));
        wv[3] = _mm512_castsi512_ps(_mm512_and_si512(bv, high));
    } else { /* kept whole */
        uint32_t index;
        memcpy(&index, rec, sizeof index);
        const unsigned char *q = (const unsigned char *)(pk->raw + (size_t)index * 64);
#pragma GCC unroll 4
        for (int i = 0; i < GP_TILE_ROWS; i++) wv[i] = load_w(K_BF16, q + (size_t)i * 32);
    }
}

/* A packed tile's chunk k against input rows x[0 .. nb) (as dense_chunk). */
INLINE void packed_chunk(const gp_bf16_packed *pk, const unsigned char *tile, size_t k,
                         const float *x, int ldx, int nb, size_t c, __mmask16 m, int masked,
                         __m512 acc[GP_TILE_ROWS][TILE_X]) {
    __m512 xv[TILE_X], wv[GP_TILE_ROWS];
#pragma GCC unroll 4
    for (int j = 0; j < nb; j++)
        xv[j] = masked ? _mm512_maskz_loadu_ps(m, x + (size_t)j * ldx + c)
                       : _mm512_loadu_ps(x + (size_t)j * ldx + c);
    packed_rows(pk, tile, k, wv);
#pragma GCC unroll 4
    for (int i = 0; i < GP_TILE_ROWS; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++) acc[i][j] = _mm512_fmadd_ps(wv[i], xv[j], acc[i][j]);
}

/* One chunk of a tile (16 columns from c; p its 4 rows × 16 weights):
 * acc[i][j] += W[i][c..] · x[j][c..]. `m` masks x past the last column
 * (the weights there are zero). */
INLINE void dense_chunk(int kind, const unsigned char *p, const float *x, int ldx, int nb, size_t c,
                        __mmask16 m, int masked, __m512 acc[GP_TILE_ROWS][TILE_X]) {
    const size_t esz = elem_size(kind);
    __m512 xv[TILE_X];
#pragma GCC unroll 4
    for (int j = 0; j < nb; j++)
        xv[j] = masked ? _mm512_maskz_loadu_ps(m, x + (size_t)j * ldx + c)
                       : _mm512_loadu_ps(x + (size_t)j * ldx + c);
#pragma GCC unroll 4
    for (int i = 0; i < GP_TILE_ROWS; i++) {
        __m512 wv = load_w(kind, p + (size_t)i * 16 * esz);
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++) acc[i][j] = _mm512_fmadd_ps(wv, xv[j], acc[i][j]);
    }
}

/* S packed tiles ts[0 .. S) against input rows x[0 .. nb) at once, as
 * dense_tiles below reads S tiles of the data: each tile's FMAs in
 * dense_chunk's order, so the sums are those of the bf16 data. */
INLINE void packed_tiles(const gp_matrix *w, int S, const size_t *ts, const float *x, int ldx,
                         int nb, float *y, int ldy, int r0, int r1, size_t pf) {
    const gp_bf16_packed *pk = w->packed;
    const size_t cols = (size_t)w->cols;
    const unsigned char *tile[DECODE_STREAMS];
    __m512 acc[DECODE_STREAMS][GP_TILE_ROWS][TILE_X];
#pragma GCC unroll 4
    for (int s = 0; s < S; s++) {
        tile[s] = pk->tiles + ts[s] * pk->tile_bytes;
#pragma GCC unroll 4
        for (int i = 0; i < GP_TILE_ROWS; i++)
#pragma GCC unroll 4
            for (int j = 0; j < nb; j++) acc[s][i][j] = _mm512_setzero_ps();
    }
    size_t c = 0, k = 0;
    for (; c + 16 <= cols; c += 16, k++) {
        if (pf)
#pragma GCC unroll 4
            for (int s = 0; s < S; s++) {
                const char *rec = (const char *)tile[s] + pk->chunks + k * GP_PACKED_RECORD;
                _mm_prefetch(rec + pf, _MM_HINT_T0);
                _mm_prefetch(rec + pf + 64, _MM_HINT_T0);
            }
#pragma GCC unroll 4
        for (int s = 0; s < S; s++) packed_chunk(pk, tile[s], k, x, ldx, nb, c, 0, 0, acc[s]);
    }
#pragma GCC unroll 4
    for (int s = 0; s < S; s++) {
        if (c < cols)
            packed_chunk(pk, tile[s], k, x, ldx, nb, c, (__mmask16)((1u << (cols - c)) - 1), 1,
                         acc[s]);
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++)
            store_tile(y + (size_t)j * ldy, ts[s],
                       hsum4(acc[s][0][j], acc[s][1][j], acc[s][2][j], acc[s][3][j]), r0, r1);
    }
}

/* Tile t against input rows x[0 .. nb): y[j][4t + i] for rows in [r0, r1). */
INLINE void dense_tile(int kind, const gp_matrix *w, size_t t, const float *x, int ldx, int nb,
                       float *y, int ldy, int r0, int r1, size_t pf) {
    if (kind == K_BF16P) { /* one packed tile: packed_tiles' single stream */
        packed_tiles(w, 1, &t, x, ldx, nb, y, ldy, r0, r1, pf);
        return;
    }
    const size_t cols = (size_t)w->cols, esz = elem_size(kind), step = GP_TILE_ROWS * 16 * esz;
    const unsigned char *p =
        (const unsigned char *)w->data + t * GP_TILE_ROWS * gp_matrix_padded_cols(w) * esz;
    __m512 acc[GP_TILE_ROWS][TILE_X];
#pragma GCC unroll 4
    for (int i = 0; i < GP_TILE_ROWS; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++) acc[i][j] = _mm512_setzero_ps();
    size_t c = 0;
    for (; c + 16 <= cols; c += 16, p += step) {
        if (pf) /* the weight stream `pf` bytes ahead (across tiles: they are contiguous) */
            for (size_t b = 0; b < step; b += 64)
                _mm_prefetch((const char *)p + pf + b, _MM_HINT_T0);
        dense_chunk(kind, p, x, ldx, nb, c, 0, 0, acc);
    }
    if (c < cols) dense_chunk(kind, p, x, ldx, nb, c, (__mmask16)((1u << (cols - c)) - 1), 1, acc);
    const __m128 sc = kind == K_I8 ? _mm_loadu_ps(w->scales + t * GP_TILE_ROWS) : _mm_set1_ps(1);
#pragma GCC unroll 4
    for (int j = 0; j < nb; j++) {
        __m128 s = hsum4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]);
        if (kind == K_I8) s = _mm_mul_ps(s, sc);
        store_tile(y + (size_t)j * ldy, t, s, r0, r1);
    }
}

/* S tiles ts[0 .. S) against input rows x[0 .. nb) at once, chunk by chunk: S
 * weight streams from S places of the matrix. Each tile keeps its own
 * accumulators and sees the FMAs of dense_tile in the same order, so the sums
 * are bitwise those of S calls of dense_tile. Why: a core reading one
 * sequential stream is held to what the L2 streamer prefetches for one page
 * at a time; S streams keep S of them running (Xeon, 2 cores: a plain read of
 * one stream per core 15 GB/s, of four 23-25 GB/s). */
INLINE void dense_tiles(int kind, const gp_matrix *w, int S, const size_t *ts, const float *x,
                        int ldx, int nb, float *y, int ldy, int r0, int r1, size_t pf) {
    if (kind == K_BF16P) {
        packed_tiles(w, S, ts, x, ldx, nb, y, ldy, r0, r1, pf);
        return;
    }
    const size_t cols = (size_t)w->cols, esz = elem_size(kind), step = GP_TILE_ROWS * 16 * esz;
    const size_t tile_bytes = GP_TILE_ROWS * gp_matrix_padded_cols(w) * esz;
    const unsigned char *p[DECODE_STREAMS];
    __m512 acc[DECODE_STREAMS][GP_TILE_ROWS][TILE_X];
#pragma GCC unroll 4
    for (int s = 0; s < S; s++) {
        p[s] = (const unsigned char *)w->data + ts[s] * tile_bytes;
#pragma GCC unroll 4
        for (int i = 0; i < GP_TILE_ROWS; i++)
#pragma GCC unroll 4
            for (int j = 0; j < nb; j++) acc[s][i][j] = _mm512_setzero_ps();
    }
    size_t c = 0, off = 0;
    for (; c + 16 <= cols; c += 16, off += step) {
        if (pf)
#pragma GCC unroll 4
            for (int s = 0; s < S; s++)
                for (size_t b = 0; b < step; b += 64)
                    _mm_prefetch((const char *)p[s] + off + pf + b, _MM_HINT_T0);
        __m512 xv[TILE_X];
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++) xv[j] = _mm512_loadu_ps(x + (size_t)j * ldx + c);
#pragma GCC unroll 4
        for (int s = 0; s < S; s++)
#pragma GCC unroll 4
            for (int i = 0; i < GP_TILE_ROWS; i++) {
                __m512 wv = load_w(kind, p[s] + off + (size_t)i * 16 * esz);
#pragma GCC unroll 4
                for (int j = 0; j < nb; j++)
                    acc[s][i][j] = _mm512_fmadd_ps(wv, xv[j], acc[s][i][j]);
            }
    }
#pragma GCC unroll 4
    for (int s = 0; s < S; s++) {
        if (c < cols)
            dense_chunk(kind, p[s] + off, x, ldx, nb, c, (__mmask16)((1u << (cols - c)) - 1), 1,
                        acc[s]);
        const __m128 sc =
            kind == K_I8 ? _mm_loadu_ps(w->scales + ts[s] * GP_TILE_ROWS) : _mm_set1_ps(1);
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++) {
            __m128 v = hsum4(acc[s][0][j], acc[s][1][j], acc[s][2][j], acc[s][3][j]);
            if (kind == K_I8) v = _mm_mul_ps(v, sc);
            store_tile(y + (size_t)j * ldy, ts[s], v, r0, r1);
        }
    }
}

/* Tiles [t0, t1) against nb (1-3) input rows as DECODE_STREAMS - nb + 1 streams
 * (4 for one row: 16 accumulators; 2 for three: 24), each a contiguous part of
 * the range; the tiles the parts leave over go one at a time. */
INLINE void dense_streams(int kind, const gp_matrix *w, size_t t0, size_t t1, const float *x,
                          int ldx, int nb, float *y, int ldy, int r0, int r1, size_t pf) {
    const int S = nb == 1 ? DECODE_STREAMS : nb == 2 ? 3 : 2;
    const size_t len = (t1 - t0) / (size_t)S;
    size_t ts[DECODE_STREAMS];
    for (size_t k = 0; k < len; k++) {
        for (int s = 0; s < S; s++) ts[s] = t0 + (size_t)s * len + k;
        dense_tiles(kind, w, S, ts, x, ldx, nb, y, ldy, r0, r1, pf);
    }
    for (size_t t = t0 + (size_t)S * len; t < t1; t++)
        dense_tile(kind, w, t, x, ldx, nb, y, ldy, r0, r1, pf);
}

INLINE void dense_rows(int kind, const gp_matrix *w, const float *x, int n, int ldx, float *y,
                       int ldy, int r0, int r1) {
    int chunk = (int)(X_CHUNK_BYTES / ((size_t)w->cols * sizeof(float) + 1)) & ~(TILE_X - 1);
    if (chunk < TILE_X) chunk = TILE_X;
    const size_t pf = gp_decode_prefetch_bytes();
    const size_t t0 = (size_t)r0 / GP_TILE_ROWS,
                 t1 = ((size_t)r1 + GP_TILE_ROWS - 1) / GP_TILE_ROWS;
    if (n < TILE_X && gp_decode_streams()) {
        switch (n) {
        case 1: dense_streams(kind, w, t0, t1, x, ldx, 1, y, ldy, r0, r1, pf); return;
        case 2: dense_streams(kind, w, t0, t1, x, ldx, 2, y, ldy, r0, r1, pf); return;
        default: dense_streams(kind, w, t0, t1, x, ldx, 3, y, ldy, r0, r1, pf); return;
        }
    }
    for (int j0 = 0; j0 < n; j0 += chunk) {
        const int j1 = n - j0 < chunk ? n : j0 + chunk;
        for (size_t t = t0; t < t1; t++)
            for (int j = j0; j < j1; j += TILE_X) {
                const float *xj = x + (size_t)j * ldx;
                float *yj = y + (size_t)j * ldy;
                switch (j1 - j) {
                case 1: dense_tile(kind, w, t, xj, ldx, 1, yj, ldy, r0, r1, pf); break;
                case 2: dense_tile(kind, w, t, xj, ldx, 2, yj, ldy, r0, r1, pf); break;
                case 3: dense_tile(kind, w, t, xj, ldx, 3, yj, ldy, r0, r1, pf); break;
                default: dense_tile(kind, w, t, xj, ldx, 4, yj, ldy, r0, r1, pf); break;
                }
            }
    }
}

/* ---- f32 / bf16 / int8, batches of rows (prefill) ---- */

/* Batches of at least BLOCK_MIN_ROWS input rows go through a cache-blocked
 * variant with the same arithmetic: BLOCK_TILES tiles (8 weight rows) ×
 * BLOCK_X input rows of accumulators in registers, the columns walked in
 * blocks of BLOCK_COLS whose weights stay in L1 while every group of input
 * rows passes over them. Between column blocks each group's accumulators are
 * parked in memory and reloaded unchanged, so every accumulator sees the
 * same sequence of FMAs as in dense_tile: the result is bitwise the one of
 * the row-by-row kernel, whatever the batch. */
#define BLOCK_MIN_ROWS 4
#define BLOCK_TILES 2
#define BLOCK_X 3
#define BLOCK_COLS 512
#define BLOCK_GROUPS 32 /* input-row groups per pass (parked accumulators: 48 KiB) */

typedef struct block_acc {
    __m512 v[BLOCK_TILES * GP_TILE_ROWS][BLOCK_X];
} block_acc;

/* The finished sums of tiles t .. t + nt for input rows y[0 .. nb). */
INLINE void block_store(int kind, const gp_matrix *w, size_t t, int nt, int nb,
                        __m512 a[BLOCK_TILES * GP_TILE_ROWS][BLOCK_X], float *y, int ldy, int r0,
                        int r1) {
#pragma GCC unroll 3
    for (int k = 0; k < nt; k++) {
        const __m128 sc =
            kind == K_I8 ? _mm_loadu_ps(w->scales + (t + k) * GP_TILE_ROWS) : _mm_set1_ps(1);
#pragma GCC unroll 8
        for (int j = 0; j < nb; j++) {
            const int i = k * GP_TILE_ROWS;
            __m128 s = hsum4(a[i][j], a[i + 1][j], a[i + 2][j], a[i + 3][j]);
            if (kind == K_I8) s = _mm_mul_ps(s, sc);
            store_tile(y + (size_t)j * ldy, t + k, s, r0, r1);
        }
    }
}

/* Columns [c0, c1) of tiles t .. t + nt against input rows x[0 .. nb):
 * the accumulators start at zero (c0 == 0) or from acc, and are parked in
 * acc again, or summed into y when c1 is the last column. The weights are
 * read in format `kind` from p (tile t at column c0; tile t + 1 tile_bytes
 * further): the matrix itself, or a block of it already widened to f32. */
INLINE void block_cols(int kind, const gp_matrix *w, size_t t, int nt, const unsigned char *p,
                       size_t tile_bytes, const float *x, int ldx, int nb, size_t c0, size_t c1,
                       block_acc *acc, float *y, int ldy, int r0, int r1, const unsigned char *pf) {
    const size_t cols = (size_t)w->cols, esz = elem_size(kind), step = GP_TILE_ROWS * 16 * esz;
    const size_t pf_tile_bytes = GP_TILE_ROWS * gp_matrix_padded_cols(w) * elem_size(kind);
    __m512 a[BLOCK_TILES * GP_TILE_ROWS][BLOCK_X];
#pragma GCC unroll 12
    for (int i = 0; i < nt * GP_TILE_ROWS; i++)
#pragma GCC unroll 8
        for (int j = 0; j < nb; j++) a[i][j] = c0 ? acc->v[i][j] : _mm512_setzero_ps();
    const float *xr[BLOCK_X];
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++) xr[j] = x + (size_t)j * ldx;
    size_t c = c0;
    for (; c + 16 <= c1; c += 16, p += step) {
        if (pf) { /* the next block's weights, as many lines per chunk as this one reads */
#pragma GCC unroll 12
            for (int i = 0; i < nt; i++)
#pragma GCC unroll 4
                for (size_t b = 0; b < step; b += 64)
                    _mm_prefetch((const char *)pf + i * pf_tile_bytes + b, _MM_HINT_T0);
            pf += step;
        }
        __m512 xv[BLOCK_X];
#pragma GCC unroll 8
        for (int j = 0; j < nb; j++) xv[j] = _mm512_loadu_ps(xr[j] + c);
#pragma GCC unroll 12
        for (int i = 0; i < nt * GP_TILE_ROWS; i++) {
            __m512 wv = load_w(kind, p + (size_t)(i / GP_TILE_ROWS) * tile_bytes +
                                         (size_t)(i % GP_TILE_ROWS) * 16 * esz);
#pragma GCC unroll 8
            for (int j = 0; j < nb; j++) a[i][j] = _mm512_fmadd_ps(wv, xv[j], a[i][j]);
        }
    }
    if (c < c1) { /* the last, partial chunk (weights past cols are zero) */
        const __mmask16 m = (__mmask16)((1u << (cols - c)) - 1);
        __m512 xv[BLOCK_X];
#pragma GCC unroll 8
        for (int j = 0; j < nb; j++) xv[j] = _mm512_maskz_loadu_ps(m, xr[j] + c);
#pragma GCC unroll 12
        for (int i = 0; i < nt * GP_TILE_ROWS; i++) {
            __m512 wv = load_w(kind, p + (size_t)(i / GP_TILE_ROWS) * tile_bytes +
                                         (size_t)(i % GP_TILE_ROWS) * 16 * esz);
#pragma GCC unroll 8
            for (int j = 0; j < nb; j++) a[i][j] = _mm512_fmadd_ps(wv, xv[j], a[i][j]);
        }
    }
    if (c1 == cols) {
        block_store(kind, w, t, nt, nb, a, y, ldy, r0, r1);
        return;
    }
#pragma GCC unroll 12
    for (int i = 0; i < nt * GP_TILE_ROWS; i++)
#pragma GCC unroll 8
        for (int j = 0; j < nb; j++) acc->v[i][j] = a[i][j];
}

/* block_cols specialised for each format, tile count and row count (out of
 * line: inlined into the driver the accumulators spill to the stack). */
typedef void (*block_fn)(const gp_matrix *w, size_t t, const unsigned char *p, size_t tile_bytes,
                         const float *x, int ldx, size_t c0, size_t c1, block_acc *acc, float *y,
                         int ldy, int r0, int r1, const unsigned char *pf);
#define BLOCK_FN(KIND, NT, NB)                                                                     \
    static __attribute__((noinline)) void block_##KIND##_##NT##_##NB(                              \
        const gp_matrix *w, size_t t, const unsigned char *p, size_t tile_bytes, const float *x,   \
        int ldx, size_t c0, size_t c1, block_acc *acc, float *y, int ldy, int r0, int r1,          \
        const unsigned char *pf) {                                                                 \
        block_cols(KIND, w, t, NT, p, tile_bytes, x, ldx, NB, c0, c1, acc, y, ldy, r0, r1, pf);    \
    }
#define BLOCK_FNS(KIND)                                                                            \
    BLOCK_FN(KIND, 1, 1)                                                                           \
    BLOCK_FN(KIND, 1, 2)                                                                           \
    BLOCK_FN(KIND, 1, 3)                                                                           \
    BLOCK_FN(KIND, 2, 1)                                                                           \
    BLOCK_FN(KIND, 2, 2)                                                                           \
    BLOCK_FN(KIND, 2, 3)
BLOCK_FNS(K_F32)
BLOCK_FNS(K_BF16)
BLOCK_FNS(K_I8)
#define BLOCK_ROW(KIND)                                                                            \
    {                                                                                              \
        {block_##KIND##_1_1, block_##KIND##_1_2, block_##KIND##_1_3}, {                            \
            block_##KIND##_2_1, block_##KIND##_2_2, block_##KIND##_2_3                             \
        }                                                                                          \
    }
static const block_fn block_fns[3][BLOCK_TILES][BLOCK_X] = {BLOCK_ROW(K_F32), BLOCK_ROW(K_BF16),
                                                            BLOCK_ROW(K_I8)};

/* bf16 blocks widened to f32 once per pass, for every group of input rows
 * (the widening is exact, so the products are those of load_w's). */
static _Thread_local float widened[BLOCK_TILES * (BLOCK_COLS / 16) * GP_TILE_ROWS * 16]
    __attribute__((aligned(64)));

/* Tiles t .. t + nt of bf16 matrix data, columns [c0, c1), into `widened` in
 * the same chunk order (tile k at k · chunks · 64 floats), prefetching pf
 * (the next block) as block_cols would. */
static void widen_block(const unsigned char *data, size_t t, int nt, size_t tile_bytes, size_t c0,
                        size_t c1, const unsigned char *pf) {
    const size_t step = GP_TILE_ROWS * 16 * 2, chunks = (c1 - c0 + 15) / 16;
    for (int k = 0; k < nt; k++) {
        const unsigned char *src = data + (t + (size_t)k) * tile_bytes + c0 / 16 * step;
        float *dst = widened + (size_t)k * chunks * GP_TILE_ROWS * 16;
        for (size_t ch = 0; ch < chunks; ch++, src += step, dst += GP_TILE_ROWS * 16) {
            if (pf)
                for (size_t b = 0; b < step; b += 64)
                    _mm_prefetch((const char *)pf + k * tile_bytes + ch * step + b, _MM_HINT_T0);
#pragma GCC unroll 4
            for (int i = 0; i < GP_TILE_ROWS; i++)
                _mm512_store_ps(dst + i * 16, load_w(K_BF16, src + (size_t)i * 32));
        }
    }
}

static void block_rows(int kind, const gp_matrix *w, const float *x, int n, int ldx, float *y,
                       int ldy, int r0, int r1) {
    block_acc acc[BLOCK_GROUPS];
    const size_t cols = (size_t)w->cols, t0 = (size_t)r0 / GP_TILE_ROWS,
                 t1 = ((size_t)r1 + GP_TILE_ROWS - 1) / GP_TILE_ROWS;
    const size_t esz = elem_size(kind), step = GP_TILE_ROWS * 16 * esz;
    const size_t tile_bytes = GP_TILE_ROWS * gp_matrix_padded_cols(w) * esz;
    const unsigned char *data = w->data;
    /* bf16 is widened once per block for all groups where the load-time
     * timing chose it (gp_prefill_widen); f32 and int8 are read as stored
     * (int8 keeps its per-row scales for the store) */
    const bool widen = kind == K_BF16 && gp_prefill_widen();
    const int run_kind = widen ? K_F32 : kind;
    for (int j0 = 0; j0 < n; j0 += BLOCK_GROUPS * BLOCK_X) {
        const int j1 = n - j0 < BLOCK_GROUPS * BLOCK_X ? n : j0 + BLOCK_GROUPS * BLOCK_X;
        for (size_t t = t0; t < t1; t += BLOCK_TILES) {
            const int nt = t1 - t < BLOCK_TILES ? (int)(t1 - t) : BLOCK_TILES;
            for (size_t c0 = 0; c0 < cols; c0 += BLOCK_COLS) {
                const size_t c1 = cols - c0 < BLOCK_COLS ? cols : c0 + BLOCK_COLS;
                /* the first group prefetches the next block: the rest of these tiles,
                 * or the start of the next ones */
                const unsigned char *pf = c1 < cols     ? data + t * tile_bytes + c1 / 16 * step
                                          : t + nt < t1 ? data + (t + nt) * tile_bytes
                                                        : NULL;
                const unsigned char *p = data + t * tile_bytes + c0 / 16 * step;
                size_t p_tile_bytes = tile_bytes;
                if (widen) {
                    widen_block(data, t, nt, tile_bytes, c0, c1, pf);
                    p = (const unsigned char *)widened;
                    p_tile_bytes = (c1 - c0 + 15) / 16 * GP_TILE_ROWS * 16 * sizeof(float);
                    pf = NULL;
                }
                for (int j = j0, g = 0, nb; j < j1; j += nb, g++) {
                    /* 3 rows at a time; 4 left go as 2 + 2 rather than 3 + 1 */
                    nb = j1 - j == 4 ? 2 : j1 - j < BLOCK_X ? j1 - j : BLOCK_X;
                    block_fns[run_kind][nt - 1][nb - 1](w, t, p, p_tile_bytes, x + (size_t)j * ldx,
                                                        ldx, c0, c1, &acc[g], y + (size_t)j * ldy,
                                                        ldy, r0, r1, g ? NULL : pf);
                }
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

static void matmul_rows_bf16(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                             int r0, int r1) {
    if (n >= BLOCK_MIN_ROWS)
        block_rows(K_BF16, w, x, n, ldx, y, ldy, r0, r1);
    else if (gp_bf16_packed_reads(w))
        dense_rows(K_BF16P, w, x, n, ldx, y, ldy, r0, r1);
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

/* Round one input row to int8 per group of 32 into the gp_q8_row layout
 * (kernels_q8.h). */
static void q8_quantize_row(const float *x, int cols, const gp_q8_row *out) {
    const int groups = cols / GP_Q4_GROUP, padded = (groups + 3) & ~3;
    const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
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
        __m512 v0 = _mm512_loadu_ps(x + g * GP_Q4_GROUP);
        __m512 v1 = _mm512_loadu_ps(x + g * GP_Q4_GROUP + 16);
        float amax = _mm512_reduce_max_ps(
            _mm512_max_ps(_mm512_and_ps(v0, abs_mask), _mm512_and_ps(v1, abs_mask)));
        float s = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
        __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, _mm512_set1_ps(inv)));
        __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, _mm512_set1_ps(inv)));
        _mm_storeu_si128((void *)lo, _mm512_cvtsepi32_epi8(i0));
        _mm_storeu_si128((void *)(lo + 64), _mm512_cvtsepi32_epi8(i1));
        corr[0] = -8 * _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
        corr[1] = corr[2] = corr[3] = 0;
        xs[0] = xs[1] = xs[2] = xs[3] = s;
    }
}

/* Block b of a tile: p holds the 4 rows' 64 nibble bytes (256 bytes), sc16
 * their 16 f16 scales (row-major 4 × 4). */
INLINE void q4_block(const uint8_t *p, const uint16_t *sc16, const gp_q8_row *xr, int nb, size_t b,
                     __m512 acc[GP_TILE_ROWS][TILE_X]) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512i xl[TILE_X_Q4], xh[TILE_X_Q4], xc[TILE_X_Q4];
    __m512 xs[TILE_X_Q4];
#pragma GCC unroll 4
    for (int j = 0; j < nb; j++) {
        xl[j] = _mm512_load_si512(xr[j].q + b * 128);
        xh[j] = _mm512_load_si512(xr[j].q + b * 128 + 64);
        xc[j] = _mm512_load_si512(xr[j].corr + b * 16);
        xs[j] = _mm512_load_ps(xr[j].xs + b * 16);
    }
    const __m512 scales = _mm512_cvtph_ps(_mm256_loadu_si256((const void *)sc16));
#pragma GCC unroll 4
    for (int i = 0; i < GP_TILE_ROWS; i++) {
        /* lanes 4g..4g+3 get row i's scale of group g */
        const __m512i spread = _mm512_set_epi32(
            4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2,
            4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i, 4 * i, 4 * i, 4 * i);
        const __m512 sc = _mm512_permutexvar_ps(spread, scales);
        const __m512i wv = _mm512_loadu_si512(p + i * 64);
        const __m512i lo = _mm512_and_si512(wv, low4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(wv, 4), low4);
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++) {
            /* lanes of group g: Σ nibble·x − 8 Σ x, then × (w scale · x scale) */
            __m512i d = _mm512_dpbusd_epi32(xc[j], lo, xl[j]);
            d = _mm512_dpbusd_epi32(d, hi, xh[j]);
            acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(sc, xs[j]), acc[i][j]);
        }
    }
}

INLINE void q4_tile(const gp_matrix *w, size_t t, const gp_q8_row *xr, int nb, float *y, int ldy,
                    int r0, int r1) {
    const size_t blocks = gp_matrix_padded_cols(w) / 128;
    const uint8_t *p = (const uint8_t *)w->data + t * blocks * 256;
    const uint16_t *sc16 = w->gscales + t * blocks * 16;
    __m512 acc[GP_TILE_ROWS][TILE_X];
#pragma GCC unroll 4
    for (int i = 0; i < GP_TILE_ROWS; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++) acc[i][j] = _mm512_setzero_ps();
    for (size_t b = 0; b < blocks; b++) q4_block(p + b * 256, sc16 + b * 16, xr, nb, b, acc);
#pragma GCC unroll 4
    for (int j = 0; j < nb; j++)
        store_tile(y + (size_t)j * ldy, t, hsum4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]), r0,
                   r1);
}

/* DECODE_STREAMS tiles ts[..] against one input row at once, block by block: as
 * dense_tiles, several weight streams per core, each tile's sums as q4_tile's. */
INLINE void q4_tiles(const gp_matrix *w, const size_t *ts, const gp_q8_row *xr, float *y, int r0,
                     int r1) {
    const size_t blocks = gp_matrix_padded_cols(w) / 128;
    const uint8_t *p[DECODE_STREAMS];
    const uint16_t *sc16[DECODE_STREAMS];
    __m512 acc[DECODE_STREAMS][GP_TILE_ROWS][TILE_X];
#pragma GCC unroll 4
    for (int s = 0; s < DECODE_STREAMS; s++) {
        p[s] = (const uint8_t *)w->data + ts[s] * blocks * 256;
        sc16[s] = w->gscales + ts[s] * blocks * 16;
#pragma GCC unroll 4
        for (int i = 0; i < GP_TILE_ROWS; i++) acc[s][i][0] = _mm512_setzero_ps();
    }
    for (size_t b = 0; b < blocks; b++)
#pragma GCC unroll 4
        for (int s = 0; s < DECODE_STREAMS; s++)
            q4_block(p[s] + b * 256, sc16[s] + b * 16, xr, 1, b, acc[s]);
#pragma GCC unroll 4
    for (int s = 0; s < DECODE_STREAMS; s++)
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
        if (jn == 1 && gp_decode_streams()) { /* one row: several streams, as dense_streams */
            const size_t len = (t1 - t0) / DECODE_STREAMS;
            size_t ts[DECODE_STREAMS];
            for (size_t k = 0; k < len; k++) {
                for (int s = 0; s < DECODE_STREAMS; s++) ts[s] = t0 + (size_t)s * len + k;
                q4_tiles(w, ts, xr, y + (size_t)j0 * ldy, r0, r1);
            }
            t = t0 + DECODE_STREAMS * len;
        }
        for (; t < t1; t++)
            for (int j = 0; j < jn; j += TILE_X_Q4) {
                float *yj = y + (size_t)(j0 + j) * ldy;
                if (jn - j == 1)
                    q4_tile(w, t, xr + j, 1, yj, ldy, r0, r1);
                else
                    q4_tile(w, t, xr + j, 2, yj, ldy, r0, r1);
            }
    }
}

/* ---- attention ---- */

/* e^x for x <= 0 (softmax arguments): Cody-Waite reduction by ln 2 and the
 * Taylor polynomial; about 1 ulp. Arguments below -87 give ~1e-38. */
INLINE __m512 exp_neg(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f) /* ln 2, high bits */, x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.1219444005469e-4f) /* ln 2 - high */, r);
    /* Taylor series to r^7 / 7!: |r| <= ln2 / 2 leaves a truncation error
     * below 5e-9, under f32 rounding */
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

#define HEAD_SET 4 /* query heads per pass over a block */

INLINE __mmask16 tail_mask(int left) {
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
}

/* scores[h·ss + j] = scale · q_h·K_j for the `count` keys of one block and
 * nh <= HEAD_SET heads (q_h = q + h·qs): four keys at a time, each key
 * vector loaded once for all heads. */
INLINE void group_scores(const float *q, int qs, int nh, const float *keys, int count, int D,
                         float scale, float *scores, int ss) {
    int j = 0;
    for (; j + 4 <= count; j += 4) {
        const float *k = keys + (size_t)j * D;
        __m512 a[HEAD_SET][4];
#pragma GCC unroll 4
        for (int h = 0; h < nh; h++)
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) a[h][p] = _mm512_setzero_ps();
        for (int d = 0; d < D; d += 16) {
            const __mmask16 m = tail_mask(D - d);
            __m512 kv[4];
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) kv[p] = _mm512_maskz_loadu_ps(m, k + (size_t)p * D + d);
#pragma GCC unroll 4
            for (int h = 0; h < nh; h++) {
                __m512 qv = _mm512_maskz_loadu_ps(m, q + (size_t)h * qs + d);
#pragma GCC unroll 4
                for (int p = 0; p < 4; p++) a[h][p] = _mm512_fmadd_ps(qv, kv[p], a[h][p]);
            }
        }
#pragma GCC unroll 4
        for (int h = 0; h < nh; h++)
            _mm_storeu_ps(
                scores + (size_t)h * ss + j,
                _mm_mul_ps(hsum4(a[h][0], a[h][1], a[h][2], a[h][3]), _mm_set1_ps(scale)));
    }
    for (; j < count; j++)
        for (int h = 0; h < nh; h++) {
            __m512 a = _mm512_setzero_ps();
            for (int d = 0; d < D; d += 16) {
                const __mmask16 m = tail_mask(D - d);
                a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + (size_t)h * qs + d),
                                    _mm512_maskz_loadu_ps(m, keys + (size_t)j * D + d), a);
            }
            scores[(size_t)h * ss + j] = _mm512_reduce_add_ps(a) * scale;
        }
}

/* out_h[D] += Σ_j p_h[j] · V_j over the `count` values of one block, for nh
 * <= HEAD_SET heads (p_h = p + h·ss, out_h = out + h·os): each value vector
 * loaded once for all heads, four positions per pass over out_h. */
INLINE void group_values(const float *values, const float *p, int ss, int nh, int count, int D,
                         float *out, int os) {
    int j = 0;
    for (; j + 4 <= count; j += 4) {
        const float *v = values + (size_t)j * D;
        __m512 w[HEAD_SET][4];
#pragma GCC unroll 4
        for (int h = 0; h < nh; h++)
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) w[h][k] = _mm512_set1_ps(p[(size_t)h * ss + j + k]);
        for (int d = 0; d < D; d += 16) {
            const __mmask16 m = tail_mask(D - d);
            __m512 vv[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) vv[k] = _mm512_maskz_loadu_ps(m, v + (size_t)k * D + d);
#pragma GCC unroll 4
            for (int h = 0; h < nh; h++) {
                float *o = out + (size_t)h * os + d;
                __m512 acc = _mm512_maskz_loadu_ps(m, o);
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) acc = _mm512_fmadd_ps(w[h][k], vv[k], acc);
                _mm512_mask_storeu_ps(o, m, acc);
            }
        }
    }
    for (; j < count; j++)
        for (int h = 0; h < nh; h++) {
            const __m512 wj = _mm512_set1_ps(p[(size_t)h * ss + j]);
            float *o = out + (size_t)h * os;
            for (int d = 0; d < D; d += 16) {
                const __mmask16 m = tail_mask(D - d);
                __m512 acc =
                    _mm512_fmadd_ps(wj, _mm512_maskz_loadu_ps(m, values + (size_t)j * D + d),
                                    _mm512_maskz_loadu_ps(m, o + d));
                _mm512_mask_storeu_ps(o + d, m, acc);
            }
        }
}

/* One block's scores or values for every head, in head sets. */
static void block_scores(const float *q, int qs, int n_q, const float *keys, int count, int D,
                         float scale, float *scores, int ss) {
    for (int h = 0; h < n_q; h += HEAD_SET) {
        const float *qh = q + (size_t)h * qs;
        float *sh = scores + (size_t)h * ss;
        switch (n_q - h) {
        case 1: group_scores(qh, qs, 1, keys, count, D, scale, sh, ss); break;
        case 2: group_scores(qh, qs, 2, keys, count, D, scale, sh, ss); break;
        case 3: group_scores(qh, qs, 3, keys, count, D, scale, sh, ss); break;
        default: group_scores(qh, qs, 4, keys, count, D, scale, sh, ss); break;
        }
    }
}

static void block_values(const float *values, const float *p, int ss, int n_q, int count, int D,
                         float *out, int os) {
    for (int h = 0; h < n_q; h += HEAD_SET) {
        const float *ph = p + (size_t)h * ss;
        float *oh = out + (size_t)h * os;
        switch (n_q - h) {
        case 1: group_values(values, ph, ss, 1, count, D, oh, os); break;
        case 2: group_values(values, ph, ss, 2, count, D, oh, os); break;
        case 3: group_values(values, ph, ss, 3, count, D, oh, os); break;
        default: group_values(values, ph, ss, 4, count, D, oh, os); break;
        }
    }
}

/* scores[j] = e^(scores[j] - max) for j < n; returns the sum. */
static float softmax_exp(float *scores, int n) {
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int j = 0; j < n; j += 16) {
        __mmask16 m = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1);
        vmax = _mm512_mask_max_ps(vmax, m, vmax, _mm512_maskz_loadu_ps(m, scores + j));
    }
    const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < n; j += 16) {
        __mmask16 m = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1);
        __m512 e = exp_neg(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, scores + j), mx));
        _mm512_mask_storeu_ps(scores + j, m, e);
        sum = _mm512_mask_add_ps(sum, m, sum, e);
    }
    return _mm512_reduce_add_ps(sum);
}

/* Up to GROUP_MAX heads per pass over the cache (more are done in turns). */
#define GROUP_MAX 16

/* Ask for the next block's run of keys or values (count vectors of D
 * floats) while this one is computed: the runs of consecutive blocks lie far
 * apart, so the hardware prefetchers would start each one cold. */
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
        for (int h = 0; h < nh; h++) {
            float *o = og + (size_t)h * out_stride;
            for (int d = 0; d < D; d += 16) {
                const __mmask16 m = tail_mask(D - d);
                _mm512_mask_storeu_ps(
                    o + d, m,
                    _mm512_mul_ps(_mm512_set1_ps(inv[h]), _mm512_maskz_loadu_ps(m, o + d)));
            }
        }
    }
}

static void attend(const gp_kv_pool *kv, const gp_kv_seq *seq, int layer, int kv_head,
                   const float *q, int n_positions, float scale, float *out, float *scores) {
    attend_group(kv, seq, layer, kv_head, q, 0, 1, n_positions, scale, out, 0, scores);
}

const gp_kernel_table gp_kernels_avx512 = {
    .name = "avx512",
    .prefill = "cache-blocked, batches of 4+ rows: 8 weight rows x 3 input rows of f32 FMA "
               "accumulators, 512-column blocks reused from L1, next block prefetched",
    .matmul_rows = {matmul_rows_f32, matmul_rows_bf16, matmul_rows_int8, matmul_rows_q4},
    .attend = attend,
    .attend_group = attend_group,
};
