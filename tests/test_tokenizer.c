/* test_tokenizer.c — the tokenizer against the upstream goldens and the
 * pre-tokenizer rules of MODEL.md §G.5, plus decode, bad input and threads.
 *
 * The fixture tokenizer (model-tiny) was built with HF `tokenizers` using
 * Qwen3.5's normalizer, split regex and added-token rules; golden.json holds
 * HF's encode/decode results. Hand-written variants live in
 * tests/data/tokenizers/ (see test_tokenizer_variants.c).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/timing.h"
#include "io/json.h"
#include "test.h"
#include "text/tok_internal.h"
#include "text/tokenizer.h"

static gp_tokenizer *load_fixture(void) {
    gp_error err;
    gp_tokenizer *tok = NULL;
    if (gp_tok_load(test_fixture("model-tiny/model/tokenizer.json"), &tok, &err)) {
        test_fail(__FILE__, __LINE__, "loading the fixture tokenizer: %s", err.message);
        return NULL;
    }
    return tok;
}

static bool ids_equal_json(const int32_t *ids, size_t n, const cJSON *arr) {
    if ((size_t)cJSON_GetArraySize(arr) != n) return false;
    size_t i = 0;
    for (const cJSON *it = arr->child; it; it = it->next, i++)
        if (!cJSON_IsNumber(it) || (int32_t)it->valuedouble != ids[i]) return false;
    return true;
}

static void print_ids(const char *label, const int32_t *ids, size_t n) {
    gp_buf b;
    gp_buf_init(&b);
    for (size_t i = 0; i < n; i++) gp_buf_printf(&b, "%s%d", i ? "," : "", (int)ids[i]);
    test_note("%s [%s]", label, b.data ? b.data : "");
    gp_buf_free(&b);
}

TEST(tokenizer_golden_encode_decode) {
    gp_tokenizer *tok = load_fixture();
    REQUIRE(tok);
    cJSON *golden;
    gp_error err;
    REQUIRE_OK(gp_json_load_file(test_fixture("model-tiny/golden.json"), 0, &golden, &err), &err);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(golden, "tokenizer");
    REQUIRE(cJSON_IsArray(cases) && cJSON_GetArraySize(cases) > 0);
    int checked = 0;
    for (const cJSON *c = cases->child; c; c = c->next) {
        const char *text = cJSON_GetObjectItemCaseSensitive(c, "text")->valuestring;
        const char *decoded = cJSON_GetObjectItemCaseSensitive(c, "decoded")->valuestring;
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "ids");
        int32_t *ids;
        size_t n;
        int rc = gp_tok_encode(tok, text, strlen(text), &ids, &n, &err);
        CHECK_MSG(rc == 0, "encode(\"%s\") failed: %s", text, err.message);
        if (rc) continue;
        if (!ids_equal_json(ids, n, want)) {
            test_fail(__FILE__, __LINE__, "encode(\"%s\") differs from the golden ids", text);
            print_ids("got", ids, n);
            char *w = cJSON_PrintUnformatted(want);
            test_note("want %s", w);
            free(w);
        }
        /* Encoding twice goes through the word cache and must agree. */
        int32_t *again;
        size_t n2;
        REQUIRE_OK(gp_tok_encode(tok, text, strlen(text), &again, &n2, &err), &err);
        CHECK(n2 == n && (n == 0 || memcmp(ids, again, n * sizeof *ids) == 0));
        free(again);
        char *out;
        size_t out_len;
        rc = gp_tok_decode(tok, ids, n, false, &out, &out_len, &err);
        CHECK_MSG(rc == 0, "decode failed: %s", err.message);
        if (!rc) {
            CHECK_MSG(out_len == strlen(decoded) && strcmp(out, decoded) == 0,
                      "decode of \"%s\" gave \"%s\", expected \"%s\"", text, out, decoded);
            free(out);
        }
        free(ids);
        checked++;
    }
    test_note("%d golden tokenizer cases", checked);
    cJSON_Delete(golden);
    gp_tok_free(tok);
}

