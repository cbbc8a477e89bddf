/* test_tokenizer_config.c — tokenizer.json settings, one at a time: each case
 * edits tests/data/tokenizers/tiny_strings.json in memory (see
 * test_tokenizer_variants.c for its vocabulary) and checks that the loader
 * refuses it with a message naming the field and value, or accepts it and
 * encodes as HF `tokenizers` would.
 */
#include <stdlib.h>
#include <string.h>

#include "io/file.h"
#include "test.h"
#include "text/tokenizer.h"

#define BASE_PATH "tests/data/tokenizers/tiny_strings.json"

/* The base file with `from` (which must occur) replaced by `to`; caller frees. */
static char *edited(const char *from, const char *to) {
    char *base;
    size_t len;
    gp_error err;
    if (gp_read_file(BASE_PATH, 0, &base, &len, &err)) {
        test_fail(__FILE__, __LINE__, "%s", err.message);
        return NULL;
    }
    char *at = strstr(base, from);
    if (!at) {
        test_fail(__FILE__, __LINE__, "\"%s\" does not occur in " BASE_PATH, from);
        free(base);
        return NULL;
    }
    size_t head = (size_t)(at - base), fl = strlen(from), tl = strlen(to);
    char *out = malloc(len - fl + tl + 1);
    memcpy(out, base, head);
    memcpy(out + head, to, tl);
    memcpy(out + head + tl, at + fl, len - head - fl + 1);
    free(base);
    return out;
}

static void refused_at(int line, const char *from, const char *to, const char *needle) {
    char *json = edited(from, to);
    if (!json) return;
    gp_tokenizer *tok = NULL;
    gp_error err;
    int rc = gp_tok_load_memory(json, strlen(json), "variant.json", &tok, &err);
    if (rc == 0) {
        test_fail(__FILE__, line, "replacing %s by %s loaded, expected \"%s\"", from, to, needle);
        gp_tok_free(tok);
    } else if (!strstr(err.message, needle) || !strstr(err.message, "variant.json")) {
        test_fail(__FILE__, line, "message \"%s\" lacks \"%s\" or the file name", err.message,
                  needle);
    }
    free(json);
}
#define REFUSED(from, to, needle) refused_at(__LINE__, from, to, needle)
/* An extra Split step (at the start of the Sequence). */
#define SPLIT_C                                                                                    \
    "{\"type\": \"Split\", \"pattern\": {\"String\": \"c\"}, \"behavior\": "                       \
    "\"MergedWithPrevious\", \"invert\": false},"

