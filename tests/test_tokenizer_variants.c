/* test_tokenizer_variants.c — hand-written tokenizer.json variants and files
 * the loader must refuse (tests/data/tokenizers/).
 *
 * All tiny_*.json files share one vocabulary and merge list (ranks 0..8):
 *
 *   ids  0 a  1 b  2 c  3 d  4 e  5 x  6 y  7 Ġ(space)  8 Ì(0xCC)  9 ģ(0x81)
 *       10 Ã(0xC3)  11 ©(0xA9)  12 ab  13 abc  14 Ġa  15 Ġab  16 cd  17 abcd
 *       18 Ìģ  19 xÌģ  20 Ã©  21 aa  22 o  23 ¶(0xB6)
 *   merges  0 "Ì ģ"  1 "Ã ©"  2 "a b"  3 "c d"  4 "ab c"  5 "Ġ a"  6 "Ġa b"
 *           7 "x Ìģ"  8 "a a"
 *   added  24 <x>  25 <x><y>  26 <y>  (special)   27 xyx  29 yxyy  (not
 *          special, normalized false)   28 "o\u0308" (not special,
 *          normalized true: matched after NFC, i.e. as "ö")
 *
 * U+0301 COMBINING ACUTE is bytes CC 81 -> symbols Ì ģ; é (U+00E9) is C3 A9
 * -> Ã ©; ö (U+00F6) is C3 B6 -> Ã ¶. The expected ids below are derived by
 * hand from MODEL.md §G; each case says how.
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "text/tokenizer.h"

#define DATA "tests/data/tokenizers/"

static gp_tokenizer *load(const char *name) {
    gp_error err;
    gp_tokenizer *tok = NULL;
    char path[512];
    snprintf(path, sizeof path, DATA "%s", name);
    if (gp_tok_load(path, &tok, &err)) {
        test_fail(__FILE__, __LINE__, "loading %s: %s", path, err.message);
        return NULL;
    }
    return tok;
}

static void expect_ids_at(int line, gp_tokenizer *tok, const char *text, const int32_t *want,
                          size_t n_want) {
    gp_error err;
    int32_t *ids;
    size_t n;
    if (gp_tok_encode(tok, text, strlen(text), &ids, &n, &err)) {
        test_fail(__FILE__, line, "encode(\"%s\") failed: %s", text, err.message);
        return;
    }
    bool same = n == n_want && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    if (!same) {
        char got[256] = "", exp[256] = "";
        for (size_t i = 0; i < n && strlen(got) < 200; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%d", i ? "," : "",
                     (int)ids[i]);
        for (size_t i = 0; i < n_want && strlen(exp) < 200; i++)
            snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%d", i ? "," : "",
                     (int)want[i]);
        test_fail(__FILE__, line, "encode(\"%s\") = [%s], expected [%s]", text, got, exp);
    }
    free(ids);
}

#define EXPECT_IDS(tok, text, ...)                                                                 \
    expect_ids_at(__LINE__, tok, text, (const int32_t[]){__VA_ARGS__},                             \
                  sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))
#define EXPECT_NO_IDS(tok, text) expect_ids_at(__LINE__, tok, text, NULL, 0)

/* Cases every tiny_* file with NFC, the Qwen3.5 regex and ignore_merges false
 * must agree on. */
