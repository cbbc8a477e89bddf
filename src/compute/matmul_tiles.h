/* matmul_tiles.h — prefill's matrix products on AMX tiles (see matmul_tiles.c). */
#ifndef GP_COMPUTE_MATMUL_TILES_H
#define GP_COMPUTE_MATMUL_TILES_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "base/pool.h"
#include "compute/matrix.h"

#define GP_TILES_MIN_ROWS 8 /* fewer input rows: the native kernels */

/* Attach a tile-ordered copy of bf16 matrix `m` (m->tiles); GEPARD_ERR_UNSUPPORTED for
 * other formats or without AMX tiles (GEPARD_TILES=emulate: the plain-C emulation). */
int gp_tiles_attach(gp_matrix *m, gp_error *err);
void gp_tiles_detach(gp_matrix *m);
/* y = x·Wᵀ through the copy (as gp_matmul); 0, or an error (then the native kernel). */
int gp_tiles_matmul(const gp_matrix *m, const float *x, int n, int ldx, float *y, int ldy,
                    gp_pool *pool);

/* Whether prefill should take the tiles: `forced` (GEPARD_PREFILL=tiles), or timing
 * `probe` at 64 rows against the native kernels (1.2x or better); why says what was
 * measured. */
bool gp_tiles_choose(const gp_matrix *probe, bool forced, char *why, size_t why_size);

#endif