TEST(tokenizer_config_refusals) {
    /* Model. */
    REFUSED("\"type\": \"BPE\"", "\"type\": \"Unigram\"",
            "model.type is \"Unigram\": unsupported model type");
    REFUSED("\"continuing_subword_prefix\": \"\"", "\"continuing_subword_prefix\": \"##\"",
            "model.continuing_subword_prefix is \"##\": unsupported");
    REFUSED("\"end_of_word_suffix\": \"\"", "\"end_of_word_suffix\": \"</w>\"",
            "model.end_of_word_suffix is \"</w>\"");
    REFUSED("\"dropout\": null", "\"dropout\": 0.1", "model.dropout is 0.1");
    REFUSED("\"unk_token\": null", "\"unk_token\": \"zz\"",
            "model.unk_token \"zz\" is not in model.vocab");
    REFUSED("\"a a\"\n", "\"a a\",\"a  b\"\n",
            "model.merges[9] is \"a  b\", expected two symbols separated by one space");
    REFUSED("\"a a\"\n", "\"a a\",[\"a\"]\n", "model.merges[9] must be a string");
    REFUSED("\"a a\"\n", "\"a a\",\"a z\"\n", "model.merges[9] (\"a\" \"z\"): \"z\" is not in");
    REFUSED("\"aa\": 21", "\"aa\": 21, \"zz\": 0", "model.vocab gives id 0 to both");
    REFUSED("\"aa\": 21", "\"aa\": -3", "model.vocab[\"aa\"] must be a token id");
    REFUSED("\"aa\": 21", "\"aa\": 21, \"aa\": 22", "lists the token \"aa\" twice");
    REFUSED("\"ignore_merges\": false", "\"ignore_merges\": 1",
            "model: \"ignore_merges\" must be true or false");
    /* Added tokens. */
    REFUSED("\"content\": \"<x>\", \"single_word\": false, \"lstrip\": false",
            "\"content\": \"<x>\", \"single_word\": false, \"lstrip\": true",
            "added_tokens[0] (\"<x>\") sets lstrip to true: unsupported");
    REFUSED("\"content\": \"<y>\", \"single_word\": false",
            "\"content\": \"<y>\", \"single_word\": true", "sets single_word to true");
    REFUSED("\"id\": 27, \"content\": \"xyx\"", "\"id\": 27, \"content\": \"ab\"",
            "added_tokens[3]: \"ab\" has id 27 but model.vocab gives it id 12");
    REFUSED("\"id\": 27, \"content\": \"xyx\"", "\"id\": 24, \"content\": \"xyx\"",
            "added_tokens[3]: id 24 is already the added token \"<x>\"");
    REFUSED("\"id\": 27, \"content\": \"xyx\"", "\"id\": 3, \"content\": \"xyx\"",
            "id 3 is already the vocabulary token \"d\"");
    REFUSED("\"content\": \"xyx\"", "\"content\": \"x\xFFy\"", "content is not valid UTF-8");
    /* Normalizer. */
    REFUSED("\"normalizer\": {\"type\": \"NFC\"}", "\"normalizer\": {\"type\": \"NFKC\"}",
            "normalizer.type is \"NFKC\": unsupported normalizer");
    REFUSED("\"normalizer\": {\"type\": \"NFC\"}",
            "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, "
            "{\"type\": \"Lowercase\"}]}",
            "normalizer.normalizers[1].type is \"Lowercase\"");
    /* Pre-tokenizer. */
    REFUSED("\"behavior\": \"Isolated\"", "\"behavior\": \"Split\"",
            "pre_tokenizer.pretokenizers[0].behavior is \"Split\": expected Removed, Isolated");
    REFUSED("\"invert\": false", "\"invert\": 0", "\"invert\" must be true or false");
    REFUSED("\"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false",
            "\"add_prefix_space\": true, \"trim_offsets\": false, \"use_regex\": false",
            "pretokenizers[1].add_prefix_space is true");
    REFUSED("\"type\": \"Split\"", "\"type\": \"Metaspace\"",
            "pre_tokenizer is a Sequence of [Metaspace, ByteLevel]: unsupported");
    REFUSED("\"pretokenizers\": [", "\"pretokenizers\": [{\"type\": \"ByteLevel\"},",
            "a Sequence of [ByteLevel, Split, ByteLevel]: unsupported");
    REFUSED("\"pretokenizers\": [",
            "\"pretokenizers\": [" SPLIT_C SPLIT_C SPLIT_C SPLIT_C SPLIT_C SPLIT_C SPLIT_C SPLIT_C,
            "more than 8 Split pre-tokenizers");
    REFUSED("\"pattern\": {\"Regex\": \"", "\"pattern\": {\"Regex\": \"\\\\u12|",
            "\\u at offset 0 must be followed by 4 hex digits");
    REFUSED("\"}, \"behavior\": \"Isolated\"", "|\\\\p{L\"}, \"behavior\": \"Isolated\"",
            "is not closed");
    REFUSED("\"pre_tokenizer\": {", "\"pre_tokenizer\": null, \"x\": {", "pre_tokenizer is null");
    REFUSED("\"pattern\": {\"Regex\": \"", "\"pattern\": {\"Regex\": \"[[:alpha:]]|",
            "POSIX character class");
    REFUSED("\"pattern\": {\"Regex\": \"", "\"pattern\": {\"Regex\": \"(|", "cannot be compiled");
    REFUSED("\"pattern\": {\"Regex\": \"", "\"pattern\": {\"Rx\": \"", ".pattern must be");
    /* Decoder and top level. */
    REFUSED("\"decoder\": {\"type\": \"ByteLevel\"", "\"decoder\": {\"type\": \"WordPiece\"",
            "decoder.type is \"WordPiece\": unsupported decoder");
    REFUSED("{\n  \"version\"", "[1] {\n  \"version\"", "unexpected data after the JSON document");
    gp_tokenizer *tok = NULL;
    gp_error err;
    CHECK_ERR_CONTAINS(gp_tok_load_memory("[1, 2]", 6, "array.json", &tok, &err), &err,
                       "array.json: expected a JSON object at the top level");
    const char *empty = "{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}, "
                        "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": "
                        "false, \"use_regex\": false}}";
    CHECK_ERR_CONTAINS(gp_tok_load_memory(empty, strlen(empty), "empty.json", &tok, &err), &err,
                       "empty.json: the vocabulary is empty");
}

