/* conv_direct_avx512.c — AVX-512 micro-kernels and epilogues of the direct convolution
 * (see compute/conv_direct.h), f32 (FMA) and bf16 (AVX512-BF16 vdpbf16ps, f32 accumulators).
 *
 * Time layout: 6 output channels x 4 vectors of 16 samples = 24 zmm accumulators; per tap,
 * 4 input loads (the last one masked at the signal's end) and 6 weight broadcasts.
 * Channel layout: 2 vectors of 16 output channels x 8 samples = 16 accumulators; per tap,
 * 2 weight loads and 8 input broadcasts; the tile is transposed on the way out.
 * Every kernel accumulates bias, then channels (pairs) ascending, then taps ascending.
 *
 * The epilogue works on the tile while it is in L1: residual add, branch accumulator,
 * activation (vectorised Snake; see sin2_v) and bf16 pair packing.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "compute/conv_direct.h"

#define MR 6      /* time layout: channels per block */
#define NR 4      /* time layout: vectors per tile */
#define MV 2      /* channel layout: channel vectors per block */
#define NN 8      /* channel layout: samples per tile */
#define TILE_W 64 /* tile buffer row length (time layout: NR * 16) */
#define TILE_R 32 /* tile buffer rows (channel layout: MV * 16) */
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* ---- sin^2 ---- */

#define SIN2_MAX_ARG 25735.93f /* 2^13 * pi: k * pi_a stays exact below this */

/* sin(x)^2: x - k*pi with k = round(x/pi) (three-part pi, Cody-Waite), then the odd Taylor
 * polynomial of sin to r^11 on [-pi/2, pi/2] (truncation < 6e-8); max abs error of the
 * square ~2.5e-7 (tests/test_conv_direct.c measures it). Lanes beyond 2^13*pi or NaN use
 * sinf, so each result depends only on its own input. */
static ALWAYS_INLINE __m512 sin2_v(__m512 x) {
    const __m512 inv_pi = _mm512_set1_ps(0.318309886183790671538f);
    const __m512 pi_a = _mm512_set1_ps(3.140625f), pi_b = _mm512_set1_ps(9.67502593994140625e-4f),
                 pi_c = _mm512_set1_ps(1.509957990978376432e-7f);
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, inv_pi),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, pi_a, x);
    r = _mm512_fnmadd_ps(k, pi_b, r);
    r = _mm512_fnmadd_ps(k, pi_c, r);
    __m512 r2 = _mm512_mul_ps(r, r);
    __m512 p = _mm512_set1_ps(-1.0f / 39916800);
    p = _mm512_fmadd_ps(p, r2, _mm512_set1_ps(1.0f / 362880));
    p = _mm512_fmadd_ps(p, r2, _mm512_set1_ps(-1.0f / 5040));
    p = _mm512_fmadd_ps(p, r2, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r2, _mm512_set1_ps(-1.0f / 6));
    __m512 s = _mm512_fmadd_ps(_mm512_mul_ps(r, r2), p, r);
    __m512 out = _mm512_mul_ps(s, s);
    __mmask16 bad = _mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(SIN2_MAX_ARG),
                                       _CMP_NLE_UQ); /* > max, or NaN */
    if (__builtin_expect(bad != 0, 0)) {
        float in[16], o[16];
        _mm512_storeu_ps(in, x);
        _mm512_storeu_ps(o, out);
        for (int l = 0; l < 16; l++) {
            if (bad >> l & 1) {
                float v = sinf(in[l]);
                o[l] = v * v;
            }
        }
        out = _mm512_loadu_ps(o);
    }
    return out;
}

/* act(v) for channel c. */
static ALWAYS_INLINE __m512 act_v(const gp_act *act, int c, __m512 v) {
    if (c < act->n_snake) {
        __m512 s = sin2_v(_mm512_mul_ps(v, _mm512_set1_ps(act->alpha[c])));
        return _mm512_fmadd_ps(_mm512_set1_ps(act->inv_alpha[c]), s, v);
    }
    if (act->kind == GP_ACT_LRELU || act->kind == GP_ACT_HALF_SNAKE) {
        __mmask16 pos = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ);
        return _mm512_mask_mov_ps(_mm512_mul_ps(v, _mm512_set1_ps(act->slope)), pos, v);
    }
    if (act->kind == GP_ACT_ELU) {
        float t[16];
        _mm512_storeu_ps(t, v);
        for (int l = 0; l < 16; l++) t[l] = t[l] > 0.0f ? t[l] : expm1f(t[l]);
        return _mm512_loadu_ps(t);
    }
    return v;
}

