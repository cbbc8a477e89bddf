/* kernels_avx2.c — the AVX2+FMA kernel table (built with -mavx2 -mfma
 * -mf16c because of the file name, called only after matrix.c's CPU check).
 *
 * Same structure as kernels_avx512.c with 8-float vectors and 16 registers:
 * tiles of 4 weight rows × up to 2 input rows, each weight vector widened
 * once and multiplied into every input row of the tile; input rows in
 * L2-sized chunks. f32 / bf16 / int8 multiply exact f32 activations; q4 uses
 * the int8 activation rows of kernels_q8.h with VPMADDUBSW/VPMADDWD, which
 * give bit-identical integer sums to the AVX-512 VNNI kernel.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "compute/attention.h"
#include "compute/cpu/kernels_q8.h"
#include "compute/kernels.h"

#define INLINE static inline __attribute__((always_inline))

#define TILE_ROWS 4
#define TILE_X 2
#define X_CHUNK_BYTES (256 * 1024)

enum { K_F32, K_BF16, K_I8 };

/* {Σa, Σb, Σc, Σd} of four vectors. */
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

INLINE void store4(float *dst, __m128 s, int valid) {
    if (valid == TILE_ROWS) {
        _mm_storeu_ps(dst, s);
        return;
    }
    float t[4];
    _mm_storeu_ps(t, s);
    for (int i = 0; i < valid; i++) dst[i] = t[i];
}

/* ---- f32 / bf16 / int8 ---- */

INLINE size_t elem_size(int kind) { return kind == K_F32 ? 4 : kind == K_BF16 ? 2 : 1; }

/* 8 weights from column c of a row, as f32. */
INLINE __m256 load_w(int kind, const unsigned char *row, size_t c) {
    if (kind == K_F32) return _mm256_loadu_ps((const float *)row + c);
    if (kind == K_BF16) {
        __m128i h = _mm_loadu_si128((const void *)((const uint16_t *)row + c));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    __m128i b = _mm_loadl_epi64((const void *)((const int8_t *)row + c));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}

/* One weight as f32 (for the column tail). */
INLINE float weight_at(int kind, const unsigned char *row, size_t c) {
    if (kind == K_F32) return ((const float *)row)[c];
    if (kind == K_BF16) return gp_bf16_to_f32(((const uint16_t *)row)[c]);
    return (float)((const int8_t *)row)[c];
}

INLINE void dense_tile(int kind, const gp_matrix *w, int r, int r_end, const float *x, int ldx,
                       int nb, float *y, int ldy) {
    const size_t cols = (size_t)w->cols, esz = elem_size(kind);
    const unsigned char *row[TILE_ROWS];
    float scale[TILE_ROWS];
    for (int i = 0; i < TILE_ROWS; i++) {
        int rr = r + i < r_end ? r + i : r_end - 1;
        row[i] = (const unsigned char *)w->data + (size_t)rr * cols * esz;
        scale[i] = kind == K_I8 ? w->scales[rr] : 1.0f;
    }
    __m256 acc[TILE_ROWS][TILE_X];
#pragma GCC unroll 4
    for (int i = 0; i < TILE_ROWS; i++)
#pragma GCC unroll 2
        for (int j = 0; j < nb; j++) acc[i][j] = _mm256_setzero_ps();
    const size_t ahead = TILE_ROWS * cols * esz; /* the next tile, same column */
    size_t c = 0;
    for (; c + 8 <= cols; c += 8) {
        __m256 xv[TILE_X];
#pragma GCC unroll 2
        for (int j = 0; j < nb; j++) xv[j] = _mm256_loadu_ps(x + (size_t)j * ldx + c);
#pragma GCC unroll 4
        for (int i = 0; i < TILE_ROWS; i++) {
            _mm_prefetch((const char *)(row[i] + c * esz + ahead), _MM_HINT_T0);
            __m256 wv = load_w(kind, row[i], c);
#pragma GCC unroll 2
            for (int j = 0; j < nb; j++) acc[i][j] = _mm256_fmadd_ps(wv, xv[j], acc[i][j]);
        }
    }
    float tail[TILE_ROWS][TILE_X] = {{0}};
    for (; c < cols; c++)
        for (int i = 0; i < TILE_ROWS; i++)
            for (int j = 0; j < nb; j++)
                tail[i][j] += weight_at(kind, row[i], c) * x[(size_t)j * ldx + c];
    const int valid = r_end - r < TILE_ROWS ? r_end - r : TILE_ROWS;
#pragma GCC unroll 2
    for (int j = 0; j < nb; j++) {
        __m128 s = hsum4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]);
        s = _mm_add_ps(s, _mm_setr_ps(tail[0][j], tail[1][j], tail[2][j], tail[3][j]));
        if (kind == K_I8) s = _mm_mul_ps(s, _mm_loadu_ps(scale));
        store4(y + (size_t)j * ldy + r, s, valid);
    }
}

