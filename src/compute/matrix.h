/* matrix.h — weight matrices in the formats the kernels run, and y = x·Wᵀ.
 *
 * A gp_matrix is the weight of one Linear layer, [rows = out][cols = in],
 * stored in one of the formats chosen at load time: f32 (the reference),
 * bf16, int8 with per-row scales, or 4-bit with per-group scales. gp_matmul
 * multiplies a small batch of input rows by it, splitting the output rows
 * over the thread pool and dispatching to the best kernel for the CPU (or the
 * scalar reference when asked). Activations and accumulators are always f32.
 */
#ifndef GP_COMPUTE_MATRIX_H
#define GP_COMPUTE_MATRIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/error.h"
#include "base/pool.h"

typedef enum gp_weight_format {
    GP_WEIGHTS_F32 = 0,
    GP_WEIGHTS_BF16 = 1,
    GP_WEIGHTS_INT8 = 2, /* symmetric int8, one f32 scale per row */
    GP_WEIGHTS_Q4 = 3,   /* symmetric 4-bit, one f16 scale per group of GP_Q4_GROUP columns */
} gp_weight_format;

#define GP_Q4_GROUP 32

typedef struct gp_onednn_matrix gp_onednn_matrix; /* compute/onednn_matmul.h */
typedef struct gp_tiles_matrix gp_tiles_matrix;   /* compute/matmul_tiles.h */
typedef struct gp_bf16_packed gp_bf16_packed;     /* compute/bf16_packed.h */

typedef struct gp_matrix {
    gp_weight_format format;
    int rows;                 /* output features */
    int cols;                 /* input features */
    void *data;               /* f32 / uint16 bf16 / int8 / packed nibbles, tiled (below), owned */
    float *scales;            /* int8: [padded rows] f32 row scales; owned */
    uint16_t *gscales;        /* q4: f16 group scales, tiled (below); owned */
    gp_onednn_matrix *onednn; /* bf16: oneDNN's copy for prefill, or NULL; owned */
    gp_tiles_matrix *tiles;   /* bf16: the AMX tile copy for prefill, or NULL; owned */
    gp_bf16_packed *packed;   /* bf16: the 12-bit lossless copy for decode, or NULL; owned */
} gp_matrix;

/* Storage layout (every format). Rows are grouped in tiles of GP_TILE_ROWS;
 * a tile is stored chunk by chunk, each chunk holding gp_matrix_chunk()
 * columns of the tile's first row, then of its second row, and so on. The
 * last tile is padded with zero rows and every row with zero columns up to a
 * whole chunk. One tile is thus one sequential stream that the kernels read
 * once, multiplying each chunk into every input row (the same arithmetic for
 * any batch size). Element (r, c) of a f32/bf16/int8 matrix is at
 * gp_matrix_index(m, r, c).
 *
 * q4: a chunk of a row is 4 groups of GP_Q4_GROUP columns in 64 bytes; byte
 * k of group g holds element 32g + k in its low nibble and 32g + 16 + k in
 * its high nibble, as the unsigned value q + 8 (q in [-8, 7]); value =
 * q * scale (f16 widened). The 16 f16 scales of a tile's chunk (4 rows × 4
 * groups, row-major) follow each other in gscales. 18 bytes per group. */
#define GP_TILE_ROWS 4

/* Columns per chunk: 128 for q4, 16 for the other formats. */
static inline int gp_matrix_chunk(gp_weight_format format) {
    return format == GP_WEIGHTS_Q4 ? 128 : 16;
}
static inline size_t gp_matrix_padded_rows(const gp_matrix *m) {
    return ((size_t)m->rows + GP_TILE_ROWS - 1) / GP_TILE_ROWS * GP_TILE_ROWS;
}
static inline size_t gp_matrix_padded_cols(const gp_matrix *m) {
    size_t chunk = (size_t)gp_matrix_chunk(m->format);
    return ((size_t)m->cols + chunk - 1) / chunk * chunk;
}
/* Element index of (r, c) in a f32 / bf16 / int8 matrix's data. */
static inline size_t gp_matrix_index(const gp_matrix *m, int r, int c) {
    const size_t chunk = 16;
    return ((size_t)(r / GP_TILE_ROWS) * gp_matrix_padded_cols(m) + (size_t)c / chunk * chunk) *
               GP_TILE_ROWS +
           (size_t)(r % GP_TILE_ROWS) * chunk + (size_t)c % chunk;
}
/* q4: byte holding element (r, c) (low nibble when c % 32 < 16), and the
 * index of its group's scale in gscales. */