/* 16 channel pairs (lo[i], hi[i]) as bf16 words, rounded to nearest even. */
static ALWAYS_INLINE __m512i bf16_pairs(__m512 lo, __m512 hi) {
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24,
                                         8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    __m512i both = (__m512i)_mm512_cvtne2ps_pbh(hi, lo); /* lo in words 0-15, hi in 16-31 */
    return _mm512_permutexvar_epi16(idx, both);
}

static ALWAYS_INLINE __mmask16 tail_mask(size_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

/* ---- epilogue ---- */

/* v = tile + base for one row segment, kept in `store` and folded into `acc` as asked;
 * returns what the activation (if any) takes. */
static ALWAYS_INLINE __m512 epi_value(const gp_dconv_out *out, const float *trow, size_t off,
                                      __mmask16 m) {
    __m512 v = _mm512_load_ps(trow);
    if (out->base) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, out->base + off));
    if (out->store) _mm512_mask_storeu_ps(out->store + off, m, v);
    if (out->acc_mode != GP_DCONV_ACC_NONE) {
        float *a = out->acc + off;
        __m512 s = v;
        if (out->acc_mode != GP_DCONV_ACC_SET) s = _mm512_add_ps(_mm512_maskz_loadu_ps(m, a), v);
        if (out->acc_mode == GP_DCONV_ACC_ADD_DIV)
            s = _mm512_div_ps(s, _mm512_set1_ps(out->acc_div));
        _mm512_mask_storeu_ps(a, m, s);
        if (out->act_src == GP_DCONV_ACT_OF_ACC) return s;
    }
    if (out->act_src == GP_DCONV_ACT_OF_FROM) return _mm512_maskz_loadu_ps(m, out->act_from + off);
    return v;
}

/* Rows [0, rows) of the tile are channels o0.. (o0 even); columns [0, nc) are samples n0.. .
 * Rows go in pairs so a bf16 destination gets whole channel-pair words. */
static void epilogue(const gp_dconv_out *out, const float *tile, int o0, int rows, size_t n0,
                     size_t nc) {
    const size_t ld = out->ld, ald = out->act_ld;
    for (int r = 0; r < rows; r += 2) {
        const int o = o0 + r;
        const bool has_hi = r + 1 < rows;
        const float *t0 = tile + (size_t)r * TILE_W, *t1 = t0 + TILE_W;
        for (size_t q = 0; q < nc; q += 16) {
            const __mmask16 m = tail_mask(nc - q);
            const size_t off = (size_t)o * ld + n0 + q;
            __m512 lo = epi_value(out, t0 + q, off, m), hi = _mm512_setzero_ps();
            if (has_hi) hi = epi_value(out, t1 + q, off + ld, m);
            if (!out->act) continue;
            lo = act_v(out->act, o, lo);
            if (has_hi) hi = act_v(out->act, o + 1, hi);
            if (out->act_bf16) {
                uint32_t *d = (uint32_t *)out->act_dst + (size_t)(o / 2) * ald + n0 + q;
                _mm512_mask_storeu_epi32(d, m, bf16_pairs(lo, hi));
            } else {
                float *d = (float *)out->act_dst + (size_t)o * ald + n0 + q;
                _mm512_mask_storeu_ps(d, m, lo);
                if (has_hi) _mm512_mask_storeu_ps(d + ald, m, hi);
            }
        }
    }
}

/* ---- micro-kernels ---- */

