/* bf16_choice.c — whether the decode step reads the backbone's bf16 weights
 * through their 12-bit packed copies (bf16_packed.h), chosen at load by
 * timing, not by CPU flags: the packed form reads 24 % fewer bytes but
 * costs more instructions per weight, so it wins where a core's memory
 * bandwidth is what the step waits for and loses where it is not (on a
 * Zen 5 VM with ~25 GB/s per core the AVX-512 form measured 1.3x, the AVX2
 * one 0.8x: docs/NOTES.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timing.h"
#include "compute/bf16_packed.h"
#include "compute/matrix.h"

static void detach_all(gp_matrix *const *ms, int n) {
    for (int i = 0; i < n; i++) gp_bf16_packed_detach(ms[i]);
}

/* One single-row product through every matrix, seconds. */
static double one_pass(gp_matrix *const *ms, int n, const float *x, float *y, gp_pool *pool) {
    const uint64_t t0 = gp_now_ns();
    for (int i = 0; i < n; i++) gp_matmul_native(ms[i], x, 1, ms[i]->cols, y, ms[i]->rows, pool);
    return (double)(gp_now_ns() - t0) * 1e-9;
}

/* Packed copies for ms[from .. to); *ms_spent adds the time. */
static int attach_range(gp_matrix *const *ms, int from, int to, gp_pool *pool, double *ms_spent,
                        gp_error *err) {
    const uint64_t t0 = gp_now_ns();
    int rc = GEPARD_OK;
    for (int i = from; i < to && rc == GEPARD_OK; i++) rc = gp_bf16_packed_attach(ms[i], pool, err);
    *ms_spent += (double)(gp_now_ns() - t0) * 1e-6;
    return rc;
}

/* The timed subset: the first matrices holding at least this many bytes of
 * bf16 weights, more than a server CPU's last-level cache, so that both
 * passes read them from memory as the decode step does; only they are
 * packed before the choice. */
#define TIMED_BYTES ((size_t)192 << 20)

int gp_bf16_packed_choose(gp_matrix *const *ms, int n, int policy, char *why, size_t why_size,
                          gp_error *err) {
    gp_bf16_packed_set(false);
    const char *env = getenv("GEPARD_BF16_PACKED");
    const bool by_env = env && (!strcmp(env, "0") || !strcmp(env, "1"));
    if (by_env) policy = env[0] == '1' ? 1 : -1;
    const bool forced = policy > 0;
    if (policy < 0) {
        snprintf(why, why_size, "bf16 (%s)",
                 by_env ? "GEPARD_BF16_PACKED=0" : "the 12-bit packed copies not asked for");
        return GEPARD_OK;
    }
    if (gp_kernels_active() < GP_KERNELS_AVX2) {
        snprintf(why, why_size, "bf16 (the 12-bit packed form has AVX2 and AVX-512 kernels only)");
        return GEPARD_OK;
    }
    int timed = 0, max_cols = 1, max_rows = 1;
    size_t timed_bytes = 0;
    for (int i = 0; i < n; i++) {
        if (ms[i]->format != GP_WEIGHTS_BF16) {
            snprintf(why, why_size, "%s weights", gp_weight_format_name(ms[i]->format));
            return GEPARD_OK;
        }
        if (timed_bytes < TIMED_BYTES) {
            timed_bytes += gp_matrix_bytes(ms[i]);
            timed = i + 1;
        }
        if (ms[i]->cols > max_cols) max_cols = ms[i]->cols;
        if (ms[i]->rows > max_rows) max_rows = ms[i]->rows;
    }
    gp_pool *pool = NULL;
    gp_error perr;
    gp_error_clear(&perr);
    if (gp_pool_create(0, &pool, &perr)) pool = NULL; /* then one thread */
    double pack_ms = 0, plain = 1e30, packed = 1e30;
    int rc = attach_range(ms, 0, forced ? n : timed, pool, &pack_ms, err);
    float *x = NULL, *y = NULL;
    if (!rc && !forced) {
        x = gp_matmul_trial_input(1, max_cols);
        y = malloc((size_t)max_rows * sizeof *y);
        for (int rep = 0; x && y && rep < 4; rep++) { /* the first of each a warm-up */
            gp_bf16_packed_set(false);
            const double a = one_pass(ms, timed, x, y, pool);
            gp_bf16_packed_set(true);
            const double b = one_pass(ms, timed, x, y, pool);
            if (rep > 0 && a < plain) plain = a;
            if (rep > 0 && b < packed) packed = b;
        }
    }
    const double speedup = x && y ? plain / packed : 0.0;
    const bool use = forced || speedup >= 1.05;
    if (!rc && use && !forced) rc = attach_range(ms, timed, n, pool, &pack_ms, err);
    gp_bf16_packed_set(!rc && use);
    size_t bf16_bytes = 0, packed_bytes = 0, kept = 0, chunks = 0;
    for (int i = 0; !rc && use && i < n; i++) {
        bf16_bytes += gp_matrix_bytes(ms[i]);
        packed_bytes += ms[i]->packed->bytes;
        kept += ms[i]->packed->n_raw;
        chunks += gp_matrix_padded_rows(ms[i]) / GP_TILE_ROWS * ms[i]->packed->chunks;
    }
    if (rc || !use) detach_all(ms, n);
    char measured[160];
    if (forced)
        snprintf(measured, sizeof measured, "%s", by_env ? "GEPARD_BF16_PACKED=1" : "asked for");
    else
        snprintf(measured, sizeof measured,
                 "one row through %d matrices: packed %.2f ms, bf16 %.2f ms, %.2fx, on %d threads",
                 timed, packed * 1e3, plain * 1e3, speedup, gp_pool_size(pool));
    if (rc) /* the copies are an optimisation: without the memory for them, bf16 as stored */
        snprintf(why, why_size, "bf16 (no memory for the 12-bit packed copies: %s)", err->message);
    else if (!forced && (!x || !y))
        snprintf(why, why_size, "bf16 (no memory to time the 12-bit packed copies)");
    else if (use)
        snprintf(why, why_size,
                 "bf16 packed to 12 bits, lossless (%s; %.2f of the bytes, %zu of %zu chunks kept "
                 "whole, packed in %.0f ms)",
                 measured, (double)packed_bytes / (double)(bf16_bytes ? bf16_bytes : 1), kept,
                 chunks, pack_ms);
    else
        snprintf(why, why_size, "bf16 (the 12-bit packed copies measured slower: %s)", measured);
    free(x);
    free(y);
    gp_pool_free(pool);
    gp_error_clear(err);
    return GEPARD_OK;
}