/* n = 1: one weight row at a time (one sequential stream), four
 * accumulators. */
INLINE void dense_single(int kind, const gp_matrix *w, const float *x, float *y, int r0, int r1) {
    const size_t cols = (size_t)w->cols, esz = elem_size(kind);
    for (int r = r0; r < r1; r++) {
        const unsigned char *row = (const unsigned char *)w->data + (size_t)r * cols * esz;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        size_t c = 0;
        for (; c + 32 <= cols; c += 32) {
            a0 = _mm256_fmadd_ps(load_w(kind, row, c), _mm256_loadu_ps(x + c), a0);
            a1 = _mm256_fmadd_ps(load_w(kind, row, c + 8), _mm256_loadu_ps(x + c + 8), a1);
            a2 = _mm256_fmadd_ps(load_w(kind, row, c + 16), _mm256_loadu_ps(x + c + 16), a2);
            a3 = _mm256_fmadd_ps(load_w(kind, row, c + 24), _mm256_loadu_ps(x + c + 24), a3);
        }
        for (; c + 8 <= cols; c += 8)
            a0 = _mm256_fmadd_ps(load_w(kind, row, c), _mm256_loadu_ps(x + c), a0);
        float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
        for (; c < cols; c++) s += weight_at(kind, row, c) * x[c];
        y[r] = kind == K_I8 ? s * w->scales[r] : s;
    }
}

INLINE void dense_rows(int kind, const gp_matrix *w, const float *x, int n, int ldx, float *y,
                       int ldy, int r0, int r1) {
    if (n == 1) {
        dense_single(kind, w, x, y, r0, r1);
        return;
    }
    int chunk = (int)(X_CHUNK_BYTES / ((size_t)w->cols * sizeof(float) + 1)) & ~(TILE_X - 1);
    if (chunk < TILE_X) chunk = TILE_X;
    for (int j0 = 0; j0 < n; j0 += chunk) {
        const int j1 = n - j0 < chunk ? n : j0 + chunk;
        for (int r = r0; r < r1; r += TILE_ROWS)
            for (int j = j0; j < j1; j += TILE_X) {
                const float *xj = x + (size_t)j * ldx;
                float *yj = y + (size_t)j * ldy;
                if (j1 - j == 1)
                    dense_tile(kind, w, r, r1, xj, ldx, 1, yj, ldy);
                else
                    dense_tile(kind, w, r, r1, xj, ldx, 2, yj, ldy);
            }
    }
}

static void matmul_rows_f32(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                            int r0, int r1) {
    dense_rows(K_F32, w, x, n, ldx, y, ldy, r0, r1);
}

static void matmul_rows_bf16(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                             int r0, int r1) {
    dense_rows(K_BF16, w, x, n, ldx, y, ldy, r0, r1);
}

static void matmul_rows_int8(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                             int r0, int r1) {
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

/* Two groups (64 columns, step h of block b) of one weight row against the
 * tile's input rows. */
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

/* The f16 scales of groups g and g + 1 (lanes 0, 1). */
INLINE __m128 scales2(const uint16_t *ws, size_t g) {
    uint32_t s;
    memcpy(&s, ws + g, sizeof s);
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)s));
}

