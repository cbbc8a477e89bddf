/* test_word_times.c — the estimated word timestamps of Cartesia's
 * add_timestamps (src/server/word_times.c): the voiced span found in the
 * samples, the words spread over it by their letters with pauses after
 * punctuation, counted from the stream's start and scaled by the speed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "server/word_times.h"
#include "test.h"

enum { RATE = 22050, N = 3 * RATE };

/* 3 s of samples voiced from 0.5 s to 2.5 s (a steady tone), silent around. */
static const float *tone_with_silent_margins(void) {
    static float x[N];
    for (int i = RATE / 2; i < 5 * RATE / 2; i++) x[i] = 0.3f * sinf((float)i * 0.05f);
    return x;
}

TEST(word_times_spread_over_the_voiced_span) {
    const float *x = tone_with_silent_margins();
    gp_voiced_span v;
    gp_voiced_span_init(&v);
    for (int i = 0; i < N; i += 1000) gp_voiced_span_feed(&v, x + i, N - i < 1000 ? N - i : 1000);
    CHECK(v.samples == N);
    CHECK(v.first >= RATE / 2 && v.first < RATE / 2 + 10);
    CHECK(v.last <= 5 * RATE / 2 && v.last > 5 * RATE / 2 - 10);
    gp_buf b;
    gp_buf_init(&b);
    /* "Hi," 2 letters + pause 2; "there." 5 + 4; "Bye" 3: 12 letters' worth
     * spoken over the 2 s span (the last word's pause is after it) */
    REQUIRE(gp_word_times_append(&b, "  Hi, there.\nBye ", &v, RATE, 1.0, 10.0) == 3);
    cJSON *j = cJSON_ParseWithLength(b.data, b.len);
    REQUIRE_MSG(j, "not JSON: %.*s", (int)b.len, b.data);
    const cJSON *w = cJSON_GetObjectItem(j, "words"), *s = cJSON_GetObjectItem(j, "start"),
                *e = cJSON_GetObjectItem(j, "end");
    REQUIRE(cJSON_GetArraySize(w) == 3 && cJSON_GetArraySize(s) == 3 && cJSON_GetArraySize(e) == 3);
    CHECK(strcmp(cJSON_GetArrayItem(w, 1)->valuestring, "there.") == 0);
    const double span0 = 10.0 + (double)v.first / RATE, span1 = 10.0 + (double)(v.last + 1) / RATE;
    const double per = (span1 - span0) / 16.0; /* 2+2 + 5+4 + 3 */
    const double want_start[3] = {span0, span0 + 4 * per, span0 + 13 * per};
    const double want_end[3] = {span0 + 2 * per, span0 + 9 * per, span1};
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(fabs(cJSON_GetArrayItem(s, i)->valuedouble - want_start[i]) < 2e-3,
                  "word %d starts at %g, want %g", i, cJSON_GetArrayItem(s, i)->valuedouble,
                  want_start[i]);
        CHECK_MSG(fabs(cJSON_GetArrayItem(e, i)->valuedouble - want_end[i]) < 2e-3,
                  "word %d ends at %g, want %g", i, cJSON_GetArrayItem(e, i)->valuedouble,
                  want_end[i]);
    }
    cJSON_Delete(j);
    /* at speed 2 the same audio plays in half the time */
    gp_buf_clear(&b);
    REQUIRE(gp_word_times_append(&b, "Bye", &v, RATE, 2.0, 0) == 1);
    j = cJSON_ParseWithLength(b.data, b.len);
    REQUIRE(j);
    CHECK(fabs(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "end"), 0)->valuedouble -
               (double)(v.last + 1) / RATE / 2) < 2e-3);
    cJSON_Delete(j);
    /* silence only: the words spread over the whole length; no words: empty lists */
    gp_voiced_span quiet;
    gp_voiced_span_init(&quiet);
    static const float zeros[100] = {0};
    gp_voiced_span_feed(&quiet, zeros, 100);
    gp_buf_clear(&b);
    REQUIRE(gp_word_times_append(&b, " \n ", &quiet, RATE, 1.0, 0) == 0);
    CHECK(b.len && strcmp(b.data, "{\"words\":[],\"start\":[],\"end\":[]}") == 0);
    gp_buf_free(&b);
}

/* ElevenLabs' character alignment over the same estimate: every code point
 * a character, a word's span shared by its characters, spaces filling the
 * pauses (the trailing ones up to the end of the audio), whole
 * milliseconds that add up without gaps. */
TEST(char_times_share_each_words_span) {
    const float *x = tone_with_silent_margins();
    gp_voiced_span v;
    gp_voiced_span_init(&v);
    gp_voiced_span_feed(&v, x, N);
    gp_buf b;
    gp_buf_init(&b);
    /* "Hi," 2 letters + pause 2, "çà." 2 + 4 (two-byte letters): 6 units over 2 s */
    const char *text = "Hi, \xC3\xA7\xC3\xA0. ";
    REQUIRE(gp_char_times_append(&b, text, &v, RATE, 1.0, GP_CHAR_TIMES_MS) == 8);
    cJSON *j = cJSON_ParseWithLength(b.data, b.len);
    REQUIRE_MSG(j, "not JSON: %.*s", (int)b.len, b.data);
    const cJSON *c = cJSON_GetObjectItem(j, "chars"),
                *s = cJSON_GetObjectItem(j, "charStartTimesMs"),
                *d = cJSON_GetObjectItem(j, "charDurationsMs");
    REQUIRE(cJSON_GetArraySize(c) == 8 && cJSON_GetArraySize(s) == 8 && cJSON_GetArraySize(d) == 8);
    CHECK(strcmp(cJSON_GetArrayItem(c, 4)->valuestring, "\xC3\xA7") == 0);
    CHECK(strcmp(cJSON_GetArrayItem(c, 3)->valuestring, " ") == 0);
    const double t0 = 1000.0 * v.first / RATE, t1 = 1000.0 * (v.last + 1) / RATE;
    const double per = (t1 - t0) / 6.0; /* 2 + 2 + 2 (the last pause is after the span) */
    /* H i , share "Hi," (2 units); the space fills the pause (2); ç à . share 2 units */
    const double want[8] = {
        t0,           t0 + per * 2 / 3,           t0 + per * 4 / 3,           t0 + 2 * per,
        t0 + 4 * per, t0 + 4 * per + per * 2 / 3, t0 + 4 * per + per * 4 / 3, t0 + 6 * per};
    for (int i = 0; i < 8; i++)
        CHECK_MSG(fabs(cJSON_GetArrayItem(s, i)->valuedouble - want[i]) <= 1.0,
                  "char %d starts at %g ms, want %g", i, cJSON_GetArrayItem(s, i)->valuedouble,
                  want[i]);
    /* consecutive: each starts where the one before ended; the last ends with the audio */
    long end = 0;
    for (int i = 0; i < 8; i++) {
        const long start = (long)cJSON_GetArrayItem(s, i)->valuedouble;
        if (i)
            CHECK_MSG(start == end, "char %d starts at %ld, the one before ended at %ld", i, start,
                      end);
        end = start + (long)cJSON_GetArrayItem(d, i)->valuedouble;
    }
    CHECK_MSG(labs(end - lround(1000.0 * N / RATE)) <= 1, "the last char ends at %ld ms", end);
    cJSON_Delete(j);
    gp_buf_free(&b);
}