static inline size_t gp_q4_byte_index(const gp_matrix *m, int r, int c) {
    size_t g = (size_t)c / GP_Q4_GROUP;
    return (size_t)(r / GP_TILE_ROWS) * gp_matrix_padded_cols(m) / 2 * GP_TILE_ROWS + g / 4 * 256 +
           (size_t)(r % GP_TILE_ROWS) * 64 + g % 4 * 16 + (size_t)c % 16;
}
static inline size_t gp_q4_scale_index(const gp_matrix *m, int r, int c) {
    size_t g = (size_t)c / GP_Q4_GROUP;
    return (size_t)(r / GP_TILE_ROWS) * gp_matrix_padded_cols(m) / GP_Q4_GROUP * GP_TILE_ROWS +
           g / 4 * 16 + (size_t)(r % GP_TILE_ROWS) * 4 + g % 4;
}

/* Parse "f32" | "bf16" | "int8" | "q4"; returns -1 if unknown. */
int gp_weight_format_parse(const char *name);
const char *gp_weight_format_name(gp_weight_format format);
/* Bytes of weight data (+ scales) one pass over the matrix reads. */
size_t gp_matrix_bytes(const gp_matrix *m);
/* ... and one pass of the decode step (one or two input rows): the packed
 * copy's bytes where the kernels read it (bf16_packed.h). */
size_t gp_matrix_decode_bytes(const gp_matrix *m);

/* Build a matrix of `format` from `rows*cols` source elements of a float
 * dtype (F32/F16/BF16). q4 needs cols % GP_Q4_GROUP == 0 (else falls back to
 * int8 and says so in the log). */
int gp_matrix_from_data(gp_matrix *m, gp_weight_format format, int rows, int cols,
                        gp_dtype src_dtype, const void *src, gp_error *err);
/* Same from f32 values. */
int gp_matrix_from_f32(gp_matrix *m, gp_weight_format format, int rows, int cols, const float *src,
                       gp_error *err);
void gp_matrix_free(gp_matrix *m);

/* Dequantise row r into dst[cols] (the value the kernels multiply by). */
void gp_matrix_row_f32(const gp_matrix *m, int row, float *dst);

/* Which kernels run: the best the CPU supports (default) or the scalar
 * reference. Set once at start-up (GEPARD_KERNELS=scalar|avx2|avx512 in the
 * environment overrides the default). */
typedef enum gp_kernel_level {
    GP_KERNELS_SCALAR = 0,
    GP_KERNELS_AVX2 = 1,
    GP_KERNELS_AVX512 = 2,
} gp_kernel_level;

gp_kernel_level gp_kernels_best(void);
gp_kernel_level gp_kernels_active(void);
/* Clamp to what the CPU supports; returns the level actually set. */
gp_kernel_level gp_kernels_set(gp_kernel_level level);
const char *gp_kernel_level_name(gp_kernel_level level);
/* Why the active level was chosen, as a phrase for `gepard bench`:
 * "GEPARD_KERNELS=avx2", or what the CPU offers. */
const char *gp_kernels_reason(void);

/* A fixed batch of `rows` input rows [rows][cols] (values in [-1, 1]) for
 * the load-time timings that choose a prefill path; the caller frees it.
 * NULL without memory. */
float *gp_matmul_trial_input(int rows, int cols);
/* Another way to compute gp_matmul (oneDNN, AMX tiles): 0, or an error. */
typedef int (*gp_matmul_alt_fn)(const gp_matrix *m, const float *x, int n, int ldx, float *y,
                                int ldy, gp_pool *pool);
/* The best of three timed runs (after a warm-up each) of `rows` trial rows through the
 * native kernels and through `alt`, alternating, on `pool`; false when `alt` failed. */
bool gp_matmul_race(const gp_matrix *m, int rows, gp_pool *pool, gp_matmul_alt_fn alt,
                    double *native_s, double *alt_s);

/* Whether the AVX-512 blocked prefill widens each bf16 block of weights to
 * f32 once for all groups of input rows instead of once per group (bitwise
 * the same results): faster where the widening competes with the FMAs for
 * execution ports, slower on Zen 4, so gp_prefill_widen_choose
 * (compute/prefill_widen.c) times both at model load. Off until chosen. */
void gp_prefill_widen_set(bool on);
bool gp_prefill_widen(void);
/* Time gp_matmul_native on bf16 matrix `probe` at 64 rows, on as many
 * threads as the process may use, with and without widening; keep widening
 * when it is at least 1.05x faster. GEPARD_PREFILL_WIDEN=0|1 decides without
 * timing; only the AVX-512 kernels have the choice. `why` gets a phrase for
 * `gepard bench`. Returns the setting. */
bool gp_prefill_widen_choose(const gp_matrix *probe, char *why, size_t why_size);

/* y[j][r] = Σ_i W[r][i] · x[j][i] for j < n, r < rows, with x rows `ldx`
 * floats apart and y rows `ldy` apart. Batches of GP_ONEDNN_MIN_ROWS rows
 * or more go through oneDNN where the matrix has a oneDNN copy
 * (compute/onednn_matmul.h). */
void gp_matmul(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
               gp_pool *pool);
/* The same on gepard's own kernels whatever the batch. */
void gp_matmul_native(const gp_matrix *w, const float *x, int n, int ldx, float *y, int ldy,
                      gp_pool *pool);

#endif
