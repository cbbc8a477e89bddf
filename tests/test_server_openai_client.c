/* test_server_openai_client.c — `gepard serve` driven by OpenAI's official
 * Node client (npm `openai` 6.x, pinned in tests/openai/package.json and
 * installed by `make test` into tests/openai/node_modules): models list and
 * retrieve, every response_format whole, streamed and with "stream": false,
 * SSE, speed values, errors as the client's exception classes, and aborts
 * (tests/openai/client_suite.mjs). Every audio body the client received is
 * then decoded here — libsndfile for wav/flac/mp3/opus, libavcodec for aac,
 * raw for pcm — for its sample rate and length, and the streamed opus's
 * first audio page is timed.
 *
 * Skipped, with a note, when node or the npm package is missing. */
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aac_decode.h"
#include "io/file.h"
#include "io/json.h"
#include "node_suite.h"
#include "server_harness.h"
#include "test.h"

#define KEY "sesame"
#define CHECKS_EXPECTED 37 /* client_suite.mjs's checks, the manifest included */

static const char *openai_modules(void) {
    const char *env = getenv("GEPARD_OPENAI_NODE_MODULES");
    return env && *env ? env : "tests/openai/node_modules";
}

/* Seconds of audio in one saved body, from its decoder; -1 if it does not
 * decode. *rate gets the decoded rate. */
static double decoded_seconds(const char *path, const char *format, int manifest_rate, int *rate) {
    *rate = 0;
    if (strcmp(format, "pcm") == 0) {
        struct stat st;
        if (stat(path, &st) != 0) return -1;
        *rate = manifest_rate; /* headerless: the rate is what the response said */
        return (double)(st.st_size / 2) / manifest_rate;
    }
    if (strcmp(format, "aac") == 0) {
        char *bytes = NULL;
        size_t len = 0, n = 0;
        gp_error err;
        if (gp_read_file(path, 1 << 26, &bytes, &len, &err)) return -1;
        test_aac_info info;
        float *x = test_aac_decode(bytes, len, &n, &info);
        free(bytes);
        free(x);
        if (!x || info.bad_frames) return -1;
        *rate = info.rate;
        return (double)n / info.rate;
    }
    int channels;
    double secs = test_sndfile_seconds(path, rate, &channels);
    return channels == 1 ? secs : -1;
}

/* The input rate an Ogg Opus file's OpusHead records (libsndfile decodes
 * at one of Opus's own rates, 24 or 48 kHz), or 0. */
static int opus_head_rate(const char *path) {
    char *bytes = NULL;
    size_t len = 0;
    gp_error err;
    if (gp_read_file(path, 1 << 26, &bytes, &len, &err)) return 0;
    int rate = 0;
    for (size_t i = 0; i + 16 <= len && i < 4096; i++)
        if (memcmp(bytes + i, "OpusHead", 8) == 0) {
            const unsigned char *p = (const unsigned char *)bytes + i + 12;
            rate = p[0] | (p[1] << 8) | (p[2] << 16) | (p[3] << 24);
            break;
        }
    free(bytes);
    return rate;
}

/* Decode every file of the manifest and hold it to what the request asked. */
static void check_manifest(const char *dir) {
    char path[1024];
    cJSON *m = test_node_manifest();
    if (!m) return;
    int files = 0;
    for (const cJSON *f = m->child; f; f = f->next, files++) {
        const char *file = cJSON_GetStringValue(cJSON_GetObjectItem(f, "file"));
        const char *format = cJSON_GetStringValue(cJSON_GetObjectItem(f, "format"));
        int want_rate = cJSON_GetObjectItem(f, "rate")->valueint;
        double speed = cJSON_GetObjectItem(f, "speed")->valuedouble;
        double samples = cJSON_GetObjectItem(f, "samples")->valuedouble;
        snprintf(path, sizeof path, "%s/%s", dir, file);
        int rate = 0;
        double secs = decoded_seconds(path, format, want_rate, &rate);
        double want = samples / 22050.0 / speed;
        test_note("%s: %.3f s at %d Hz (want %.3f s at %d Hz)", file, secs, rate, want, want_rate);
        CHECK_MSG(secs > 0, "%s does not decode", file);
        if (strcmp(format, "opus") == 0) {
            CHECK_MSG(rate == 24000 || rate == 48000, "%s: decoded at %d Hz", file, rate);
            rate = opus_head_rate(path);
        }
        CHECK_MSG(rate == want_rate, "%s: %d Hz, the response said %d", file, rate, want_rate);
        /* pcm is OpenAI's 24 kHz */
        if (strcmp(format, "pcm") == 0) CHECK_EQ_INT(want_rate, 24000);
        /* lossless formats: the length within 2 % (the tolerance for
         * speed; exact but for the 24 kHz resampler's rounding at speed 1);
         * lossy ones add encoder delay and padding: within 0.1 s (+2 %) */
        bool lossless = !strcmp(format, "pcm") || !strcmp(format, "wav") || !strcmp(format, "flac");
        double tol = lossless ? 0.02 * want : 0.1 + 0.02 * want;
        CHECK_MSG(fabs(secs - want) <= tol, "%s: %.3f s, want %.3f +- %.3f", file, secs, want, tol);
        /* streamed opus: the first audio page well before the end (it
         * held back ~2.7 s with libopusenc's default delays) */
        const cJSON *fa = cJSON_GetObjectItem(f, "first_audio_ms");
        if (fa && strcmp(format, "opus") == 0) {
            double first = fa->valuedouble, total = cJSON_GetObjectItem(f, "total_ms")->valuedouble;
            test_note("%s: first audio page after %.0f ms of %.0f ms", file, first, total);
            CHECK_MSG(first >= 0 && first < 0.5 * total,
                      "%s: the first audio page came after %.0f ms of %.0f", file, first, total);
        }
    }
    test_note("%d files decoded", files);
    CHECK_EQ_INT(files, 25);
    cJSON_Delete(m);
}

TEST(server_openai_node_client_suite) {
    test_require_node_package(openai_modules(), "openai", "OpenAI's client", "tests/openai");
    test_server_opts o = {.api_key = KEY, .max_streams = 1, .max_queue = -1};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    test_node_suite("tests/openai/client_suite.mjs", &ts, KEY, "openai client", CHECKS_EXPECTED);
    check_manifest(test_tmpdir());
    /* the aborted streams are gone from the engine */
    gepard_engine_stats st;
    for (int i = 0; i < 50; i++) {
        test_server_stats(&ts, &st);
        if (st.active_streams == 0) break;
        usleep(100000);
    }
    CHECK_EQ_INT(st.active_streams, 0);
    test_server_stop(&ts);
}
