/* tok_load.c — reading tokenizer.json: top-level structure and the BPE model.
 *
 * The file is parsed once with cJSON; the vocabulary and merges are walked as
 * linked lists (never looked up by key in the cJSON tree, which would be
 * quadratic) and moved into hash tables, then the tree is freed. The pipeline
 * settings (added tokens, normalizer, pre-tokenizer, decoder) are read by
 * tok_config.c. Every unsupported setting is refused with a sentence naming
 * the file, the field and the value.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "io/file.h"
#include "io/json.h"
#include "text/tok_internal.h"
#include "text/utf8.h"

/* Real tokenizer.json files are ~10 MiB; refuse absurd sizes up front. */
#define GP_TOK_MAX_FILE_BYTES ((size_t)1 << 30)

/* Make sure tok->entries covers `id`, zero-filling new entries. */
int gp_tok_reserve_id(gp_tokenizer *tok, int32_t id, gp_error *err) {
    if (id < tok->n_ids) return GEPARD_OK;
    size_t n = (size_t)id + 1;
    gp_tok_entry *e = realloc(tok->entries, n * sizeof *e);
    if (!e) return gp_fail_oom(err, "the token table", n * sizeof *e);
    memset(e + tok->n_ids, 0, (n - (size_t)tok->n_ids) * sizeof *e);
    tok->entries = e;
    tok->n_ids = id + 1;
    return GEPARD_OK;
}

static int parse_vocab(gp_tokenizer *tok, const cJSON *vocab, gp_error *err) {
    const char *o = tok->origin;
    if (!vocab)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: model.vocab is missing — a BPE model needs "
                       "its vocabulary",
                       o);
    if (!cJSON_IsObject(vocab))
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: model.vocab must be an object mapping token strings to ids", o);
    size_t count = 0;
    int64_t max_id = -1;
    for (const cJSON *it = vocab->child; it; it = it->next) count++;
    if (gp_strmap_init(&tok->vocab, count)) return gp_fail_oom(err, "the vocabulary", count * 16);
    for (const cJSON *it = vocab->child; it; it = it->next) {
        const char *key = it->string ? it->string : "";
        if (!gp_json_is_integer(it) || it->valuedouble < 0 || it->valuedouble > GP_TOK_MAX_ID)
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: model.vocab[\"%.80s\"] must be a token id between 0 and %d", o, key,
                           GP_TOK_MAX_ID);
        int32_t id = (int32_t)it->valuedouble, previous;
        if (gp_strmap_put(&tok->vocab, key, strlen(key), id, &previous, NULL))
            return gp_fail_oom(err, "the vocabulary", strlen(key));
        if (previous >= 0)
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: model.vocab lists the token \"%.80s\" twice", o, key);
        if (id > max_id) max_id = id;
    }
    if (max_id >= 0) {
        int rc = gp_tok_reserve_id(tok, (int32_t)max_id, err);
        if (rc) return rc;
    }
    /* id -> string, refusing two tokens with one id (decode would be ambiguous). */
    for (size_t i = 0; i < tok->vocab.cap; i++) {
        const gp_strmap_slot *s = &tok->vocab.slots[i];
        if (s->value < 0) continue;
        gp_tok_entry *e = &tok->entries[s->value];
        if (e->kind != GP_TOK_NONE)
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: model.vocab gives id %d to both \"%.80s\" and \"%.80s\"", o,
                           (int)s->value, gp_strmap_key(&tok->vocab, e->off),
                           gp_strmap_key(&tok->vocab, s->off));
        *e = (gp_tok_entry){s->off, s->len, GP_TOK_BPE, 0};
    }
    for (int b = 0; b < 256; b++) {
        char u[4];
        size_t n = gp_utf8_put(gp_bytelevel_char((uint8_t)b), u);
        tok->byte_id[b] = gp_strmap_get(&tok->vocab, u, n);
    }
    return GEPARD_OK;
}

/* Split one merges entry into its two symbols. */
static int merge_parts(const gp_tokenizer *tok, const cJSON *item, size_t index, const char **a,
                       size_t *alen, const char **b, size_t *blen, gp_error *err) {
    if (cJSON_IsString(item)) {
        /* "A B": exactly one space (HF splits on ' ' and wants two parts;
         * byte-level symbols never contain a raw space). */
        const char *s = item->valuestring;
        const char *sp = strchr(s, ' ');
        if (!sp || strchr(sp + 1, ' '))
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: model.merges[%zu] is \"%.80s\", expected two symbols separated by "
                           "one space",
                           tok->origin, index, s);
        *a = s;
        *alen = (size_t)(sp - s);
        *b = sp + 1;
        *blen = strlen(sp + 1);
        return GEPARD_OK;
    }
    if (cJSON_IsArray(item) && cJSON_GetArraySize(item) == 2 && cJSON_IsString(item->child) &&
        cJSON_IsString(item->child->next)) {
        *a = item->child->valuestring;
        *alen = strlen(*a);
        *b = item->child->next->valuestring;
        *blen = strlen(*b);
        return GEPARD_OK;
    }
    return gp_fail(err, GEPARD_ERR_FORMAT,
                   "%s: model.merges[%zu] must be a string \"A B\" or an array [\"A\", \"B\"]",
                   tok->origin, index);
}