/* ---- pre-tokenizer rules of MODEL.md §G.5, on the fixture's own pattern ---- */

/* Pieces of one segment (NFC + Split) must equal the NULL-terminated list. */
static void expect_pieces_at(int line, const gp_tokenizer *tok, const char *text, size_t len,
                             const char *const *want) {
    gp_buf out;
    gp_buf_init(&out);
    gp_error err;
    size_t count;
    if (gp_tok_debug_pieces(tok, text, len, &out, &count, &err)) {
        test_fail(__FILE__, line, "splitting \"%s\" failed: %s", text, err.message);
        gp_buf_free(&out);
        return;
    }
    size_t n_want = 0, off = 0;
    bool same = true;
    while (want[n_want]) n_want++;
    for (size_t i = 0; i < count; i++) {
        const char *piece = out.data + off;
        if (i >= n_want || strcmp(piece, want[i]) != 0) same = false;
        off += strlen(piece) + 1;
    }
    if (!same || count != n_want) {
        gp_buf got;
        gp_buf_init(&got);
        off = 0;
        for (size_t i = 0; i < count; i++) {
            gp_json_append_string(&got, out.data + off);
            gp_buf_append_str(&got, " ");
            off += strlen(out.data + off) + 1;
        }
        test_fail(__FILE__, line, "pieces of \"%s\": got %s(%zu pieces, expected %zu)", text,
                  got.data ? got.data : "", count, n_want);
        gp_buf_free(&got);
    }
    gp_buf_free(&out);
}

#define EXPECT_PIECES(tok, text, ...)                                                              \
    expect_pieces_at(__LINE__, tok, text, strlen(text), (const char *const[]){__VA_ARGS__, NULL})

TEST(tokenizer_split_rules_of_model_md) {
    gp_tokenizer *tok = load_fixture();
    REQUIRE(tok);
    /* The examples of §G.5. */
    EXPECT_PIECES(tok, "Hello there", "Hello", " there");
    EXPECT_PIECES(tok, "a  b", "a", " ", " b");
    EXPECT_PIECES(tok, "x 123", "x", " ", "1", "2", "3");
    EXPECT_PIECES(tok, "end.\n\nNext", "end", ".\n\n", "Next");
    /* Rule 1: contractions, case-insensitive, in the order s t re ve m ll d;
     * U+017F (long s) case-folds to s. */
    EXPECT_PIECES(tok, "'sup", "'s", "up");
    EXPECT_PIECES(tok, "DON'T YOU'LL", "DON", "'T", " YOU", "'LL");
    EXPECT_PIECES(tok, "we'Re I'd've", "we", "'Re", " I", "'d", "'ve");
    EXPECT_PIECES(tok, "it'\xC5\xBF", "it", "'\xC5\xBF");
    /* Only U+0027 is an apostrophe: U+2019 starts an ordinary word. */
    EXPECT_PIECES(tok, "it\xE2\x80\x99s", "it", "\xE2\x80\x99s");
    /* Rule 2: one non-letter/number/newline character may lead a word...
     * marks belong to words (x + U+0301 has no precomposed form). */
    EXPECT_PIECES(tok, "x(hello 'hello", "x", "(hello", " '", "hello");
    /* ...only one: in " 'hello" the space and apostrophe form a rule-4 symbol
     * piece and the word stands alone. */
    EXPECT_PIECES(tok, "a\tb", "a", "\tb");
    EXPECT_PIECES(tok, "x\xCC\x81y z", "x\xCC\x81y", " z");
    /* Rule 3: every number character is its own piece, \p{N} = Nd Nl No. */
    EXPECT_PIECES(tok, "\xC2\xB2\xC2\xBD\xE2\x85\xAB\xE2\x91\xA0", "\xC2\xB2", "\xC2\xBD",
                  "\xE2\x85\xAB", "\xE2\x91\xA0");
    EXPECT_PIECES(tok, "\xD9\xA3\xD9\xA4", "\xD9\xA3", "\xD9\xA4");
    /* Rule 4: symbol runs with an optional leading space and trailing CR/LF. */
    EXPECT_PIECES(tok, "a ...!", "a", " ...!");
    EXPECT_PIECES(tok, "a  ...", "a", " ", " ...");
    EXPECT_PIECES(tok, "x.\r\n", "x", ".\r\n");
    EXPECT_PIECES(tok, "$5", "$", "5");
    /* Rule 5: whitespace through its last line break. */
    EXPECT_PIECES(tok, "a \n\n b", "a", " \n\n", " b");
    EXPECT_PIECES(tok, "a\r\n", "a", "\r\n");
    /* Rule 6: trailing whitespace, or all but the last space before a word. */
    EXPECT_PIECES(tok, "a   ", "a", "   ");
    EXPECT_PIECES(tok, "a   b", "a", "  ", " b");
    /* Rule 7: a single space before a non-letter. */
    EXPECT_PIECES(tok, "x 1", "x", " ", "1");
    /* \s is Unicode White_Space: U+00A0 and U+0085 are, U+200B, U+001C and
     * U+180E are not. PCRE2's own \s would count U+180E as space and give
     * "a", "\u180E", "\u180Eb"; HF (Oniguruma) gives this: */
    EXPECT_PIECES(tok,
                  "a \xC2\xA0"
                  "b",
                  "a", " ",
                  "\xC2\xA0"
                  "b");
    EXPECT_PIECES(tok,
                  "a\xC2\x85\xC2\x85"
                  "b",
                  "a", "\xC2\x85",
                  "\xC2\x85"
                  "b");
    EXPECT_PIECES(tok,
                  "a\xE2\x80\x8B"
                  "b",
                  "a",
                  "\xE2\x80\x8B"
                  "b");
    EXPECT_PIECES(tok,
                  "a\x1C"
                  "b",
                  "a",
                  "\x1C"
                  "b");
    EXPECT_PIECES(tok,
                  "a\xE1\xA0\x8E\xE1\xA0\x8E"
                  "b",
                  "a", "\xE1\xA0\x8E\xE1\xA0\x8E", "b");
    /* NUL is an ordinary symbol character. */
    expect_pieces_at(__LINE__, tok, "a\0b", 3, (const char *const[]){"a", "", NULL});
    gp_tok_free(tok);
}

