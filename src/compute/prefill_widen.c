/* prefill_widen.c — the load-time choice between the AVX-512 prefill kernel's
 * two ways of reading bf16 weights (matrix.h: gp_prefill_widen_choose). Both
 * give bitwise the same sums; which is faster depends on the core (widening
 * once pays where the conversions share ports with the FMAs, loses on Zen 4
 * where they do not and the f32 copy crowds L1), so it is timed, not read
 * from CPU flags. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/pool.h"
#include "base/timing.h"
#include "compute/matrix.h"

static atomic_bool widen_on = false;

void gp_prefill_widen_set(bool on) { atomic_store(&widen_on, on); }
bool gp_prefill_widen(void) { return atomic_load_explicit(&widen_on, memory_order_relaxed); }

/* The best of three timed runs after one warm-up, seconds. */
static double best_of(const gp_matrix *m, const float *x, int rows, float *y, gp_pool *pool) {
    double best = 1e30;
    for (int rep = 0; rep < 4; rep++) {
        const uint64_t t0 = gp_now_ns();
        gp_matmul_native(m, x, rows, m->cols, y, m->rows, pool);
        const double s = (double)(gp_now_ns() - t0) * 1e-9;
        if (rep > 0 && s < best) best = s;
    }
    return best;
}

bool gp_prefill_widen_choose(const gp_matrix *probe, char *why, size_t why_size) {
    const char *env = getenv("GEPARD_PREFILL_WIDEN");
    if (env && (!strcmp(env, "0") || !strcmp(env, "1"))) {
        gp_prefill_widen_set(env[0] == '1');
        snprintf(why, why_size, "bf16 widened %s (GEPARD_PREFILL_WIDEN=%s)",
                 env[0] == '1' ? "once per block" : "per row group", env);
        return env[0] == '1';
    }
    gp_prefill_widen_set(false);
    if (gp_kernels_active() == GP_KERNELS_AVX2) {
        snprintf(why, why_size, "bf16 widened once per block (as the AVX2 kernels always do)");
        return false;
    }
    if (gp_kernels_active() != GP_KERNELS_AVX512 || probe->format != GP_WEIGHTS_BF16) {
        snprintf(why, why_size, "bf16 widened per row group");
        return false;
    }
    const int rows = 64; /* a prefill chunk */
    gp_pool *pool = NULL;
    gp_error err;
    gp_error_clear(&err);
    if (gp_pool_create(0, &pool, &err)) pool = NULL; /* then one thread */
    float *x = gp_matmul_trial_input(rows, probe->cols);
    float *y = malloc((size_t)rows * probe->rows * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        gp_pool_free(pool);
        snprintf(why, why_size, "bf16 widened per row group (no memory to time it)");
        return false;
    }
    const double per_group = best_of(probe, x, rows, y, pool);
    gp_prefill_widen_set(true);
    const double once = best_of(probe, x, rows, y, pool);
    const double speedup = per_group / once;
    const bool use = speedup >= 1.05;
    gp_prefill_widen_set(use);
    snprintf(why, why_size,
             "bf16 widened %s (once per block %.2f ms, per row group %.2f ms: %.2fx, %d rows of "
             "%d x %d on %d threads)",
             use ? "once per block" : "per row group", once * 1e3, per_group * 1e3, speedup, rows,
             probe->rows, probe->cols, gp_pool_size(pool));
    gp_pool_free(pool);
    free(x);
    free(y);
    return use;
}
