/* kernels.h — the per-instruction-set kernel table behind gp_matmul, the
 * cached attention and the other hot loops. One table per level (scalar
 * reference in cpu/kernels_scalar.c, AVX2+FMA in cpu/kernels_avx2.c,
 * AVX-512 with VNNI in cpu/kernels_avx512.c); each matmul entry computes a
 * range of output rows so the caller can split work across threads. Tables
 * for levels the CPU lacks are never called.
 *
 * The SIMD matmuls walk matrix.h's tiled layout one 4-row tile at a time
 * (one sequential stream) and give every output the same arithmetic whatever
 * the batch size or thread split, so a row's result never depends on what it
 * is batched with. Batches of several rows (prefill) take cache-blocked
 * variants (several weight rows × several input rows of accumulators, the
 * columns in L1-sized blocks) that keep each output's FMA sequence, so they
 * are bitwise equal to the row-by-row kernels (tests/test_kernels.c).
 *
 * Exactness: f32, bf16 and int8 entries of every level multiply the stored
 * weights by the f32 activations exactly (only the summation order differs
 * from the scalar reference). The SIMD q4 entries round the activations to
 * int8 per group of GP_Q4_GROUP (scale = max|x| / 127 over the group) and use
 * integer dot products; their extra error per output is at most
 * Σ_i |w_i| · scale_group(i) / 2 (tests/test_kernels.c checks that bound).
 */
#ifndef GP_COMPUTE_KERNELS_H
#define GP_COMPUTE_KERNELS_H

#include "compute/kv_cache.h"
#include "compute/matrix.h"

/* Rows [r0, r1) of y = x·Wᵀ for a matrix in one format. */
typedef void (*gp_matmul_rows_fn)(const gp_matrix *w, const float *x, int n, int ldx, float *y,
                                  int ldy, int r0, int r1);

/* gp_attend_cached (attention.h) at one level. */
typedef void (*gp_attend_fn)(const gp_kv_pool *kv, const gp_kv_seq *seq, int layer, int kv_head,
                             const float *q, int n_positions, float scale, float *out,
                             float *scores);

/* gp_attend_cached_group (attention.h) at one level. */
typedef void (*gp_attend_group_fn)(const gp_kv_pool *kv, const gp_kv_seq *seq, int layer,
                                   int kv_head, const float *q, int q_stride, int n_q,
                                   int n_positions, float scale, float *out, int out_stride,
                                   float *scores);

typedef struct gp_kernel_table {
    const char *name;
    const char *prefill;              /* how batches of rows are multiplied, for `gepard bench` */
    gp_matmul_rows_fn matmul_rows[4]; /* indexed by gp_weight_format */
    gp_attend_fn attend;
    gp_attend_group_fn attend_group;
} gp_kernel_table;

/* The scalar reference table (always present) and the SIMD tables, which
 * register in matrix.c's level table. */
extern const gp_kernel_table gp_kernels_scalar;
extern const gp_kernel_table gp_kernels_avx2;
extern const gp_kernel_table gp_kernels_avx512;

const gp_kernel_table *gp_kernel_table_active(void);
/* How far ahead (bytes) the row-by-row (decode) matmuls prefetch their weight
 * stream into L1: GP_DECODE_PREFETCH_DEFAULT, or GEPARD_DECODE_PREFETCH in the
 * environment (0: the hardware prefetchers alone), read once. On the H200
 * host's Xeon at 2 cores the bf16 decode step went from 40-44 to 28-29 ms per
 * frame (0.52-0.56 → 0.73-0.75 of the measured bandwidth bound, alternating
 * in one call); on the Zen 5 development VM it is within that machine's noise. */
#define GP_DECODE_PREFETCH_DEFAULT 2048
size_t gp_decode_prefetch_bytes(void);
/* Whether the row-by-row matmuls of one to three input rows read several tiles at
 * once, each a weight stream from its own part of the thread's rows (AVX-512: 4
 * streams for one input row, 3 for two, 2 for three; AVX2: 3 for one row; q4: one
 * row, 4 streams with AVX-512, 2 with AVX2). The same sums bit for bit;
 * GEPARD_DECODE_STREAMS=0 in the environment reads one tile at a time as before.
 * On a 2-core Xeon (Sapphire Rapids) the bf16 decode products went 30.6-32.8 →
 * 21.7-22.9 ms per frame at 2 threads (AVX2 kernels 34.9-36.2 → 23.2-25.9): one
 * sequential stream per core is held to what the L2 streamer prefetches for one
 * page at a time. */
bool gp_decode_streams(void);
/* Tests: 1 or 0 decides, -1 goes back to the environment. */
void gp_decode_streams_set(int on);
/* The table of one level, or NULL when this CPU cannot run it. */
const gp_kernel_table *gp_kernel_table_for(gp_kernel_level level);

#endif
