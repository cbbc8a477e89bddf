/* conv_tiles_amx.c — GP_DCONV_TILES on the AMX unit: the tile loop of conv_tiles_body.h
 * over the AMX instructions, and the AVX-512 split of a chunk's inputs into bf16 pairs.
 * Compiled with AVX-512 and -mamx-tile -mamx-bf16 (Makefile: *_amx.c); conv_tiles.c
 * calls it only after finding the tile unit and getting the kernel's permission to use
 * it. */
#include <immintrin.h>
#include <string.h>

#include "compute/conv_direct.h"
#include "compute/cpu/conv_tiles_kernels.h"

/* The 64-byte operand of LDTILECFG (palette 1). */
typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static void tiles_config(void) {
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        cfg.colsb[i] = 64;
        cfg.rows[i] = 16;
    }
    _tile_loadconfig(&cfg);
}

/* The tile intrinsics are asm statements without a memory clobber: the fence keeps the
 * compiler from moving memory accesses across the loop's stores. */
#define TCONFIG() tiles_config()
#define TZERO(t) _tile_zero(t)
#define TLOAD(t, p, stride) _tile_loadd(t, p, stride)
#define TSTORE(t, p, stride) _tile_stored(t, p, stride)
#define TDP(c, a, b) _tile_dpbf16ps(c, a, b)
#define TRELEASE()                                                                                 \
    do {                                                                                           \
        _tile_release();                                                                           \
        __asm__ volatile("" ::: "memory");                                                         \
    } while (0)
#define TILES_CHUNK_FN gp_tiles_chunk_amx
#include "compute/cpu/conv_tiles_body.h"
#define MATMUL_TILES_FN gp_matmul_tiles_amx
#include "compute/cpu/matmul_tiles_body.h"

/* 16 values as their bf16 terms hi = bf16(x), lo = bf16(x - hi). */
static inline void terms16(__m512 x, __m256i *hi, __m256i *lo) {
    const __m256bh h = _mm512_cvtneps_pbh(x);
    const __m512 hf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)h), 16));
    *hi = (__m256i)h;
    *lo = (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(x, hf));
}

/* The hi and lo terms of 16 values each of channels a and b, as pair words (a's term in
 * the low half). */
static inline void split16(__m512 a, __m512 b, __m512i *hi, __m512i *lo) {
    __m256i ha, la, hb, lb;
    terms16(a, &ha, &la);
    terms16(b, &hb, &lb);
    *hi = _mm512_or_si512(_mm512_cvtepu16_epi32(ha),
                          _mm512_slli_epi32(_mm512_cvtepu16_epi32(hb), 16));
    *lo = _mm512_or_si512(_mm512_cvtepu16_epi32(la),
                          _mm512_slli_epi32(_mm512_cvtepu16_epi32(lb), 16));
}

void gp_tiles_split_avx512(const float *x, size_t xs, int c_in, int rows, size_t valid,
                           uint32_t *xhi, uint32_t *xlo, size_t xw) {
    for (int r = 0; r < rows; r++) {
        uint32_t *dh = xhi + (size_t)r * xw, *dl = xlo + (size_t)r * xw;
        if (2 * r >= c_in) {
            memset(dh, 0, xw * sizeof *dh);
            memset(dl, 0, xw * sizeof *dl);
            continue;
        }
        const float *sa = x + (size_t)(2 * r) * xs, *sb = 2 * r + 1 < c_in ? sa + xs : NULL;
        __m512i hi, lo;
        size_t i = 0;
        for (; i < valid; i += 16) {
            const __mmask16 m =
                valid - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (valid - i)) - 1u);
            const __m512 a = _mm512_maskz_loadu_ps(m, sa + i);
            const __m512 b = sb ? _mm512_maskz_loadu_ps(m, sb + i) : _mm512_setzero_ps();
            split16(a, b, &hi, &lo);
            _mm512_mask_storeu_epi32(dh + i, m, hi);
            _mm512_mask_storeu_epi32(dl + i, m, lo);
        }
        memset(dh + valid, 0, (xw - valid) * sizeof *dh);
        memset(dl + valid, 0, (xw - valid) * sizeof *dl);
    }
}

/* gp_dconv_epilogue_rows with bias on AVX-512: the same additions and division in the
 * same order per element (so the same bits), 16 samples at a time. */
void gp_tiles_epilogue_avx512(const gp_dconv *conv, const gp_dconv_out *o, float *v, size_t vld,
                              int r0, int r1, size_t t0, size_t len) {
    for (int c = r0; c < r1; c++) {
        float *vr = v + (size_t)c * vld;
        const size_t off = (size_t)c * o->ld + t0;
        const __m512 bias = _mm512_set1_ps(conv->bias[c]), div = _mm512_set1_ps(o->acc_div);
        for (size_t t = 0; t < len; t += 16) {
            const __mmask16 m =
                len - t >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (len - t)) - 1u);
            __m512 x = _mm512_add_ps(_mm512_maskz_loadu_ps(m, vr + t), bias);
            if (o->base) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, o->base + off + t));
            _mm512_mask_storeu_ps(vr + t, m, x);
            if (o->store) _mm512_mask_storeu_ps(o->store + off + t, m, x);
            if (o->acc && o->acc_mode != GP_DCONV_ACC_NONE) {
                float *a = o->acc + off + t;
                __m512 y = x;
                if (o->acc_mode != GP_DCONV_ACC_SET)
                    y = _mm512_add_ps(_mm512_maskz_loadu_ps(m, a), x);
                if (o->acc_mode == GP_DCONV_ACC_ADD_DIV) y = _mm512_div_ps(y, div);
                _mm512_mask_storeu_ps(a, m, y);
            }
        }
    }
}

void gp_matmul_tiles_split_avx512(const float *x, int n, int ldx, int K, int rblocks, int kb,
                                  int r0, int r1, uint16_t *a) {
    const size_t term = (size_t)rblocks * kb * 512;
    for (int r = r0; r < r1; r++) {
        uint16_t *row = a + (size_t)(r / 16) * kb * 512 + (size_t)(r % 16) * 32;
        const float *s = r < n ? x + (size_t)r * ldx : NULL;
        for (int i = 0; i < kb * 32; i += 16) {
            const __mmask16 m = !s            ? 0
                                : K - i >= 16 ? (__mmask16)0xffff
                                : K > i       ? (__mmask16)((1u << (K - i)) - 1u)
                                              : 0;
            __m256i h, l;
            terms16(_mm512_maskz_loadu_ps(m, s ? s + i : x), &h, &l);
            uint16_t *d = row + (size_t)(i / 32) * 512 + i % 32;
            _mm256_storeu_si256((__m256i *)d, h);
            _mm256_storeu_si256((__m256i *)(d + term), l);
        }
    }
}
