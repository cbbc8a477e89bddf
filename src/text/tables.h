/* tables.h — the small data structures behind the tokenizer.
 *
 * gp_strmap   byte string -> non-negative int32, open addressing, and an
 *             interner: the map keeps its own copy of every key in one blob,
 *             so the vocabulary's token strings live there and are found by
 *             offset (id -> string) as well as by content (string -> id).
 * gp_pairmap  (int32, int32) -> (rank, int32), open addressing; the BPE merge
 *             table keyed by the ids of the two symbols.
 * gp_trie     a byte trie with longest-prefix lookup; the added-token matcher.
 * gp_i32vec   a growable int32 array.
 *
 * Nothing here is thread-safe on its own; the tokenizer only reads these
 * after loading, except the word cache, which it guards with a mutex.
 */
#ifndef GP_TEXT_TABLES_H
#define GP_TEXT_TABLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

typedef struct gp_strmap_slot {
    uint32_t hash;
    int32_t value; /* -1 marks an empty slot */
    uint32_t off;  /* key offset in keys.data */
    uint32_t len;  /* key length in bytes */
} gp_strmap_slot;

typedef struct gp_strmap {
    gp_strmap_slot *slots;
    size_t cap; /* power of two, or 0 before the first insert */
    size_t count;
    gp_buf keys; /* every key, each followed by a NUL */
} gp_strmap;

/* Prepare an empty map with room for `expected` keys without rehashing. */
int gp_strmap_init(gp_strmap *m, size_t expected); /* 0 = ok, -1 = out of memory */
void gp_strmap_free(gp_strmap *m);
/* Forget every key, keeping the memory. */
void gp_strmap_clear(gp_strmap *m);
/* The value stored for the key, or -1. */
int32_t gp_strmap_get(const gp_strmap *m, const void *key, size_t len);
/* Insert key -> value (value >= 0) unless the key is present. *previous gets
 * the value already stored (the map is then unchanged) or -1 when the key was
 * added; *key_off (may be NULL) gets the offset of the stored key.
 * Returns 0, or -1 when out of memory or the key blob would pass 4 GiB. */
int gp_strmap_put(gp_strmap *m, const void *key, size_t len, int32_t value, int32_t *previous,
                  uint32_t *key_off);
/* The stored key at an offset returned by gp_strmap_put (NUL-terminated). */
static inline const char *gp_strmap_key(const gp_strmap *m, uint32_t off) {
    return m->keys.data + off;
}

typedef struct gp_pairmap_slot {
    uint64_t key; /* (left << 32) | right; UINT64_MAX marks an empty slot */
    uint32_t rank;
    int32_t value;
} gp_pairmap_slot;

typedef struct gp_pairmap {
    gp_pairmap_slot *slots;
    size_t cap;
    size_t count;
} gp_pairmap;

int gp_pairmap_init(gp_pairmap *m, size_t expected);
void gp_pairmap_free(gp_pairmap *m);
/* Insert or overwrite (left, right) -> (rank, value); left, right >= 0. */
int gp_pairmap_set(gp_pairmap *m, int32_t left, int32_t right, uint32_t rank, int32_t value);
/* The slot for (left, right), or NULL. */
const gp_pairmap_slot *gp_pairmap_get(const gp_pairmap *m, int32_t left, int32_t right);

typedef struct gp_trie_node {
    int32_t child;   /* first child node, -1 if none */
    int32_t sibling; /* next sibling node, -1 if none */
    int32_t value;   /* value of the key ending here, -1 if none */
    uint8_t byte;    /* the byte leading to this node */
} gp_trie_node;

typedef struct gp_trie {
    gp_trie_node *nodes; /* node 0 is the root */
    size_t count, cap;
    bool first[256]; /* bytes some key starts with (fast rejection) */
} gp_trie;

void gp_trie_init(gp_trie *t);
void gp_trie_free(gp_trie *t);
/* Add key -> value (value >= 0, len >= 1). *previous gets the value already
 * stored for the key (unchanged) or -1. Returns 0 or -1 when out of memory. */
int gp_trie_insert(gp_trie *t, const void *key, size_t len, int32_t value, int32_t *previous);
/* Length of the longest key that is a prefix of s[0..len), 0 if none;
 * *value gets its value. */
size_t gp_trie_longest(const gp_trie *t, const void *s, size_t len, int32_t *value);
static inline bool gp_trie_empty(const gp_trie *t) { return t->count <= 1; }

typedef struct gp_i32vec {
    int32_t *v;
    size_t n, cap;
} gp_i32vec;

int gp_i32vec_reserve(gp_i32vec *a, size_t extra); /* 0 = ok */
static inline int gp_i32vec_push(gp_i32vec *a, int32_t x) {
    if (a->n == a->cap && gp_i32vec_reserve(a, 1)) return -1;
    a->v[a->n++] = x;
    return 0;
}
void gp_i32vec_free(gp_i32vec *a);

/* 64-bit FNV-1a of a byte string, for hashing keys. */
uint64_t gp_hash_bytes(const void *data, size_t len);

#endif
