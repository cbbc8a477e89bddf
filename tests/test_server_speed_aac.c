/* test_server_speed_aac.c — OpenAI's `speed` and `response_format: "aac"`
 * through `gepard serve` (issue 13): the duration changes by the factor
 * within 2 % for every way a response goes out (streamed, whole, SSE, with
 * the 24 kHz resampling after it), the spectrum stays where it was (the
 * pitch is kept; the tone-level pitch check is tests/test_tempo.c on the
 * same function), and AAC streams in ADTS that libavcodec decodes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aac_decode.h"
#include "io/json.h"
#include "server/base64.h"
#include "server_harness.h"
#include "test.h"

#define FRAMES 40 /* 1.86 s of audio at 22.05 kHz */

/* POST a FRAMES-frame request with `fields`; 0 and the response in *h. */
static int speak(test_server *ts, const char *fields, test_http *h) {
    char body[512];
    snprintf(body, sizeof body, "{\"input\":\"Hello world!\",\"max_frames\":%d," TS_GREEDY ",%s}",
             FRAMES, fields);
    *h = (test_http){0};
    int rc = test_http_post(h, test_url(ts, "/v1/audio/speech"), NULL, body, NULL);
    if (rc == 0 && h->status != 200) return -1;
    return rc;
}

/* s16le bytes to floats. */
static float *pcm_floats(const char *data, size_t len, size_t *n) {
    *n = len / 2;
    float *x = malloc((*n + 1) * sizeof(float));
    for (size_t i = 0; i < *n; i++) {
        int16_t v;
        memcpy(&v, data + 2 * i, 2);
        x[i] = v / 32768.0f;
    }
    return x;
}

/* The spectral centroid (Hz) of x: where its energy sits. Resampling by a
 * factor k would move it by k; a pitch-keeping speed change leaves it. */
static double centroid_hz(const float *x, size_t n, int rate) {
    double num = 0, den = 0;
    for (double f = 50; f < rate / 2.0 - 50; f += 50) {
        double w = 2 * M_PI * f / rate, c = 2 * cos(w), s1 = 0, s2 = 0;
        for (size_t i = 0; i < n; i++) {
            double s0 = x[i] + c * s1 - s2;
            s2 = s1;
            s1 = s0;
        }
        double p = s1 * s1 + s2 * s2 - c * s1 * s2;
        num += f * p;
        den += p;
    }
    return den > 0 ? num / den : 0;
}

/* The audio of an SSE response's delta events. */
static int sse_audio(const test_http *h, gp_buf *audio) {
    char *text = strndup(h->body.data ? h->body.data : "", h->body.len);
    int deltas = 0;
    for (char *ev = text; ev && *ev;) {
        char *end = strstr(ev, "\n\n");
        if (!end || strncmp(ev, "data: ", 6) != 0) break;
        *end = '\0';
        cJSON *j = cJSON_Parse(ev + 6);
        const char *b64 = cJSON_GetStringValue(cJSON_GetObjectItem(j, "audio"));
        if (b64) {
            unsigned char *bytes = NULL;
            size_t n = 0;
            gp_error err;
            if (gp_base64_decode(b64, strlen(b64), 1 << 24, "audio", &bytes, &n, &err) == 0)
                gp_buf_append(audio, bytes, n);
            free(bytes);
            deltas++;
        }
        cJSON_Delete(j);
        ev = end + 2;
    }
    free(text);
    return deltas;
}

