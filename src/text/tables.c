/* tables.c — open-addressing hash maps, a byte trie and an int32 vector for
 * the tokenizer (see tables.h). Tables keep a load factor of at most 1/2 and
 * probe linearly; capacities are powers of two.
 */
#include "text/tables.h"

#include <stdlib.h>
#include <string.h>

uint64_t gp_hash_bytes(const void *data, size_t len) {
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    /* Final mix so that the low bits (the slot index) depend on every byte. */
    h ^= h >> 32;
    h *= 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    return h;
}

static size_t capacity_for(size_t expected) {
    size_t cap = 16;
    while (cap < expected * 2 + 2) cap *= 2;
    return cap;
}

/* ---- gp_strmap ---- */

static int strmap_rehash(gp_strmap *m, size_t cap) {
    gp_strmap_slot *slots = malloc(cap * sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < cap; i++) slots[i].value = -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].value < 0) continue;
        size_t j = m->slots[i].hash & (cap - 1);
        while (slots[j].value >= 0) j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

int gp_strmap_init(gp_strmap *m, size_t expected) {
    memset(m, 0, sizeof *m);
    gp_buf_init(&m->keys);
    return strmap_rehash(m, capacity_for(expected));
}

void gp_strmap_free(gp_strmap *m) {
    if (!m) return;
    free(m->slots);
    gp_buf_free(&m->keys);
    memset(m, 0, sizeof *m);
}

void gp_strmap_clear(gp_strmap *m) {
    for (size_t i = 0; i < m->cap; i++) m->slots[i].value = -1;
    m->count = 0;
    gp_buf_clear(&m->keys);
}

static size_t strmap_find(const gp_strmap *m, uint32_t hash, const void *key, size_t len) {
    size_t j = hash & (m->cap - 1);
    for (;;) {
        const gp_strmap_slot *s = &m->slots[j];
        if (s->value < 0) return j;
        if (s->hash == hash && s->len == len && memcmp(m->keys.data + s->off, key, len) == 0)
            return j;
        j = (j + 1) & (m->cap - 1);
    }
}

int32_t gp_strmap_get(const gp_strmap *m, const void *key, size_t len) {
    if (m->cap == 0) return -1;
    uint32_t hash = (uint32_t)gp_hash_bytes(key, len);
    return m->slots[strmap_find(m, hash, key, len)].value;
}

int gp_strmap_put(gp_strmap *m, const void *key, size_t len, int32_t value, int32_t *previous,
                  uint32_t *key_off) {
    *previous = -1;
    if (value < 0) return -1;
    if ((m->count + 1) * 2 > m->cap && strmap_rehash(m, m->cap ? m->cap * 2 : 16)) return -1;
    uint32_t hash = (uint32_t)gp_hash_bytes(key, len);
    size_t j = strmap_find(m, hash, key, len);
    gp_strmap_slot *s = &m->slots[j];
    if (s->value >= 0) {
        *previous = s->value;
        if (key_off) *key_off = s->off;
        return 0;
    }
    size_t off = m->keys.len;
    if (len > UINT32_MAX || off + len + 1 > UINT32_MAX) return -1;
    if (gp_buf_append(&m->keys, key, len) || gp_buf_append(&m->keys, "", 1)) return -1;
    s->hash = hash;
    s->value = value;
    s->off = (uint32_t)off;
    s->len = (uint32_t)len;
    m->count++;
    if (key_off) *key_off = (uint32_t)off;
    return 0;
}

/* ---- gp_pairmap ---- */

static uint64_t pair_key(int32_t left, int32_t right) {
    return ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
}

static size_t pair_slot(uint64_t key, size_t cap) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    return (size_t)(h & (cap - 1));
}

static int pairmap_rehash(gp_pairmap *m, size_t cap) {
    gp_pairmap_slot *slots = malloc(cap * sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < cap; i++) slots[i].key = UINT64_MAX;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].key == UINT64_MAX) continue;
        size_t j = pair_slot(m->slots[i].key, cap);
        while (slots[j].key != UINT64_MAX) j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

int gp_pairmap_init(gp_pairmap *m, size_t expected) {
    memset(m, 0, sizeof *m);
    return pairmap_rehash(m, capacity_for(expected));
}

