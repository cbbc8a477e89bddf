/* conv_direct_avx2.c — AVX2+FMA micro-kernels and epilogues of the direct convolution (see
 * compute/conv_direct.h), f32 only (bf16 dot products need AVX512-BF16).
 *
 * Same scheme as conv_direct_avx512.c with 8-float vectors and 16 registers:
 * time layout 6 output channels x 2 vectors of 8 samples (12 accumulators, the 2 input
 * vectors and one broadcast weight: 15 of the 16 registers; 4 x 3 left the compiler one
 * register short, so it re-read the third input vector from memory for every FMA, and
 * measured ~10 % slower on the 27- to 108-channel stages), channel
 * layout 1 vector of 8 output channels x 8 samples. Accumulation order per output sample:
 * bias, channels ascending, taps ascending.
 */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "compute/conv_direct.h"

#define MR 6      /* time layout: channels per block */
#define NR 2      /* time layout: vectors per tile */
#define NN 8      /* channel layout: samples per tile */
#define TILE_W 16 /* tile buffer row length (time layout: NR * 8) */
#define TILE_R 8  /* tile buffer rows */
#define ALWAYS_INLINE inline __attribute__((always_inline))

static ALWAYS_INLINE __m256i tail_mask(size_t left) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    int n = left >= 8 ? 8 : (int)left;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lanes);
}

/* sin(x)^2 as in conv_direct_avx512.c: Cody-Waite reduction by pi, Taylor to r^11. */
static ALWAYS_INLINE __m256 sin2_v(__m256 x) {
    __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.318309886183790671538f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(3.140625f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(9.67502593994140625e-4f), r);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.509957990978376432e-7f), r);
    __m256 r2 = _mm256_mul_ps(r, r);
    __m256 p = _mm256_set1_ps(-1.0f / 39916800);
    p = _mm256_fmadd_ps(p, r2, _mm256_set1_ps(1.0f / 362880));
    p = _mm256_fmadd_ps(p, r2, _mm256_set1_ps(-1.0f / 5040));
    p = _mm256_fmadd_ps(p, r2, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r2, _mm256_set1_ps(-1.0f / 6));
    __m256 s = _mm256_fmadd_ps(_mm256_mul_ps(r, r2), p, r);
    __m256 out = _mm256_mul_ps(s, s);
    __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    int bad = _mm256_movemask_ps(_mm256_cmp_ps(ax, _mm256_set1_ps(25735.93f), _CMP_NLE_UQ));
    if (__builtin_expect(bad != 0, 0)) {
        float in[8], o[8];
        _mm256_storeu_ps(in, x);
        _mm256_storeu_ps(o, out);
        for (int l = 0; l < 8; l++) {
            if (bad >> l & 1) {
                float v = sinf(in[l]);
                o[l] = v * v;
            }
        }
        out = _mm256_loadu_ps(o);
    }
    return out;
}

static ALWAYS_INLINE __m256 act_v(const gp_act *act, int c, __m256 v) {
    if (c < act->n_snake) {
        __m256 s = sin2_v(_mm256_mul_ps(v, _mm256_set1_ps(act->alpha[c])));
        return _mm256_fmadd_ps(_mm256_set1_ps(act->inv_alpha[c]), s, v);
    }
    if (act->kind == GP_ACT_LRELU || act->kind == GP_ACT_HALF_SNAKE) {
        __m256 pos = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ);
        return _mm256_blendv_ps(_mm256_mul_ps(v, _mm256_set1_ps(act->slope)), v, pos);
    }
    if (act->kind == GP_ACT_ELU) {
        float t[8];
        _mm256_storeu_ps(t, v);
        for (int l = 0; l < 8; l++) t[l] = t[l] > 0.0f ? t[l] : expm1f(t[l]);
        return _mm256_loadu_ps(t);
    }
    return v;
}

