/* tok_config.c — the pipeline settings of tokenizer.json: added tokens,
 * normalizer, pre-tokenizer and decoder (MODEL.md §G.2–G.4).
 *
 * Supported: normalizer null / NFC / Sequence of those; pre-tokenizer
 * Sequence[Split..., ByteLevel] (any number of Splits up to
 * GP_TOK_MAX_SPLITS, any behavior, invert or not) or ByteLevel alone, with
 * ByteLevel's add_prefix_space false (use_regex true adds GPT-2's split);
 * decoder ByteLevel or null; added tokens without lstrip / rstrip /
 * single_word. Everything else is refused
 * with the file, the field and the value in the message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "text/nfc.h"
#include "text/tok_internal.h"
#include "text/utf8.h"

#define GP_TOK_MAX_NESTING 8

/* ---- added tokens ---- */

static int add_one(gp_tokenizer *tok, const char *content, size_t len, int32_t id, bool special,
                   bool normalized, const char *where, gp_error *err) {
    int32_t previous;
    uint32_t off;
    if (gp_strmap_put(&tok->added, content, len, id, &previous, &off))
        return gp_fail_oom(err, "the added tokens", len);
    if (previous >= 0 && previous != id)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: \"%.80s\" is already an added token with id %d, here it has id %d",
                       where, content, (int)previous, (int)id);
    int32_t vocab_id = gp_strmap_get(&tok->vocab, content, len);
    if (vocab_id >= 0 && vocab_id != id)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: \"%.80s\" has id %d but model.vocab gives it id %d", where, content,
                       (int)id, (int)vocab_id);
    int rc = gp_tok_reserve_id(tok, id, err);
    if (rc) return rc;
    gp_tok_entry *e = &tok->entries[id];
    if (e->kind == GP_TOK_ADDED && e->off != off)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: id %d is already the added token \"%.80s\"",
                       where, (int)id, gp_strmap_key(&tok->added, e->off));
    if (e->kind == GP_TOK_BPE && vocab_id != id)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: id %d is already the vocabulary token \"%.80s\"", where, (int)id,
                       gp_strmap_key(&tok->vocab, e->off));
    bool was_special = e->kind == GP_TOK_ADDED && e->special;
    *e = (gp_tok_entry){off, (uint32_t)len, GP_TOK_ADDED, (uint8_t)(special || was_special)};

    /* Tokens marked normalized are matched after NFC, in their NFC form. */
    char *key = NULL;
    size_t key_len = len;
    if (normalized && tok->nfc && (rc = gp_nfc(content, len, &key, &key_len, err))) return rc;
    gp_trie *trie = normalized ? &tok->norm_trie : &tok->raw_trie;
    int32_t other = -1;
    if (key_len > 0 && gp_trie_insert(trie, key ? key : content, key_len, id, &other)) rc = -1;
    free(key);
    if (rc) return gp_fail_oom(err, "the added-token matcher", len);
    if (other >= 0 && other != id)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: \"%.80s\" normalizes to the same text as the added token with id %d",
                       where, content, (int)other);
    return GEPARD_OK;
}

static int parse_added_token(gp_tokenizer *tok, const cJSON *item, size_t index, gp_error *err) {
    char where[512];
    snprintf(where, sizeof where, "%s: added_tokens[%zu]", tok->origin, index);
    if (!cJSON_IsObject(item))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s must be an object", where);
    int64_t id;
    const char *content;
    bool single_word, lstrip, rstrip, special, normalized;
    int rc;
    if ((rc = gp_json_get_int(item, "id", -1, &id, where, err)) ||
        (rc = gp_json_get_string(item, "content", NULL, &content, where, err)) ||
        (rc = gp_json_get_bool(item, "single_word", false, &single_word, where, err)) ||
        (rc = gp_json_get_bool(item, "lstrip", false, &lstrip, where, err)) ||
        (rc = gp_json_get_bool(item, "rstrip", false, &rstrip, where, err)) ||
        (rc = gp_json_get_bool(item, "special", false, &special, where, err)) ||
        (rc = gp_json_get_bool(item, "normalized", !special, &normalized, where, err)))
        return rc;
    if (id < 0 || id > GP_TOK_MAX_ID)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s.id must be a token id between 0 and %d", where,
                       GP_TOK_MAX_ID);
    if (!content) return gp_fail(err, GEPARD_ERR_FORMAT, "%s has no \"content\"", where);
    const char *flag = single_word ? "single_word" : lstrip ? "lstrip" : rstrip ? "rstrip" : NULL;
    if (flag)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "%s (\"%.80s\") sets %s to true: unsupported — added tokens are matched "
                       "exactly, without absorbing whitespace or checking word boundaries",
                       where, content, flag);
    size_t len = strlen(content), bad;
    const char *why;
    if (len == 0) return GEPARD_OK; /* HF ignores empty added tokens */
    if (gp_utf8_check(content, len, &bad, &why))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s.content is not valid UTF-8 (byte %zu is %s)",
                       where, bad, why);
    return add_one(tok, content, len, (int32_t)id, special, normalized, where, err);
}

