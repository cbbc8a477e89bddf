/* onednn_matmul.h — prefill's matrix products through oneDNN's bf16 matmul
 * (AMX tiles on Intel Sapphire Rapids and later, AVX512-BF16 elsewhere),
 * exact to f32 rounding (issue 15).
 *
 * The weights are bf16 already; the f32 activations are split into three
 * bf16 terms (x = hi + mid + lo, 24 significant bits, as f32 has), each
 * bf16 × bf16 product is exact in f32, so hi·W + mid·W + lo·W equals x·W up
 * to the order of the f32 additions — the error of the f32-FMA kernels, at
 * three times the bf16 work, which AMX does many times faster than the FMA
 * units. The three terms go through one matmul as 3n rows (one pass over
 * the weights), and the three results are summed in a fixed order.
 * GEPARD_ONEDNN_TERMS=2 (for measurements) uses two terms instead — hi and a
 * rounded lo, 16-17 bits, relative error <= 2^-17 per input, two thirds of
 * the work; the real-size goldens still give their codes with it
 * (real_size_cpu_onednn_two_terms_codes).
 *
 * Each matrix is cut into slices of GP_ONEDNN_SLICE output rows with their
 * own reordered weights (a second copy, in oneDNN's blocked layout), run as
 * tasks on gepard's thread pool with oneDNN single-threaded inside each, and
 * one primitive per row count is kept per slice. Whether the path is used is
 * decided at load by a short measurement against the native kernel
 * (gp_onednn_choose), never by CPU flags alone; GEPARD_PREFILL=onednn or
 * native overrides it. Decode (fewer than GP_ONEDNN_MIN_ROWS rows) always
 * stays on the native kernels, which stream the weights at memory speed.
 */
#ifndef GP_COMPUTE_ONEDNN_MATMUL_H
#define GP_COMPUTE_ONEDNN_MATMUL_H

#include <oneapi/dnnl/dnnl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/dtype.h"
#include "base/error.h"
#include "base/pool.h"
#include "compute/matrix.h"

#define GP_ONEDNN_SLICE 128    /* output rows per slice (a task); GEPARD_ONEDNN_SLICE overrides */
#define GP_ONEDNN_MIN_ROWS 8   /* fewer input rows: the native kernels */
#define GP_ONEDNN_PRIMITIVES 4 /* row counts remembered per slice */

/* Attach a oneDNN copy of bf16 matrix `m` (m->onednn); GEPARD_ERR_UNSUPPORTED
 * for other formats or when oneDNN cannot build a bf16 matmul here. */
int gp_onednn_attach(gp_matrix *m, gp_error *err);
void gp_onednn_detach(gp_matrix *m);
/* y = x·Wᵀ through the attached copy (as gp_matmul; n ≥ 1). 0, or an error
 * (the caller then runs the native kernel). */
int gp_onednn_matmul(const gp_matrix *m, const float *x, int n, int ldx, float *y, int ldy,
                     gp_pool *pool);

/* Process-wide switch (on by default) for measurements: off, gp_matmul runs
 * the native kernels even where a matrix has a oneDNN (or AMX tile) copy. */
void gp_onednn_enable(bool on);
bool gp_onednn_enabled(void);

/* Whether prefill should go through oneDNN on this machine: GEPARD_PREFILL
 * (onednn | native), else timing `probe` (a bf16 matrix of at least 2^20
 * elements) at 64 rows on as many threads as the process may use (the
 * default of --threads), both ways: oneDNN when it is at least 1.2× faster.
 * `why` gets a phrase for `gepard bench` (the figures and oneDNN's kernel). */
bool gp_onednn_choose(const gp_matrix *probe, char *why, size_t why_size);

/* Input terms per activation: 3 (exact products; the default) or, with
 * GEPARD_ONEDNN_TERMS=2, 2 (two thirds of the work; 16-17 bits) — for
 * measurements against the goldens and on AMX machines. */
int gp_onednn_terms(void);

/* v = hi + mid + lo (nt = 3) or v ≈ hi + lo (nt = 2) as bf16 values at
 * out[0], out[stride], ...: every term but the last by truncation (so each
 * remainder is exact in f32), the last rounded to nearest — 24 significant
 * bits with three terms (as f32 has), 16-17 with two (relative error
 * ≤ 2^-17). */
static inline void gp_onednn_split(float v, int nt, uint16_t *out, size_t stride) {
    for (int t = 0; t < nt - 1; t++) {
        uint32_t bits;
        float head;
        memcpy(&bits, &v, sizeof bits);
        out[(size_t)t * stride] = (uint16_t)(bits >> 16);
        bits &= 0xFFFF0000u;
        memcpy(&head, &bits, sizeof head);
        v -= head;
    }
    out[(size_t)(nt - 1) * stride] = gp_f32_to_bf16(v);
}

/* The process's oneDNN CPU engine (NULL when oneDNN has none), and the
 * calling thread's stream on it with oneDNN single-threaded (the pool owns
 * the parallelism); shared with conv_onednn.c. */
dnnl_engine_t gp_onednn_engine(void);
dnnl_stream_t gp_onednn_thread_stream(void);
/* The calling thread's scratch buffer `which` (0 or 1) of at least `bytes`,
 * kept between calls and freed when the thread exits (the matmul uses 0 for
 * its split inputs on the calling thread, 1 for a slice's results). */
void *gp_onednn_thread_buffer(int which, size_t bytes);

#endif
