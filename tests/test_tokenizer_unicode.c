/* test_tokenizer_unicode.c — the tokenizer's Unicode behaviour without node:
 * regex classes on every code point against tests/data/unicode_classes.txt
 * (Oniguruma's answers, recorded by scripts/unicode/gen_tables.py from HF
 * `tokenizers`), NFC cases where HF's tables differ from current Unicode,
 * and the time NFC takes on a megabyte of combining marks (issue 16.4).
 */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/timing.h"
#include "io/file.h"
#include "test.h"
#include "text/nfc.h"
#include "text/tok_internal.h"
#include "text/unicode.h"
#include "text/utf8.h"

#define N_CP 0x110000u
#define CLASSES_PATH "tests/data/unicode_classes.txt"

/* Members of class `name` in the data file, as a bitmap of N_CP bytes. */
static bool read_class(const char *data, const char *name, uint8_t *member) {
    memset(member, 0, N_CP);
    size_t nl = strlen(name);
    bool any = false;
    for (const char *line = data; line && *line;
         line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (line[0] == '#' || strncmp(line, name, nl) != 0 || line[nl] != ' ') continue;
        unsigned lo, hi;
        if (sscanf(line + nl, "%x %x", &lo, &hi) != 2 || hi >= N_CP || lo > hi) return false;
        memset(member + lo, 1, hi - lo + 1);
        any = true;
    }
    return any;
}

/* A tokenizer whose only split step is `pattern` with behavior Removed. */
static gp_tokenizer *class_tokenizer(const char *pattern) {
    gp_buf json;
    gp_buf_init(&json);
    gp_buf_printf(&json,
                  "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
                  "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
                  "\"Split\", \"pattern\": {\"Regex\": \"");
    for (const char *p = pattern; *p; p++) gp_buf_printf(&json, *p == '\\' ? "\\\\" : "%c", *p);
    gp_buf_printf(&json, "\"}, \"behavior\": \"Removed\", \"invert\": false}, {\"type\": "
                         "\"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]}}");
    gp_tokenizer *tok = NULL;
    gp_error err;
    if (gp_tok_load_memory(json.data, json.len, "classes.json", &tok, &err))
        test_fail(__FILE__, __LINE__, "%s: %s", pattern, err.message);
    gp_buf_free(&json);
    return tok;
}

/* Which code points the pattern matches, as the pre-tokenizer sees them
 * (translation, substitution, PCRE2): the text is every scalar value once;
 * with behavior Removed the kept spans are the non-members. */
static bool pcre_members(const char *pattern, const char *all, size_t len, const uint32_t *cp_at,
                         uint8_t *member) {
    gp_tokenizer *tok = class_tokenizer(pattern);
    if (!tok) return false;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(tok->splits[0].re, NULL);
    gp_buf subst;
    gp_buf_init(&subst);
    const char *subject = all;
    if (tok->splits[0].substitute && gp_tok_substitute(all, len, &subst) == 1) subject = subst.data;
    gp_tok_spans spans = {0};
    gp_error err;
    bool ok = md && gp_tok_split_run(tok, 0, md, subject, len, &spans, &err) == 0;
    memset(member, 1, N_CP);
    for (size_t i = 0; ok && i < spans.n; i++)
        for (size_t b = spans.v[i].start; b < spans.v[i].end; b++)
            if (cp_at[b] != UINT32_MAX) member[cp_at[b]] = 0;
    for (uint32_t c = 0xD800; c < 0xE000; c++) member[c] = 0;
    gp_tok_spans_free(&spans);
    gp_buf_free(&subst);
    pcre2_match_data_free(md);
    gp_tok_free(tok);
    return ok;
}