/* Time layout, f32: tile[i][16j + l] = bias[i] + sum_c sum_t w[c][t][i] * x[c][16j + l + t*d]. */
static ALWAYS_INLINE void ktime_f32(const int mr, const int nr, const float *w, const float *bias,
                                    int c_in, int k, size_t d, const float *x, size_t xs,
                                    __mmask16 last, float *tile) {
    __m512 acc[MR][NR];
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nr; j++) acc[i][j] = _mm512_set1_ps(bias[i]);
    for (int c = 0; c < c_in; c++) {
        const float *xt = x + (size_t)c * xs;
        for (int l = 0; l < mr * k; l += 16)
            GP_DCONV_PREFETCH(w + GP_DCONV_PF_TIME + l, GP_DCONV_PF_TIME_HINT);
        for (int t = 0; t < k; t++, xt += d, w += mr) {
            __m512 xv[NR];
#pragma GCC unroll 4
            for (int j = 0; j < nr; j++)
                xv[j] = j + 1 < nr ? _mm512_loadu_ps(xt + 16 * j)
                                   : _mm512_maskz_loadu_ps(last, xt + 16 * j);
#pragma GCC unroll 6
            for (int i = 0; i < mr; i++) {
                const __m512 wb = _mm512_set1_ps(w[i]);
#pragma GCC unroll 4
                for (int j = 0; j < nr; j++) acc[i][j] = _mm512_fmadd_ps(wb, xv[j], acc[i][j]);
            }
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nr; j++) _mm512_store_ps(tile + i * TILE_W + 16 * j, acc[i][j]);
}

/* Time layout, bf16: the same over channel pairs with vdpbf16ps; x and w are pair words. */
static ALWAYS_INLINE void ktime_bf16(const int mr, const int nr, const uint32_t *w,
                                     const float *bias, int pairs, int k, size_t d,
                                     const uint32_t *x, size_t xs, __mmask16 last, float *tile) {
    __m512 acc[MR][NR];
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nr; j++) acc[i][j] = _mm512_set1_ps(bias[i]);
    for (int p = 0; p < pairs; p++) {
        const uint32_t *xt = x + (size_t)p * xs;
        for (int l = 0; l < mr * k; l += 16)
            GP_DCONV_PREFETCH(w + GP_DCONV_PF_TIME + l, GP_DCONV_PF_TIME_HINT);
        for (int t = 0; t < k; t++, xt += d, w += mr) {
            __m512bh xv[NR];
#pragma GCC unroll 4
            for (int j = 0; j < nr; j++)
                xv[j] = (__m512bh)(j + 1 < nr ? _mm512_loadu_si512(xt + 16 * j)
                                              : _mm512_maskz_loadu_epi32(last, xt + 16 * j));
#pragma GCC unroll 6
            for (int i = 0; i < mr; i++) {
                const __m512bh wb = (__m512bh)_mm512_set1_epi32((int)w[i]);
#pragma GCC unroll 4
                for (int j = 0; j < nr; j++) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], wb, xv[j]);
            }
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nr; j++) _mm512_store_ps(tile + i * TILE_W + 16 * j, acc[i][j]);
}

/* Channel layout: acc[v][j] holds channels 16v.. of sample j; stored transposed. */
static ALWAYS_INLINE void kchan_store(const int nn, __m512 acc[MV][NN], float *tile) {
    float buf[NN][MV * 16] __attribute__((aligned(64)));
#pragma GCC unroll 8
    for (int j = 0; j < nn; j++)
#pragma GCC unroll 2
        for (int v = 0; v < MV; v++) _mm512_store_ps(&buf[j][16 * v], acc[v][j]);
    for (int r = 0; r < MV * 16; r++)
#pragma GCC unroll 8
        for (int j = 0; j < nn; j++) tile[r * TILE_W + j] = buf[j][r];
}

static ALWAYS_INLINE void kchan_f32(const int nn, const float *w, const float *bias, int c_in,
                                    int k, size_t d, const float *x, size_t xs, float *tile) {
    __m512 acc[MV][NN];
#pragma GCC unroll 2
    for (int v = 0; v < MV; v++)
#pragma GCC unroll 8
        for (int j = 0; j < nn; j++) acc[v][j] = _mm512_load_ps(bias + 16 * v);
    for (int c = 0; c < c_in; c++) {
        const float *xt = x + (size_t)c * xs;
        for (int t = 0; t < k; t++, xt += d, w += MV * 16) {
            GP_DCONV_PREFETCH(w + GP_DCONV_PF_CHAN, GP_DCONV_PF_CHAN_HINT);
            GP_DCONV_PREFETCH(w + GP_DCONV_PF_CHAN + 16, GP_DCONV_PF_CHAN_HINT);
            __m512 wv[MV];
#pragma GCC unroll 2
            for (int v = 0; v < MV; v++) wv[v] = _mm512_load_ps(w + 16 * v);
#pragma GCC unroll 8
            for (int j = 0; j < nn; j++) {
                const __m512 xb = _mm512_set1_ps(xt[j]);
#pragma GCC unroll 2
                for (int v = 0; v < MV; v++) acc[v][j] = _mm512_fmadd_ps(wv[v], xb, acc[v][j]);
            }
        }
    }
    kchan_store(nn, acc, tile);
}

