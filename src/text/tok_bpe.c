/* tok_bpe.c — BPE over one pre-tokenized piece, and the word cache.
 *
 * A piece's UTF-8 bytes become byte-level symbols (one vocabulary id each;
 * a byte whose symbol is missing is dropped, or becomes unk_token when the
 * model has one, as in HF). Merging follows HF's Word::merge_all: a binary
 * heap of candidate pairs ordered by (rank, position) — lowest rank first,
 * leftmost on ties — with stale entries skipped when popped, so a piece of n
 * bytes costs O(n log n) however long it is.
 *
 * Results for pieces up to GP_TOK_CACHE_MAX_PIECE bytes are cached under a
 * mutex; the cache is emptied when it reaches its bounds.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"
#include "text/utf8.h"

struct gp_bpe_symbol {
    int32_t id;   /* -1 once merged into its left neighbour */
    int32_t prev; /* index of the previous live symbol, -1 if none */
    int32_t next; /* index of the next live symbol, -1 if none */
};

struct gp_bpe_merge {
    uint32_t rank;
    uint32_t pos; /* index of the left symbol */
    int32_t merged;
};

typedef struct gp_bpe_symbol sym_t;
typedef struct gp_bpe_merge merge_t;

void gp_tok_scratch_free(gp_tok_scratch *s) {
    if (!s) return;
    free(s->syms);
    free(s->heap);
    gp_buf_free(&s->bytelevel);
    memset(s, 0, sizeof *s);
}

static int scratch_reserve(gp_tok_scratch *s, size_t n, gp_error *err) {
    if (n > INT32_MAX / 4)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "a single word of %zu bytes is too long to tokenize", n);
    if (n > s->syms_cap) {
        sym_t *p = realloc(s->syms, n * sizeof *p);
        if (!p) return gp_fail_oom(err, "BPE symbols", n * sizeof *p);
        s->syms = p;
        s->syms_cap = n;
    }
    size_t h = 3 * n + 1; /* n-1 initial pairs, at most 2 new ones per merge */
    if (h > s->heap_cap) {
        merge_t *p = realloc(s->heap, h * sizeof *p);
        if (!p) return gp_fail_oom(err, "the BPE merge queue", h * sizeof *p);
        s->heap = p;
        s->heap_cap = h;
    }
    return GEPARD_OK;
}

static bool before(const merge_t *a, const merge_t *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(merge_t *heap, size_t *n, merge_t m) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&m, &heap[parent])) break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = m;
}

static merge_t heap_pop(merge_t *heap, size_t *n) {
    merge_t top = heap[0], last = heap[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= *n) break;
        if (child + 1 < *n && before(&heap[child + 1], &heap[child])) child++;
        if (!before(&heap[child], &last)) break;
        heap[i] = heap[child];
        i = child;
    }
    if (*n > 0) heap[i] = last;
    return top;
}

/* Queue the pair starting at symbol `pos` if it is a merge. */
static void queue_pair(const gp_tokenizer *tok, const sym_t *syms, merge_t *heap, size_t *n,
                       int32_t pos) {
    int32_t next = syms[pos].next;
    if (next < 0) return;
    const gp_pairmap_slot *m = gp_pairmap_get(&tok->merges, syms[pos].id, syms[next].id);
    if (m) heap_push(heap, n, (merge_t){m->rank, (uint32_t)pos, m->value});
}

/* Byte-level symbols of the piece; returns how many. */
static size_t initial_symbols(const gp_tokenizer *tok, sym_t *syms, const unsigned char *p,
                              size_t len) {
    size_t n = 0;
    bool prev_unk = false;
    for (size_t i = 0; i < len; i++) {
        int32_t id = tok->byte_id[p[i]];
        if (id < 0) {
            /* HF: without unk_token the symbol is dropped; with fuse_unk a run
             * of unknown symbols becomes one unk. */
            if (tok->unk_id < 0 || (tok->fuse_unk && prev_unk)) continue;
            id = tok->unk_id;
            prev_unk = true;
        } else {
            prev_unk = false;
        }
        syms[n] = (sym_t){id, (int32_t)n - 1, (int32_t)n + 1};
        n++;
    }
    if (n > 0) syms[n - 1].next = -1;
    return n;
}