int gp_tok_parse_added_tokens(gp_tokenizer *tok, const cJSON *root, gp_error *err) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    size_t count = 0;
    if (list && !cJSON_IsNull(list) && !cJSON_IsArray(list))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: added_tokens must be an array", tok->origin);
    for (const cJSON *it = cJSON_IsArray(list) ? list->child : NULL; it; it = it->next) count++;
    if (gp_strmap_init(&tok->added, count)) return gp_fail_oom(err, "the added tokens", count * 16);
    size_t index = 0;
    for (const cJSON *it = cJSON_IsArray(list) ? list->child : NULL; it; it = it->next, index++) {
        int rc = parse_added_token(tok, it, index, err);
        if (rc) return rc;
    }
    return GEPARD_OK;
}

/* ---- normalizer ---- */

static int node_type(const gp_tokenizer *tok, const cJSON *node, const char *path,
                     const char **type, gp_error *err) {
    if (!cJSON_IsObject(node))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: %s must be an object", tok->origin, path);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(node, "type");
    if (!cJSON_IsString(t))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: %s has no \"type\" string", tok->origin, path);
    *type = t->valuestring;
    return GEPARD_OK;
}

static int normalizer_node(gp_tokenizer *tok, const cJSON *node, const char *path, int depth,
                           gp_error *err) {
    if (!node || cJSON_IsNull(node)) return GEPARD_OK;
    const char *type;
    int rc = node_type(tok, node, path, &type, err);
    if (rc) return rc;
    if (strcmp(type, "NFC") == 0) {
        tok->nfc = true;
        return GEPARD_OK;
    }
    if (strcmp(type, "Sequence") == 0 && depth < GP_TOK_MAX_NESTING) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(node, "normalizers");
        if (!cJSON_IsArray(list))
            return gp_fail(err, GEPARD_ERR_FORMAT, "%s: %s.normalizers must be an array",
                           tok->origin, path);
        int i = 0;
        for (const cJSON *it = list->child; it; it = it->next, i++) {
            char sub[256];
            snprintf(sub, sizeof sub, "%s.normalizers[%d]", path, i);
            if (cJSON_IsNull(it))
                return gp_fail(err, GEPARD_ERR_FORMAT, "%s: %s is null", tok->origin, sub);
            if ((rc = normalizer_node(tok, it, sub, depth + 1, err))) return rc;
        }
        return GEPARD_OK;
    }
    return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                   "%s: %s.type is \"%.40s\": unsupported normalizer — only NFC, null or a "
                   "Sequence of NFC normalizers are supported",
                   tok->origin, path, type);
}

int gp_tok_parse_normalizer(gp_tokenizer *tok, const cJSON *root, gp_error *err) {
    tok->nfc = false;
    return normalizer_node(tok, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), "normalizer",
                           0, err);
}

/* ---- pre-tokenizer ---- */

/* The split HF's ByteLevel pre-tokenizer does itself when use_regex is true
 * (GPT-2's pattern, behavior Isolated). */
#define GPT2_PATTERN                                                                               \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

static int parse_bytelevel(gp_tokenizer *tok, const cJSON *node, const char *path, gp_error *err) {
    char where[512];
    snprintf(where, sizeof where, "%s: %s", tok->origin, path);
    bool add_prefix_space, use_regex;
    int rc;
    /* Absent flags take HF's defaults (true). */
    if ((rc = gp_json_get_bool(node, "add_prefix_space", true, &add_prefix_space, where, err)) ||
        (rc = gp_json_get_bool(node, "use_regex", true, &use_regex, where, err)))
        return rc;
    if (add_prefix_space)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "%s.add_prefix_space is true (or absent): unsupported — Qwen-style "
                       "byte-level tokenizers set it to false",
                       where);
    if (!use_regex) return GEPARD_OK;
    return gp_tok_split_add(tok, GPT2_PATTERN, false, GP_SPLIT_ISOLATED, false, where, err);
}

