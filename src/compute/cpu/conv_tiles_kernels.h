/* conv_tiles_kernels.h — what compute/conv_tiles.c (the driver of GP_DCONV_TILES) and
 * its two kernel files share: one chunk of a convolution as a job for the tile loop,
 * built once per chunk by the driver and run by conv_tiles_amx.c (the AMX instructions)
 * or conv_tiles_emulated.c (the same products in plain C).
 *
 * The products: an A tile is 16 output channels x 32 input channels of bf16 weights (word
 * j of a row holds the weights of input channels 2j and 2j + 1, the VNNI pairs); a B tile
 * is 16 channel pairs (rows) x 16 output samples, word n of a row holding the two
 * channels' inputs at sample n. Each f32 input is split into two bf16 terms, hi = bf16(x)
 * and lo = bf16(x - hi) (~16 bits together), kept in two arrays of such words, XHI and XLO
 * [row = channel pair][column = sample]; every A tile meets the hi tile and then the lo
 * tile, so the weights are read once and carry no copy per term. The B tile of tap t for
 * output samples s0 .. s0 + 15 is 16 rows from column s0 + t * dilation, with the row
 * stride of the arrays (no unrolled copy per tap). */
#ifndef GP_COMPUTE_CPU_CONV_TILES_KERNELS_H
#define GP_COMPUTE_CPU_CONV_TILES_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"

/* x as its two bf16 terms: hi = bf16(x), lo = bf16(x - hi) (the plain-C splits of the
 * emulated paths; the AVX-512 ones compute the same with VCVTNEPS2BF16). */
static inline void gp_tiles_terms(float x, uint16_t *hi, uint16_t *lo) {
    *hi = gp_f32_to_bf16(x);
    *lo = gp_f32_to_bf16(x - gp_bf16_to_f32(*hi));
}

#define GP_AMX_SIDE 16   /* output channels, input channels or samples per tile side */
#define GP_AMX_WORDS 256 /* 32-bit words per tile (16 rows of 64 bytes) */

typedef struct gp_tiles_chunk {
    const uint32_t *a; /* the packed weights: block b (16 output channels) at a + b * a_block,
                          inside it tap t's input block k (32 channels) at
                          (t * cib + k) * GP_AMX_WORDS */
    size_t a_block;    /* words per block */
    int cib;           /* input channel blocks of 32 */
    int kernel, dilation;
    int b0, b1;          /* the output channel blocks to compute, b1 - b0 even */
    const uint32_t *xhi; /* [cib * 16][xw] words of the inputs' hi terms (see above) */
    const uint32_t *xlo; /* the same for the lo terms */
    size_t xw;           /* words per row: nt * 16 + (kernel - 1) * dilation */
    int nt;              /* sample blocks of 16 */
    float *v;            /* results: output channel r at v + r * vld (r from 0), samples
                            from 0 to nt * 16 */
    size_t vld;
} gp_tiles_chunk;

/* The tile loop over blocks [b0, b1) x nt sample blocks; every result is the sum, in
 * this order, over taps ascending, input blocks ascending, then the block's hi terms and
 * its lo terms (the hardware's order inside one product), so a sample's value does not
 * depend on which chunk, sample block or thread computes it. */
void gp_tiles_chunk_amx(const gp_tiles_chunk *c);
void gp_tiles_chunk_emulated(const gp_tiles_chunk *c);

/* The hi and lo rows for one chunk: pair row p from channels 2p and 2p + 1 of x (row
 * stride xs floats, `valid` samples from column 0; channels from c_in on are zero), zero
 * beyond `valid` up to xw and in rows [ceil(c_in / 2), rows). The AVX-512 version rounds
 * with VCVTNEPS2BF16 (denormals to zero, as the tile unit reads them). */
void gp_tiles_split_avx512(const float *x, size_t xs, int c_in, int rows, size_t valid,
                           uint32_t *xhi, uint32_t *xlo, size_t xw);

/* Prefill's y = x·Wᵀ on tiles (compute/matmul_tiles.c, cpu/matmul_tiles_body.h). */
typedef struct gp_matmul_tiles_job {
    const uint32_t *b; /* weights: output block jb, column block k at
                          (jb * kb + k) * GP_AMX_WORDS: 16 rows (column pairs) x 16
                          words (the block's 16 outputs), VNNI */
    int kb;            /* column blocks of 32 */
    int j0, j1;        /* output blocks to compute, j1 - j0 even */
    const uint16_t *a; /* activations' bf16 terms packed as tiles: term t (hi, lo), row
                          block rb, column block k at ((t * rblocks + rb) * kb + k) * 512
                          (16 rows x 32 columns, 1 KB) */
    int rblocks;       /* row blocks packed in a */
    int r0b, r1b;      /* row blocks to compute */
    int kc;            /* column blocks per chunk (the activations kept in L1) */
    int n, N;          /* real rows and outputs */
    float *y;
    int ldy;
    float *c; /* accumulators: (j1 - j0) / 2 x (r1b - r0b + 1) / 2 x 4 tiles of scratch */
} gp_matmul_tiles_job;

void gp_matmul_tiles_amx(const gp_matmul_tiles_job *j);
void gp_matmul_tiles_emulated(const gp_matmul_tiles_job *j);
/* Rows [r0, r1) of x [n][ldx] (K columns; rows past n are zeros) as bf16 hi and lo
 * terms packed as the job's tiles (a, rblocks row blocks of kb column blocks),
 * zero-padded: each row's words are its own, so row ranges may run in parallel. */
void gp_matmul_tiles_split_avx512(const float *x, int n, int ldx, int K, int rblocks, int kb,
                                  int r0, int r1, uint16_t *a);

/* gp_dconv_epilogue_rows's value part (bias, residual, store, accumulator) on AVX-512,
 * bit-identical to it; the caller applies the activation. */
struct gp_dconv;
struct gp_dconv_out;
void gp_tiles_epilogue_avx512(const struct gp_dconv *conv, const struct gp_dconv_out *o, float *v,
                              size_t vld, int r0, int r1, size_t t0, size_t len);

#endif
