/* pool.c — fork-join thread pool with spin-then-sleep workers (see pool.h).
 *
 * Dispatch only touches the mutex and condition variable when a worker is
 * actually asleep (the `sleepers` count), so while the workers spin a
 * parallel_for costs a few cache-line transfers (~150-250 ns on two cores). */
#include "base/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How many relax iterations a worker spins before sleeping (~50-100 us). */
#define POOL_SPIN_ITERATIONS 20000

struct gp_pool {
    int nthreads;
    pthread_t *threads;
    pthread_mutex_t dispatch_lock; /* one parallel_for at a time */
    pthread_mutex_t lock;          /* guards sleeping workers */
    pthread_cond_t wake;
    atomic_uint generation; /* bumped once per parallel_for; workers wait on it */
    /* The job word packs generation (24 bits) | ntasks (20) | next task (20),
     * so a worker that wakes late can never take a task of a newer job while
     * believing it belongs to an older one. */
    _Atomic unsigned long long job;
    atomic_int tasks_done;
    atomic_int sleepers; /* workers inside the condition wait (or about to be) */
    atomic_int stop;
    gp_pool_task_fn fn;
    void *ctx;
};

typedef struct worker_arg {
    gp_pool *pool;
    int index;
} worker_arg;

#define JOB_FIELD_BITS 20
#define JOB_FIELD_MASK ((1ull << JOB_FIELD_BITS) - 1)
#define JOB_MAX_TASKS ((int)JOB_FIELD_MASK)

static unsigned long long job_word(unsigned gen, unsigned ntasks, unsigned next) {
    return ((unsigned long long)(gen & 0xFFFFFFu) << (2 * JOB_FIELD_BITS)) |
           ((unsigned long long)ntasks << JOB_FIELD_BITS) | next;
}

static void pool_run_tasks(gp_pool *pool, unsigned gen, int worker) {
    unsigned long long w = atomic_load_explicit(&pool->job, memory_order_acquire);
    for (;;) {
        if ((unsigned)(w >> (2 * JOB_FIELD_BITS)) != (gen & 0xFFFFFFu)) return;
        unsigned ntasks = (unsigned)((w >> JOB_FIELD_BITS) & JOB_FIELD_MASK);
        unsigned next = (unsigned)(w & JOB_FIELD_MASK);
        if (next >= ntasks) return;
        if (!atomic_compare_exchange_weak_explicit(&pool->job, &w, w + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        pool->fn(pool->ctx, (int)next, worker);
        atomic_fetch_add_explicit(&pool->tasks_done, 1, memory_order_release);
        w = atomic_load_explicit(&pool->job, memory_order_acquire);
    }
}

static void *pool_worker_main(void *arg_ptr) {
    worker_arg *arg = arg_ptr;
    gp_pool *pool = arg->pool;
    int index = arg->index;
    free(arg);
    unsigned seen = atomic_load_explicit(&pool->generation, memory_order_acquire);
    for (;;) {
        int spins = 0;
        unsigned gen;
        while ((gen = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen &&
               !atomic_load_explicit(&pool->stop, memory_order_relaxed)) {
            if (++spins < POOL_SPIN_ITERATIONS) {
                cpu_relax();
                continue;
            }
            /* Announce the sleep before re-checking the generation; with the
             * dispatcher's store-then-load of the same two variables (both
             * sequentially consistent) one of the two sides sees the other. */
            pthread_mutex_lock(&pool->lock);
            atomic_fetch_add(&pool->sleepers, 1);
            while (atomic_load(&pool->generation) == seen &&
                   !atomic_load_explicit(&pool->stop, memory_order_relaxed))
                pthread_cond_wait(&pool->wake, &pool->lock);
            atomic_fetch_sub(&pool->sleepers, 1);
            pthread_mutex_unlock(&pool->lock);
        }
        if (atomic_load_explicit(&pool->stop, memory_order_relaxed)) break;
        seen = gen;
        pool_run_tasks(pool, gen, index);
    }
    return NULL;
}

int gp_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

#define ONE_OFF_BYTES_PER_THREAD ((size_t)4 << 20) /* less: one thread */

int gp_threads_for_bytes(size_t bytes, long units) {
    long n = (long)(bytes / ONE_OFF_BYTES_PER_THREAD);
    const int cpus = gp_cpu_count();
    if (n > cpus) n = cpus;
    if (n > GP_RUN_THREADS_MAX) n = GP_RUN_THREADS_MAX;
    if (n > units) n = units;
    return n < 1 ? 1 : (int)n;
}

typedef struct one_off {
    void (*fn)(void *ctx, int i);
    void *ctx;
    int i;
} one_off;

static void *one_off_main(void *arg) {
    const one_off *o = arg;
    o->fn(o->ctx, o->i);
    return NULL;
}

void gp_run_threads(int n, void (*fn)(void *ctx, int i), void *ctx) {
    if (n > GP_RUN_THREADS_MAX) n = GP_RUN_THREADS_MAX;
    one_off jobs[GP_RUN_THREADS_MAX];
    pthread_t threads[GP_RUN_THREADS_MAX];
    bool started[GP_RUN_THREADS_MAX] = {false};
    for (int i = 1; i < n; i++) {
        jobs[i] = (one_off){fn, ctx, i};
        started[i] = pthread_create(&threads[i], NULL, one_off_main, &jobs[i]) == 0;
    }
    if (n > 0) fn(ctx, 0);
    for (int i = 1; i < n; i++) {
        if (started[i])
            pthread_join(threads[i], NULL);
        else
            fn(ctx, i); /* no thread: this one does it */
    }
}

int gp_pool_create(int nthreads, gp_pool **out, gp_error *err) {
    *out = NULL;
    if (nthreads <= 0) nthreads = gp_cpu_count();
    if (nthreads > 256) nthreads = 256;
    gp_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return gp_fail_oom(err, "thread pool", sizeof *pool);
    pool->nthreads = nthreads;
    pthread_mutex_init(&pool->dispatch_lock, NULL);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->job, 0ull);
    atomic_init(&pool->tasks_done, 0);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->stop, 0);
    if (nthreads > 1) {
        pool->threads = calloc((size_t)nthreads - 1, sizeof *pool->threads);
        if (!pool->threads) {
            free(pool);
            return gp_fail_oom(err, "thread pool", sizeof(pthread_t) * (size_t)nthreads);
        }
    }
    for (int i = 1; i < nthreads; i++) {
        worker_arg *arg = malloc(sizeof *arg);
        if (!arg) {
            pool->nthreads = i;
            gp_pool_free(pool);
            return gp_fail_oom(err, "thread pool worker", sizeof *arg);
        }
        arg->pool = pool;
        arg->index = i;
        if (pthread_create(&pool->threads[i - 1], NULL, pool_worker_main, arg) != 0) {
            free(arg);
            pool->nthreads = i;
            gp_pool_free(pool);
            return gp_fail(err, GEPARD_ERR_INTERNAL, "could not start thread %d of %d", i,
                           nthreads);
        }
    }
    *out = pool;
    return GEPARD_OK;
}

void gp_pool_free(gp_pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->stop, 1);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 1; i < pool->nthreads; i++) pthread_join(pool->threads[i - 1], NULL);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->lock);
    pthread_mutex_destroy(&pool->dispatch_lock);
    free(pool->threads);
    free(pool);
}