TEST(tokenizer_nul_bytes_round_trip) {
    gp_tokenizer *tok = load_fixture();
    REQUIRE(tok);
    gp_error err;
    int32_t *ids;
    size_t n;
    REQUIRE_OK(gp_tok_encode(tok, "a\0b", 3, &ids, &n, &err), &err);
    /* Pieces "a" and "\0b": byte 0 is the byte-level symbol U+0100. */
    CHECK(n >= 2);
    char *text;
    size_t len;
    REQUIRE_OK(gp_tok_decode(tok, ids, n, false, &text, &len, &err), &err);
    CHECK(len == 3 && memcmp(text, "a\0b", 3) == 0);
    free(text);
    free(ids);
    gp_tok_free(tok);
}

/* ---- bad text ---- */

TEST(tokenizer_rejects_invalid_utf8) {
    gp_tokenizer *tok = load_fixture();
    REQUIRE(tok);
    static const struct {
        const char *text;
        size_t len;
        const char *needle;
    } cases[] = {
        {"a\x80"
         "b",
         3, "byte offset 1 (0x80) is a continuation byte"},
        {"ab\xE4\xB8", 4, "byte offset 2 (0xE4) is a multi-byte sequence cut short"},
        {"ab\xE4\xB8x", 5, "byte offset 2 (0xE4) is a multi-byte sequence cut short"},
        {"\xC0\xAF", 2, "byte offset 0 (0xC0) is an overlong encoding"},
        {"xy\xE0\x80\xAF", 5, "byte offset 2 (0xE0) is an overlong encoding"},
        {"\xF0\x80\x80\xAF", 4, "an overlong encoding"},
        {"x\xED\xA0\x80", 4, "byte offset 1 (0xED) is a UTF-16 surrogate"},
        {"\xF4\x90\x80\x80", 4, "a code point above U+10FFFF"},
        {"ok\xFF", 3, "byte offset 2 (0xFF) is a byte that never occurs in UTF-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        gp_error err;
        int32_t *ids = (int32_t *)1;
        size_t n = 99;
        int rc = gp_tok_encode(tok, cases[i].text, cases[i].len, &ids, &n, &err);
        CHECK_EQ_INT(rc, GEPARD_ERR_INVALID_ARGUMENT);
        CHECK(ids == NULL && n == 0);
        CHECK_MSG(strstr(err.message, "not valid UTF-8") && strstr(err.message, cases[i].needle),
                  "case %zu: message \"%s\" lacks \"%s\"", i, err.message, cases[i].needle);
    }
    gp_tok_free(tok);
}

TEST(tokenizer_empty_text_gives_no_ids) {
    gp_tokenizer *tok = load_fixture();
    REQUIRE(tok);
    gp_error err;
    int32_t *ids;
    size_t n = 5;
    REQUIRE_OK(gp_tok_encode(tok, "", 0, &ids, &n, &err), &err);
    CHECK(ids == NULL && n == 0);
    REQUIRE_OK(gp_tok_encode(tok, NULL, 0, &ids, &n, &err), &err);
    CHECK(ids == NULL && n == 0);
    CHECK_EQ_INT(gp_tok_encode(tok, NULL, 3, &ids, &n, &err), GEPARD_ERR_INVALID_ARGUMENT);
    gp_tok_free(tok);
}

/* ---- threads and speed ---- */

static char *sample_text(size_t target, size_t *len) {
    static const char *const words[] = {
        "Hello",    " world", "!",      " The",   " quick",  " brown",
        " fox",     " jumps", " over",  " the",   " lazy",   " dog",
        ".",        " It's",  " 10:45", " —",     " isn't",  " it",
        "?",        "\n",     " Café",  " naïve", " Привет", ",",
        " мир",     " 你好",  "，",     "世界",   "。",      " 😀",
        " numbers", " 31415", "  ",     "\t",     " DON'T",  " e\xCC\x81t\xC3\xA9"};
    gp_buf b;
    gp_buf_init(&b);
    uint32_t state = 12345;
    while (b.len < target) {
        state = state * 1103515245u + 12345u;
        gp_buf_append_str(&b, words[(state >> 16) % (sizeof words / sizeof *words)]);
    }
    return gp_buf_detach(&b, len);
}

typedef struct thread_job {
    gp_tokenizer *tok;
    const char *const *texts;
    const size_t *lens;
    int32_t *const *want;
    const size_t *n_want;
    int n_texts;
    int mismatches;
} thread_job;

static void *encode_worker(void *arg) {
    thread_job *job = arg;
    for (int round = 0; round < 20; round++) {
        for (int t = 0; t < job->n_texts; t++) {
            int k = (t + round) % job->n_texts;
            gp_error err;
            int32_t *ids;
            size_t n;
            if (gp_tok_encode(job->tok, job->texts[k], job->lens[k], &ids, &n, &err) ||
                n != job->n_want[k] || (n && memcmp(ids, job->want[k], n * sizeof *ids) != 0))
                job->mismatches++;
            free(ids);
        }
    }
    return NULL;
}

TEST(tokenizer_encode_is_thread_safe) {
    gp_tokenizer *tok = load_fixture();
    REQUIRE(tok);
    enum { N_TEXTS = 6, N_THREADS = 4 };
    const char *texts[N_TEXTS];
    char *owned[N_TEXTS] = {0};
    size_t lens[N_TEXTS];
    int32_t *want[N_TEXTS];
    size_t n_want[N_TEXTS];
    for (int t = 0; t < N_TEXTS; t++) {
        owned[t] = sample_text(200 + 300 * (size_t)t, &lens[t]);
        texts[t] = owned[t];
        gp_error err;
        /* Serial reference with a fresh tokenizer (cold cache). */
        REQUIRE_OK(gp_tok_encode(tok, texts[t], lens[t], &want[t], &n_want[t], &err), &err);
    }
    gp_tok_free(tok);
    tok = load_fixture();
    REQUIRE(tok);
    thread_job jobs[N_THREADS];
    pthread_t threads[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        jobs[i] = (thread_job){tok, texts, lens, want, n_want, N_TEXTS, 0};
        REQUIRE(pthread_create(&threads[i], NULL, encode_worker, &jobs[i]) == 0);
    }
    int mismatches = 0;
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(threads[i], NULL);
        mismatches += jobs[i].mismatches;
    }
    CHECK_EQ_INT(mismatches, 0);
    for (int t = 0; t < N_TEXTS; t++) {
        free(want[t]);
        free(owned[t]);
    }
    gp_tok_free(tok);
}

