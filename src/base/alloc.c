/* alloc.c — aligned allocation and bump arena (see alloc.h). */
#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void *gp_aligned_alloc(size_t bytes) {
    if (bytes == 0) bytes = GP_ALIGNMENT;
    if (bytes > ((size_t)-1) - GP_ALIGNMENT) return NULL;
    size_t rounded = (bytes + GP_ALIGNMENT - 1) / GP_ALIGNMENT * GP_ALIGNMENT;
    return aligned_alloc(GP_ALIGNMENT, rounded);
}

void *gp_aligned_calloc(size_t count, size_t size) {
    size_t bytes;
    if (gp_mul_size(count, size, &bytes) != 0) return NULL;
    void *p = gp_aligned_alloc(bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

void gp_aligned_free(void *p) { free(p); }

#define HUGE_PAGE ((size_t)2 << 20)

void *gp_huge_alloc(size_t bytes) {
    if (bytes == 0 || bytes > ((size_t)-1) - HUGE_PAGE) return NULL;
    size_t rounded = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    void *p = aligned_alloc(HUGE_PAGE, rounded);
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, rounded, MADV_HUGEPAGE); /* advice only: failure is harmless */
#endif
    return p;
}

int gp_arena_init(gp_arena *arena, size_t capacity) {
    arena->base = gp_aligned_alloc(capacity);
    arena->capacity = arena->base ? capacity : 0;
    arena->used = 0;
    arena->high_water = 0;
    return arena->base ? 0 : -1;
}

void gp_arena_free(gp_arena *arena) {
    gp_aligned_free(arena->base);
    memset(arena, 0, sizeof *arena);
}

void *gp_arena_alloc(gp_arena *arena, size_t bytes) {
    size_t start = (arena->used + GP_ALIGNMENT - 1) / GP_ALIGNMENT * GP_ALIGNMENT;
    if (start > arena->capacity || bytes > arena->capacity - start) return NULL;
    arena->used = start + bytes;
    if (arena->used > arena->high_water) arena->high_water = arena->used;
    return arena->base + start;
}

float *gp_arena_floats(gp_arena *arena, size_t count) {
    size_t bytes;
    if (gp_mul_size(count, sizeof(float), &bytes) != 0) return NULL;
    return gp_arena_alloc(arena, bytes);
}

void gp_arena_reset(gp_arena *arena) { arena->used = 0; }

int gp_mul_size(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > ((size_t)-1) / a) return -1;
    *out = a * b;
    return 0;
}
