/* word_times.c — word timestamps estimated over the voiced span (see
 * word_times.h). */
#include "server/word_times.h"

#include <math.h>
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

int gp_word_times_append(gp_buf *out, const char *text, const gp_voiced_span *v, int rate,
                         double speed, double offset_s) {
    const char *sep = " \t\r\n";
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
    const double t0 = v->first >= 0 ? (double)v->first * scale : 0;
    const double t1 = v->first >= 0 ? (double)(v->last + 1) * scale : (double)v->samples * scale;
    /* the last word's pause falls after the voiced span */
    const double per = total - last_pause > 0 ? (t1 - t0) / (total - last_pause) : 0;
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
