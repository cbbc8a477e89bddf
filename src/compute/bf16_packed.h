/* bf16_packed.h — a lossless 12-bit form of a bf16 weight matrix for the
 * decode step (bf16_packed.c).
 *
 * Why: one stream's decode step reads every backbone weight once per frame
 * (~0.52 GB in bf16), so on a CPU with little memory bandwidth per core (the
 * GPU machine's Xeon host at 2 cores: 25-30 GB/s, the AVX2 EPYC: 19)
 * the step is the bytes it reads. A bf16 weight's exponent carries little
 * information: within a chunk of 64 neighbouring weights nearly all lie
 * within 15 binades of the largest, so each is stored as a 4-bit distance
 * below the chunk's largest exponent (code 15: exponent 0, i.e. zero or
 * subnormal) plus its sign and 7 mantissa bits: 12 bits instead of 16, the
 * same values exactly. A chunk with a weight further below (or an Inf/NaN)
 * is kept whole as bf16 in a side table. The kernels widen a chunk to f32
 * with a table lookup (vpshufb) and multiply as the bf16 kernels do, in the
 * same order: the sums are bitwise those of the bf16 matrix.
 *
 * Layout, per tile of GP_TILE_ROWS rows (matrix.h): one byte per 16-column
 * chunk (the chunk's largest exponent; 0: kept whole), then one 96-byte
 * record per chunk: 64 bytes of (mantissa << 1 | sign), 32 bytes of codes
 * (the low nibbles for bytes 0-31, the high nibbles for bytes 32-63). A kept
 * chunk's record starts with the uint32 index of its 64 bf16 values (the
 * tiled order) in `raw`. Within a record the 64 weights are in the order
 * gp_bf16_packed_byte_of gives: the one the AVX-512 and AVX2 kernels'
 * byte interleaves (vpunpck[lh]bw, then even/odd 16-bit words) undo.
 * The bf16 data stays beside the copy (prefill, the reference path, LoRA
 * merges read it): ~0.4 GB more memory for the real model. */
#ifndef GP_COMPUTE_BF16_PACKED_H
#define GP_COMPUTE_BF16_PACKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/pool.h"

typedef struct gp_matrix gp_matrix;

#define GP_PACKED_RECORD 96

typedef struct gp_bf16_packed {
    unsigned char *tiles; /* [tiles][chunks + chunks · GP_PACKED_RECORD] */
    uint16_t *raw;        /* [n_raw][64] chunks kept whole, tiled order */
    size_t chunks;        /* per tile: padded columns / 16 */
    size_t tile_bytes;    /* chunks · (1 + GP_PACKED_RECORD) */
    size_t n_raw;
    size_t bytes; /* what one pass reads: tiles and raw */
} gp_bf16_packed;

/* Where weight (row i of the tile's 4, column c of the chunk's 16) goes in
 * a record's 64 bytes. */
static inline int gp_bf16_packed_byte_of(int i, int c) {
    return 16 * (c / 4) + 2 * (c % 4) + (i & 1) + (i >= 2 ? 8 : 0);
}

/* Build m->packed from m's bf16 data (on the pool's threads): 0, or an
 * error (out of memory; a matrix that is not bf16 is refused). */
int gp_bf16_packed_attach(gp_matrix *m, gp_pool *pool, gp_error *err);
void gp_bf16_packed_detach(gp_matrix *m);
/* Chunk k of tile t back as 64 bf16 values in the tiled order (tests). */
void gp_bf16_packed_chunk(const gp_bf16_packed *p, size_t t, size_t k, uint16_t out[64]);

/* Whether the kernels read a matrix's packed form when it has one. */
void gp_bf16_packed_set(bool on);
bool gp_bf16_packed_on(void);
/* Whether the SIMD kernels read m through its packed copy: it has one and
 * the copies are on. */
bool gp_bf16_packed_reads(const gp_matrix *m);

/* The load-time choice for the decode step's bf16 matrices ms[0 .. n)
 * (bf16_choice.c): packed copies attached and kept when a single-row pass
 * over the first ~192 MB of them measures at least 1.05x faster than over
 * the bf16 data, else freed. `policy` -1 never packs, 1 packs without
 * timing (gepard_load_params.packed_weights); GEPARD_BF16_PACKED=0|1
 * overrides it. The AVX2 and AVX-512 kernels read the packed form for the
 * decode step (1-3 input rows on AVX-512, 1-2 on AVX2); the scalar
 * reference, prefill and batched steps read the bf16 data. `why` gets a
 * phrase for `gepard bench`. Never fails a load: without the memory for the
 * copies the matrices stay as they are (`why` says so); returns 0. */
int gp_bf16_packed_choose(gp_matrix *const *ms, int n, int policy, char *why, size_t why_size,
                          gp_error *err);

#endif