TEST(server_speed_changes_duration_and_keeps_pitch) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    const double native = FRAMES * 1024.0;
    struct {
        const char *fields;
        double want; /* samples */
        bool sse;
    } cases[] = {
        {"\"response_format\":\"pcm\",\"sample_rate\":22050,\"speed\":1", native, false},
        {"\"response_format\":\"pcm\",\"sample_rate\":22050,\"speed\":0.5", native / 0.5, false},
        {"\"response_format\":\"pcm\",\"sample_rate\":22050,\"speed\":2", native / 2, false},
        {"\"response_format\":\"pcm\",\"sample_rate\":22050,\"speed\":4", native / 4, false},
        {"\"response_format\":\"pcm\",\"sample_rate\":22050,\"speed\":0.25", native / 0.25, false},
        /* speed, then the 24 kHz resampling */
        {"\"response_format\":\"pcm\",\"speed\":1.5", native / 1.5 * 24000 / 22050, false},
        /* the whole file in one response */
        {"\"response_format\":\"pcm\",\"sample_rate\":22050,\"speed\":0.8,\"stream\":false",
         native / 0.8, false},
        /* SSE deltas */
        {"\"response_format\":\"pcm\",\"sample_rate\":22050,\"speed\":2,\"stream_format\":\"sse\"",
         native / 2, true},
    };
    double centroid_1 = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_http h;
        CHECK_MSG(speak(&ts, cases[i].fields, &h) == 0, "%s: HTTP %ld: %.200s", cases[i].fields,
                  h.status, h.body.data ? h.body.data : "");
        gp_buf audio;
        gp_buf_init(&audio);
        if (cases[i].sse)
            CHECK(sse_audio(&h, &audio) >= 2);
        else
            gp_buf_append(&audio, h.body.data, h.body.len);
        size_t n = 0;
        float *x = pcm_floats(audio.data, audio.len, &n);
        double ratio = (double)n / cases[i].want;
        double c = centroid_hz(x, n, strstr(cases[i].fields, "22050") ? 22050 : 24000);
        if (i == 0) centroid_1 = c;
        test_note("%s: %zu samples, %.4f of the expected %.0f; spectral centroid %.0f Hz",
                  cases[i].fields, n, ratio, cases[i].want, c);
        /* the tolerance: duration changes by the factor within 2 % */
        CHECK_MSG(fabs(ratio - 1) <= 0.02, "%s: %zu samples, want %.0f", cases[i].fields, n,
                  cases[i].want);
        /* pitch kept: the spectrum's centre moves by less than 15 % (a
         * plain resampling to the same duration would move it by 1/speed,
         * >= 25 %); the tone test holds the pitch to 1 % */
        if (i > 0 && i < 5)
            CHECK_MSG(fabs(c / centroid_1 - 1) < 0.15, "%s: centroid %.0f Hz vs %.0f at speed 1",
                      cases[i].fields, c, centroid_1);
        free(x);
        gp_buf_free(&audio);
        test_http_free(&h);
    }
    test_server_stop(&ts);
}

TEST(server_aac_streams_and_decodes) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    const char *fields[] = {"\"response_format\":\"aac\"",
                            "\"response_format\":\"aac\",\"stream\":false",
                            "\"response_format\":\"aac\",\"sample_rate\":24000,\"speed\":2"};
    const int rates[] = {22050, 22050, 24000};
    const double want[] = {FRAMES * 1024.0, FRAMES * 1024.0, FRAMES * 1024.0 / 2 * 24000 / 22050};
    for (int i = 0; i < 3; i++) {
        test_http h;
        REQUIRE_MSG(speak(&ts, fields[i], &h) == 0, "%s: HTTP %ld: %.200s", fields[i], h.status,
                    h.body.data ? h.body.data : "");
        const char *type = test_http_header(&h, "Content-Type");
        CHECK_MSG(type && strcmp(type, "audio/aac") == 0, "Content-Type %s", type ? type : "-");
        size_t n = 0;
        test_aac_info info;
        float *x = test_aac_decode(h.body.data, h.body.len, &n, &info);
        test_note("%s: %zu bytes, %d ADTS frames, %zu samples at %d Hz (want ~%.0f)", fields[i],
                  h.body.len, info.frames, n, info.rate, want[i]);
        CHECK_MSG(x, "%s: libavcodec decoded nothing", fields[i]);
        CHECK_EQ_INT(info.rate, rates[i]);
        CHECK_EQ_INT(info.channels, 1);
        CHECK_EQ_INT(info.bad_frames, 0);
        /* AAC adds the encoder's 1024-sample priming and pads the last
         * frame: between the audio's length and 2048 samples more (and the
         * speed case's 2 %) */
        CHECK_MSG(n >= want[i] * 0.98 && n <= want[i] * 1.02 + 2048, "%s: %zu samples", fields[i],
                  n);
        free(x);
        test_http_free(&h);
    }
    test_server_stop(&ts);
}