static gp_tokenizer *load_edited(const char *from, const char *to) {
    char *json = edited(from, to);
    if (!json) return NULL;
    gp_tokenizer *tok = NULL;
    gp_error err;
    if (gp_tok_load_memory(json, strlen(json), "variant.json", &tok, &err))
        test_fail(__FILE__, __LINE__, "replacing %s by %s: %s", from, to, err.message);
    free(json);
    return tok;
}

static void expect_ids_at(int line, gp_tokenizer *tok, const char *text, const int32_t *want,
                          size_t n_want) {
    gp_error err;
    int32_t *ids;
    size_t n;
    if (!tok) return;
    if (gp_tok_encode(tok, text, strlen(text), &ids, &n, &err)) {
        test_fail(__FILE__, line, "encode(\"%s\"): %s", text, err.message);
        return;
    }
    if (n != n_want || (n && memcmp(ids, want, n * sizeof *ids) != 0)) {
        char got[256] = "";
        for (size_t i = 0; i < n && strlen(got) < 200; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), " %d", (int)ids[i]);
        test_fail(__FILE__, line, "encode(\"%s\") gave [%s ]", text, got);
    }
    free(ids);
}
/* The base file with two edits. */
static gp_tokenizer *load_edited2(const char *from1, const char *to1, const char *from2,
                                  const char *to2) {
    char *once = edited(from1, to1);
    if (!once) return NULL;
    char *at = strstr(once, from2);
    gp_tokenizer *tok = NULL;
    if (!at) {
        test_fail(__FILE__, __LINE__, "\"%s\" does not occur after the first edit", from2);
    } else {
        size_t head = (size_t)(at - once), fl = strlen(from2), tl = strlen(to2);
        char *json = malloc(strlen(once) - fl + tl + 1);
        memcpy(json, once, head);
        memcpy(json + head, to2, tl);
        strcpy(json + head + tl, at + fl);
        gp_error err;
        if (gp_tok_load_memory(json, strlen(json), "variant.json", &tok, &err))
            test_fail(__FILE__, __LINE__, "two edits: %s", err.message);
        free(json);
    }
    free(once);
    return tok;
}
/* First edit of load_edited2: the split pattern becomes the String " ". */
#define STRING_SPACE "\"pattern\": {\"Regex\"", "\"pattern\": {\"String\": \" \", \"Unused\""

#define EXPECT_IDS(tok, text, ...)                                                                 \
    expect_ids_at(__LINE__, tok, text, (const int32_t[]){__VA_ARGS__},                             \
                  sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))

