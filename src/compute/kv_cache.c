/* kv_cache.c — block pool and per-sequence block lists (see kv_cache.h). */
#include "compute/kv_cache.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/alloc.h"

int gp_kv_pool_create(int num_layers, int num_kv_heads, int head_dim, int block_size,
                      int num_blocks, gp_kv_pool **out, gp_error *err) {
    *out = NULL;
    if (num_layers < 1 || num_kv_heads < 1 || head_dim < 1 || block_size < 1 || num_blocks < 1)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "KV cache: invalid geometry");
    gp_kv_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return gp_fail_oom(err, "KV cache", sizeof *pool);
    pool->num_layers = num_layers;
    pool->num_kv_heads = num_kv_heads;
    pool->head_dim = head_dim;
    pool->block_size = block_size;
    pool->num_blocks = num_blocks;
    pool->block_floats =
        (size_t)num_layers * 2 * (size_t)num_kv_heads * (size_t)block_size * (size_t)head_dim;
    size_t bytes;
    if (gp_mul_size(pool->block_floats * sizeof(float), (size_t)num_blocks, &bytes) != 0) {
        free(pool);
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "KV cache: size overflows");
    }
    /* Reserve address space; pages become resident only when written. */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) {
        free(pool);
        return gp_fail_oom(err, "KV cache", bytes);
    }
#ifdef MADV_HUGEPAGE
    /* Attention reads each block's keys and values as 16 KiB-ish runs far
     * apart; 2 MiB pages keep those reads out of TLB misses and page-bounded
     * prefetching. A hint: failure is harmless. */
    (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    pool->data = p;
    pool->mapped_bytes = bytes;
    pool->free_blocks = malloc((size_t)num_blocks * sizeof(int));
    if (!pool->free_blocks) {
        gp_kv_pool_free(pool);
        return gp_fail_oom(err, "KV cache block list", (size_t)num_blocks * sizeof(int));
    }
    /* Hand out low block ids first so memory use stays compact. */
    for (int i = 0; i < num_blocks; i++) pool->free_blocks[i] = num_blocks - 1 - i;
    pool->free_count = num_blocks;
    *out = pool;
    return GEPARD_OK;
}

void gp_kv_pool_free(gp_kv_pool *pool) {
    if (!pool) return;
    if (pool->device && pool->device_free) pool->device_free(pool->device);
    if (pool->data) munmap(pool->data, pool->mapped_bytes);
    free(pool->free_blocks);
    free(pool);
}

int gp_kv_blocks_for(const gp_kv_pool *pool, int positions) {
    return (positions + pool->block_size - 1) / pool->block_size;
}

void gp_kv_seq_init(gp_kv_seq *seq) { memset(seq, 0, sizeof *seq); }

int gp_kv_seq_reserve(gp_kv_pool *pool, gp_kv_seq *seq, int positions, gp_error *err) {
    int need = gp_kv_blocks_for(pool, positions);
    if (need <= seq->n_blocks) return GEPARD_OK;
    if (need - seq->n_blocks > pool->free_count)
        return gp_fail(err, GEPARD_ERR_BUSY,
                       "KV cache full: %d positions need %d more blocks of %d positions but only "
                       "%d are free — lower max_frames or raise the KV cache size",
                       positions, need - seq->n_blocks, pool->block_size, pool->free_count);
    if (need > seq->cap_blocks) {
        int cap = seq->cap_blocks ? seq->cap_blocks : 8;
        while (cap < need) cap *= 2;
        int *blocks = realloc(seq->blocks, (size_t)cap * sizeof(int));
        if (!blocks) return gp_fail_oom(err, "KV block list", (size_t)cap * sizeof(int));
        seq->blocks = blocks;
        seq->cap_blocks = cap;
    }
    while (seq->n_blocks < need)
        seq->blocks[seq->n_blocks++] = pool->free_blocks[--pool->free_count];
    return GEPARD_OK;
}

void gp_kv_seq_release(gp_kv_pool *pool, gp_kv_seq *seq) {
    for (int i = seq->n_blocks - 1; i >= 0; i--)
        pool->free_blocks[pool->free_count++] = seq->blocks[i];
    free(seq->blocks);
    gp_kv_seq_init(seq);
}

void gp_kv_seq_truncate(gp_kv_seq *seq, int length) {
    if (length < seq->length) seq->length = length;
}