static ALWAYS_INLINE __m256 epi_value(const gp_dconv_out *out, const float *trow, size_t off,
                                      __m256i m) {
    __m256 v = _mm256_load_ps(trow);
    if (out->base) v = _mm256_add_ps(v, _mm256_maskload_ps(out->base + off, m));
    if (out->store) _mm256_maskstore_ps(out->store + off, m, v);
    if (out->acc_mode != GP_DCONV_ACC_NONE) {
        float *a = out->acc + off;
        __m256 s = v;
        if (out->acc_mode != GP_DCONV_ACC_SET) s = _mm256_add_ps(_mm256_maskload_ps(a, m), v);
        if (out->acc_mode == GP_DCONV_ACC_ADD_DIV)
            s = _mm256_div_ps(s, _mm256_set1_ps(out->acc_div));
        _mm256_maskstore_ps(a, m, s);
        if (out->act_src == GP_DCONV_ACT_OF_ACC) return s;
    }
    if (out->act_src == GP_DCONV_ACT_OF_FROM) return _mm256_maskload_ps(out->act_from + off, m);
    return v;
}

/* f32 destinations only (the bf16 path is AVX-512). */
static void epilogue(const gp_dconv_out *out, const float *tile, int o0, int rows, size_t n0,
                     size_t nc) {
    for (int r = 0; r < rows; r++) {
        const int o = o0 + r;
        for (size_t q = 0; q < nc; q += 8) {
            const __m256i m = tail_mask(nc - q);
            __m256 v =
                epi_value(out, tile + (size_t)r * TILE_W + q, (size_t)o * out->ld + n0 + q, m);
            if (out->act)
                _mm256_maskstore_ps((float *)out->act_dst + (size_t)o * out->act_ld + n0 + q, m,
                                    act_v(out->act, o, v));
        }
    }
}

/* `full`: the tile's last vector is whole, so it is loaded like the others
 * (a masked load every pass costs a load of the mask too: with 16 registers
 * the compiler keeps neither, and the x vectors spill into the FMAs). */
