/* conv.h — 1-D convolution and activation kernels for the audio codec.
 *
 * Signals are channel-major f32 buffers: row c holds the samples of channel
 * c, rows `stride` floats apart. Every kernel is "valid" (no implicit
 * padding): callers put the left context — a causal conv's history, or the
 * replicate/reflect/zero padding of a non-causal conv — into the input rows
 * themselves, which is what makes one kernel serve the streaming decoder,
 * the one-shot decoder and the encoder alike.
 *
 * Two implementations sit side by side:
 *   gp_*_ref   plain readable loops, the reference every test trusts;
 *   gp_*_fast  convolution as im2col + OpenBLAS sgemm over blocks of output
 *              columns (optionally split over output channels on a gp_pool),
 *              and Snake with a vectorised polynomial sine.
 * The fast conv can be asked for a fixed column block per BLAS call, which
 * keeps streaming results independent of the chunking.
 */
#ifndef GP_COMPUTE_CONV_H
#define GP_COMPUTE_CONV_H

#include <stddef.h>

#include "base/error.h"
#include "base/pool.h"

/* Convolution: y[o][n] = b[o] + sum_c sum_t w[o][c][t] * x[c][n*stride + t*dilation]. */
typedef struct gp_conv1d {
    int c_in, c_out, kernel, dilation, stride;
    float *weight; /* [c_out][c_in][kernel], 64-byte aligned */
    float *bias;   /* [c_out] */
} gp_conv1d;

/* Causal grouped transposed convolution (PyTorch ConvTranspose1d, output trimmed on the
 * right by kernel - stride): n_in inputs give n_in * stride outputs. */
typedef struct gp_convt1d {
    int c_in, c_out, kernel, stride, groups;
    float *weight; /* [c_in][c_out / groups][kernel] */
    float *bias;   /* [c_out] */
} gp_convt1d;

typedef enum gp_act_kind {
    GP_ACT_IDENTITY,
    GP_ACT_LRELU,      /* x > 0 ? x : slope * x */
    GP_ACT_SNAKE,      /* x + 1/(alpha + 1e-9) * sin(alpha * x)^2, per-channel alpha */
    GP_ACT_HALF_SNAKE, /* Snake on channels [0, C/2), LeakyReLU on the rest */
    GP_ACT_ELU,        /* x > 0 ? x : exp(x) - 1 */
} gp_act_kind;

typedef struct gp_act {
    gp_act_kind kind;
    int channels;
    int n_snake;      /* channels [0, n_snake) use Snake */
    float *alpha;     /* [n_snake] */
    float *inv_alpha; /* [n_snake]: 1 / (alpha + 1e-9f), precomputed */
    float slope;      /* LeakyReLU negative slope (0.01, PyTorch's default) */
} gp_act;

typedef enum gp_pad_mode { GP_PAD_ZEROS, GP_PAD_REPLICATE, GP_PAD_REFLECT } gp_pad_mode;

/* ---- setup ---- */
/* Fill an activation; `alpha` (n_snake values, copied) is needed for the Snake kinds. */
int gp_act_init(gp_act *act, gp_act_kind kind, int channels, const float *alpha, gp_error *err);
void gp_act_free(gp_act *act);
void gp_conv1d_free(gp_conv1d *conv);
void gp_convt1d_free(gp_convt1d *conv);
/* Input samples per channel a transposed conv needs from before the chunk. */
int gp_convt1d_history(const gp_convt1d *conv);
/* Fill the `left` and `right` pad columns of each row around its n centre samples
 * (row r spans buf[r*stride, r*stride + left + n + right)). Reflect needs left, right < n;
 * replicate needs n >= 1. */
void gp_pad1d_fill(float *buf, size_t stride, int channels, size_t left, size_t n, size_t right,
                   gp_pad_mode mode);

/* ---- reference kernels ---- */
/* n_out outputs per channel; x rows must hold (n_out-1)*stride + (kernel-1)*dilation + 1. */
void gp_conv1d_ref(const gp_conv1d *conv, const float *x, size_t xs, float *y, size_t ys,
                   size_t n_out);
/* x rows: gp_convt1d_history() samples of history, then n_in new samples;
 * y: [c_out][n_in * stride]. */
void gp_convt1d_ref(const gp_convt1d *conv, const float *x, size_t xs, size_t n_in, float *y,
                    size_t ys);
/* The same for output channels [o0, o1) only (y still points at channel 0). */
void gp_convt1d_rows(const gp_convt1d *conv, const float *x, size_t xs, size_t n_in, float *y,
                     size_t ys, int o0, int o1);
/* y = act(x) over `channels` rows of n samples (x == y allowed when xs == ys). */
void gp_act_ref(const gp_act *act, const float *x, size_t xs, float *y, size_t ys, size_t n);

/* ---- fast kernels ---- */
/* Scratch memory a fast conv uses; owned by the caller (one per stream/thread). */
typedef struct gp_conv_scratch {
    float *buf;
    size_t cap; /* floats */
} gp_conv_scratch;

/* Floats of scratch gp_conv1d_fast needs for `conv` with column block `block` (0 = auto). */
size_t gp_conv1d_fast_scratch(const gp_conv1d *conv, size_t block);
int gp_conv_scratch_reserve(gp_conv_scratch *s, size_t floats, gp_error *err);
void gp_conv_scratch_free(gp_conv_scratch *s);
/* Same contract as gp_conv1d_ref, computed `block` output columns per sgemm call (0 = a
 * cache-friendly automatic size). With a fixed block and n_out a multiple of it, each
 * block's results depend only on its own inputs — bit-identical however a signal is cut
 * into calls. Scratch must hold gp_conv1d_fast_scratch(conv, block) floats. `pool` (may
 * be NULL) splits output channels over threads. */
void gp_conv1d_fast(const gp_conv1d *conv, const float *x, size_t xs, float *y, size_t ys,
                    size_t n_out, size_t block, gp_conv_scratch *scratch, gp_pool *pool);
void gp_act_fast(const gp_act *act, const float *x, size_t xs, float *y, size_t ys, size_t n);
/* sin(x)^2 for n values with a vectorised polynomial (max abs error ~2e-7 vs sinf^2). */
void gp_sin2_fast(const float *x, float *y, size_t n);

#endif