int gp_pool_size(const gp_pool *pool) { return pool ? pool->nthreads : 1; }

void gp_pool_parallel_for(gp_pool *pool, int ntasks, gp_pool_task_fn fn, void *ctx) {
    if (ntasks <= 0) return;
    if (!pool || pool->nthreads == 1 || ntasks == 1) {
        for (int i = 0; i < ntasks; i++) fn(ctx, i, 0);
        return;
    }
    if (ntasks > JOB_MAX_TASKS) { /* callers split work coarser than this; stay correct */
        for (int i = 0; i < ntasks; i++) fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&pool->dispatch_lock);
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store_explicit(&pool->tasks_done, 0, memory_order_relaxed);
    /* Publish the job; only sleeping workers need the lock + broadcast
     * (spinning ones see the generation change). */
    unsigned gen = atomic_load_explicit(&pool->generation, memory_order_relaxed) + 1;
    atomic_store_explicit(&pool->job, job_word(gen, (unsigned)ntasks, 0), memory_order_release);
    atomic_store(&pool->generation, gen);
    if (atomic_load(&pool->sleepers) > 0) {
        pthread_mutex_lock(&pool->lock);
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->lock);
    }
    pool_run_tasks(pool, gen, 0);
    while (atomic_load_explicit(&pool->tasks_done, memory_order_acquire) < ntasks) cpu_relax();
    pthread_mutex_unlock(&pool->dispatch_lock);
}

void gp_split_range(long n, int parts, int index, long align, long *begin, long *end) {
    if (align < 1) align = 1;
    long units = (n + align - 1) / align;
    long base = units / parts, extra = units % parts;
    long first = index * base + (index < extra ? index : extra);
    long count = base + (index < extra ? 1 : 0);
    long b = first * align, e = (first + count) * align;
    if (b > n) b = n;
    if (e > n) e = n;
    *begin = b;
    *end = e;
}