/* n = 1: one weight row at a time (sequential nibble and scale streams). */
static void q4_single(const gp_matrix *w, const gp_q8_row *xr, float *y, int r0, int r1) {
    const size_t cols = (size_t)w->cols, groups = cols / GP_Q4_GROUP;
    for (int r = r0; r < r1; r++) {
        const uint8_t *wq = (const uint8_t *)w->data + (size_t)r * cols / 2;
        const uint16_t *ws = w->gscales + (size_t)r * groups;
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        size_t g = 0;
        for (; g + 4 <= groups; g += 4) {
            q4_pair(_mm256_loadu_si256((const void *)(wq + g * 16)), scales2(ws, g), xr, 1, g / 4,
                    0, &acc[0]);
            q4_pair(_mm256_loadu_si256((const void *)(wq + g * 16 + 32)), scales2(ws, g + 2), xr, 1,
                    g / 4, 1, &acc[1]);
        }
        for (; g + 2 <= groups; g += 2)
            q4_pair(_mm256_loadu_si256((const void *)(wq + g * 16)), scales2(ws, g), xr, 1, g / 4,
                    (g / 2) % 2, &acc[0]);
        if (g < groups) {
            __m256i wv = _mm256_zextsi128_si256(_mm_loadu_si128((const void *)(wq + g * 16)));
            q4_pair(wv, _mm_cvtph_ps(_mm_cvtsi32_si128(ws[g])), xr, 1, g / 4, (g / 2) % 2, &acc[1]);
        }
        y[r] = hsum(_mm256_add_ps(acc[0], acc[1]));
    }
}

INLINE void q4_tile(const gp_matrix *w, int r, int r_end, const gp_q8_row *xr, int nb, float *y,
                    int ldy) {
    const size_t cols = (size_t)w->cols, groups = cols / GP_Q4_GROUP;
    __m256 acc[TILE_ROWS][TILE_X];
#pragma GCC unroll 4
    for (int i = 0; i < TILE_ROWS; i++)
#pragma GCC unroll 2
        for (int j = 0; j < nb; j++) acc[i][j] = _mm256_setzero_ps();
    const uint8_t *wq[TILE_ROWS];
    const uint16_t *ws[TILE_ROWS];
    for (int i = 0; i < TILE_ROWS; i++) {
        int rr = r + i < r_end ? r + i : r_end - 1;
        wq[i] = (const uint8_t *)w->data + (size_t)rr * cols / 2;
        ws[i] = w->gscales + (size_t)rr * groups;
    }
    const size_t ahead = TILE_ROWS * cols / 2; /* the next tile, same groups */
    size_t g = 0;
    for (; g + 2 <= groups; g += 2) {
#pragma GCC unroll 4
        for (int i = 0; i < TILE_ROWS; i++) {
            _mm_prefetch((const char *)(wq[i] + g * 16 + ahead), _MM_HINT_T0);
            __m256i wv = _mm256_loadu_si256((const void *)(wq[i] + g * 16));
            q4_pair(wv, scales2(ws[i], g), xr, nb, g / 4, (g / 2) % 2, acc[i]);
        }
    }
    if (g < groups) { /* one group left: upper half of the pair is zero */
#pragma GCC unroll 4
        for (int i = 0; i < TILE_ROWS; i++) {
            __m256i wv = _mm256_zextsi128_si256(_mm_loadu_si128((const void *)(wq[i] + g * 16)));
            __m128 s2 = _mm_cvtph_ps(_mm_cvtsi32_si128(ws[i][g]));
            q4_pair(wv, s2, xr, nb, g / 4, (g / 2) % 2, acc[i]);
        }
    }
    const int valid = r_end - r < TILE_ROWS ? r_end - r : TILE_ROWS;
#pragma GCC unroll 2
    for (int j = 0; j < nb; j++)
        store4(y + (size_t)j * ldy + r, hsum4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]), valid);
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
    for (int j0 = 0; j0 < n; j0 += chunk) {
        const int jn = n - j0 < chunk ? n - j0 : chunk;
        for (int j = 0; j < jn; j++) {
            xr[j] = gp_q8_row_at(scratch + (size_t)j * row_bytes, w->cols);
            q8_quantize_row(x + (size_t)(j0 + j) * ldx, w->cols, &xr[j]);
        }
        if (jn == 1) {
            q4_single(w, &xr[0], y + (size_t)j0 * ldy, r0, r1);
            continue;
        }
        for (int r = r0; r < r1; r += TILE_ROWS)
            for (int j = 0; j < jn; j += TILE_X) {
                float *yj = y + (size_t)(j0 + j) * ldy;
                if (jn - j == 1)
                    q4_tile(w, r, r1, xr + j, 1, yj, ldy);
                else
                    q4_tile(w, r, r1, xr + j, 2, yj, ldy);
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
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
}

static float dot(const float *q, const float *k, int D) {
    __m256 acc = _mm256_setzero_ps();
    int d = 0;
    for (; d + 8 <= D; d += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), acc);
    float s = hsum(acc);
    for (; d < D; d++) s += q[d] * k[d];
    return s;
}