static int parse_split(gp_tokenizer *tok, const cJSON *node, const char *path, gp_error *err) {
    static const char *const behaviors[] = {"Removed", "Isolated", "MergedWithPrevious",
                                            "MergedWithNext", "Contiguous"};
    char where[512];
    snprintf(where, sizeof where, "%s: %s", tok->origin, path);
    const char *behavior;
    bool invert;
    int rc;
    if ((rc = gp_json_get_string(node, "behavior", NULL, &behavior, where, err)) ||
        (rc = gp_json_get_bool(node, "invert", false, &invert, where, err)))
        return rc;
    int b = -1;
    for (int i = 0; behavior && i < 5; i++)
        if (strcmp(behavior, behaviors[i]) == 0) b = i;
    if (b < 0)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s.behavior is %s%.40s%s: expected Removed, Isolated, MergedWithPrevious, "
                       "MergedWithNext or Contiguous",
                       where, behavior ? "\"" : "", behavior ? behavior : "missing",
                       behavior ? "\"" : "");
    const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(node, "pattern");
    const cJSON *regex = cJSON_GetObjectItemCaseSensitive(pattern, "Regex");
    const cJSON *literal = cJSON_GetObjectItemCaseSensitive(pattern, "String");
    if (cJSON_IsString(regex))
        return gp_tok_split_add(tok, regex->valuestring, false, b, invert, where, err);
    if (cJSON_IsString(literal))
        return gp_tok_split_add(tok, literal->valuestring, true, b, invert, where, err);
    return gp_fail(err, GEPARD_ERR_FORMAT,
                   "%s.pattern must be {\"Regex\": \"...\"} or {\"String\": \"...\"}", where);
}

/* Refuse a Sequence whose steps are not Split... then ByteLevel. */
static int refuse_sequence(gp_tokenizer *tok, const cJSON *list, gp_error *err) {
    gp_buf names;
    gp_buf_init(&names);
    int n = 0;
    for (const cJSON *it = list->child; it; it = it->next, n++) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(it, "type");
        gp_buf_printf(&names, "%s%.40s", n ? ", " : "", cJSON_IsString(t) ? t->valuestring : "?");
    }
    int rc = gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                     "%s: pre_tokenizer is a Sequence of [%s]: unsupported — expected Split "
                     "pre-tokenizers followed by ByteLevel (or ByteLevel alone)",
                     tok->origin, names.data ? names.data : "");
    gp_buf_free(&names);
    return rc;
}

int gp_tok_parse_pre_tokenizer(gp_tokenizer *tok, const cJSON *root, gp_error *err) {
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (!pt || cJSON_IsNull(pt))
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "%s: pre_tokenizer is null: unsupported — byte-level BPE needs the "
                       "ByteLevel pre-tokenizer (Qwen uses a Sequence of Split and ByteLevel)",
                       tok->origin);
    const char *type;
    int rc = node_type(tok, pt, "pre_tokenizer", &type, err);
    if (rc) return rc;
    if (strcmp(type, "ByteLevel") == 0) return parse_bytelevel(tok, pt, "pre_tokenizer", err);
    if (strcmp(type, "Sequence") != 0)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "%s: pre_tokenizer.type is \"%.40s\": unsupported pre-tokenizer — expected "
                       "a Sequence of Split pre-tokenizers and ByteLevel",
                       tok->origin, type);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers");
    if (!cJSON_IsArray(list))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: pre_tokenizer.pretokenizers must be an array",
                       tok->origin);
    /* Every step but the last must be a Split, the last a ByteLevel. */
    for (const cJSON *it = list->child; it; it = it->next) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(it, "type");
        const char *want = it->next ? "Split" : "ByteLevel";
        if (!cJSON_IsString(t) || strcmp(t->valuestring, want) != 0)
            return refuse_sequence(tok, list, err);
    }
    if (!list->child) return refuse_sequence(tok, list, err);
    int i = 0;
    for (const cJSON *it = list->child; it; it = it->next, i++) {
        char path[64];
        snprintf(path, sizeof path, "pre_tokenizer.pretokenizers[%d]", i);
        rc = it->next ? parse_split(tok, it, path, err) : parse_bytelevel(tok, it, path, err);
        if (rc) return rc;
    }
    return GEPARD_OK;
}

/* ---- decoder ---- */

int gp_tok_parse_decoder(gp_tokenizer *tok, const cJSON *root, gp_error *err) {
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    if (!dec || cJSON_IsNull(dec)) return GEPARD_OK;
    const char *type;
    int rc = node_type(tok, dec, "decoder", &type, err);
    if (rc) return rc;
    if (strcmp(type, "ByteLevel") == 0) return GEPARD_OK;
    return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                   "%s: decoder.type is \"%.40s\": unsupported decoder — expected ByteLevel (or "
                   "null)",
                   tok->origin, type);
}