TEST(tokenizer_encode_speed) {
    gp_tokenizer *tok = load_fixture();
    REQUIRE(tok);
    size_t len;
    char *text = sample_text(8192, &len);
    gp_error err;
    int32_t *ids;
    size_t n;
    double t0 = gp_now_s();
    REQUIRE_OK(gp_tok_encode(tok, text, len, &ids, &n, &err), &err);
    double cold = gp_now_s() - t0;
    free(ids);
    t0 = gp_now_s();
    int reps = 20;
    for (int i = 0; i < reps; i++) {
        REQUIRE_OK(gp_tok_encode(tok, text, len, &ids, &n, &err), &err);
        free(ids);
    }
    double warm = (gp_now_s() - t0) / reps;
    test_note("encode %zu bytes -> %zu ids: %.2f MB/s cold cache, %.2f MB/s warm (this build)", len,
              n, len / cold / 1e6, len / warm / 1e6);
    free(text);
    gp_tok_free(tok);
}

/* ---- the Oniguruma -> PCRE2 rewrite ---- */

static void expect_translation(const char *onig, const char *pcre) {
    gp_buf out;
    gp_buf_init(&out);
    gp_error err;
    int rc = gp_tok_regex_translate(onig, strlen(onig), &out, NULL, "t.json: pre_tokenizer", &err);
    CHECK_MSG(rc == 0, "translating %s failed: %s", onig, err.message);
    if (rc == 0)
        CHECK_MSG(strcmp(out.data, pcre) == 0, "translating %s gave %s, expected %s", onig,
                  out.data, pcre);
    gp_buf_free(&out);
}

