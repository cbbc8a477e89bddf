/* tok_internal.h — the tokenizer's internal layout, shared by its files.
 *
 *   tok_load.c     reading tokenizer.json: the model (vocab, merges) and the
 *                  top-level checks
 *   tok_config.c   the pipeline settings: added tokens, normalizer,
 *                  pre-tokenizer, decoder
 *   tok_regex.c    the Split pre-tokenizer: Oniguruma-to-PCRE2 translation of
 *                  the pattern, compilation, matching (with the Unicode
 *                  representatives of unicode.h) and the split behaviors
 *   tok_bpe.c      BPE merging of one piece and the thread-safe word cache
 *   tok_encode.c   encode (added tokens, NFC, splits, BPE) and decode
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
/* Split steps in one pre-tokenizer Sequence. */
#define GP_TOK_MAX_SPLITS 8

enum { GP_TOK_NONE = 0, GP_TOK_BPE = 1, GP_TOK_ADDED = 2 };

typedef struct gp_tok_entry {
    uint32_t off;    /* string offset: in vocab.keys (BPE) or added.keys (ADDED) */
    uint32_t len;    /* string length in bytes */
    uint8_t kind;    /* GP_TOK_NONE / GP_TOK_BPE / GP_TOK_ADDED */
    uint8_t special; /* added token marked special */
} gp_tok_entry;

/* What a Split does with the matches of its pattern (HF's
 * SplitDelimiterBehavior). */
enum {
    GP_SPLIT_REMOVED,
    GP_SPLIT_ISOLATED,
    GP_SPLIT_MERGED_WITH_PREVIOUS,
    GP_SPLIT_MERGED_WITH_NEXT,
    GP_SPLIT_CONTIGUOUS
};

typedef struct gp_tok_split {
    pcre2_code *re;
    char *pattern; /* as written in the file, for messages */
    int behavior;  /* GP_SPLIT_* */
    bool invert;   /* the gaps between matches are what the behavior acts on */
    /* Match on the text with representatives substituted (unicode.h): the
     * pattern uses Unicode classes, and only ones this makes exact. */
    bool substitute;
} gp_tok_split;

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
    /* Applied in order, each to every piece of the one before; none: the
     * segment is one piece. */
    gp_tok_split splits[GP_TOK_MAX_SPLITS];
    int n_splits;
    bool substitute; /* some split substitutes */
    pcre2_match_context *match_ctx;

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
/* What the translation found in a pattern. */
typedef struct gp_tok_regex_info {
    bool classes;            /* Unicode classes: \p \P \s \S \d \D \w \W \b \B */
    bool other_classes;      /* a property that is not a general category or White_Space, or \X */
    bool caseless;           /* (?i) somewhere */
    bool opaque;             /* a character given in octal, whose value is not tracked */
    uint32_t (*literals)[2]; /* non-ASCII characters and ranges written in the pattern */
    size_t n_literals, cap_literals;
} gp_tok_regex_info;
void gp_tok_regex_info_free(gp_tok_regex_info *info);
/* Rewrite an Oniguruma pattern (what HF `tokenizers` compiles) into PCRE2
 * syntax with the same meaning; refuses constructs it cannot translate.
 * `info` (may be NULL) receives what the pattern uses. */
int gp_tok_regex_translate(const char *pattern, size_t len, gp_buf *out, gp_tok_regex_info *info,
                           const char *where, gp_error *err);
/* Whether matching this pattern on the substituted text is exact (see
 * tok_regex.c). */
bool gp_tok_regex_can_substitute(const gp_tok_regex_info *info);
/* Compile a Split step (pattern as in the file; literal: a "String"
 * pattern) and append it to tok->splits. */
int gp_tok_split_add(gp_tokenizer *tok, const char *pattern, bool literal, int behavior,
                     bool invert, const char *where, gp_error *err);
/* Copy text into out with every code point that has a representative
 * replaced by it. Returns 1 when something was replaced (out holds the
 * copy, same length), 0 when the text can be matched as it is, -1 when out
 * of memory. */
int gp_tok_substitute(const char *text, size_t len, gp_buf *out);

/* A span of a piece of text: [start, end). */
typedef struct gp_tok_span {
    size_t start, end;
    bool match; /* internal: the pattern matched it (after invert) */
} gp_tok_span;
typedef struct gp_tok_spans {
    gp_tok_span *v;
    size_t n, cap;
} gp_tok_spans;
void gp_tok_spans_free(gp_tok_spans *s);
/* Run split step k on a piece of len bytes: match its pattern on
 * `subject` (the piece itself, or its substituted copy when the step
 * substitutes), apply the behavior, and append the non-empty pieces it
 * keeps to out as spans of the piece, in order. `md` is a match-data block
 * for that step's pattern. */
int gp_tok_split_run(const gp_tokenizer *tok, int k, pcre2_match_data *md, const char *subject,
                     size_t len, gp_tok_spans *out, gp_error *err);

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