TEST(tokenizer_unicode_classes_match_hf_on_every_code_point) {
    char *data;
    size_t data_len;
    gp_error err;
    REQUIRE_OK(gp_read_file(CLASSES_PATH, 0, &data, &data_len, &err), &err);
    /* The text of all scalar values, and the code point at each start byte. */
    char *all = malloc(4 * N_CP);
    uint32_t *cp_at = malloc(4 * N_CP * sizeof *cp_at);
    uint8_t *want = malloc(N_CP), *got = malloc(N_CP), *part = malloc(N_CP);
    REQUIRE(all && cp_at && want && got && part);
    size_t len = 0;
    for (uint32_t c = 0; c < N_CP; c++) {
        if (c >= 0xD800 && c < 0xE000) continue;
        size_t n = gp_utf8_put(c, all + len);
        for (size_t k = 0; k < n; k++) cp_at[len + k] = k ? UINT32_MAX : c;
        len += n;
    }
    /* Each class as HF's pattern spells it, and how the data file names it
     * ("A+B" is a union of entries). */
    static const char *const cases[][2] = {
        {"\\p{L}", "Lu+Ll+Lt+Lm+Lo"},
        {"\\p{M}", "Mn+Mc+Me"},
        {"\\p{N}", "Nd+Nl+No"},
        {"\\p{P}", "Pc+Pd+Ps+Pe+Pi+Pf+Po"},
        {"\\p{S}", "Sm+Sc+Sk+So"},
        {"\\p{Z}", "Zs+Zl+Zp"},
        {"\\p{Lu}", "Lu"},
        {"\\p{Ll}", "Ll"},
        {"\\p{Lt}", "Lt"},
        {"\\p{Lm}", "Lm"},
        {"\\p{Lo}", "Lo"},
        {"\\p{Mn}", "Mn"},
        {"\\p{Mc}", "Mc"},
        {"\\p{Me}", "Me"},
        {"\\p{Nd}", "Nd"},
        {"\\p{Nl}", "Nl"},
        {"\\p{No}", "No"},
        {"\\p{Pd}", "Pd"},
        {"\\p{Po}", "Po"},
        {"\\p{Sc}", "Sc"},
        {"\\p{Sk}", "Sk"},
        {"\\p{Sm}", "Sm"},
        {"\\p{So}", "So"},
        {"\\p{Cf}", "Cf"},
        {"\\p{Cn}", "Cn"},
        {"\\p{Co}", "Co"},
        {"\\s", "s"},
        {"\\p{White_Space}", "White_Space"},
        {"\\d", "d"},
        {"\\w", "w"},
        {"[\\w]", "w_in_class"},
        {"\\h", "h"},
        {"[\\p{L}\\p{M}]", "Lu+Ll+Lt+Lm+Lo+Mn+Mc+Me"},
    };
    size_t checked = 0, wrong_total = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(want, 0, N_CP);
        char names[64];
        snprintf(names, sizeof names, "%s", cases[i][1]);
        bool ok = true;
        for (char *name = strtok(names, "+"); name; name = strtok(NULL, "+")) {
            ok &= read_class(data, name, part);
            for (uint32_t c = 0; c < N_CP; c++) want[c] |= part[c];
        }
        CHECK_MSG(ok, "%s has no entries in " CLASSES_PATH, cases[i][1]);
        if (!pcre_members(cases[i][0], all, len, cp_at, got)) continue;
        size_t wrong = 0;
        uint32_t first = 0;
        for (uint32_t c = 0; c < N_CP; c++)
            if (want[c] != got[c] && wrong++ == 0) first = c;
        if (wrong)
            test_fail(__FILE__, __LINE__,
                      "%s: %zu code points differ from HF, first U+%04X (HF %s)", cases[i][0],
                      wrong, (unsigned)first, want[first] ? "matches" : "does not");
        wrong_total += wrong;
        checked++;
    }
    test_note("%zu classes checked on all 1,112,064 scalar values, %zu differences", checked,
              wrong_total);
    free(all);
    free(cp_at);
    free(want);
    free(got);
    free(part);
    free(data);
}

/* A pattern naming a representative without the code points it stands for
 * (or a property the tables do not cover) is matched without substitution. */
