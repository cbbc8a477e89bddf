/* alloc.h — aligned allocation and a bump arena for per-step scratch memory.
 *
 * Kernels want 64-byte aligned buffers; gp_aligned_alloc provides them and
 * gp_aligned_free releases them. An arena hands out aligned slices of one
 * block and is reset as a whole (e.g. once per forward pass), so scratch
 * buffers need no individual frees and have a single owner.
 */
#ifndef GP_BASE_ALLOC_H
#define GP_BASE_ALLOC_H

#include <stddef.h>

#define GP_ALIGNMENT 64

/* 64-byte aligned, uninitialised; NULL on failure or size overflow. */
void *gp_aligned_alloc(size_t bytes);
/* Same, zero-filled. */
void *gp_aligned_calloc(size_t count, size_t size);
void gp_aligned_free(void *p);
/* `bytes` (rounded up to 2 MB) aligned to 2 MB and advised to transparent huge pages where
 * the system allows: fewer TLB misses for weights streamed from memory at every step.
 * Uninitialised; release with gp_aligned_free. */
void *gp_huge_alloc(size_t bytes);

typedef struct gp_arena {
    unsigned char *base;
    size_t capacity;
    size_t used;
    size_t high_water;
} gp_arena;

int gp_arena_init(gp_arena *arena, size_t capacity); /* 0 = ok */
void gp_arena_free(gp_arena *arena);
/* An aligned slice of `bytes`, or NULL when the arena is full. */
void *gp_arena_alloc(gp_arena *arena, size_t bytes);
/* Convenience: `count` floats. */
float *gp_arena_floats(gp_arena *arena, size_t count);
void gp_arena_reset(gp_arena *arena);

/* Multiply with overflow check: returns 0 and sets *out, or -1 on overflow. */
int gp_mul_size(size_t a, size_t b, size_t *out);

#endif