static int parse_merges(gp_tokenizer *tok, const cJSON *merges, gp_error *err) {
    const char *o = tok->origin;
    if (merges && !cJSON_IsArray(merges))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: model.merges must be an array", o);
    size_t count = 0;
    for (const cJSON *it = merges ? merges->child : NULL; it; it = it->next) count++;
    if (count > UINT32_MAX)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: model.merges has too many entries", o);
    if (gp_pairmap_init(&tok->merges, count))
        return gp_fail_oom(err, "the merge table", count * 16);
    gp_buf joined;
    gp_buf_init(&joined);
    int rc = GEPARD_OK;
    size_t rank = 0;
    for (const cJSON *it = merges ? merges->child : NULL; it; it = it->next, rank++) {
        const char *a = NULL, *b = NULL;
        size_t alen = 0, blen = 0;
        rc = merge_parts(tok, it, rank, &a, &alen, &b, &blen, err);
        if (rc) break;
        int32_t ia = gp_strmap_get(&tok->vocab, a, alen);
        int32_t ib = gp_strmap_get(&tok->vocab, b, blen);
        if (ia < 0 || ib < 0) {
            rc = gp_fail(
                err, GEPARD_ERR_FORMAT,
                "%s: model.merges[%zu] (\"%.*s\" \"%.*s\"): \"%.*s\" is not in model.vocab", o,
                rank, (int)alen, a, (int)blen, b, ia < 0 ? (int)alen : (int)blen, ia < 0 ? a : b);
            break;
        }
        gp_buf_clear(&joined);
        if (gp_buf_append(&joined, a, alen) || gp_buf_append(&joined, b, blen)) {
            rc = gp_fail_oom(err, "a merge", alen + blen);
            break;
        }
        int32_t merged = gp_strmap_get(&tok->vocab, joined.data, joined.len);
        if (merged < 0) {
            rc = gp_fail(err, GEPARD_ERR_FORMAT,
                         "%s: model.merges[%zu] (\"%.*s\" \"%.*s\"): the merged token \"%.80s\" is "
                         "not in model.vocab",
                         o, rank, (int)alen, a, (int)blen, b, joined.data);
            break;
        }
        /* A repeated pair takes the later rank, as in HF (its merge map is a
         * HashMap collected in file order). */
        if (gp_pairmap_set(&tok->merges, ia, ib, (uint32_t)rank, merged)) {
            rc = gp_fail_oom(err, "the merge table", tok->merges.cap * 32);
            break;
        }
    }
    gp_buf_free(&joined);
    return rc;
}

/* A field that must be null, absent or the empty string. */
static int require_empty_string(const gp_tokenizer *tok, const cJSON *model, const char *key,
                                gp_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(model, key);
    if (!v || cJSON_IsNull(v) || (cJSON_IsString(v) && v->valuestring[0] == '\0')) return GEPARD_OK;
    return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                   "%s: model.%s is %s%.40s%s: unsupported — only byte-level BPE without "
                   "sub-word prefixes or suffixes is supported (expected null or \"\")",
                   tok->origin, key, cJSON_IsString(v) ? "\"" : "",
                   cJSON_IsString(v) ? v->valuestring : "not a string",
                   cJSON_IsString(v) ? "\"" : "");
}

static int parse_model(gp_tokenizer *tok, const cJSON *model, gp_error *err) {
    const char *o = tok->origin;
    if (!model || cJSON_IsNull(model))
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: no \"model\" object — is this a Hugging Face tokenizer.json?", o);
    if (!cJSON_IsObject(model))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: \"model\" must be an object", o);
    /* Messages of the typed getters read "FILE: model: \"key\" must be ...". */
    char where[512];
    snprintf(where, sizeof where, "%s: model", o);
    const char *type;
    int rc = gp_json_get_string(model, "type", NULL, &type, where, err);
    if (rc) return rc;
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!type && !merges)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "%s: model.type is missing and the model has no merges — only byte-level "
                       "BPE tokenizers are supported",
                       o);
    if (type && strcmp(type, "BPE") != 0)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "%s: model.type is \"%.40s\": unsupported model type — only byte-level BPE "
                       "tokenizers (model.type \"BPE\", as used by Qwen) are supported",
                       o, type);
    bool byte_fallback;
    double dropout;
    if ((rc = gp_json_get_bool(model, "byte_fallback", false, &byte_fallback, where, err)) ||
        (rc = gp_json_get_bool(model, "ignore_merges", false, &tok->ignore_merges, where, err)) ||
        (rc = gp_json_get_bool(model, "fuse_unk", false, &tok->fuse_unk, where, err)) ||
        (rc = gp_json_get_double(model, "dropout", 0.0, &dropout, where, err)))
        return rc;
    if (byte_fallback)
        return gp_fail(
            err, GEPARD_ERR_UNSUPPORTED,
            "%s: model.byte_fallback is true: byte fallback is not supported (byte-level "
            "BPE tokenizers such as Qwen's set it to false)",
            o);
    if (dropout != 0.0)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "%s: model.dropout is %g: BPE dropout makes tokenization random and is not "
                       "supported — set it to null",
                       o, dropout);
    if ((rc = require_empty_string(tok, model, "continuing_subword_prefix", err)) ||
        (rc = require_empty_string(tok, model, "end_of_word_suffix", err)))
        return rc;
    if ((rc = parse_vocab(tok, cJSON_GetObjectItemCaseSensitive(model, "vocab"), err)) ||
        (rc = parse_merges(tok, merges, err)))
        return rc;
    const char *unk;
    if ((rc = gp_json_get_string(model, "unk_token", NULL, &unk, where, err))) return rc;
    tok->unk_id = -1;
    if (unk) {
        tok->unk_id = gp_strmap_get(&tok->vocab, unk, strlen(unk));
        if (tok->unk_id < 0)
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: model.unk_token \"%.80s\" is not in "
                           "model.vocab",
                           o, unk);
    }
    return GEPARD_OK;
}