/* W16: one word vector holds channels l (low half) and l + 16 (high half) as bf16; widening
 * is a shift / a mask. Accumulation as kchan_f32. */
static ALWAYS_INLINE void kchan_w16(const int nn, const uint32_t *w, const float *bias, int c_in,
                                    int k, size_t d, const float *x, size_t xs, float *tile) {
    __m512 acc[MV][NN];
    const __m512i hi_mask = _mm512_set1_epi32((int)0xffff0000u);
#pragma GCC unroll 2
    for (int v = 0; v < MV; v++)
#pragma GCC unroll 8
        for (int j = 0; j < nn; j++) acc[v][j] = _mm512_load_ps(bias + 16 * v);
    for (int c = 0; c < c_in; c++) {
        const float *xt = x + (size_t)c * xs;
        for (int t = 0; t < k; t++, xt += d, w += MV * 8) {
            GP_DCONV_PREFETCH(w + GP_DCONV_PF_CHAN, GP_DCONV_PF_CHAN_HINT);
            __m512 wv[MV];
#pragma GCC unroll 1
            for (int v = 0; v < MV; v += 2) {
                const __m512i words = _mm512_load_si512(w + 8 * v);
                wv[v] = _mm512_castsi512_ps(_mm512_slli_epi32(words, 16));
                wv[v + 1] = _mm512_castsi512_ps(_mm512_and_si512(words, hi_mask));
            }
#pragma GCC unroll 8
            for (int j = 0; j < nn; j++) {
                const __m512 xb = _mm512_set1_ps(xt[j]);
#pragma GCC unroll 2
                for (int v = 0; v < MV; v++) acc[v][j] = _mm512_fmadd_ps(wv[v], xb, acc[v][j]);
            }
        }
    }
    kchan_store(nn, acc, tile);
}

static ALWAYS_INLINE void kchan_bf16(const int nn, const uint32_t *w, const float *bias, int pairs,
                                     int k, size_t d, const uint32_t *x, size_t xs, float *tile) {
    __m512 acc[MV][NN];
#pragma GCC unroll 2
    for (int v = 0; v < MV; v++)
#pragma GCC unroll 8
        for (int j = 0; j < nn; j++) acc[v][j] = _mm512_load_ps(bias + 16 * v);
    for (int p = 0; p < pairs; p++) {
        const uint32_t *xt = x + (size_t)p * xs;
        for (int t = 0; t < k; t++, xt += d, w += MV * 16) {
            GP_DCONV_PREFETCH(w + GP_DCONV_PF_CHAN, GP_DCONV_PF_CHAN_HINT);
            GP_DCONV_PREFETCH(w + GP_DCONV_PF_CHAN + 16, GP_DCONV_PF_CHAN_HINT);
            __m512bh wv[MV];
#pragma GCC unroll 2
            for (int v = 0; v < MV; v++) wv[v] = (__m512bh)_mm512_load_si512(w + 16 * v);
#pragma GCC unroll 8
            for (int j = 0; j < nn; j++) {
                const __m512bh xb = (__m512bh)_mm512_set1_epi32((int)xt[j]);
#pragma GCC unroll 2
                for (int v = 0; v < MV; v++) acc[v][j] = _mm512_dpbf16_ps(acc[v][j], wv[v], xb);
            }
        }
    }
    kchan_store(nn, acc, tile);
}

/* Specialisations: the tile shape must be a compile-time constant for the accumulators to
 * live in registers. */
#define TIME_CASES(FN, T, mr)                                                                      \
    switch (nr) {                                                                                  \
    case 1: FN(mr, 1, (const T *)w, bias, red, k, d, (const T *)x, xs, last, tile); break;         \
    case 2: FN(mr, 2, (const T *)w, bias, red, k, d, (const T *)x, xs, last, tile); break;         \
    case 3: FN(mr, 3, (const T *)w, bias, red, k, d, (const T *)x, xs, last, tile); break;         \
    default: FN(mr, 4, (const T *)w, bias, red, k, d, (const T *)x, xs, last, tile); break;        \
    }

