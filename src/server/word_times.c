/* word_times.c — word timestamps estimated over the voiced span (see
 * word_times.h). */
#include "server/word_times.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "io/json.h"

#define VOICED_THRESHOLD 0.02f /* -34 dBFS */

void gp_voiced_span_init(gp_voiced_span *v) {
    v->samples = 0;
    v->first = v->last = -1;
}

void gp_voiced_span_feed(gp_voiced_span *v, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (fabsf(x[i]) > VOICED_THRESHOLD) {
            if (v->first < 0) v->first = (int64_t)(v->samples + i);
            v->last = (int64_t)(v->samples + i);
        }
    v->samples += n;
}

/* A word's weight: its letters and digits (code points), at least one; the
 * pause after it: for its trailing punctuation. */
static void word_weight(const char *w, size_t n, double *speak, double *pause) {
    double letters = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)w[i];
        if ((c & 0xC0) == 0x80) continue; /* inside a multi-byte character */
        if (c >= 0x80 || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))
            letters++;
    }
    *speak = letters > 0 ? letters : 1;
    char last = n ? w[n - 1] : 0;
    if (n >= 2 && strchr("\"')]", last)) last = w[n - 2];
    *pause = strchr(".!?", last) && last ? 4 : strchr(",;:", last) && last ? 2 : 0;
}

static const char *const word_sep = " \t\r\n";

/* Where the text's first word starts (s) and how long a unit of weight
 * lasts (s): the words' weights spread over the voiced span. */
static int spread(const char *text, const gp_voiced_span *v, int rate, double speed, double *t0,
                  double *per) {
    const char *sep = word_sep;
    double total = 0, last_pause = 0;
    int words = 0;
    for (const char *p = text + strspn(text, sep); *p; p += strspn(p, sep)) {
        size_t n = strcspn(p, sep);
        double speak, pause;
        word_weight(p, n, &speak, &pause);
        total += speak + pause;
        last_pause = pause;
        words++;
        p += n;
    }
    const double scale = 1.0 / ((double)rate * (speed > 0 ? speed : 1));
    *t0 = v->first >= 0 ? (double)v->first * scale : 0;
    const double t1 = v->first >= 0 ? (double)(v->last + 1) * scale : (double)v->samples * scale;
    /* the last word's pause falls after the voiced span */
    *per = total - last_pause > 0 ? (t1 - *t0) / (total - last_pause) : 0;
    return words;
}

int gp_word_times_append(gp_buf *out, const char *text, const gp_voiced_span *v, int rate,
                         double speed, double offset_s) {
    const char *sep = word_sep;
    double t0, per;
    const int words = spread(text, v, rate, speed, &t0, &per);
    int rc = gp_buf_append_str(out, "{\"words\":[");
    for (int pass = 0; pass < 3; pass++) { /* words, starts, ends */
        if (pass) rc |= gp_buf_append_str(out, pass == 1 ? "],\"start\":[" : "],\"end\":[");
        double at = t0;
        int k = 0;
        for (const char *p = text + strspn(text, sep); *p; p += strspn(p, sep), k++) {
            size_t n = strcspn(p, sep);
            double speak, pause;
            word_weight(p, n, &speak, &pause);
            if (k) rc |= gp_buf_append_str(out, ",");
            if (pass == 0) {
                char word[256];
                size_t m = n < sizeof word - 1 ? n : sizeof word - 1;
                while (m < n && m > 0 && ((unsigned char)p[m] & 0xC0) == 0x80) m--;
                memcpy(word, p, m);
                word[m] = '\0';
                rc |= gp_json_append_string(out, word);
            } else {
                rc |= gp_buf_printf(out, "%.3f", offset_s + (pass == 1 ? at : at + speak * per));
            }
            at += (speak + pause) * per;
            p += n;
        }
    }
    rc |= gp_buf_append_str(out, "]}");
    return rc ? -1 : words;
}

int gp_char_times_append(gp_buf *out, const char *text, const gp_voiced_span *v, int rate,
                         double speed, gp_char_times_style style) {
    const bool secs = style == GP_CHAR_TIMES_SECONDS;
    double t0, per;
    spread(text, v, rate, speed, &t0, &per);
    gp_buf chars, starts, durations;
    gp_buf_init(&chars);
    gp_buf_init(&starts);
    gp_buf_init(&durations);
    int rc = 0, n_chars = 0;
    double at = t0, prev_end = 0; /* where the next word starts; where the last one ended */
    for (const char *p = text; *p;) {
        const size_t gap = strspn(p, word_sep);
        const size_t n = gap ? gap : strcspn(p, word_sep);
        double start = prev_end, step = 0;
        size_t points = 0;
        for (size_t i = 0; i < n; i++) points += ((unsigned char)p[i] & 0xC0) != 0x80;
        if (gap) { /* spaces share the silence between two words (the last ones
                    * reach the end of the utterance's audio) */
            const double end =
                p[n] ? at : fmax(prev_end, (double)v->samples / rate / (speed > 0 ? speed : 1));
            step = points ? (end - prev_end) / (double)points : 0;
        } else {
            double speak, pause;
            word_weight(p, n, &speak, &pause);
            start = at;
            step = points ? speak * per / (double)points : 0;
            prev_end = at + speak * per;
            at += (speak + pause) * per;
        }
        for (size_t i = 0, k = 0; i < n; k++) { /* one code point a character */
            size_t len = 1;
            while (i + len < n && ((unsigned char)p[i + len] & 0xC0) == 0x80) len++;
            const char *sep = n_chars ? "," : "";
            char ch[8];
            memcpy(ch, p + i, len < sizeof ch ? len : sizeof ch - 1);
            ch[len < sizeof ch ? len : sizeof ch - 1] = '\0';
            rc |= gp_buf_append_str(&chars, sep) | gp_json_append_string(&chars, ch);
            const double s = start + step * (double)k;
            if (secs) /* start and end in seconds */
                rc |= gp_buf_printf(&starts, "%s%.3f", sep, s) |
                      gp_buf_printf(&durations, "%s%.3f", sep, s + step);
            else /* start and duration in whole milliseconds, adding up */
                rc |= gp_buf_printf(&starts, "%s%ld", sep, lround(s * 1000)) |
                      gp_buf_printf(&durations, "%s%ld", sep,
                                    lround((s + step) * 1000) - lround(s * 1000));
            n_chars++;
            i += len;
        }
        p += n;
    }
    rc |= gp_buf_append_str(out, secs ? "{\"characters\":[" : "{\"chars\":[") |
          gp_buf_append_str(out, chars.data ? chars.data : "");
    rc |= gp_buf_append_str(out, secs ? "],\"character_start_times_seconds\":["
                                      : "],\"charStartTimesMs\":[") |
          gp_buf_append_str(out, starts.data ? starts.data : "");
    rc |= gp_buf_append_str(out, secs ? "],\"character_end_times_seconds\":["
                                      : "],\"charDurationsMs\":[") |
          gp_buf_append_str(out, durations.data ? durations.data : "");
    rc |= gp_buf_append_str(out, "]}");
    gp_buf_free(&chars);
    gp_buf_free(&starts);
    gp_buf_free(&durations);
    return rc ? -1 : n_chars;
}
