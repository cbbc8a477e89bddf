/* test_server_elevenlabs.c — ElevenLabs' routes (src/server/elevenlabs.c):
 * the routes and variants a path names, the output formats, the error
 * shape and the key header, in C; and ElevenLabs' official Node client
 * (tests/elevenlabs/client_suite.mjs, skipped visibly without node or the
 * pinned package), whose WAV, MP3 and Opus bodies are decoded here. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "node_suite.h"
#include "server/base64.h"
#include "server_harness.h"
#include "test.h"

#define KEY "el-test-key"
#define FRAMES 12

/* POST `path` with the text and `extra` fields (none: ElevenLabs' model id
 * and Gepard's greedy fixed-length sampling, for the samples to compare). */
static long el_post(test_server *ts, const char *path, const char *extra, test_http *h) {
    char body[512];
    snprintf(body, sizeof body, "{\"text\":\"Hello world!\",\"max_frames\":%d%s}", FRAMES,
             *extra ? extra : ",\"model_id\":\"eleven_flash_v2_5\"," TS_GREEDY);
    *h = (test_http){0};
    test_http_post(h, test_url(ts, path), NULL, body, KEY);
    return h->status;
}

/* Append the bytes of base64 `text` to b; 0 or -1. */
static int append_base64(gp_buf *b, const char *text) {
    unsigned char *data = NULL;
    size_t n = 0;
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_base64_decode(text, strlen(text), (size_t)1 << 26, "audio_base64", &data, &n, &err);
    if (!rc && n) rc = gp_buf_append(b, data, n);
    free(data);
    return rc ? -1 : 0;
}

/* The body's detail.status ("" when it has none). */
static const char *detail_status(const test_http *h) {
    static char out[64];
    out[0] = '\0';
    const char *p = h->body.data ? strstr(h->body.data, "{\"detail\":{\"status\":\"") : NULL;
    if (p) sscanf(p + 21, "%63[^\"]", out);
    return out;
}

/* Whole and streamed give the same samples as the OpenAI route; each
 * output format its content type and length; the variants and errors. */
