/* conv_direct.h — direct (im2col-free) 1-D convolution on SIMD micro-kernels, with the
 * element-wise work that follows a convolution fused into it.
 *
 * A gp_dconv is a stride-1 convolution (conv.h's gp_conv1d) whose weights were packed at
 * load time into the order a micro-kernel streams them, in f32 or in bf16:
 *
 *   time layout     blocks of `mr` output channels x (vector width * nr) output samples in
 *                   registers: one vector load of input per tap feeds mr broadcast
 *                   weights. Weights [block][c][t][mr]. For signals with many samples.
 *   channel layout  blocks of (vector width * mv) output channels x nn samples: one vector
 *                   of weights per tap feeds nn broadcast input samples. Weights
 *                   [block][c][t][mr]. For short signals (the codec's first stage streams 8
 *                   samples per frame) where a time vector would be mostly empty.
 *
 * Taps and dilation are handled by offsetting the input pointer: the input rows already
 * hold the left context (a streaming layer's history), as for gp_conv1d_ref.
 *
 * bf16 weights run on AVX512-BF16 dot products (vdpbf16ps, f32 accumulation); their input
 * is bf16 too, stored as channel PAIRS: row p of a bf16 signal holds 32-bit words whose low
 * half is channel 2p and high half channel 2p+1 (an odd channel count pads a zero channel).
 * W16 keeps f32 inputs and arithmetic and only stores the weights as bf16 — for layers
 * whose time goes into reading weights from memory (a stream's first stage).
 *
 * Every output sample is accumulated in one fixed order — bias, then input channels (pairs
 * for bf16) ascending, taps ascending inside each — whatever tile, block, thread or call
 * computes it, so results do not depend on how a signal is cut into calls or how many
 * signals share a call: the streaming decoder relies on that for bit-identical chunking.
 *
 * gp_dconv_run computes one convolution for several independent signals (streams) that
 * share the weights, tiles (block, signal, time) spread over a gp_pool. Each tile's
 * result v = conv + bias then goes through the epilogue gp_dconv_out describes:
 *   v += base                     (residual connection)
 *   store = v                     (f32)
 *   acc = v | acc + v | (acc + v) / div     (averaging parallel branches)
 *   act_dst = act(v)              (the next convolution's input, f32 or bf16 pairs; the
 *                                 activation may also take the new acc, or another signal)
 */