#define TIME_DISPATCH(NAME, FN, T)                                                                 \
    static void NAME(int mr, int nr, const void *w, const float *bias, int red, int k, size_t d,   \
                     const void *x, size_t xs, __mmask16 last, float *tile) {                      \
        switch (mr) {                                                                              \
        case 1: TIME_CASES(FN, T, 1) break;                                                        \
        case 2: TIME_CASES(FN, T, 2) break;                                                        \
        case 3: TIME_CASES(FN, T, 3) break;                                                        \
        case 4: TIME_CASES(FN, T, 4) break;                                                        \
        case 5: TIME_CASES(FN, T, 5) break;                                                        \
        default: TIME_CASES(FN, T, 6) break;                                                       \
        }                                                                                          \
    }

TIME_DISPATCH(time_f32, ktime_f32, float)
TIME_DISPATCH(time_bf16, ktime_bf16, uint32_t)

#define CHAN_DISPATCH(NAME, FN, TW, TX)                                                            \
    static void NAME(int nn, const void *w, const float *bias, int red, int k, size_t d,           \
                     const void *x, size_t xs, float *tile) {                                      \
        switch (nn) {                                                                              \
        case 1: FN(1, (const TW *)w, bias, red, k, d, (const TX *)x, xs, tile); break;             \
        case 2: FN(2, (const TW *)w, bias, red, k, d, (const TX *)x, xs, tile); break;             \
        case 3: FN(3, (const TW *)w, bias, red, k, d, (const TX *)x, xs, tile); break;             \
        case 4: FN(4, (const TW *)w, bias, red, k, d, (const TX *)x, xs, tile); break;             \
        case 5: FN(5, (const TW *)w, bias, red, k, d, (const TX *)x, xs, tile); break;             \
        case 6: FN(6, (const TW *)w, bias, red, k, d, (const TX *)x, xs, tile); break;             \
        case 7: FN(7, (const TW *)w, bias, red, k, d, (const TX *)x, xs, tile); break;             \
        default: FN(8, (const TW *)w, bias, red, k, d, (const TX *)x, xs, tile); break;            \
        }                                                                                          \
    }

CHAN_DISPATCH(chan_f32, kchan_f32, float, float)
CHAN_DISPATCH(chan_bf16, kchan_bf16, uint32_t, uint32_t)
CHAN_DISPATCH(chan_w16, kchan_w16, uint32_t, float)

/* ---- tiles ---- */

void gp_dconv_tiles_avx512(const gp_dconv *conv, const gp_dconv_signal *sig, int n_sig, size_t n,
                           const gp_dconv_plan *plan, long t0, long t1) {
    float tile[TILE_R * TILE_W] __attribute__((aligned(64)));
    const bool bf16 = conv->type == GP_DCONV_BF16;
    const int red = bf16 ? (conv->c_in + 1) / 2 : conv->c_in, k = conv->kernel;
    const size_t d = (size_t)conv->dilation;
    const size_t width = plan->width;
    for (long idx = t0; idx < t1; idx++) {
        long b, si, q;
        gp_dconv_tile_at(idx, plan, conv->n_blocks, n_sig, &b, &si, &q);
        const gp_dconv_signal *s = &sig[si];
        const size_t n0 = (size_t)q * width;
        const size_t nc = n - n0 < width ? n - n0 : width;
        const int o0 = (int)b * conv->mr;
        const int rows = conv->c_out - o0 < conv->mr ? conv->c_out - o0 : conv->mr;
        const void *w = (const char *)conv->weight + (size_t)b * conv->block_elems * 4;
        const void *x = (const char *)s->x + n0 * 4;
        const float *bias = conv->bias + o0;
        if (conv->chan) {
            (bf16                         ? chan_bf16
             : conv->type == GP_DCONV_W16 ? chan_w16
                                          : chan_f32)((int)nc, w, bias, red, k, d, x, s->xs, tile);
        } else {
            const int nr = (int)((nc + 15) / 16);
            const __mmask16 last = tail_mask(nc - 16 * (size_t)(nr - 1));
            (bf16 ? time_bf16 : time_f32)(rows, nr, w, bias, red, k, d, x, s->xs, last, tile);
        }
        epilogue(&s->out, tile, o0, rows, n0, nc);
    }
}

