/* conv_tiles_kernels.h — what compute/conv_tiles.c (the driver of GP_DCONV_TILES) and
 * its two kernel files share: one chunk of a convolution as a job for the tile loop,
 * built once per chunk by the driver and run by conv_tiles_amx.c (the AMX instructions)
 * or conv_tiles_emulated.c (the same products in plain C).
 *
 * The products: an A tile is 16 output channels x 16 input channels, each weight twice
 * (bf16 words 2j and 2j + 1 of a row both hold w[co][ci_j][tap]); a B tile is 16 input
 * channels (rows) x 16 output samples, each sample's input as the bf16 pair (hi, lo) with
 * hi + lo = x to ~16 bits. One tile product (TDPBF16PS) therefore adds w * hi + w * lo
 * for 16 channels into a 16 x 16 f32 tile. The input of all taps comes from one array,
 * XB [row = input channel][column = sample] of 32-bit (hi | lo << 16) words: the B tile
 * of tap t for output samples s0 .. s0 + 15 is 16 rows from column s0 + t * dilation,
 * with the row stride of XB (no unrolled copy per tap). */
#ifndef GP_COMPUTE_CPU_CONV_TILES_KERNELS_H
#define GP_COMPUTE_CPU_CONV_TILES_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#define GP_AMX_SIDE 16   /* output channels, input channels or samples per tile side */
#define GP_AMX_WORDS 256 /* 32-bit words per tile (16 rows of 64 bytes) */

typedef struct gp_tiles_chunk {
    const uint32_t *a; /* the packed weights: block b (16 output channels) at a + b * a_block,
                          inside it tap t's input block k at (t * cib + k) * GP_AMX_WORDS */
    size_t a_block;    /* words per block */
    int cib;           /* input channel blocks of 16 */
    int kernel, dilation;
    int b0, b1;         /* the output channel blocks to compute, b1 - b0 even */
    const uint32_t *xb; /* [cib * 16][xw] input words (see above) */
    size_t xw;          /* words per XB row: nt * 16 + (kernel - 1) * dilation */
    int nt;             /* sample blocks of 16 */
    float *v;           /* results: output channel r at v + r * vld (r from 0), samples
                           from 0 to nt * 16 */
    size_t vld;
} gp_tiles_chunk;

/* The tile loop over blocks [b0, b1) x nt sample blocks; every result is the sum, in
 * this order, over taps ascending, input blocks ascending, and the 16 channels of a
 * block ascending (the hardware's order inside one product), so a sample's value does
 * not depend on which chunk, sample block or thread computes it. */
void gp_tiles_chunk_amx(const gp_tiles_chunk *c);
void gp_tiles_chunk_emulated(const gp_tiles_chunk *c);

/* XB rows for one chunk: rows [0, c_in) from x (row stride xs floats, `valid` samples
 * from column 0), zero beyond `valid` up to xw and in rows [c_in, rows). The AVX-512
 * version rounds with VCVTNEPS2BF16 (denormals to zero, as the tile unit reads them). */
void gp_tiles_split_avx512(const float *x, size_t xs, int c_in, int rows, size_t valid,
                           uint32_t *xb, size_t xw);

/* gp_dconv_epilogue_rows's value part (bias, residual, store, accumulator) on AVX-512,
 * bit-identical to it; the caller applies the activation. */
struct gp_dconv;
struct gp_dconv_out;
void gp_tiles_epilogue_avx512(const struct gp_dconv *conv, const struct gp_dconv_out *o, float *v,
                              size_t vld, int r0, int r1, size_t t0, size_t len);

#endif