static void attend_scores(const float *q, const float *keys, int count, int D, float scale,
                          float *scores) {
    int j = 0;
    if (D % 8 == 0)
        for (; j + 4 <= count; j += 4) {
            const float *k = keys + (size_t)j * D;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int d = 0; d < D; d += 8) {
                __m256 qv = _mm256_loadu_ps(q + d);
                a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + d), a0);
                a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + D + d), a1);
                a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 2 * (size_t)D + d), a2);
                a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 3 * (size_t)D + d), a3);
            }
            _mm_storeu_ps(scores + j, _mm_mul_ps(hsum4(a0, a1, a2, a3), _mm_set1_ps(scale)));
        }
    for (; j < count; j++) scores[j] = dot(q, keys + (size_t)j * D, D) * scale;
}

static void attend_values(const float *values, const float *p, int count, int D, float *out) {
    int j = 0;
    const int D8 = D & ~7;
    for (; j + 4 <= count; j += 4) {
        const float *v = values + (size_t)j * D;
        const __m256 p0 = _mm256_set1_ps(p[j]), p1 = _mm256_set1_ps(p[j + 1]);
        const __m256 p2 = _mm256_set1_ps(p[j + 2]), p3 = _mm256_set1_ps(p[j + 3]);
        for (int d = 0; d < D8; d += 8) {
            __m256 o = _mm256_loadu_ps(out + d);
            o = _mm256_fmadd_ps(p0, _mm256_loadu_ps(v + d), o);
            o = _mm256_fmadd_ps(p1, _mm256_loadu_ps(v + D + d), o);
            o = _mm256_fmadd_ps(p2, _mm256_loadu_ps(v + 2 * (size_t)D + d), o);
            o = _mm256_fmadd_ps(p3, _mm256_loadu_ps(v + 3 * (size_t)D + d), o);
            _mm256_storeu_ps(out + d, o);
        }
        for (int d = D8; d < D; d++)
            out[d] += p[j] * v[d] + p[j + 1] * v[D + d] + p[j + 2] * v[2 * (size_t)D + d] +
                      p[j + 3] * v[3 * (size_t)D + d];
    }
    for (; j < count; j++) {
        const float *v = values + (size_t)j * D;
        const __m256 pj = _mm256_set1_ps(p[j]);
        for (int d = 0; d < D8; d += 8)
            _mm256_storeu_ps(out + d,
                             _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + d), _mm256_loadu_ps(out + d)));
        for (int d = D8; d < D; d++) out[d] += p[j] * v[d];
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

static void attend(const gp_kv_pool *kv, const gp_kv_seq *seq, int layer, int kv_head,
                   const float *q, int n_positions, float scale, float *out, float *scores) {
    const int D = kv->head_dim, bs = kv->block_size;
    for (int start = 0; start < n_positions; start += bs) {
        int count = n_positions - start < bs ? n_positions - start : bs;
        attend_scores(q, gp_kv_at(kv, seq, layer, 0, kv_head, start), count, D, scale,
                      scores + start);
    }
    const float inv = 1.0f / softmax_exp(scores, n_positions);
    memset(out, 0, (size_t)D * sizeof(float));
    for (int start = 0; start < n_positions; start += bs) {
        int count = n_positions - start < bs ? n_positions - start : bs;
        attend_values(gp_kv_at(kv, seq, layer, 1, kv_head, start), scores + start, count, D, out);
    }
    for (int d = 0; d < D; d++) out[d] *= inv;
}

const gp_kernel_table gp_kernels_avx2 = {
    .name = "avx2",
    .matmul_rows = {matmul_rows_f32, matmul_rows_bf16, matmul_rows_int8, matmul_rows_q4},
    .attend = attend,
};