/* ---- element-wise rows ---- */

void gp_dconv_act_rows_avx512(const gp_act *act, const float *src, size_t ss, void *dst, size_t ds,
                              bool dst_bf16, int r0, int r1, size_t n) {
    for (int r = r0; r < r1; r += dst_bf16 ? 2 : 1) {
        const float *a = src + (size_t)r * ss;
        const bool has_hi = dst_bf16 && r + 1 < r1;
        for (size_t q = 0; q < n; q += 16) {
            const __mmask16 m = tail_mask(n - q);
            __m512 lo = act_v(act, r, _mm512_maskz_loadu_ps(m, a + q));
            if (!dst_bf16) {
                _mm512_mask_storeu_ps((float *)dst + (size_t)r * ds + q, m, lo);
                continue;
            }
            __m512 hi = _mm512_setzero_ps();
            if (has_hi) hi = act_v(act, r + 1, _mm512_maskz_loadu_ps(m, a + ss + q));
            _mm512_mask_storeu_epi32((uint32_t *)dst + (size_t)(r / 2) * ds + q, m,
                                     bf16_pairs(lo, hi));
        }
    }
}

void gp_dconv_sin2_avx512(const float *x, float *y, size_t n) {
    for (size_t q = 0; q < n; q += 16) {
        const __mmask16 m = tail_mask(n - q);
        _mm512_mask_storeu_ps(y + q, m, sin2_v(_mm512_maskz_loadu_ps(m, x + q)));
    }
}

/* ---- grouped transposed convolution ---- */

/* Up-sampling by `stride` with two input channels per output channel and kernel 2 * stride
 * (CODEC.md A.1.2): y[o][q*s + u] = b + sum over c of x[c][q] w[c][u] + x[c][q-1] w[c][u+s],
 * sixteen outputs (16/s input samples) per vector. Needs 16 % stride == 0. */
void gp_dconv_convt_rows_avx512(const gp_convt1d *conv, const float *x, size_t xs, size_t n_in,
                                float *y, size_t ys, int o0, int o1) {
    const int s = conv->stride;
    int idx[16], ph[16];
    for (int l = 0; l < 16; l++) {
        idx[l] = l / s;
        ph[l] = l % s;
    }
    const __m512i spread = _mm512_loadu_si512(idx), phase = _mm512_loadu_si512(ph);
    const size_t n_out = n_in * (size_t)s, step = (size_t)(16 / s);
    for (int o = o0; o < o1; o++) {
        __m512 wc[2], wp[2];
        for (int g = 0; g < 2; g++) {
            const float *w = conv->weight + (size_t)(2 * o + g) * (size_t)conv->kernel;
            const __mmask16 taps = tail_mask((size_t)s); /* w[u], u = l % s */
            wc[g] = _mm512_permutexvar_ps(phase, _mm512_maskz_loadu_ps(taps, w));
            wp[g] = _mm512_permutexvar_ps(phase, _mm512_maskz_loadu_ps(taps, w + s));
        }
        const __m512 b = _mm512_set1_ps(conv->bias[o]);
        const float *xr = x + (size_t)(2 * o) * xs + 1; /* column 0 is the history */
        float *yo = y + (size_t)o * ys;
        for (size_t q = 0, j = 0; j < n_out; q += step, j += 16) {
            const __mmask16 now = tail_mask(n_in - q), before = tail_mask(n_in - q + 1);
            __m512 acc = b;
            for (int g = 0; g < 2; g++) { /* lane l: input q + l/s, and the one before */
                const float *xg = xr + (size_t)g * xs + q;
                const __m512 xc = _mm512_permutexvar_ps(spread, _mm512_maskz_loadu_ps(now, xg));
                const __m512 xp =
                    _mm512_permutexvar_ps(spread, _mm512_maskz_loadu_ps(before, xg - 1));
                acc = _mm512_fmadd_ps(xc, wc[g], acc);
                acc = _mm512_fmadd_ps(xp, wp[g], acc);
            }
            _mm512_mask_storeu_ps(yo + j, tail_mask(n_out - j), acc);
        }
    }
}
