/* test_tokenizer_unicode.c — the tokenizer's Unicode behaviour without node:
 * NFC cases where HF's tables differ from current Unicode, and the time NFC
 * takes on a megabyte of combining marks (issue 16.4).
 */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/timing.h"
#include "test.h"
#include "text/nfc.h"
#include "text/unicode.h"
#include "text/utf8.h"

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
