/* test_text_prep.c — input hygiene and long-text segmentation. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "text/clean.h"
#include "text/segment.h"

static void expect_clean(const char *in, const char *want) {
    char *out;
    size_t n;
    gp_error err;
    int rc = gp_text_clean(in, strlen(in), 0, &out, &n, &err);
    REQUIRE_MSG(rc == 0, "clean(\"%s\") failed: %s", in, err.message);
    CHECK_MSG(strcmp(out, want) == 0, "clean(\"%s\") = \"%s\", want \"%s\"", in, out, want);
    CHECK(n == strlen(out));
    free(out);
}

TEST(text_clean_normalises_spaces_and_controls) {
    expect_clean("  Hello\t\tworld  ", "Hello world");
    expect_clean("a\x01\x02"
                 "b",
                 "a b");
    expect_clean("line one\r\nline two", "line one\nline two");
    expect_clean("para\n\n\n\nnext", "para\n\nnext");
    expect_clean("non\xC2\xA0"
                 "breaking\xE2\x80\x83space",
                 "non breaking space");
    expect_clean("zero\xE2\x80\x8Bwidth", "zero width");
    expect_clean("caf\xC3\xA9 \xF0\x9F\x98\x80", "caf\xC3\xA9 \xF0\x9F\x98\x80");
}

TEST(text_clean_rejects_bad_input) {
    char *out;
    gp_error err;
    CHECK_ERR_CONTAINS(gp_text_clean("", 0, 0, &out, NULL, &err), &err, "empty");
    CHECK_ERR_CONTAINS(gp_text_clean(" \n\t ", 4, 0, &out, NULL, &err), &err, "empty");
    CHECK_ERR_CONTAINS(gp_text_clean("ab\xC3", 3, 0, &out, NULL, &err), &err, "offset 2");
    CHECK_ERR_CONTAINS(gp_text_clean("\xED\xA0\x80", 3, 0, &out, NULL, &err), &err,
                       "not valid UTF-8");
    CHECK_ERR_CONTAINS(gp_text_clean("\xC0\xAF", 2, 0, &out, NULL, &err), &err, "not valid UTF-8");
    CHECK_ERR_CONTAINS(gp_text_clean("hello world", 11, 5, &out, NULL, &err), &err,
                       "over the limit");
}

static int segments(const char *text, size_t target, size_t max, char segs[][400], int cap) {
    gp_segment_options o = {target, max};
    size_t pos = 0, b, e;
    int n = 0;
    while (n < cap && gp_segment_next(text, strlen(text), &pos, &o, &b, &e)) {
        snprintf(segs[n], 400, "%.*s", (int)(e - b), text + b);
        n++;
    }
    return n;
}

TEST(text_segments_at_sentences_not_abbreviations) {
    char s[16][400];
    int n = segments("Dr. Smith paid $3.50 to Mr. J. R. Jones. Then he left! Did he? Yes.", 1, 360,
                     s, 16);
    CHECK_EQ_INT(n, 4);
    CHECK(strcmp(s[0], "Dr. Smith paid $3.50 to Mr. J. R. Jones.") == 0);
    CHECK(strcmp(s[1], "Then he left!") == 0);
    CHECK(strcmp(s[2], "Did he?") == 0);
    CHECK(strcmp(s[3], "Yes.") == 0);
    /* packing up to the target */
    n = segments("One. Two. Three. Four.", 12, 360, s, 16);
    CHECK_EQ_INT(n, 2);
    CHECK(strcmp(s[0], "One. Two. Three.") == 0 || strcmp(s[0], "One. Two.") == 0);
    /* quotes and ellipses stay with their sentence; CJK terminators */
    n = segments("He said \"stop.\" Then... nothing. "
                 "\xE4\xBD\xA0\xE5\xA5\xBD\xE3\x80\x82\xE5\x86\x8D\xE8\xA7\x81\xE3\x80\x82",
                 1, 360, s, 16);
    CHECK(n >= 3);
    CHECK(strcmp(s[0], "He said \"stop.\"") == 0);
}

TEST(text_segments_long_sentences_between_words) {
    char s[64][400];
    const char *text =
        "This sentence has no full stop but it does have a comma, and it keeps going for quite a "
        "while so that it must be cut somewhere sensible because it is longer than the maximum";
    int n = segments(text, 40, 60, s, 64);
    CHECK(n >= 3);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        CHECK_MSG(strlen(s[i]) <= 60, "segment %d too long: %s", i, s[i]);
        CHECK(s[i][0] != ' ' && s[i][strlen(s[i]) - 1] != ' ');
        total += strlen(s[i]);
    }
    /* every word survives intact: re-joining with spaces gives the text back */
    char joined[1024] = "";
    for (int i = 0; i < n; i++) {
        if (i) strcat(joined, " ");
        strcat(joined, s[i]);
    }
    CHECK(strcmp(joined, text) == 0);
    (void)total;
}

TEST(text_segments_hour_of_text_in_bounded_steps) {
    size_t len = 400000;
    char *text = malloc(len + 1);
    const char *sentence = "The quick brown fox jumps over the lazy dog again. ";
    size_t sl = strlen(sentence);
    for (size_t i = 0; i < len; i++) text[i] = sentence[i % sl];
    text[len] = '\0';
    size_t pos = 0, b, e, count = 0, covered = 0;
    while (gp_segment_next(text, len, &pos, NULL, &b, &e)) {
        CHECK(e - b <= 360);
        covered += e - b;
        count++;
    }
    CHECK(count > 1000);
    CHECK(covered > len * 9 / 10);
    free(text);
}