TEST(tokenizer_unicode_substitution_only_when_exact) {
    static const struct {
        const char *pattern;
        bool substitute;
    } cases[] = {
        {"\\p{L}+|\\s+", true},
        {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+", true},
        {"abc", false},                           /* no classes: nothing to substitute */
        {"\\p{Han}+|\\p{L}", false},              /* a script */
        {"\\p{Alphabetic}", false},               /* not a general category */
        {"\\X", false},                           /* grapheme clusters */
        {"[\\x{4E00}-\\x{9FA5}]+|\\p{L}", true},  /* holds no representative */
        {"[\\x{A000}-\\x{A48C}]+|\\p{L}", false}, /* U+A000 stands for others outside */
        {"\\x{A000}|\\p{L}", false},
        {"[\\x{0}-\\x{10FFFF}]|\\p{L}", true}, /* everything: uniform */
        {"(?i:\\x{E9})|\\p{L}", false},        /* non-ASCII under (?i) */
        {"\\101\\p{L}", false},                /* octal */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gp_tokenizer *tok = class_tokenizer(cases[i].pattern);
        if (!tok) continue;
        CHECK_MSG(tok->splits[0].substitute == cases[i].substitute, "%s: substitute is %d",
                  cases[i].pattern, (int)tok->splits[0].substitute);
        gp_tok_free(tok);
    }
}

static void expect_nfc_at(int line, const char *in, const char *want) {
    char *out;
    size_t n;
    gp_error err;
    if (gp_nfc(in, strlen(in), &out, &n, &err)) {
        test_fail(__FILE__, line, "gp_nfc failed: %s", err.message);
        return;
    }
    if (n != strlen(want) || memcmp(out, want, n) != 0) {
        gp_buf b;
        gp_buf_init(&b);
        for (size_t i = 0; i < n; i++) gp_buf_printf(&b, "%02X ", (unsigned char)out[i]);
        test_fail(__FILE__, line, "NFC gave bytes %s", b.data ? b.data : "(none)");
        gp_buf_free(&b);
    }
    free(out);
}
#define EXPECT_NFC(in, want) expect_nfc_at(__LINE__, in, want)

/* Cases where HF's tables (about Unicode 9 for classes) differ from current
 * Unicode, checked against HF `tokenizers` 0.23.2, and the usual ones. */
TEST(tokenizer_unicode_nfc_like_hf) {
    EXPECT_NFC("e\xCC\x81", "\xC3\xA9");                          /* e + U+0301 -> é */
    EXPECT_NFC("e\xE1\xAB\x80\xCC\x81", "e\xE1\xAB\x80\xCC\x81"); /* U+1AC0: class 0 in HF */
    EXPECT_NFC("\xD8\xA8\xE0\xA3\x8A\xD9\x8E", "\xD8\xA8\xE0\xA3\x8A\xD9\x8E"); /* U+08CA */
    EXPECT_NFC("\xF0\x91\xA4\xB5\xF0\x91\xA4\xB0",
               "\xF0\x91\xA4\xB5\xF0\x91\xA4\xB0");                     /* no U+11938 */
    EXPECT_NFC("a\xCC\x81\xCC\x96", "\xC3\xA1\xCC\x96");                /* reorder, compose */
    EXPECT_NFC("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81"); /* Hangul L V T */
    EXPECT_NFC("\xEA\xB0\x80\xE1\x86\xA8", "\xEA\xB0\x81");             /* LV + T */
    EXPECT_NFC("\xCC\x81"
               "a",
               "\xCC\x81"
               "a");                                        /* leading mark */
    EXPECT_NFC("\xE2\x84\xAB", "\xC3\x85");                 /* Å sign -> Å */
    EXPECT_NFC("\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC"); /* excluded U+0958 */
    EXPECT_NFC("\xE0\xAD\x87\xE0\xAC\xBE", "\xE0\xAD\x8B"); /* starter + starter */
    EXPECT_NFC("plain ASCII", "plain ASCII");
}

/* 1 MB of combining marks of mixed classes after one letter: the marks are
 * sorted by class with a stable counting sort, so the time is linear. Bound:
 * 2 s in the ASan build (the utf8proc normaliser this replaced took 4.8 s
 * for 80 kB and did not finish 1 MB in 120 s; HF takes about 1.2 s). */
TEST(tokenizer_unicode_nfc_linear_on_1mb_of_marks) {
    /* Classes 240, 230, 220, 202, 10, 7, 1 in descending order, repeated:
     * every mark is out of order. */
    static const char *const marks[] = {"\xCD\x85", "\xCC\x81",     "\xCC\x96", "\xCC\xA7",
                                        "\xD6\xB0", "\xE0\xA4\xBC", "\xCC\xB4"};
    const size_t target = 1 << 20;
    char *s = malloc(target + 8);
    REQUIRE(s);
    size_t n = 0, count = 0;
    s[n++] = 'a';
    while (n + 3 < target) {
        const char *m = marks[count++ % 7];
        memcpy(s + n, m, strlen(m));
        n += strlen(m);
    }
    char *out;
    size_t out_len;
    gp_error err;
    double t0 = gp_now_s();
    int rc = gp_nfc(s, n, &out, &out_len, &err);
    double dt = gp_now_s() - t0;
    REQUIRE_OK(rc, &err);
    test_note("NFC of %zu bytes (%zu marks of 7 classes): %.3f s (this build)", n, count, dt);
    CHECK_MSG(dt < 2.0, "NFC of 1 MB of marks took %.2f s, bound 2 s", dt);
    /* Sorted by class (the first U+0301 composes with the a), nothing lost. */
    size_t pos = 0, marks_out = 0;
    int last = 0;
    bool sorted = true;
    gp_utf8_next(out, out_len, &pos);
    while (pos < out_len) {
        int cls = gp_uni_nfc_props(gp_utf8_next(out, out_len, &pos)) & 0xFF;
        sorted &= cls >= last;
        last = cls;
        marks_out++;
    }
    CHECK(sorted);
    CHECK_EQ_INT(marks_out, count - 1);
    free(out);
    free(s);
}