static void check_base_cases(gp_tokenizer *tok) {
    /* a b c d: (a,b) has rank 2 -> ab; then (ab,c) rank 4 loses to (c,d)
     * rank 3 -> cd; (ab,cd) is no merge. Merging in text order would give
     * [abc, d]. */
    EXPECT_IDS(tok, "abcd", 12, 16);
    EXPECT_IDS(tok, "abc", 13); /* ab (2), then ab+c (4) */
    /* " ab" is one piece (space + letters); (a,b) rank 2 beats (Ġ,a) rank 5,
     * and (Ġ,ab) is no merge, so Ġab (id 15) is unreachable. */
    EXPECT_IDS(tok, " ab", 7, 12);
    EXPECT_IDS(tok, "x ab", 5, 7, 12);
    EXPECT_IDS(tok, " a", 14);
    /* Equal ranks: the leftmost pair merges first: aaa -> [aa, a]. */
    EXPECT_IDS(tok, "aaa", 21, 0);
    EXPECT_IDS(tok, "aaaa", 21, 21);
    /* z has no vocabulary entry and there is no unk_token: HF drops the
     * symbol, after which a and b are adjacent and merge. */
    EXPECT_IDS(tok, "azb", 12);
    /* Combining acute after x (no precomposed form, NFC keeps it): the
     * Qwen3.5 regex keeps marks in the word, one piece x Ì ģ y:
     * (Ì,ģ) rank 0, then (x,Ìģ) rank 7. */
    EXPECT_IDS(tok, "x\xCC\x81y", 19, 6);
    /* NFC composes e + U+0301 into é = Ã ©, merged by rank 1. */
    EXPECT_IDS(tok, "e\xCC\x81", 20);
    EXPECT_IDS(tok, "\xC3\xA9", 20);
    /* Added tokens, leftmost-longest: at 0 "<x><y>" beats "<x>". */
    EXPECT_IDS(tok, "<x><y><y>", 25, 26);
    EXPECT_IDS(tok, "<x><x><y>", 24, 25);
    EXPECT_IDS(tok, "ab<y>cd", 12, 26, 16);
    /* Leftmost beats longer: "xyx" at 0 wins over "yxyy" at 1, leaving y y. */
    EXPECT_IDS(tok, "xyxyy", 27, 6, 6);
    EXPECT_IDS(tok, "yxyy", 29);
    /* The normalized added token "o\u0308" is matched after NFC, as "ö",
     * whichever way the input spells it. */
    EXPECT_IDS(tok, "\xC3\xB6", 28);
    EXPECT_IDS(tok, "o\xCC\x88", 28);
    EXPECT_IDS(tok,
               "a\xC3\xB6"
               "b",
               0, 28, 1);
    EXPECT_NO_IDS(tok, "");
}

TEST(tokenizer_variant_merges_strings_and_arrays_agree) {
    gp_tokenizer *s = load("tiny_strings.json"), *a = load("tiny_arrays.json");
    REQUIRE(s && a);
    check_base_cases(s);
    check_base_cases(a);
    CHECK_EQ_INT(gp_tok_vocab_size(s), 30);
    CHECK_EQ_INT(gp_tok_vocab_size(a), 30);
    CHECK_EQ_INT(gp_tok_token_to_id(s, "Ġab"), 15);
    CHECK_EQ_INT(gp_tok_token_to_id(s, "<x><y>"), 25);
    CHECK_EQ_INT(gp_tok_token_to_id(s, "o\xCC\x88"), 28);
    CHECK_EQ_INT(gp_tok_token_to_id(s, "zz"), -1);
    gp_tok_free(s);
    gp_tok_free(a);
}

TEST(tokenizer_variant_ignore_merges) {
    gp_tokenizer *tok = load("tiny_ignore_merges.json");
    REQUIRE(tok);
    /* A piece that is a whole vocabulary entry is taken as is: */
    EXPECT_IDS(tok, "abcd", 17); /* merges alone give [ab, cd] */
    EXPECT_IDS(tok, " ab", 15);  /* byte-level "Ġab"; merges give [Ġ, ab] */
    EXPECT_IDS(tok, "abc", 13);
    /* Not a vocabulary entry: ordinary merging (ab, then nothing). */
    EXPECT_IDS(tok, "abdc", 12, 3, 2);
    EXPECT_IDS(tok, "aaa", 21, 0);
    gp_tok_free(tok);
}

TEST(tokenizer_variant_qwen2_regex_splits_marks) {
    gp_tokenizer *q2 = load("tiny_qwen2.json"), *q35 = load("tiny_strings.json");
    REQUIRE(q2 && q35);
    /* Qwen2's [^\r\n\p{L}\p{N}]?\p{L}+ stops at the mark: pieces "x" and
     * "\u0301y" (the mark is the optional leading character of the next
     * word) -> [x] [Ìģ y]. Qwen3.5 keeps "x\u0301y" whole -> [xÌģ, y]. */
    EXPECT_IDS(q2, "x\xCC\x81y", 5, 18, 6);
    EXPECT_IDS(q35, "x\xCC\x81y", 19, 6);
    /* A mark after a space: Qwen2 "x", " \u0301"... the space and mark form
     * a symbol run ( ?[^\s\p{L}\p{N}]+) -> [x] [Ġ Ìģ]; Qwen3.5 excludes
     * marks from that rule and makes " \u0301" a letter-run piece with the
     * space as prefix -> same bytes, same ids. */
    EXPECT_IDS(q2, "x \xCC\x81", 5, 7, 18);
    EXPECT_IDS(q35, "x \xCC\x81", 5, 7, 18);
    /* Text without marks splits identically. */
    EXPECT_IDS(q2, "abc ab", 13, 7, 12);
    EXPECT_IDS(q35, "abc ab", 13, 7, 12);
    gp_tok_free(q2);
    gp_tok_free(q35);
}