static int parse_root(gp_tokenizer *tok, const cJSON *root, gp_error *err) {
    if (!cJSON_IsObject(root))
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: expected a JSON object at the top level — is this a Hugging Face "
                       "tokenizer.json?",
                       tok->origin);
    /* The normalizer is read before the added tokens: those marked normalized
     * are stored in their normalized form. `truncation`, `padding` and `post_processor`
     * are not applied: the engine encodes without special tokens and never
     * truncates (long text is segmented by the caller). */
    int rc;
    if ((rc = parse_model(tok, cJSON_GetObjectItemCaseSensitive(root, "model"), err)) ||
        (rc = gp_tok_parse_normalizer(tok, root, err)) ||
        (rc = gp_tok_parse_added_tokens(tok, root, err)) ||
        (rc = gp_tok_parse_pre_tokenizer(tok, root, err)) ||
        (rc = gp_tok_parse_decoder(tok, root, err)))
        return rc;
    if (tok->n_ids == 0)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: the vocabulary is empty", tok->origin);
    return GEPARD_OK;
}

int gp_tok_load_memory(const char *json, size_t len, const char *origin, gp_tokenizer **out,
                       gp_error *err) {
    *out = NULL;
    if (!json) return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "no tokenizer JSON given");
    gp_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) return gp_fail_oom(err, "a tokenizer", sizeof *tok);
    tok->unk_id = -1;
    gp_trie_init(&tok->raw_trie);
    gp_trie_init(&tok->norm_trie);
    tok->origin = strdup(origin ? origin : "tokenizer.json");
    if (!tok->origin || gp_tok_cache_init(&tok->cache)) {
        free(tok->origin);
        free(tok);
        return gp_fail_oom(err, "a tokenizer", sizeof *tok);
    }
    cJSON *root = NULL;
    int rc = gp_json_parse(json, len, tok->origin, &root, err);
    if (!rc) rc = parse_root(tok, root, err);
    cJSON_Delete(root);
    if (rc) {
        gp_tok_free(tok);
        return rc;
    }
    GP_DEBUG("%s: %zu vocabulary entries, %zu merges, %zu added tokens, %d ids", tok->origin,
             tok->vocab.count, tok->merges.count, tok->added.count, (int)tok->n_ids);
    *out = tok;
    return GEPARD_OK;
}

int gp_tok_load(const char *path, gp_tokenizer **out, gp_error *err) {
    *out = NULL;
    char *text;
    size_t len;
    int rc = gp_read_file(path, GP_TOK_MAX_FILE_BYTES, &text, &len, err);
    if (rc) return rc;
    rc = gp_tok_load_memory(text, len, path, out, err);
    free(text);
    return rc;
}

void gp_tok_free(gp_tokenizer *tok) {
    if (!tok) return;
    gp_tok_cache_free(&tok->cache);
    gp_strmap_free(&tok->vocab);
    gp_strmap_free(&tok->added);
    gp_pairmap_free(&tok->merges);
    gp_trie_free(&tok->raw_trie);
    gp_trie_free(&tok->norm_trie);
    for (int i = 0; i < tok->n_splits; i++) {
        pcre2_code_free(tok->splits[i].re);
        free(tok->splits[i].pattern);
    }
    pcre2_match_context_free(tok->match_ctx);
    free(tok->entries);
    free(tok->origin);
    free(tok);
}

size_t gp_tok_vocab_size(const gp_tokenizer *tok) { return tok ? (size_t)tok->n_ids : 0; }

int32_t gp_tok_token_to_id(const gp_tokenizer *tok, const char *token) {
    if (!tok || !token) return -1;
    size_t len = strlen(token);
    int32_t id = tok->added.cap ? gp_strmap_get(&tok->added, token, len) : -1;
    return id >= 0 ? id : gp_strmap_get(&tok->vocab, token, len);
}