static ALWAYS_INLINE void ktime(const int mr, const int nr, const bool full, const float *w,
                                const float *bias, int c_in, int k, size_t d, const float *x,
                                size_t xs, __m256i last, float *tile) {
    __m256 acc[MR][NR];
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 3
        for (int j = 0; j < nr; j++) acc[i][j] = _mm256_set1_ps(bias[i]);
    for (int c = 0; c < c_in; c++) {
        const float *xt = x + (size_t)c * xs;
        for (int l = 0; l < mr * k; l += 16)
            GP_DCONV_PREFETCH(w + GP_DCONV_PF_TIME + l, GP_DCONV_PF_TIME_HINT);
        for (int t = 0; t < k; t++, xt += d, w += mr) {
            __m256 xv[NR];
#pragma GCC unroll 3
            for (int j = 0; j < nr; j++)
                xv[j] = full || j + 1 < nr ? _mm256_loadu_ps(xt + 8 * j)
                                           : _mm256_maskload_ps(xt + 8 * j, last);
#pragma GCC unroll 6
            for (int i = 0; i < mr; i++) {
                const __m256 wb = _mm256_broadcast_ss(w + i);
#pragma GCC unroll 3
                for (int j = 0; j < nr; j++) acc[i][j] = _mm256_fmadd_ps(wb, xv[j], acc[i][j]);
            }
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 3
        for (int j = 0; j < nr; j++) _mm256_store_ps(tile + i * TILE_W + 8 * j, acc[i][j]);
}

/* `w16`: the weights are stored as bf16 (GP_DCONV_W16: 8 channels' weights in 16 bytes,
 * half the bytes a stream's first stage reads from memory per frame) and widened exactly
 * in registers; the FMAs are those of the f32 weights rounded to bf16, in the same order. */
static ALWAYS_INLINE void kchan(const int nn, const bool w16, const void *wp, const float *bias,
                                int c_in, int k, size_t d, const float *x, size_t xs, float *tile) {
    const char *w = wp;
    const size_t w_step = w16 ? 16 : 32; /* bytes of one tap's 8 weights */
    __m256 acc[NN];
    const __m256 b = _mm256_load_ps(bias);
#pragma GCC unroll 8
    for (int j = 0; j < nn; j++) acc[j] = b;
    for (int c = 0; c < c_in; c++) {
        const float *xt = x + (size_t)c * xs;
        for (int t = 0; t < k; t++, xt += d, w += w_step) {
            GP_DCONV_PREFETCH(w + 4 * GP_DCONV_PF_CHAN, GP_DCONV_PF_CHAN_HINT);
            const __m256 wv =
                w16 ? _mm256_castsi256_ps(_mm256_slli_epi32(
                          _mm256_cvtepu16_epi32(_mm_load_si128((const __m128i *)(const void *)w)),
                          16))
                    : _mm256_load_ps((const float *)(const void *)w);
#pragma GCC unroll 8
            for (int j = 0; j < nn; j++)
                acc[j] = _mm256_fmadd_ps(wv, _mm256_broadcast_ss(xt + j), acc[j]);
        }
    }
    float buf[NN][8] __attribute__((aligned(32)));
#pragma GCC unroll 8
    for (int j = 0; j < nn; j++) _mm256_store_ps(buf[j], acc[j]);
    for (int r = 0; r < 8; r++)
        for (int j = 0; j < nn; j++) tile[r * TILE_W + j] = buf[j][r];
}

#define TIME_CASES(mr)                                                                             \
    switch (nr) {                                                                                  \
    case 1: ktime(mr, 1, false, w, bias, c_in, k, d, x, xs, last, tile); break;                    \
    default: ktime(mr, 2, false, w, bias, c_in, k, d, x, xs, last, tile); break;                   \
    }

static void time_f32(int mr, int nr, bool full, const float *w, const float *bias, int c_in, int k,
                     size_t d, const float *x, size_t xs, __m256i last, float *tile) {
    /* the common tile: 6 channels × 2 whole vectors */
    if (full && mr == MR && nr == NR) {
        ktime(MR, NR, true, w, bias, c_in, k, d, x, xs, last, tile);
        return;
    }
    switch (mr) {
    case 1: TIME_CASES(1) break;
    case 2: TIME_CASES(2) break;
    case 3: TIME_CASES(3) break;
    case 4: TIME_CASES(4) break;
    case 5: TIME_CASES(5) break;
    default: TIME_CASES(6) break;
    }
}

#define CHAN_CASES(W16)                                                                            \
    switch (nn) {                                                                                  \
    case 1: kchan(1, W16, w, bias, c_in, k, d, x, xs, tile); break;                                \
    case 2: kchan(2, W16, w, bias, c_in, k, d, x, xs, tile); break;                                \
    case 3: kchan(3, W16, w, bias, c_in, k, d, x, xs, tile); break;                                \
    case 4: kchan(4, W16, w, bias, c_in, k, d, x, xs, tile); break;                                \
    case 5: kchan(5, W16, w, bias, c_in, k, d, x, xs, tile); break;                                \
    case 6: kchan(6, W16, w, bias, c_in, k, d, x, xs, tile); break;                                \
    case 7: kchan(7, W16, w, bias, c_in, k, d, x, xs, tile); break;                                \
    default: kchan(8, W16, w, bias, c_in, k, d, x, xs, tile); break;                               \
    }

static void chan_any(bool w16, int nn, const void *w, const float *bias, int c_in, int k, size_t d,
                     const float *x, size_t xs, float *tile) {
    if (w16)
        CHAN_CASES(true)
    else
        CHAN_CASES(false)
}

void gp_dconv_tiles_avx2(const gp_dconv *conv, const gp_dconv_signal *sig, int n_sig, size_t n,
                         const gp_dconv_plan *plan, long t0, long t1) {
    float tile[TILE_R * TILE_W] __attribute__((aligned(32)));
    const int k = conv->kernel;
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
        const float *w = (const float *)conv->weight + (size_t)b * conv->block_elems;
        const float *x = (const float *)s->x + n0;
        if (conv->chan) {
            chan_any(conv->type == GP_DCONV_W16, (int)nc, w, conv->bias + o0, conv->c_in, k, d, x,
                     s->xs, tile);
        } else {
            const int nr = (int)((nc + 7) / 8);
            time_f32(rows, nr, nc == 8 * (size_t)nr, w, conv->bias + o0, conv->c_in, k, d, x, s->xs,
                     tail_mask(nc - 8 * (size_t)(nr - 1)), tile);
        }
        epilogue(&s->out, tile, o0, rows, n0, nc);
    }
}

void gp_dconv_act_rows_avx2(const gp_act *act, const float *src, size_t ss, float *dst, size_t ds,
                            int r0, int r1, size_t n) {
    for (int r = r0; r < r1; r++) {
        for (size_t q = 0; q < n; q += 8) {
            const __m256i m = tail_mask(n - q);
            __m256 v = act_v(act, r, _mm256_maskload_ps(src + (size_t)r * ss + q, m));
            _mm256_maskstore_ps(dst + (size_t)r * ds + q, m, v);
        }
    }
}

void gp_dconv_sin2_avx2(const float *x, float *y, size_t n) {
    for (size_t q = 0; q < n; q += 8) {
        const __m256i m = tail_mask(n - q);
        _mm256_maskstore_ps(y + q, m, sin2_v(_mm256_maskload_ps(x + q, m)));
    }
}

/* The grouped up-sampling transposed convolution (kernel 2 · stride, two input channels
 * per output; stride dividing 8), as gp_dconv_convt_rows_avx512 does it with 16 lanes: lane
 * l of a vector is output j + l, the input q + l / s times tap l % s plus the input before
 * it times tap l % s + s, for each of the two inputs in order (the same FMAs, so the same
 * values as the AVX-512 kernel). Column 0 of each input row is the history. */
void gp_dconv_convt_rows_avx2(const gp_convt1d *conv, const float *x, size_t xs, size_t n_in,
                              float *y, size_t ys, int o0, int o1) {
    const int s = conv->stride;
    int idx[8], ph[8];
    for (int l = 0; l < 8; l++) {
        idx[l] = l / s;
        ph[l] = l % s;
    }
    const __m256i spread = _mm256_loadu_si256((const void *)idx);
    const __m256i phase = _mm256_loadu_si256((const void *)ph);
    const size_t n_out = n_in * (size_t)s, step = (size_t)(8 / s);
    const __m256i taps = tail_mask((size_t)s); /* w[u], u = l % s */
    for (int o = o0; o < o1; o++) {
        __m256 wc[2], wp[2];
        for (int g = 0; g < 2; g++) {
            const float *w = conv->weight + (size_t)(2 * o + g) * (size_t)conv->kernel;
            wc[g] = _mm256_permutevar8x32_ps(_mm256_maskload_ps(w, taps), phase);
            wp[g] = _mm256_permutevar8x32_ps(_mm256_maskload_ps(w + s, taps), phase);
        }
        const __m256 b = _mm256_set1_ps(conv->bias[o]);
        const float *xr = x + (size_t)(2 * o) * xs + 1;
        float *yo = y + (size_t)o * ys;
        for (size_t q = 0, j = 0; j < n_out; q += step, j += 8) {
            const __m256i now = tail_mask(n_in - q), before = tail_mask(n_in - q + 1);
            __m256 acc = b;
            for (int g = 0; g < 2; g++) {
                const float *xg = xr + (size_t)g * xs + q;
                const __m256 xc = _mm256_permutevar8x32_ps(_mm256_maskload_ps(xg, now), spread);
                const __m256 xp =
                    _mm256_permutevar8x32_ps(_mm256_maskload_ps(xg - 1, before), spread);
                acc = _mm256_fmadd_ps(xc, wc[g], acc);
                acc = _mm256_fmadd_ps(xp, wp[g], acc);
            }
            _mm256_maskstore_ps(yo + j, tail_mask(n_out - j), acc);
        }
    }
}
