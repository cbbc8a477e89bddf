/* pool.h — a small fork-join thread pool for the compute kernels.
 *
 * A decode step of the backbone calls ~100 parallel regions, so dispatch must
 * cost microseconds: workers spin briefly on a generation counter before
 * sleeping on a condition variable, the calling thread takes part in the work,
 * and tasks are handed out from an atomic counter. One parallel_for runs at a
 * time per pool (calls from several threads are serialised).
 */
#ifndef GP_BASE_POOL_H
#define GP_BASE_POOL_H

#include <stddef.h>

#include "base/error.h"

typedef struct gp_pool gp_pool;

/* Called once per task index in [0, ntasks); `worker` is in [0, pool size). */
typedef void (*gp_pool_task_fn)(void *ctx, int task, int worker);

/* A pool of `nthreads` threads in total, counting the caller (so 1 = no
 * helper threads). nthreads <= 0 means one per online CPU. */
int gp_pool_create(int nthreads, gp_pool **out, gp_error *err);
void gp_pool_free(gp_pool *pool);

/* Number of threads (>= 1). A NULL pool counts as 1. */
int gp_pool_size(const gp_pool *pool);

/* Run fn(ctx, i, worker) for every i in [0, ntasks) and return when all are
 * done. A NULL pool runs the tasks on the calling thread. */
void gp_pool_parallel_for(gp_pool *pool, int ntasks, gp_pool_task_fn fn, void *ctx);

/* Split [0, n) into `parts` nearly equal ranges aligned to `align`; returns
 * the half-open range of part `index` in *begin, *end. */
void gp_split_range(long n, int parts, int index, long align, long *begin, long *end);

/* The number of CPUs this process may run on. */
int gp_cpu_count(void);

#define GP_RUN_THREADS_MAX 16

/* One-off work outside a pool (loading weights): how many threads for `bytes`
 * of it split into `units` pieces — one per 4 MB, at most the CPUs, GP_RUN_THREADS_MAX and
 * `units`, at least 1. */
int gp_threads_for_bytes(size_t bytes, long units);
/* Run fn(ctx, i) for every i in [0, n) on n - 1 new threads and this one, and
 * return when all are done; a thread that cannot start runs on this one. */
void gp_run_threads(int n, void (*fn)(void *ctx, int i), void *ctx);

#endif