TEST(tokenizer_variant_normalizers) {
    gp_tokenizer *null_norm = load("tiny_norm_null.json");
    gp_tokenizer *seq = load("tiny_norm_sequence.json");
    REQUIRE(null_norm && seq);
    /* Sequence[Sequence[], NFC] behaves as NFC. */
    check_base_cases(seq);
    /* No normalizer: e + U+0301 stays decomposed, one piece e Ì ģ ->
     * [e, Ìģ]; precomposed é is still [Ã©]. */
    EXPECT_IDS(null_norm, "e\xCC\x81", 4, 18);
    EXPECT_IDS(null_norm, "\xC3\xA9", 20);
    /* The normalized added token is stored unnormalized ("o\u0308"), so only
     * that spelling matches; "ö" goes through BPE as Ã ¶. */
    EXPECT_IDS(null_norm, "o\xCC\x88", 28);
    EXPECT_IDS(null_norm, "\xC3\xB6", 10, 23);
    EXPECT_IDS(null_norm, "abcd", 12, 16);
    gp_tok_free(null_norm);
    gp_tok_free(seq);
}

TEST(tokenizer_variant_decode_added_and_special) {
    gp_tokenizer *tok = load("tiny_strings.json");
    REQUIRE(tok);
    gp_error err;
    char *text;
    size_t len;
    const int32_t ids[] = {24, 0, 27, 7, 12, 28, 26};
    REQUIRE_OK(gp_tok_decode(tok, ids, 7, false, &text, &len, &err), &err);
    /* Added tokens give their content as written in the file. */
    CHECK(strcmp(text, "<x>axyx abo\xCC\x88<y>") == 0);
    CHECK_EQ_INT(len, strlen(text));
    free(text);
    /* skip_special drops <x>, <y>; the non-special xyx and o\u0308 stay. */
    REQUIRE_OK(gp_tok_decode(tok, ids, 7, true, &text, &len, &err), &err);
    CHECK(strcmp(text, "axyx abo\xCC\x88") == 0);
    free(text);
    /* A lone Ã (byte C3) is not valid UTF-8: U+FFFD, as HF's lossy decode. */
    const int32_t half[] = {0, 10, 1};
    REQUIRE_OK(gp_tok_decode(tok, half, 3, false, &text, &len, &err), &err);
    CHECK(strcmp(text, "a\xEF\xBF\xBD"
                       "b") == 0);
    free(text);
    REQUIRE_OK(gp_tok_decode(tok, NULL, 0, false, &text, &len, &err), &err);
    CHECK(text && text[0] == '\0' && len == 0);
    free(text);
    const int32_t bad[] = {0, 30};
    CHECK_ERR_CONTAINS(gp_tok_decode(tok, bad, 2, false, &text, &len, &err), &err,
                       "token id 30 (position 1) is not in the vocabulary");
    const int32_t negative[] = {-5};
    CHECK_ERR_CONTAINS(gp_tok_decode(tok, negative, 1, false, &text, &len, &err), &err,
                       "token id -5");
    gp_tok_free(tok);
}

static void expect_load_error(const char *name, const char *needle, int code) {
    gp_error err;
    gp_tokenizer *tok = NULL;
    char path[512];
    snprintf(path, sizeof path, DATA "%s", name);
    int rc = gp_tok_load(path, &tok, &err);
    CHECK_MSG(rc != 0, "%s loaded, expected an error mentioning \"%s\"", name, needle);
    CHECK(tok == NULL);
    if (rc == 0) {
        gp_tok_free(tok);
        return;
    }
    CHECK_MSG(strstr(err.message, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", name,
              err.message, needle);
    CHECK_MSG(strstr(err.message, name) != NULL, "%s: message \"%s\" does not name the file", name,
              err.message);
    CHECK_EQ_INT(rc, code);
}

TEST(tokenizer_refuses_bad_files) {
    expect_load_error("bad_wordpiece.json", "model.type is \"WordPiece\": unsupported model type",
                      GEPARD_ERR_UNSUPPORTED);
    expect_load_error("bad_byte_fallback.json", "model.byte_fallback is true",
                      GEPARD_ERR_UNSUPPORTED);
    expect_load_error("bad_truncated.json", "malformed JSON", GEPARD_ERR_FORMAT);
    expect_load_error("bad_no_model.json", "no \"model\" object", GEPARD_ERR_FORMAT);
    expect_load_error("bad_merge_not_in_vocab.json",
                      "model.merges[9] (\"d\" \"e\"): the merged token \"de\" is not in "
                      "model.vocab",
                      GEPARD_ERR_FORMAT);
    expect_load_error("does_not_exist.json", "cannot open", GEPARD_ERR_NOT_FOUND);
}