TEST(server_elevenlabs_routes) {
    test_server_opts o = {.api_key = KEY};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    test_http whole, streamed, openai = {0};
    REQUIRE(el_post(&ts, "/v1/text-to-speech/alloy?output_format=pcm_22050", "", &whole) == 200);
    REQUIRE(el_post(&ts, "/v1/text-to-speech/alloy/stream/?output_format=pcm_22050", "",
                    &streamed) == 200);
    char body[512];
    snprintf(body, sizeof body,
             "{\"input\":\"Hello world!\",\"voice\":\"alloy\",\"response_format\":\"pcm\","
             "\"sample_rate\":22050,\"max_frames\":%d," TS_GREEDY "}",
             FRAMES);
    test_http_post(&openai, test_url(&ts, "/v1/audio/speech"), NULL, body, KEY);
    CHECK_EQ_INT((long)whole.body.len, FRAMES * 1024L * 2);
    CHECK(whole.body.len == streamed.body.len &&
          memcmp(whole.body.data, streamed.body.data, whole.body.len) == 0);
    CHECK(whole.body.len == openai.body.len &&
          memcmp(whole.body.data, openai.body.data, whole.body.len) == 0);
    const char *length = test_http_header(&whole, "Content-Length");
    CHECK_MSG(length && atol(length) == (long)whole.body.len, "the whole file has a length: %s",
              length ? length : "none");
    /* with timestamps: the same audio in JSON, one object or a line a chunk,
     * then the estimated character times of the text */
    test_http object, lines;
    REQUIRE(el_post(&ts, "/v1/text-to-speech/alloy/with-timestamps?output_format=pcm_22050", "",
                    &object) == 200);
    REQUIRE(el_post(&ts, "/v1/text-to-speech/alloy/stream/with-timestamps?output_format=pcm_22050",
                    "", &lines) == 200);
    const char *object_type = test_http_header(&object, "Content-Type");
    CHECK(object_type && strcmp(object_type, "application/json") == 0);
    cJSON *j = cJSON_ParseWithLength(object.body.data, object.body.len);
    REQUIRE_MSG(j, "not one JSON object: %.200s", object.body.data ? object.body.data : "");
    gp_buf pcm;
    gp_buf_init(&pcm);
    const char *b64 = cJSON_GetStringValue(cJSON_GetObjectItem(j, "audio_base64"));
    REQUIRE(b64 && append_base64(&pcm, b64) == 0);
    CHECK(pcm.len == whole.body.len && memcmp(pcm.data, whole.body.data, pcm.len) == 0);
    const cJSON *al = cJSON_GetObjectItem(j, "alignment");
    const cJSON *chars = cJSON_GetObjectItem(al, "characters");
    const cJSON *ends = cJSON_GetObjectItem(al, "character_end_times_seconds");
    char said[64] = "";
    for (const cJSON *c = chars ? chars->child : NULL; c; c = c->next)
        strncat(said, cJSON_GetStringValue(c), sizeof said - strlen(said) - 1);
    CHECK_MSG(strcmp(said, "Hello world!") == 0, "alignment of \"%s\"", said);
    const double end = cJSON_GetArrayItem(ends, cJSON_GetArraySize(ends) - 1)->valuedouble;
    CHECK_MSG(end > 0 && end <= FRAMES * 1024.0 / 22050 + 1e-3, "the last character ends at %g s",
              end);
    CHECK(cJSON_IsObject(cJSON_GetObjectItem(j, "normalized_alignment")));
    cJSON_Delete(j);
    gp_buf_clear(&pcm);
    int n_lines = 0;
    bool last_aligned = false;
    for (char *line = lines.body.data, *nl; line && (nl = strchr(line, '\n')); line = nl + 1) {
        cJSON *l = cJSON_ParseWithLength(line, (size_t)(nl - line));
        REQUIRE_MSG(l, "line %d is not JSON", n_lines);
        const char *a = cJSON_GetStringValue(cJSON_GetObjectItem(l, "audio_base64"));
        CHECK(a && append_base64(&pcm, a) == 0);
        last_aligned = cJSON_IsObject(cJSON_GetObjectItem(l, "alignment"));
        cJSON_Delete(l);
        n_lines++;
    }
    test_note("with-timestamps: %zu bytes in one object; %d lines", object.body.len, n_lines);
    CHECK(n_lines >= 2 && last_aligned);
    CHECK(pcm.len == whole.body.len && memcmp(pcm.data, whole.body.data, pcm.len) == 0);
    gp_buf_free(&pcm);
    test_http_free(&object);
    test_http_free(&lines);
    test_http_free(&whole);
    test_http_free(&streamed);
    test_http_free(&openai);
    static const struct {
        const char *format, *type;
        long min_bytes, max_bytes;
    } formats[] = {
        {"mp3_44100_128", "audio/mpeg", 1000, 40000},
        {"ulaw_8000", "audio/PCMU", FRAMES * 1024L * 8000 / 22050 - 400,
         FRAMES * 1024L * 8000 / 22050 + 400},
        {"wav_16000", "audio/wav", 44 + FRAMES * 1024L * 16000 / 22050 * 2 - 800,
         44 + FRAMES * 1024L * 16000 / 22050 * 2 + 800},
        {"opus_48000_32", "audio/ogg", 500, 20000},
    };
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "/v1/text-to-speech/default?output_format=%s",
                 formats[i].format);
        test_http h;
        CHECK_EQ_INT(el_post(&ts, path, "", &h), 200);
        const char *type = test_http_header(&h, "Content-Type");
        test_note("%s: %zu bytes, %s", formats[i].format, h.body.len, type ? type : "?");
        CHECK(type && strcmp(type, formats[i].type) == 0);
        CHECK((long)h.body.len >= formats[i].min_bytes && (long)h.body.len <= formats[i].max_bytes);
        test_http_free(&h);
    }
    /* refusals, in ElevenLabs' shape */
    static const struct {
        const char *path, *extra, *status;
        long code;
    } bad[] = {
        {"/v1/text-to-speech/nobody", "", "voice_not_found", 400},
        {"/v1/text-to-speech/alloy?output_format=mp3_48000_320", "", "invalid_output_format", 400},
        {"/v1/text-to-speech/alloy", ",\"model_id\":\"whisper\"", "model_not_found", 400},
        {"/v1/text-to-speech/alloy", ",\"voice_settings\":{\"speed\":9}", "invalid_value", 400},
        {"/v1/text-to-speech/alloy", ",\"voice_settings\":{\"stability\":2}", "invalid_value", 400},
        {"/v1/text-to-speech/alloy", ",\"voice_settings\":[]", "invalid_type", 400},
        {"/v1/text-to-speech/alloy", ",\"seed\":-1", "invalid_value", 400},
        {"/v1/text-to-speech/alloy",
         ",\"pronunciation_dictionary_locators\":[{\"pronunciation_dictionary_id\":\"x\"}]",
         "not_supported", 400},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        test_http h;
        long st = el_post(&ts, bad[i].path, bad[i].extra, &h);
        CHECK_MSG(st == bad[i].code && strcmp(detail_status(&h), bad[i].status) == 0,
                  "%s %s: %ld %s", bad[i].path, bad[i].extra, st, h.body.data ? h.body.data : "");
        test_http_free(&h);
    }
    /* a path under the routes that names none of them: the generic 404 */
    test_http nf;
    CHECK_EQ_INT(el_post(&ts, "/v1/text-to-speech/alloy/nonsense", "", &nf), 404);
    test_http_free(&nf);
    /* a wrong key is 401 in ElevenLabs' shape (the client suite sends xi-api-key) */
    test_http h = {0};
    test_http_get(&h, test_url(&ts, "/v1/voices/default"), "wrong");
    CHECK_EQ_INT(h.status, 401);
    CHECK(strcmp(detail_status(&h), "invalid_api_key") == 0);
    test_http_free(&h);
    /* a WebSocket handshake without the key (it may come in the first
     * message) does not list the voices when refusing one */
    int fd = test_tcp_connect(ts.port, 10);
    REQUIRE(fd >= 0);
    const char *hs = "GET /v1/text-to-speech/nobody/stream-input HTTP/1.1\r\nHost: x\r\n"
                     "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    REQUIRE(test_tcp_send(fd, hs, strlen(hs)) == 0);
    char head[2048];
    CHECK_EQ_INT(test_tcp_read_head(fd, head, sizeof head), 400);
    char reply[1024] = "";
    ssize_t got = recv(fd, reply, sizeof reply - 1, 0);
    reply[got > 0 ? got : 0] = 0;
    CHECK_MSG(strstr(reply, "voice_not_found") && !strstr(reply, "alloy"), "%s", reply);
    close(fd);
    test_http_get(&h, test_url(&ts, "/v2/voices?search=ALL"), KEY);
    CHECK_EQ_INT(h.status, 200);
    CHECK_MSG(h.body.data && strstr(h.body.data, "\"voice_id\":\"ballad\"") &&
                  strstr(h.body.data, "\"total_count\":2"),
              "%s", h.body.data ? h.body.data : "");
    test_http_free(&h);
    test_server_stop(&ts);
}