static void expect_refused(const char *onig, const char *needle) {
    gp_buf out;
    gp_buf_init(&out);
    gp_error err;
    CHECK_ERR_CONTAINS(gp_tok_regex_translate(onig, strlen(onig), &out, NULL, "t.json: x", &err),
                       &err, needle);
    gp_buf_free(&out);
}

TEST(tokenizer_regex_translation) {
    expect_translation("\\s+(?!\\S)|\\s+",
                       "\\p{White_Space}+(?!\\P{White_Space})|\\p{White_Space}+");
    expect_translation("[^\\s\\p{L}]", "[^\\p{White_Space}\\p{L}]");
    expect_translation("(?i:'s|'t)", "(?i:'s|'t)");
    expect_translation("(?m:a.b)(?mi)", "(?s:a.b)(?si)");
    expect_translation("[\\w]", "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}]");
    expect_translation("\\h[\\h]", "[0-9a-fA-F][0-9a-fA-F]");
    expect_translation("[]a]\\[\\d", "[]a]\\[\\d");
    expect_translation("(?:x)(?<=y)(?=z)", "(?:x)(?<=y)(?=z)");
    expect_refused("[[:alpha:]]", "POSIX character class");
    expect_refused("[a-z&&[^aeiou]]", "character class intersection");
    expect_refused("[a[b]]", "nested character class");
    expect_refused("\\Qa.b\\E", "\\Q...\\E");
    expect_refused("[\\W]", "\\W inside a character class");
    expect_refused("(?W)x", "group option");
    expect_refused("[abc", "unterminated character class");
    expect_refused("abc\\", "lone backslash");
}
