/* tok_internal.h — the tokenizer's internal layout, shared by its files.
 *
 *   tok_load.c     reading tokenizer.json: the model (vocab, merges) and the
 *                  top-level checks
 *   tok_config.c   the pipeline settings: added tokens, normalizer,
 *                  pre-tokenizer, decoder
 *   tok_regex.c    the Split pre-tokenizer: Oniguruma-to-PCRE2 translation of
 *                  the pattern, compilation, and the Isolated split
 *   tok_bpe.c      BPE merging of one piece and the thread-safe word cache
 *   tok_encode.c   encode (added tokens, NFC, split, BPE) and decode
 *
 * Only tests include this header besides those files.
 */
#ifndef GP_TEXT_TOK_INTERNAL_H
#define GP_TEXT_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include <pcre2.h>
#include <pthread.h>

#include "base/buf.h"
#include "text/tables.h"
#include "text/tokenizer.h"

/* Ids above this are refused at load (Qwen3.5 uses 248 077). */
#define GP_TOK_MAX_ID (1 << 24)
/* Word cache bounds: entries and stored ids; the cache is emptied when full. */
#define GP_TOK_CACHE_MAX_ENTRIES 32768
#define GP_TOK_CACHE_MAX_IDS (1 << 20)
/* Pieces longer than this (bytes) are not cached. */
#define GP_TOK_CACHE_MAX_PIECE 256

enum { GP_TOK_NONE = 0, GP_TOK_BPE = 1, GP_TOK_ADDED = 2 };

typedef struct gp_tok_entry {
    uint32_t off;    /* string offset: in vocab.keys (BPE) or added.keys (ADDED) */
    uint32_t len;    /* string length in bytes */
    uint8_t kind;    /* GP_TOK_NONE / GP_TOK_BPE / GP_TOK_ADDED */
    uint8_t special; /* added token marked special */
} gp_tok_entry;

typedef struct gp_tok_cache {
    pthread_mutex_t lock;
    gp_strmap words; /* piece bytes -> index into ids */
    gp_i32vec ids;   /* at each index: count, then the ids */
} gp_tok_cache;

struct gp_tokenizer {
    char *origin; /* file name for messages */

    /* Vocabulary. */
    gp_strmap vocab;       /* BPE token (byte-level spelling) -> id */
    gp_strmap added;       /* added-token content -> id */
    gp_tok_entry *entries; /* per id, n_ids of them */
    int32_t n_ids;         /* 1 + highest id */
    int32_t byte_id[256];  /* id of each byte's byte-level symbol, -1 if absent */

    /* Model. */
    gp_pairmap merges; /* (left id, right id) -> (rank, merged id) */
    bool ignore_merges;
    int32_t unk_id; /* -1: unknown symbols are dropped */
    bool fuse_unk;

    /* Added tokens. */
    gp_trie raw_trie;  /* normalized: false, matched in the raw text */
    gp_trie norm_trie; /* normalized: true, matched after NFC */

    /* Normalizer and pre-tokenizer. */
    bool nfc;
    pcre2_code *split_re; /* NULL: no Split step, the segment is one piece */
    pcre2_match_context *match_ctx;
    char *split_pattern; /* as written in the file, for messages */

    gp_tok_cache cache;
};

/* tok_load.c: make tok->entries cover `id` (new entries are GP_TOK_NONE). */
int gp_tok_reserve_id(gp_tokenizer *tok, int32_t id, gp_error *err);

/* tok_config.c */
int gp_tok_parse_added_tokens(gp_tokenizer *tok, const cJSON *root, gp_error *err);
int gp_tok_parse_normalizer(gp_tokenizer *tok, const cJSON *root, gp_error *err);
int gp_tok_parse_pre_tokenizer(gp_tokenizer *tok, const cJSON *root, gp_error *err);
int gp_tok_parse_decoder(gp_tokenizer *tok, const cJSON *root, gp_error *err);

/* tok_regex.c */
/* Rewrite an Oniguruma pattern (what HF `tokenizers` compiles) into PCRE2
 * syntax with the same meaning; refuses constructs it cannot translate. */
int gp_tok_regex_translate(const char *pattern, size_t len, gp_buf *out, const char *where,
                           gp_error *err);
/* Compile the Split pattern into tok->split_re. */
int gp_tok_regex_compile(gp_tokenizer *tok, const char *pattern, bool literal, const char *where,
                         gp_error *err);
typedef int (*gp_tok_piece_fn)(void *ctx, const char *piece, size_t len, gp_error *err);
/* Split valid UTF-8 text with the Split pattern (Isolated: every match and
 * every gap between matches is a piece; empty pieces are dropped) and call
 * fn for each piece in order. `md` is a match-data block for tok->split_re. */
int gp_tok_regex_split(const gp_tokenizer *tok, pcre2_match_data *md, const char *text, size_t len,
                       gp_tok_piece_fn fn, void *ctx, gp_error *err);

/* tok_bpe.c */
typedef struct gp_tok_scratch {
    struct gp_bpe_symbol *syms;
    struct gp_bpe_merge *heap;
    size_t syms_cap, heap_cap;
    gp_buf bytelevel;
} gp_tok_scratch;
void gp_tok_scratch_free(gp_tok_scratch *s);
int gp_tok_cache_init(gp_tok_cache *c);
void gp_tok_cache_free(gp_tok_cache *c);
/* Append the ids of one pre-tokenized piece (raw UTF-8 bytes) to out. */
int gp_tok_bpe_piece(gp_tokenizer *tok, gp_tok_scratch *s, const char *piece, size_t len,
                     gp_i32vec *out, gp_error *err);

/* tok_encode.c — for tests: the pre-tokenizer pieces of one segment (after
 * NFC, without added-token matching), each followed by a NUL in `out`.
 * *count gets the number of pieces. */
int gp_tok_debug_pieces(const gp_tokenizer *tok, const char *text, size_t len, gp_buf *out,
                        size_t *count, gp_error *err);

#endif