TEST(tokenizer_config_accepted_variants) {
    /* No Split: the whole segment is one piece, so merges cross what the
     * regex would separate. "ab1c": '1' has no symbol and is dropped; with
     * the split "ab" "1" "c" -> [ab] [] [c]; without, a b c -> [abc]. */
    gp_tokenizer *base = load_edited("\"normalizer\"", "\"normalizer\"");
    gp_tokenizer *whole = load_edited(
        "{\n    \"type\": \"Sequence\",\n    \"pretokenizers\": [\n      {\"type\": \"Split\"",
        "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false, \"x\": "
        "[\n      {\"type\": \"Split\"");
    EXPECT_IDS(base, "ab1c", 12, 2);
    EXPECT_IDS(whole, "ab1c", 13);
    gp_tok_free(whole);
    gp_tok_free(base);

    /* A literal String pattern: split at (and keep) each space. */
    gp_tokenizer *lit = load_edited("\"pattern\": {\"Regex\"", "\"pattern\": {\"String\": \" \", "
                                                               "\"Unused\"");
    EXPECT_IDS(lit, "ab cd", 12, 7, 16);
    EXPECT_IDS(lit, "abc ab", 13, 7, 12);
    gp_tok_free(lit);

    /* Split behaviors, invert, several Splits, ByteLevel's own regex; the
     * expected ids are HF tokenizers 0.23.2's for the same edits. */
    gp_tokenizer *removed =
        load_edited2(STRING_SPACE, "\"behavior\": \"Isolated\"", "\"behavior\": \"Removed\"");
    EXPECT_IDS(removed, "abc  ab", 13, 12);
    EXPECT_IDS(removed, "abcd abcab", 12, 16, 13, 12);
    gp_tok_free(removed);
    gp_tokenizer *next = load_edited2(STRING_SPACE, "\"behavior\": \"Isolated\"",
                                      "\"behavior\": \"MergedWithNext\"");
    EXPECT_IDS(next, "abc  ab", 13, 7, 7, 12);
    EXPECT_IDS(next, "abcd abcab", 12, 16, 7, 13, 12);
    gp_tok_free(next);
    gp_tokenizer *kept = load_edited2(STRING_SPACE, "\"behavior\": \"Isolated\", \"invert\": false",
                                      "\"behavior\": \"Removed\", \"invert\": true");
    EXPECT_IDS(kept, "abc  ab", 7, 7);
    EXPECT_IDS(kept, "abcd abcab", 7);
    gp_tok_free(kept);
    gp_tokenizer *contiguous = load_edited2("\"pattern\": {\"Regex\": \"",
                                            "\"pattern\": {\"Regex\": \"b\", \"Unused\": \"",
                                            "\"behavior\": \"Isolated\", \"invert\": false",
                                            "\"behavior\": \"Contiguous\", \"invert\": true");
    EXPECT_IDS(contiguous, "abc  ab", 0, 1, 2, 7, 14, 1);
    EXPECT_IDS(contiguous, "abcd abcab", 0, 1, 16, 14, 1, 2, 0, 1);
    gp_tok_free(contiguous);
    gp_tokenizer *gpt2 =
        load_edited("\"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false",
                    "\"add_prefix_space\": false");
    EXPECT_IDS(gpt2, "abc  ab", 13, 7, 7, 12);
    EXPECT_IDS(gpt2, "abcd abcab", 12, 16, 7, 13, 12);
    gp_tok_free(gpt2);
    gp_tokenizer *two = load_edited("\"pretokenizers\": [", "\"pretokenizers\": [" SPLIT_C);
    EXPECT_IDS(two, "ab cd", 12, 7, 2, 3);
    EXPECT_IDS(two, "abcd abcab", 13, 3, 7, 13, 12);
    gp_tok_free(two);

    /* unk_token: a byte without a symbol becomes unk (here "e", id 4);
     * fuse_unk merges a run of them into one. */
    gp_tokenizer *unk = load_edited("\"unk_token\": null", "\"unk_token\": \"e\"");
    EXPECT_IDS(unk, "azzb", 0, 4, 4, 1);
    gp_tok_free(unk);
    gp_tokenizer *fused =
        load_edited("\"unk_token\": null,\n    \"continuing_subword_prefix\": \"\",\n    "
                    "\"end_of_word_suffix\": \"\",\n    \"fuse_unk\": false",
                    "\"unk_token\": \"e\", \"continuing_subword_prefix\": null, "
                    "\"end_of_word_suffix\": null,\n    \"fuse_unk\": true");
    EXPECT_IDS(fused, "azzb", 0, 4, 1);
    gp_tok_free(fused);

    /* A repeated merge takes its later rank (HF collects merges into a map):
     * "a b" again after "ab c" (rank 4) makes abc unreachable from "abc":
     * (b,c) is no merge, so nothing applies before (a,b) at its new rank
     * 9... which is still the only pair: [ab, c] -> (ab,c) rank 4 -> abc. */
    gp_tokenizer *dup = load_edited("\"a a\"\n", "\"a a\",\"a b\"\n");
    EXPECT_IDS(dup, "abc", 13);
    /* ... but in "aab" the pairs (a,a) rank 8 and (a,b) rank 9 now compete:
     * aa wins -> [aa, b]; with the original rank 2, ab wins -> [a, ab]. */
    EXPECT_IDS(dup, "aab", 21, 1);
    gp_tok_free(dup);
    gp_tokenizer *orig = load_edited("\"normalizer\"", "\"normalizer\"");
    EXPECT_IDS(orig, "aab", 0, 12);
    gp_tok_free(orig);

    /* dropout 0 is no dropout; a missing decoder and post_processor are fine. */
    gp_tokenizer *zero = load_edited("\"dropout\": null", "\"dropout\": 0.0");
    EXPECT_IDS(zero, "abcd", 12, 16);
    gp_tok_free(zero);
}