void gp_pairmap_free(gp_pairmap *m) {
    if (!m) return;
    free(m->slots);
    memset(m, 0, sizeof *m);
}

int gp_pairmap_set(gp_pairmap *m, int32_t left, int32_t right, uint32_t rank, int32_t value) {
    if (left < 0 || right < 0) return -1;
    if ((m->count + 1) * 2 > m->cap && pairmap_rehash(m, m->cap ? m->cap * 2 : 16)) return -1;
    uint64_t key = pair_key(left, right);
    size_t j = pair_slot(key, m->cap);
    while (m->slots[j].key != UINT64_MAX && m->slots[j].key != key) j = (j + 1) & (m->cap - 1);
    if (m->slots[j].key == UINT64_MAX) m->count++;
    m->slots[j] = (gp_pairmap_slot){key, rank, value};
    return 0;
}

const gp_pairmap_slot *gp_pairmap_get(const gp_pairmap *m, int32_t left, int32_t right) {
    if (m->cap == 0 || left < 0 || right < 0) return NULL;
    uint64_t key = pair_key(left, right);
    size_t j = pair_slot(key, m->cap);
    for (;;) {
        const gp_pairmap_slot *s = &m->slots[j];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
        j = (j + 1) & (m->cap - 1);
    }
}

/* ---- gp_trie ---- */

void gp_trie_init(gp_trie *t) { memset(t, 0, sizeof *t); }

void gp_trie_free(gp_trie *t) {
    if (!t) return;
    free(t->nodes);
    memset(t, 0, sizeof *t);
}

static int32_t trie_new_node(gp_trie *t, uint8_t byte) {
    if (t->count == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        if (cap > INT32_MAX) return -1;
        gp_trie_node *nodes = realloc(t->nodes, cap * sizeof *nodes);
        if (!nodes) return -1;
        t->nodes = nodes;
        t->cap = cap;
    }
    t->nodes[t->count] = (gp_trie_node){-1, -1, -1, byte};
    return (int32_t)t->count++;
}

static int32_t trie_child(const gp_trie *t, int32_t node, uint8_t byte) {
    for (int32_t c = t->nodes[node].child; c >= 0; c = t->nodes[c].sibling)
        if (t->nodes[c].byte == byte) return c;
    return -1;
}

int gp_trie_insert(gp_trie *t, const void *key, size_t len, int32_t value, int32_t *previous) {
    const unsigned char *k = key;
    *previous = -1;
    if (len == 0 || value < 0) return -1;
    if (t->count == 0 && trie_new_node(t, 0) < 0) return -1;
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t next = trie_child(t, node, k[i]);
        if (next < 0) {
            next = trie_new_node(t, k[i]);
            if (next < 0) return -1;
            t->nodes[next].sibling = t->nodes[node].child;
            t->nodes[node].child = next;
        }
        node = next;
    }
    if (t->nodes[node].value >= 0) {
        *previous = t->nodes[node].value;
        return 0;
    }
    t->nodes[node].value = value;
    t->first[k[0]] = true;
    return 0;
}

size_t gp_trie_longest(const gp_trie *t, const void *s, size_t len, int32_t *value) {
    const unsigned char *p = s;
    *value = -1;
    if (t->count <= 1 || len == 0 || !t->first[p[0]]) return 0;
    size_t best = 0;
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        node = trie_child(t, node, p[i]);
        if (node < 0) break;
        if (t->nodes[node].value >= 0) {
            best = i + 1;
            *value = t->nodes[node].value;
        }
    }
    return best;
}

/* ---- gp_i32vec ---- */

int gp_i32vec_reserve(gp_i32vec *a, size_t extra) {
    if (a->cap - a->n >= extra) return 0;
    size_t need = a->n + extra;
    if (need < a->n || need > SIZE_MAX / 2 / sizeof(int32_t)) return -1;
    size_t cap = a->cap ? a->cap : 16;
    while (cap < need) cap *= 2;
    int32_t *v = realloc(a->v, cap * sizeof *v);
    if (!v) return -1;
    a->v = v;
    a->cap = cap;
    return 0;
}

void gp_i32vec_free(gp_i32vec *a) {
    if (!a) return;
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}