static const char *elevenlabs_modules(void) {
    const char *env = getenv("GEPARD_ELEVENLABS_NODE_MODULES");
    return env && *env ? env : "tests/elevenlabs/node_modules";
}

TEST(server_elevenlabs_node_client_suite) {
    test_require_node_package(elevenlabs_modules(), "@elevenlabs/elevenlabs-js",
                              "ElevenLabs' client", "tests/elevenlabs");
    test_server_opts o = {.api_key = KEY, .max_streams = 2};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    test_node_suite("tests/elevenlabs/client_suite.mjs", &ts, KEY, "elevenlabs client", 15);
    test_node_check_manifest(test_tmpdir(), 5);
    test_server_stop(&ts);
}

TEST(server_elevenlabs_websocket_suite) {
    test_require_node_package(elevenlabs_modules(), "ws", "the ws client", "tests/elevenlabs");
    test_server_opts o = {.api_key = KEY, .max_streams = 4};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    test_node_suite("tests/elevenlabs/ws_suite.mjs", &ts, KEY, "websocket client", 5);
    test_server_stop(&ts);
}

/* `gepard serve --no-word-timestamps`: ElevenLabs' with-timestamps is
 * refused by name instead of answered with estimated times. */
TEST(server_elevenlabs_timestamps_off) {
    test_server_opts o = {.api_key = KEY, .no_word_timestamps = true};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    test_http h;
    CHECK_EQ_INT(el_post(&ts, "/v1/text-to-speech/alloy/with-timestamps", "", &h), 400);
    CHECK_MSG(strcmp(detail_status(&h), "timestamps_not_supported") == 0 && h.body.data &&
                  strstr(h.body.data, "--no-word-timestamps"),
              "%s", h.body.data ? h.body.data : "");
    test_http_free(&h);
    test_server_stop(&ts);
}
