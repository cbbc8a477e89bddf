/* kv_cache.h — the paged key/value cache shared by all streams.
 *
 * One pool holds fixed-size blocks of `block_size` positions; a block stores,
 * for every layer, the keys and values of its positions ([layer][k|v]
 * [kv_head][position][head_dim] floats). A sequence (one CFG branch of one
 * stream) owns a list of blocks; positions map to (block, offset) through it.
 * The pool's memory is reserved up front but mapped lazily, so resident
 * memory grows only with the blocks actually written. Not thread-safe: the
 * engine's step thread owns it.
 */
#ifndef GP_COMPUTE_KV_CACHE_H
#define GP_COMPUTE_KV_CACHE_H

#include <stddef.h>

#include "base/error.h"

typedef struct gp_kv_pool {
    int num_layers;
    int num_kv_heads;
    int head_dim;
    int block_size;
    int num_blocks;
    size_t block_floats; /* floats per block */
    float *data;
    size_t mapped_bytes;
    int *free_blocks; /* stack of free block ids */
    int free_count;
    /* Storage of the same blocks on a compute device (model/device.c), or
     * NULL; freed with the pool through device_free. */
    void *device;
    void (*device_free)(void *device);
} gp_kv_pool;

typedef struct gp_kv_seq {
    int *blocks;
    int n_blocks;
    int cap_blocks;
    int length; /* positions written so far */
} gp_kv_seq;

int gp_kv_pool_create(int num_layers, int num_kv_heads, int head_dim, int block_size,
                      int num_blocks, gp_kv_pool **out, gp_error *err);
void gp_kv_pool_free(gp_kv_pool *pool);
/* Blocks needed to hold `positions` positions. */
int gp_kv_blocks_for(const gp_kv_pool *pool, int positions);

void gp_kv_seq_init(gp_kv_seq *seq);
/* Make room for `positions` positions in total (allocating blocks). Fails
 * with GEPARD_ERR_BUSY when the pool is out of blocks. */
int gp_kv_seq_reserve(gp_kv_pool *pool, gp_kv_seq *seq, int positions, gp_error *err);
/* Return every block to the pool and reset the sequence. */
void gp_kv_seq_release(gp_kv_pool *pool, gp_kv_seq *seq);
/* Forget positions >= length (keeps blocks). */
void gp_kv_seq_truncate(gp_kv_seq *seq, int length);

/* Address of the key (or value) vector of one kv head at one position. */
static inline float *gp_kv_at(const gp_kv_pool *pool, const gp_kv_seq *seq, int layer, int is_value,
                              int kv_head, int position) {
    int block = seq->blocks[position / pool->block_size];
    int offset = position % pool->block_size;
    size_t index =
        (size_t)block * pool->block_floats +
        ((((size_t)layer * 2 + (size_t)is_value) * (size_t)pool->num_kv_heads + (size_t)kv_head) *
             (size_t)pool->block_size +
         (size_t)offset) *
            (size_t)pool->head_dim;
    return pool->data + index;
}

#endif