static int merge_piece(const gp_tokenizer *tok, gp_tok_scratch *s, const char *piece, size_t len,
                       gp_i32vec *out, gp_error *err) {
    int rc = scratch_reserve(s, len, err);
    if (rc) return rc;
    sym_t *syms = s->syms;
    size_t n = initial_symbols(tok, syms, (const unsigned char *)piece, len);
    if (n == 0) return GEPARD_OK;
    size_t heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++) queue_pair(tok, syms, s->heap, &heap_n, (int32_t)i);
    while (heap_n > 0) {
        merge_t top = heap_pop(s->heap, &heap_n);
        sym_t *left = &syms[top.pos];
        if (left->id < 0 || left->next < 0) continue;
        sym_t *right = &syms[left->next];
        const gp_pairmap_slot *m = gp_pairmap_get(&tok->merges, left->id, right->id);
        if (!m || m->value != top.merged || m->rank != top.rank) continue; /* stale */
        left->id = top.merged;
        right->id = -1;
        left->next = right->next;
        if (right->next >= 0) syms[right->next].prev = (int32_t)top.pos;
        if (left->prev >= 0) queue_pair(tok, syms, s->heap, &heap_n, left->prev);
        queue_pair(tok, syms, s->heap, &heap_n, (int32_t)top.pos);
    }
    /* Symbol 0 is never merged away (merges keep the left symbol). */
    for (int32_t i = 0; i >= 0; i = syms[i].next)
        if (gp_i32vec_push(out, syms[i].id)) return gp_fail_oom(err, "token ids", out->n * 8);
    return GEPARD_OK;
}

/* ignore_merges: a piece that is a whole vocabulary entry is that one token. */
static int32_t whole_word_id(const gp_tokenizer *tok, gp_tok_scratch *s, const char *piece,
                             size_t len, gp_error *err) {
    gp_buf_clear(&s->bytelevel);
    if (gp_buf_reserve(&s->bytelevel, 2 * len + 1)) {
        gp_fail_oom(err, "a word", 2 * len);
        return -2;
    }
    for (size_t i = 0; i < len; i++) {
        char u[4];
        size_t k = gp_utf8_put(gp_bytelevel_char((uint8_t)piece[i]), u);
        gp_buf_append(&s->bytelevel, u, k); /* reserved above */
    }
    return gp_strmap_get(&tok->vocab, s->bytelevel.data, s->bytelevel.len);
}

/* ---- cache ---- */

int gp_tok_cache_init(gp_tok_cache *c) {
    memset(c, 0, sizeof *c);
    if (pthread_mutex_init(&c->lock, NULL)) return -1;
    if (gp_strmap_init(&c->words, 1024)) {
        pthread_mutex_destroy(&c->lock);
        return -1;
    }
    return 0;
}

void gp_tok_cache_free(gp_tok_cache *c) {
    gp_strmap_free(&c->words);
    gp_i32vec_free(&c->ids);
    pthread_mutex_destroy(&c->lock);
}

/* Copy cached ids of the piece to out; true on a hit. */
static bool cache_get(gp_tok_cache *c, const char *piece, size_t len, gp_i32vec *out) {
    bool hit = false;
    pthread_mutex_lock(&c->lock);
    int32_t at = gp_strmap_get(&c->words, piece, len);
    if (at >= 0) {
        size_t n = (size_t)c->ids.v[at];
        if (gp_i32vec_reserve(out, n) == 0) {
            if (n) memcpy(out->v + out->n, c->ids.v + at + 1, n * sizeof(int32_t));
            out->n += n;
            hit = true;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return hit;
}

/* Remember ids[0..n) for the piece. Failure to cache is not an error. */
static void cache_put(gp_tok_cache *c, const char *piece, size_t len, const int32_t *ids,
                      size_t n) {
    pthread_mutex_lock(&c->lock);
    if (c->words.count >= GP_TOK_CACHE_MAX_ENTRIES || c->ids.n + n + 1 > GP_TOK_CACHE_MAX_IDS) {
        gp_strmap_clear(&c->words);
        c->ids.n = 0;
    }
    if (n + 1 <= GP_TOK_CACHE_MAX_IDS && gp_i32vec_reserve(&c->ids, n + 1) == 0) {
        int32_t previous;
        size_t at = c->ids.n;
        if (gp_strmap_put(&c->words, piece, len, (int32_t)at, &previous, NULL) == 0 &&
            previous < 0) {
            c->ids.v[at] = (int32_t)n;
            if (n) memcpy(c->ids.v + at + 1, ids, n * sizeof(int32_t));
            c->ids.n += n + 1;
        }
    }
    pthread_mutex_unlock(&c->lock);
}

int gp_tok_bpe_piece(gp_tokenizer *tok, gp_tok_scratch *s, const char *piece, size_t len,
                     gp_i32vec *out, gp_error *err) {
    if (len == 0) return GEPARD_OK;
    bool cacheable = len <= GP_TOK_CACHE_MAX_PIECE;
    if (cacheable && cache_get(&tok->cache, piece, len, out)) return GEPARD_OK;
    size_t start = out->n;
    int rc = GEPARD_OK;
    int32_t whole = tok->ignore_merges ? whole_word_id(tok, s, piece, len, err) : -1;
    if (whole == -2) return err ? err->code : GEPARD_ERR_NOMEM;
    if (whole >= 0) {
        if (gp_i32vec_push(out, whole)) return gp_fail_oom(err, "token ids", out->n * 8);
    } else {
        rc = merge_piece(tok, s, piece, len, out, err);
    }
    if (!rc && cacheable)
        cache_put(&tok->cache, piece, len, out->v ? out->v + start : NULL, out->n - start);
    return rc;
}