#ifndef GP_COMPUTE_CONV_DIRECT_H
#define GP_COMPUTE_CONV_DIRECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The SIMD kernels' weight prefetch (cpu/conv_direct_avx*.c), in floats ahead of the
 * weights being read: weights stream from memory once per frame when a stream decodes
 * frame by frame.
 * The channel layout (the wide first stage, a few samples per frame) reads each weight
 * once per frame: non-temporal, so the stream does not push the activations out of L2.
 * The time layout re-reads a block's weights for every tile of samples: into every
 * level (T0), since a non-temporal line may skip L2 (Intel's server parts) and then
 * every tile after the first fetches it again from L3 or memory. On the H200 host's
 * Xeon the AVX2 codec with non-temporal time-layout prefetches (and the 6 x 2 tile)
 * measured 36.9-38.5 ms per frame against 29.8-30.0 for the build before both
 * (codec_bench 16 2 1, 2 threads); which of the two costs it is not yet measured
 * there. On the Zen 5 development VM T0 and NTA measure alike (AVX2, 1 thread 22.3-23.4
 * ms both). -D for A/B builds (a hint < 0: no prefetch). */
#define GP_DCONV_PF_CHAN 2048 /* channel layout: 8 KB ahead */
#define GP_DCONV_PF_TIME 1024 /* time layout: 4 KB ahead */
#ifndef GP_DCONV_PF_CHAN_HINT
#define GP_DCONV_PF_CHAN_HINT _MM_HINT_NTA
#endif
#ifndef GP_DCONV_PF_TIME_HINT
#define GP_DCONV_PF_TIME_HINT _MM_HINT_T0
#endif
/* One weight prefetch with one of those hints (none when the hint is < 0). */
#define GP_DCONV_PREFETCH(addr, hint)                                                              \
    do {                                                                                           \
        if ((hint) >= 0) _mm_prefetch((const char *)(addr), (hint));                               \
    } while (0)

#include "base/error.h"
#include "base/pool.h"
#include "compute/conv.h"

typedef enum gp_dconv_type {
    GP_DCONV_F32,    /* f32 weights and inputs, FMA */
    GP_DCONV_BF16,   /* bf16 weights and inputs (channel pairs), vdpbf16ps */
    GP_DCONV_W16,    /* bf16 weights widened in registers, f32 inputs, FMA: half the weight
                        bytes of f32 for memory-bound layers (channel layout, AVX-512 only) */
    GP_DCONV_ONEDNN, /* bf16 weights, f32 inputs in bf16 terms, oneDNN's convolution (AMX
                        where the CPU has it; conv_onednn.c) */
    GP_DCONV_TILES,  /* bf16 weights, f32 inputs as two bf16 terms, our own AMX tile loop
                        (conv_tiles.c; Intel Sapphire Rapids and later) */
} gp_dconv_type;

/* Instruction sets with direct kernels, best last. */
typedef enum gp_dconv_isa {
    GP_DCONV_NONE = 0,
    GP_DCONV_AVX2 = 1,
    GP_DCONV_AVX512 = 2
} gp_dconv_isa;

typedef struct gp_dconv {
    int c_in, c_out, kernel, dilation;
    gp_dconv_type type;
    gp_dconv_isa isa; /* the kernels the weights were packed for */
    bool chan;        /* channel layout (else time layout) */
    int mr;           /* output channels per block (the last block may hold fewer) */
    int n_blocks;
    size_t block_elems; /* floats (f32) or bf16 pairs (bf16) per block */
    void *weight;       /* n_blocks * block_elems, 64-byte aligned */
    bool owns_weight;   /* else the memory belongs to whoever gave it to gp_dconv_pack_into */
    float *bias;        /* [n_blocks * mr], zero beyond c_out ([c_out] for ONEDNN) */
    struct gp_dconv_onednn *onednn; /* ONEDNN: oneDNN's weights and primitives; owned */
} gp_dconv;

typedef enum gp_dconv_acc {
    GP_DCONV_ACC_NONE,
    GP_DCONV_ACC_SET,
    GP_DCONV_ACC_ADD,
    GP_DCONV_ACC_ADD_DIV
} gp_dconv_acc;

/* What the activation is applied to: the result v, the new accumulator value, or another
 * signal of the same shape (e.g. the input of the next parallel branch). */
typedef enum gp_dconv_act_src {
    GP_DCONV_ACT_OF_V,
    GP_DCONV_ACT_OF_ACC,
    GP_DCONV_ACT_OF_FROM
} gp_dconv_act_src;

/* Where a signal's result goes. f32 rows [c_out][ld]; pointers at output sample 0. */
typedef struct gp_dconv_out {
    const float *base; /* v += base (NULL: no residual) */
    float *store;      /* store = v (NULL: not kept) */
    float *acc;        /* branch accumulator, see gp_dconv_acc */
    gp_dconv_acc acc_mode;
    float acc_div;
    size_t ld;
    const gp_act *act; /* act_dst = act(v, acc or act_from) (NULL: none) */
    gp_dconv_act_src act_src;
    const float *act_from; /* [c_out][ld] */
    void *act_dst;         /* f32 [c_out][act_ld], or bf16 pairs [(c_out+1)/2][act_ld] words */
    size_t act_ld;
    bool act_bf16;
} gp_dconv_out;

/* One signal of a call: input rows (f32 [c_in][xs] floats, or bf16 pairs
 * [(c_in+1)/2][xs] words for bf16 weights) holding (n-1) + (kernel-1)*dilation + 1
 * samples from column 0, and its outputs. */
typedef struct gp_dconv_signal {
    const void *x;
    size_t xs;
    gp_dconv_out out;
} gp_dconv_signal;

/* The best instruction set with direct kernels on this CPU (GP_DCONV_NONE: none), capped
 * by GEPARD_KERNELS=scalar|avx2 in the environment. bf16 needs GP_DCONV_AVX512 (with
 * AVX512-BF16). */
gp_dconv_isa gp_dconv_best_isa(void);
bool gp_dconv_isa_has_bf16(gp_dconv_isa isa);
const char *gp_dconv_isa_name(gp_dconv_isa isa);

/* Pack `conv` for `isa` (bf16 rounds the weights to nearest even). `chan` picks the
 * channel layout. */
int gp_dconv_pack(gp_dconv *out, const gp_conv1d *conv, gp_dconv_type type, gp_dconv_isa isa,
                  bool chan, gp_error *err);
/* The same into caller memory (64-byte aligned, gp_dconv_pack_size bytes), which stays
 * the caller's: one block for many layers keeps a model's weights contiguous in the order
 * they are used. */
size_t gp_dconv_pack_size(const gp_conv1d *conv, gp_dconv_type type, gp_dconv_isa isa, bool chan);
int gp_dconv_pack_into(gp_dconv *out, const gp_conv1d *conv, gp_dconv_type type, gp_dconv_isa isa,
                       bool chan, void *mem, gp_error *err);
void gp_dconv_free(gp_dconv *conv);
/* Bytes of packed weights (what one pass over the layer reads). */
size_t gp_dconv_weight_bytes(const gp_dconv *conv);

/* GP_DCONV_ONEDNN (conv_onednn.c): pack `conv` (GEPARD_ERR_UNSUPPORTED where
 * oneDNN has no bf16 matmul), and run it (from gp_dconv_run). */
int gp_dconv_onednn_pack(gp_dconv *out, const gp_conv1d *conv, gp_error *err);
void gp_dconv_onednn_free(struct gp_dconv_onednn *o);
void gp_dconv_onednn_run(const gp_dconv *conv, const gp_dconv_signal *sig, int n_sig, size_t n,
                         gp_pool *pool);

/* GP_DCONV_TILES (conv_tiles.c). The weights are packed like the other types (mr = 16
 * output channels per block, an even number of blocks, block_elems words per block).
 * gp_dconv_tiles_mode says what runs them: "amx" (the CPU's tile unit), "emulated"
 * (GEPARD_TILES=emulate: the same products in plain C, for tests on any CPU) or NULL
 * (neither: the type is unsupported here; GEPARD_TILES=off also says so). */
const char *gp_dconv_tiles_mode(void);
void gp_dconv_tiles_shape(gp_dconv *out, const gp_conv1d *conv);
void gp_dconv_tiles_pack(const gp_conv1d *conv, const gp_dconv *shape);
void gp_dconv_tiles_run(const gp_dconv *conv, const gp_dconv_signal *sig, int n_sig, size_t n,
                        gp_pool *pool);

/* The epilogue of gp_dconv_out for output rows [r0, r1) and columns [t0, t0 + len) of
 * results v (row r at v + r * vld; bias added first when `add_bias`), in the direct
 * kernels' order: bias, residual, store, branch accumulator, activation (bf16
 * activations need an even r0). For convolutions computed outside the micro-kernels. */
void gp_dconv_epilogue_rows(const gp_dconv *conv, const gp_dconv_out *o, float *v, size_t vld,
                            int r0, int r1, size_t t0, size_t len, bool add_bias);
/* Its last part alone: the activation of rows [r0, r1). */
void gp_dconv_epilogue_act_rows(const gp_dconv_out *o, const float *v, size_t vld, int r0, int r1,
                                size_t t0, size_t len);

/* n outputs for each of n_sig signals; `pool` (may be NULL) shares the tiles out. */
void gp_dconv_run(const gp_dconv *conv, const gp_dconv_signal *sig, int n_sig, size_t n,
                  gp_pool *pool);

/* Element-wise parts on their own, vectorised for the CPU: dst = act(src) over rows
 * [r0, r1) of n samples; dst is f32 or bf16 pairs (then r0 must be even, and an odd r1
 * equal to act->channels pads the zero channel). */
void gp_dconv_act_rows(const gp_act *act, const float *src, size_t ss, void *dst, size_t ds,
                       bool dst_bf16, int r0, int r1, size_t n);

/* gp_convt1d_rows (conv.h) on SIMD where the shape allows — two input channels per output
 * channel, kernel 2 * stride, stride dividing 16: the decoder's up-sampling — else the
 * reference loop. Same contract: x rows hold 1 column of history, then n_in samples. */
void gp_dconv_convt_rows(const gp_convt1d *conv, const float *x, size_t xs, size_t n_in, float *y,
                         size_t ys, int o0, int o1);

/* y = sin(x)^2 with the kernels' vectorised polynomial (for tests; max abs error ~2.5e-7). */
void gp_dconv_sin2(const float *x, float *y, size_t n);

/* A bf16 channel-pair word: lo in the low half, both rounded to nearest even. */
uint32_t gp_bf16_pair(float lo, float hi);

/* ---- per-ISA entry points (compute/cpu/conv_direct_*.c) ---- */
typedef struct gp_dconv_geometry {
    int mr_time, nr_time; /* time layout: channels x vectors per tile */
    int mv_chan, nn_chan; /* channel layout: vectors of channels x samples per tile */
    int vec;              /* floats per vector */
} gp_dconv_geometry;

const gp_dconv_geometry *gp_dconv_geometry_for(gp_dconv_isa isa);
/* How a run is cut into tiles (see conv_direct.c). */
typedef struct gp_dconv_plan {
    size_t width;    /* samples per time tile (a multiple of the vector width) */
    long n_time;     /* time tiles per signal */
    bool time_major; /* tile numbering */
    long group;      /* > 0: signal-group numbering, `group` signals per group */
} gp_dconv_plan;

/* Tiles [t0, t1) of a run. */
void gp_dconv_tiles_avx512(const gp_dconv *conv, const gp_dconv_signal *sig, int n_sig, size_t n,
                           const gp_dconv_plan *plan, long t0, long t1);
void gp_dconv_tiles_avx2(const gp_dconv *conv, const gp_dconv_signal *sig, int n_sig, size_t n,
                         const gp_dconv_plan *plan, long t0, long t1);

/* Block, signal and time tile of tile `idx` in a run planned as `plan`. */
static inline void gp_dconv_tile_at(long idx, const gp_dconv_plan *plan, long n_blocks, long n_sig,
                                    long *block, long *signal, long *time) {
    const long n_time = plan->n_time;
    if (plan->group > 0) { /* (group, block, signal in the group, time) */
        const long per_block = plan->group * n_time, per_group = n_blocks * per_block;
        const long rem = idx % per_group;
        *block = rem / per_block;
        *signal = idx / per_group * plan->group + rem % per_block / n_time;
        *time = rem % n_time;
    } else if (plan->time_major) {
        *time = idx / (n_blocks * n_sig);
        *block = idx % (n_blocks * n_sig) / n_sig;
        *signal = idx % n_sig;
    } else {
        *block = idx / (n_sig * n_time);
        *signal = idx % (n_sig * n_time) / n_time;
        *time = idx % n_time;
    }
}
void gp_dconv_act_rows_avx512(const gp_act *act, const float *src, size_t ss, void *dst, size_t ds,
                              bool dst_bf16, int r0, int r1, size_t n);
void gp_dconv_act_rows_avx2(const gp_act *act, const float *src, size_t ss, float *dst, size_t ds,
                            int r0, int r1, size_t n);
void gp_dconv_sin2_avx512(const float *x, float *y, size_t n);
void gp_dconv_convt_rows_avx512(const gp_convt1d *conv, const float *x, size_t xs, size_t n_in,
                                float *y, size_t ys, int o0, int o1);
void gp_dconv_sin2_avx2(const float *x, float *y, size_t n);
void gp_dconv_convt_rows_avx2(const gp_convt1d *conv, const float *x, size_t xs, size_t n_in,
                              float *y, size_t ys, int o0, int o1);

#endif
