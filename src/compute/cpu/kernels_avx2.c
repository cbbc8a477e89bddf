/* kernels_avx2.c — the AVX2+FMA kernel table (built with -mavx2 -mfma
 * -mf16c because of the file name, called only after matrix.c's CPU check).
 *
 * Same structure as kernels_avx512.c with 8-float vectors and 16 registers:
 * a tile of 4 weight rows (one sequential stream in the tiled layout) times
 * up to 2 input rows, each weight vector widened once; one accumulator per
 * (weight row, input row), so results do not depend on the batch size;
 * input rows in L2-sized chunks. f32 / bf16 / int8 multiply exact f32
 * activations; q4 uses the int8 activation rows of kernels_q8.h with
 * VPMADDUBSW/VPMADDWD, which give the same integer sums as AVX-512 VNNI.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "compute/attention.h"
#include "compute/cpu/kernels_q8.h"
#include "compute/kernels.h"

#define INLINE static inline __attribute__((always_inline))

#define TILE_X 2
#define X_CHUNK_BYTES (256 * 1024)

enum { K_F32, K_BF16, K_I8 };

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

INLINE size_t elem_size(int kind) { return kind == K_F32 ? 4 : kind == K_BF16 ? 2 : 1; }

/* 8 weights as f32. */
INLINE __m256 load_w(int kind, const unsigned char *p) {
    if (kind == K_F32) return _mm256_loadu_ps((const float *)(const void *)p);
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
                       float *y, int ldy, int r0, int r1) {
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

INLINE void dense_rows(int kind, const gp_matrix *w, const float *x, int n, int ldx, float *y,
                       int ldy, int r0, int r1) {
    int chunk = (int)(X_CHUNK_BYTES / ((size_t)w->cols * sizeof(float) + 1)) & ~(TILE_X - 1);
    if (chunk < TILE_X) chunk = TILE_X;
    const size_t t0 = (size_t)r0 / GP_TILE_ROWS,
                 t1 = ((size_t)r1 + GP_TILE_ROWS - 1) / GP_TILE_ROWS;
    for (int j0 = 0; j0 < n; j0 += chunk) {
        const int j1 = n - j0 < chunk ? n : j0 + chunk;
        for (size_t t = t0; t < t1; t++)
            for (int j = j0; j < j1; j += TILE_X) {
                const float *xj = x + (size_t)j * ldx;
                float *yj = y + (size_t)j * ldy;
                if (j1 - j == 1)
                    dense_tile(kind, w, t, xj, ldx, 1, yj, ldy, r0, r1);
                else
                    dense_tile(kind, w, t, xj, ldx, 2, yj, ldy, r0, r1);
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
        for (size_t t = t0; t < t1; t++)
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
