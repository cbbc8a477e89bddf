/* test_server_cartesia.c — `gepard serve`'s Cartesia routes (src/server/
 * cartesia.c): the same audio as the OpenAI route for the same request,
 * volume as an exact gain, the X-API-Key header, every refusal as a 400
 * naming its field, SSE's error event when a stream fails, the voices'
 * cursor pages; then Cartesia's official Node client (npm
 * @cartesia/cartesia-js, pinned in tests/cartesia/package.json) through
 * tests/cartesia/client_suite.mjs, whose WAV and MP3 bodies are decoded
 * here with libsndfile; the WebSocket (/tts/websocket): its handshake and a
 * shutdown with a context running, here, and its messages through the `ws`
 * client (tests/cartesia/ws_suite.mjs). The client test is skipped, with a note, without
 * node or the package. */
#include <math.h>
#include <pthread.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/timing.h"
#include "io/json.h"
#include "node_suite.h"
#include "server_harness.h"
#include "test.h"

#define KEY "sesame"
#define CHECKS_EXPECTED 21 /* client_suite.mjs's checks */
#define FRAMES 40

/* POST a Cartesia request with `output_format` and `extra` fields. */
static long tts(test_server *ts, const char *route, const char *output_format, const char *extra,
                test_http *h) {
    char body[1024];
    snprintf(body, sizeof body,
             "{\"model_id\":\"sonic-3\",\"transcript\":\"Hello world!\",\"voice\":{\"mode\":"
             "\"id\",\"id\":\"alloy\"},\"output_format\":%s,\"max_frames\":%d," TS_GREEDY "%s%s}",
             output_format, FRAMES, extra[0] ? "," : "", extra);
    *h = (test_http){0};
    test_http_post(h, test_url(ts, route), NULL, body, KEY);
    return h->status;
}

/* The Cartesia route and OpenAI's give the same samples for the same
 * request (both at the codec's 22050 Hz, no resampling); volume is a gain
 * applied to the float samples before encoding. */
TEST(server_cartesia_bytes_equal_the_openai_route) {
    test_server_opts o = {.api_key = KEY};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    test_http c, a = {0}, loud, quiet;
    REQUIRE(tts(&ts, "/tts/bytes",
                "{\"container\":\"raw\",\"encoding\":\"pcm_s16le\",\"sample_rate\":22050}", "",
                &c) == 200);
    char body[512];
    snprintf(body, sizeof body,
             "{\"input\":\"Hello world!\",\"voice\":\"alloy\",\"response_format\":\"pcm\","
             "\"sample_rate\":22050,\"max_frames\":%d," TS_GREEDY "}",
             FRAMES);
    test_http_post(&a, test_url(&ts, "/v1/audio/speech"), NULL, body, KEY);
    REQUIRE(a.status == 200);
    CHECK_EQ_INT(c.body.len, FRAMES * 1024 * 2);
    CHECK(c.body.len == a.body.len && memcmp(c.body.data, a.body.data, a.body.len) == 0);
    const char *f32 = "{\"container\":\"raw\",\"encoding\":\"pcm_f32le\",\"sample_rate\":22050}";
    REQUIRE(tts(&ts, "/tts/bytes", f32, "", &loud) == 200);
    REQUIRE(tts(&ts, "/tts/bytes", f32, "\"generation_config\":{\"volume\":0.5}", &quiet) == 200);
    REQUIRE(loud.body.len == quiet.body.len && loud.body.len == FRAMES * 1024 * 4);
    const float *x = (const float *)loud.body.data, *y = (const float *)quiet.body.data;
    double worst = 0;
    for (size_t i = 0; i < loud.body.len / 4; i++) worst = fmax(worst, fabs(y[i] - 0.5 * x[i]));
    CHECK_MSG(worst == 0, "volume 0.5: %g from half the samples", worst);
    const char *bits = test_http_header(&quiet, "X-Bit-Depth");
    CHECK(bits && strcmp(bits, "32") == 0);
    test_http_free(&c);
    test_http_free(&a);
    test_http_free(&loud);
    test_http_free(&quiet);
    test_server_stop(&ts);
}

/* The error code and param of an error body. */
static void error_of(const test_http *h, char code[64], char param[64]) {
    code[0] = param[0] = '\0';
    cJSON *j = h->body.data ? cJSON_Parse(h->body.data) : NULL;
    const cJSON *e = cJSON_GetObjectItem(j, "error");
    const char *c = cJSON_GetStringValue(cJSON_GetObjectItem(e, "code"));
    const char *p = cJSON_GetStringValue(cJSON_GetObjectItem(e, "param"));
    if (c) snprintf(code, 64, "%s", c);
    if (p) snprintf(param, 64, "%s", p);
    cJSON_Delete(j);
}

TEST(server_cartesia_refusals_name_the_field) {
    test_server_opts o = {.api_key = KEY};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    const char *raw = "{\"container\":\"raw\",\"encoding\":\"pcm_s16le\",\"sample_rate\":24000}";
    const struct {
        const char *route, *format, *extra, *param;
    } cases[] = {
        {"/tts/bytes", raw, "\"model_id\":\"eleven_v3\"", "model_id"},
        {"/tts/bytes", raw, "\"transcript\":\"  \"", "transcript"},
        {"/tts/bytes", raw, "\"voice\":{\"mode\":\"id\"}", "voice.id"},
        {"/tts/bytes", raw, "\"voice\":{\"mode\":\"embedding\",\"embedding\":[1]}", "voice.mode"},
        {"/tts/bytes", raw, "\"voice\":{\"mode\":\"clone\",\"id\":\"alloy\"}", "voice.mode"},
        {"/tts/bytes", raw, "\"voice\":7", "voice"},
        {"/tts/bytes", "\"wav\"", "", "output_format"},
        {"/tts/bytes", "{\"container\":\"flac\",\"sample_rate\":24000}", "",
         "output_format.container"},
        {"/tts/bytes", "{\"container\":\"raw\",\"sample_rate\":24000}", "",
         "output_format.encoding"},
        {"/tts/bytes", "{\"container\":\"wav\",\"encoding\":\"pcm_s24le\",\"sample_rate\":24000}",
         "", "output_format.encoding"},
        {"/tts/bytes", "{\"container\":\"raw\",\"encoding\":\"pcm_s16le\"}", "",
         "output_format.sample_rate"},
        {"/tts/bytes", "{\"container\":\"raw\",\"encoding\":\"pcm_s16le\",\"sample_rate\":11025}",
         "", "output_format.sample_rate"},
        {"/tts/bytes", "{\"container\":\"mp3\",\"sample_rate\":24000,\"bit_rate\":48000}", "",
         "output_format.bit_rate"},
        {"/tts/sse", "{\"container\":\"mp3\",\"sample_rate\":24000}", "",
         "output_format.container"},
        {"/tts/sse", raw, "\"add_phoneme_timestamps\":true", "add_phoneme_timestamps"},
        {"/tts/sse", raw, "\"add_timestamps\":\"yes\"", "add_timestamps"},
        {"/tts/bytes", raw, "\"continue\":true", "continue"},
        {"/tts/bytes", raw, "\"language\":\"en\",\"locale\":\"en-US\"", "locale"},
        {"/tts/bytes", raw, "\"generation_config\":{\"speed\":2}", "generation_config.speed"},
        {"/tts/bytes", raw, "\"generation_config\":{\"volume\":0.1}", "generation_config.volume"},
        {"/tts/bytes", raw, "\"generation_config\":[]", "generation_config"},
        {"/tts/bytes", raw, "\"speed\":\"warp\"", "speed"},
        {"/tts/bytes", raw, "\"speed\":3", "speed"},
        {"/tts/bytes", raw, "\"top_k\":-2", "top_k"},
    };
    char long_id[300];
    memset(long_id, 'c', sizeof long_id);
    long_id[sizeof long_id - 1] = '\0';
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_http h;
        /* cJSON finds a key's first occurrence: the case's field, written
         * first, overrides the defaults after it */
        char body[1024];
        snprintf(body, sizeof body,
                 "{%s%s\"model_id\":\"sonic-3\",\"transcript\":\"Hi\",\"voice\":\"alloy\","
                 "\"output_format\":%s}",
                 cases[i].extra, cases[i].extra[0] ? "," : "", cases[i].format);
        h = (test_http){0};
        test_http_post(&h, test_url(&ts, cases[i].route), NULL, body, KEY);
        char code[64], param[64];
        error_of(&h, code, param);
        CHECK_MSG(h.status == 400 && strcmp(param, cases[i].param) == 0,
                  "%s %s: HTTP %ld param \"%s\" (want %s): %.300s", cases[i].route, body, h.status,
                  param, cases[i].param, h.body.data ? h.body.data : "");
        test_http_free(&h);
    }
    char body[600];
    snprintf(body, sizeof body,
             "{\"context_id\":\"%s\",\"model_id\":\"sonic-3\",\"transcript\":\"Hi\",\"voice\":"
             "\"alloy\",\"output_format\":%s}",
             long_id, raw);
    test_http h = {0};
    test_http_post(&h, test_url(&ts, "/tts/sse"), NULL, body, KEY);
    CHECK_EQ_INT(h.status, 400);
    test_http_free(&h);
    /* the wrong method, and no key */
    h = (test_http){0};
    test_http_get(&h, test_url(&ts, "/tts/bytes"), KEY);
    CHECK_EQ_INT(h.status, 405);
    const char *allow = test_http_header(&h, "Allow");
    CHECK(allow && strcmp(allow, "POST") == 0);
    test_http_free(&h);
    h = (test_http){0};
    test_http_get(&h, test_url(&ts, "/voices"), NULL);
    CHECK_EQ_INT(h.status, 401);
    test_http_free(&h);
    test_server_stop(&ts);
}

/* Cartesia's older clients send the key as X-API-Key. */
TEST(server_cartesia_x_api_key) {
    test_server_opts o = {.api_key = KEY};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    const char *keys[2] = {KEY, "wrong"};
    const int want[2] = {200, 401};
    for (int k = 0; k < 2; k++) {
        int fd = test_tcp_connect(ts.port, 10);
        REQUIRE(fd >= 0);
        char req[256], head[2048];
        snprintf(req, sizeof req,
                 "GET /voices?limit=1 HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\nCartesia-Version: "
                 "2026-08-14\r\nConnection: close\r\n\r\n",
                 keys[k]);
        REQUIRE(test_tcp_send(fd, req, strlen(req)) == 0);
        CHECK_EQ_INT(test_tcp_read_head(fd, head, sizeof head), want[k]);
        close(fd);
    }
    test_server_stop(&ts);
}

/* A stream that fails after its first chunks ends with Cartesia's error
 * event (title, message, request_id, context_id) rather than `done`. */
TEST(server_cartesia_sse_error_event) {
    test_server_opts o = {.api_key = KEY, .request_timeout_s = 0.4};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    test_http h = {0};
    const char *body =
        "{\"model_id\":\"sonic-3\",\"transcript\":\"Hello world!\",\"voice\":\"alloy\","
        "\"context_id\":\"c-7\",\"output_format\":{\"container\":\"raw\",\"encoding\":"
        "\"pcm_s16le\",\"sample_rate\":16000},\"max_frames\":4000," TS_GREEDY "}";
    test_http_post(&h, test_url(&ts, "/tts/sse"), NULL, body, KEY);
    REQUIRE(h.status == 200 && h.body.data);
    const char *type = test_http_header(&h, "Content-Type");
    CHECK(type && strcmp(type, "text/event-stream") == 0);
    const char *err = strstr(h.body.data, "event: error\ndata: ");
    REQUIRE_MSG(err, "no error event in %.300s",
                h.body.data + (h.body.len > 300 ? h.body.len - 300 : 0));
    CHECK(strstr(h.body.data, "event: chunk\ndata: {\"type\":\"chunk\"") < err);
    CHECK(!strstr(h.body.data, "event: done"));
    cJSON *j = cJSON_Parse(err + strlen("event: error\ndata: "));
    REQUIRE(j);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, "done")));
    CHECK_EQ_INT(cJSON_GetObjectItem(j, "status_code")->valueint, 500);
    const char *msg = cJSON_GetStringValue(cJSON_GetObjectItem(j, "message"));
    CHECK(msg && strstr(msg, "time limit"));
    const char *rid = cJSON_GetStringValue(cJSON_GetObjectItem(j, "request_id"));
    const char *hid = test_http_header(&h, "x-request-id");
    CHECK(rid && hid && strcmp(rid, hid) == 0);
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "context_id")), "c-7") == 0);
    cJSON_Delete(j);
    test_http_free(&h);
    test_server_stop(&ts);
}

/* The ids of a /voices page, comma-separated, and its has_more. */
static long voices_page(test_server *ts, const char *query, char *ids, size_t cap, bool *more) {
    char path[256];
    snprintf(path, sizeof path, "/voices%s", query);
    test_http h = {0};
    test_http_get(&h, test_url(ts, path), KEY);
    ids[0] = '\0';
    *more = false;
    cJSON *j = h.status == 200 ? cJSON_Parse(h.body.data) : NULL;
    for (const cJSON *v = cJSON_GetObjectItem(j, "data") ? cJSON_GetObjectItem(j, "data")->child
                                                         : NULL;
         v; v = v->next) {
        size_t n = strlen(ids);
        snprintf(ids + n, cap - n, "%s%s", n ? "," : "",
                 cJSON_GetStringValue(cJSON_GetObjectItem(v, "id")));
    }
    *more = cJSON_IsTrue(cJSON_GetObjectItem(j, "has_more"));
    cJSON_Delete(j);
    long status = h.status;
    test_http_free(&h);
    return status;
}

TEST(server_cartesia_voice_pages) {
    test_server_opts o = {.api_key = KEY};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    char ids[1024];
    bool more;
    CHECK_EQ_INT(voices_page(&ts, "?limit=2", ids, sizeof ids, &more), 200);
    CHECK_MSG(strcmp(ids, "alloy,ash") == 0 && more, "%s", ids);
    CHECK_EQ_INT(voices_page(&ts, "?limit=2&starting_after=ash", ids, sizeof ids, &more), 200);
    CHECK_MSG(strcmp(ids, "ballad,coral") == 0 && more, "%s", ids);
    CHECK_EQ_INT(voices_page(&ts, "?limit=2&ending_before=coral", ids, sizeof ids, &more), 200);
    CHECK_MSG(strcmp(ids, "ash,ballad") == 0 && more, "%s", ids);
    CHECK_EQ_INT(voices_page(&ts, "?ending_before=ash", ids, sizeof ids, &more), 200);
    CHECK_MSG(strcmp(ids, "alloy") == 0 && !more, "%s", ids);
    CHECK_EQ_INT(voices_page(&ts, "?limit=100&starting_after=cedar", ids, sizeof ids, &more), 200);
    CHECK_MSG(strcmp(ids, "default") == 0 && !more, "%s", ids);
    CHECK_EQ_INT(voices_page(&ts, "?q=SH", ids, sizeof ids, &more), 200);
    CHECK_MSG(strcmp(ids, "ash,shimmer") == 0 && !more, "%s", ids);
    CHECK_EQ_INT(voices_page(&ts, "?gender=feminine", ids, sizeof ids, &more), 200);
    CHECK_MSG(ids[0] == '\0', "%s", ids);
    CHECK_EQ_INT(voices_page(&ts, "?limit=0", ids, sizeof ids, &more), 400);
    CHECK_EQ_INT(voices_page(&ts, "?limit=2x", ids, sizeof ids, &more), 400);
    CHECK_EQ_INT(voices_page(&ts, "?starting_after=nobody", ids, sizeof ids, &more), 400);
    test_http h = {0};
    test_http_get(&h, test_url(&ts, "/voices/verse"), KEY);
    CHECK(h.status == 200 && h.body.data && strstr(h.body.data, "\"id\":\"verse\""));
    test_http_free(&h);
    h = (test_http){0};
    test_http_get(&h, test_url(&ts, "/voices/nobody"), KEY);
    CHECK_EQ_INT(h.status, 404);
    test_http_free(&h);
    test_server_stop(&ts);
}

/* ---- Cartesia's Node client ---- */

static const char *cartesia_modules(void) {
    const char *env = getenv("GEPARD_CARTESIA_NODE_MODULES");
    return env && *env ? env : "tests/cartesia/node_modules";
}

TEST(server_cartesia_node_client_suite) {
    test_require_node_package(cartesia_modules(), "@cartesia/cartesia-js", "Cartesia's client",
                              "tests/cartesia");
    test_server_opts o = {.api_key = KEY, .max_streams = 2};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    test_node_suite("tests/cartesia/client_suite.mjs", &ts, KEY, "cartesia client",
                    CHECKS_EXPECTED);
    test_node_check_manifest(test_tmpdir(), 7);
    test_server_stop(&ts);
}

/* ---- the WebSocket ---- */

/* A raw handshake with `extra` headers; the status of the answer (the head
 * in `head`). The socket stays open in *fd. */
static int ws_handshake(test_server *ts, const char *path, const char *extra, char *head,
                        size_t cap, int *fd) {
    *fd = test_tcp_connect(ts->port, 10);
    if (*fd < 0) return -1;
    char req[1024];
    snprintf(req, sizeof req,
             "GET %s HTTP/1.1\r\nHost: x\r\n%sSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
             path, extra);
    if (test_tcp_send(*fd, req, strlen(req))) return -1;
    return test_tcp_read_head(*fd, head, cap);
}

/* A masked text frame (a client's). */
static void ws_send_text(int fd, const char *text) {
    size_t n = strlen(text), h = 0;
    unsigned char *frame = malloc(n + 14);
    frame[h++] = 0x81;
    if (n < 126) {
        frame[h++] = (unsigned char)(0x80 | n);
    } else {
        frame[h++] = 0x80 | 126;
        frame[h++] = (unsigned char)(n >> 8);
        frame[h++] = (unsigned char)n;
    }
    const unsigned char mask[4] = {1, 2, 3, 4};
    memcpy(frame + h, mask, 4);
    h += 4;
    for (size_t i = 0; i < n; i++) frame[h + i] = (unsigned char)text[i] ^ mask[i & 3];
    CHECK(test_tcp_send(fd, (const char *)frame, h + n) == 0);
    free(frame);
}

/* Read a WebSocket to its end, frame by frame: whether a close frame with
 * 1001 came. */
typedef struct ws_reader {
    int fd;
    size_t total;
    bool closed_1001;
    int close_code;  /* of the server's close frame; 0: none */
    bool until_done; /* stop at the first `done` event */
    bool done;
    int errors, done_false_errors;
    char flush_ids[64]; /* the flush_done ids in order, "1,2," */
    size_t audio_bytes; /* base64 characters of chunk data, decoded size */
} ws_reader;
static ws_reader ws_read;

static void *ws_read_all(void *arg) {
    ws_reader *w = arg;
    static char all[1 << 21];
    size_t got = 0;
    ssize_t r;
    while ((r = recv(w->fd, all + got, sizeof all - got, 0)) > 0) {
        got += (size_t)r;
        w->total += (size_t)r;
        size_t i = 0;
        for (;;) {
            if (got - i < 2) break;
            unsigned char op = (unsigned char)all[i] & 0x0F;
            size_t len = (unsigned char)all[i + 1] & 0x7F, h = 2;
            if (len == 126) {
                if (got - i < 4) break;
                len = ((size_t)(unsigned char)all[i + 2] << 8) | (unsigned char)all[i + 3];
                h = 4;
            } else if (len == 127) {
                if (got - i < 10) break;
                len = 0;
                for (int k = 0; k < 8; k++) len = (len << 8) | (unsigned char)all[i + 2 + k];
                h = 10;
            }
            if (h + len > sizeof all) return NULL; /* not a frame this server sends */
            if (got - i < h + len) break;
            if (op == 0x8 && len >= 2) {
                w->close_code = (unsigned char)all[i + h] << 8 | (unsigned char)all[i + h + 1];
                w->closed_1001 = w->close_code == 1001;
            }
            if (op == 0x1) {
                cJSON *j = cJSON_ParseWithLength(all + i + h, len);
                const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(j, "type"));
                const char *data = cJSON_GetStringValue(cJSON_GetObjectItem(j, "data"));
                if (type && !strcmp(type, "done")) w->done = true;
                if (type && !strcmp(type, "error")) {
                    w->errors++;
                    w->done_false_errors += cJSON_IsFalse(cJSON_GetObjectItem(j, "done"));
                }
                if (type && !strcmp(type, "flush_done")) {
                    size_t m = strlen(w->flush_ids);
                    snprintf(w->flush_ids + m, sizeof w->flush_ids - m, "%d,",
                             cJSON_GetObjectItem(j, "flush_id")->valueint);
                }
                if (data)
                    w->audio_bytes += strlen(data) / 4 * 3 - (strstr(data, "==")  ? 2
                                                              : strchr(data, '=') ? 1
                                                                                  : 0);
                cJSON_Delete(j);
            }
            i += h + len;
        }
        memmove(all, all + i, got - i);
        got -= i;
        if (w->until_done && w->done) break;
    }
    return NULL;
}

/* A WebSocket to the server with the key: its socket, or -1. */
static int ws_open(test_server *ts) {
    char head[2048], hdrs[256];
    int fd;
    snprintf(hdrs, sizeof hdrs,
             "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: "
             "13\r\nAuthorization: Bearer %s\r\n",
             KEY);
    if (ws_handshake(ts, "/tts/websocket", hdrs, head, sizeof head, &fd) != 101) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

TEST(server_cartesia_websocket_handshake) {
    test_server_opts o = {.api_key = KEY};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    const char *up = "Upgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n";
    const struct {
        const char *path, *headers;
        int status;
    } cases[] = {
        {"/tts/websocket?api_key=" KEY, "", 426}, /* plain GET */
        {"/tts/websocket?api_key=" KEY,
         "Upgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Version: 8\r\n",
         426}, /* old version */
        {"/tts/websocket",
         "Upgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Version: 13\r\n",
         401},                             /* no key */
        {"/voices?api_key=" KEY, "", 401}, /* the query key is the WebSocket's only */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char head[2048];
        int fd;
        int status = ws_handshake(&ts, cases[i].path, cases[i].headers, head, sizeof head, &fd);
        CHECK_MSG(status == cases[i].status, "case %zu: HTTP %d, want %d: %.300s", i, status,
                  cases[i].status, head);
        if (fd >= 0) close(fd);
    }
    /* the right handshake: 101 with RFC 6455's answer to its example key */
    char head[2048], hdrs[256];
    int fd;
    snprintf(hdrs, sizeof hdrs, "%sSec-WebSocket-Version: 13\r\nX-API-Key: %s\r\n", up, KEY);
    REQUIRE(ws_handshake(&ts, "/tts/websocket", hdrs, head, sizeof head, &fd) == 101);
    CHECK(strcasestr(head, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
    /* a long utterance running when the server shuts down: the drain ends
     * it, the connection is closed with 1001, nothing hangs */
    ws_send_text(
        fd, "{\"model_id\":\"sonic\",\"context_id\":\"c\",\"transcript\":\"Hello "
            "world.\",\"voice\":\"alloy\",\"output_format\":{\"container\":\"raw\","
            "\"encoding\":\"pcm_s16le\",\"sample_rate\":22050},\"max_frames\":4000," TS_GREEDY "}");
    usleep(300000);
    ws_read = (ws_reader){.fd = fd};
    pthread_t reader;
    REQUIRE(pthread_create(&reader, NULL, ws_read_all, &ws_read) == 0); /* a client that listens */
    double t0 = gp_now_s();
    gp_server_shutdown(ts.server, 0.2);
    double took = gp_now_s() - t0;
    test_note("shutdown with a running WebSocket context: %.2f s", took);
    CHECK(took < 5);
    pthread_join(reader, NULL);
    close(fd);
    const bool closed_1001 = ws_read.closed_1001;
    const size_t total = ws_read.total;
    CHECK_MSG(closed_1001, "no close frame with 1001 in %zu bytes", total);
    test_server_stop(&ts);
}

TEST(server_cartesia_websocket_suite) {
    test_require_node_package(cartesia_modules(), "ws", "the ws client", "tests/cartesia");
    test_server_opts o = {.api_key = KEY, .max_streams = 4};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    test_node_suite("tests/cartesia/ws_suite.mjs", &ts, KEY, "websocket client", 8);
    test_http h = {0};
    test_http_get(&h, test_url(&ts, "/metrics"), NULL);
    const char *text = h.body.data;
    CHECK(text && strstr(text, "route=\"tts_websocket\""));
    test_http_free(&h);
    test_server_stop(&ts);
}

/* A context's pieces run at most WS_CONTEXT_AHEAD (2) at once: six
 * sentences sent one message each still give all their audio, in order,
 * but the engine never steps more than two streams (each its own
 * utterance) — they would only hold slots other listeners need. */
TEST(server_cartesia_websocket_runs_two_pieces_ahead) {
    test_server_opts o = {.api_key = KEY, .max_streams = 16};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    int fd = ws_open(&ts);
    REQUIRE(fd >= 0);
    for (int k = 0; k <= 6; k++) {
        char msg[512];
        snprintf(
            msg, sizeof msg,
            "{\"model_id\":\"sonic\",\"context_id\":\"six\",\"transcript\":\"%s\","
            "\"continue\":%s,\"voice\":\"alloy\",\"output_format\":{\"container\":"
            "\"raw\",\"encoding\":\"pcm_s16le\",\"sample_rate\":22050},\"max_frames\":40," TS_GREEDY
            "}",
            k < 6 ? "Sentence number something. " : "", k < 6 ? "true" : "false");
        ws_send_text(fd, msg);
    }
    ws_reader w = {.fd = fd, .until_done = true};
    ws_read_all(&w);
    close(fd);
    gepard_engine_stats st;
    test_server_stats(&ts, &st);
    test_note("done %d, %zu bytes of audio, engine: %llu frames, at most %d streams a step", w.done,
              w.audio_bytes, (unsigned long long)st.frames, st.max_batch);
    CHECK(w.done);
    CHECK_EQ_INT((long)w.audio_bytes, 6L * 40 * 1024 * 2);
    CHECK_EQ_INT((long)st.frames, 6L * 40);
    CHECK_MSG(st.max_batch <= 2, "%d streams stepped together", st.max_batch);
    test_server_stop(&ts);
}

/* `gepard serve --no-word-timestamps`: add_timestamps is refused, saying
 * why, instead of answered with estimated times. */
TEST(server_cartesia_word_timestamps_off) {
    test_server_opts o = {.api_key = KEY, .no_word_timestamps = true};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    test_http h;
    CHECK_EQ_INT(tts(&ts, "/tts/sse",
                     "{\"container\":\"raw\",\"encoding\":\"pcm_s16le\",\"sample_rate\":24000}",
                     "\"add_timestamps\":true", &h),
                 400);
    CHECK_MSG(h.body.data && strstr(h.body.data, "--no-word-timestamps"), "%s",
              h.body.data ? h.body.data : "");
    test_http_free(&h);
    /* with them on, /tts/sse answers them before done */
    test_server_stop(&ts);
    o.no_word_timestamps = false;
    REQUIRE(test_server_start(&ts, &o) == 0);
    CHECK_EQ_INT(tts(&ts, "/tts/sse",
                     "{\"container\":\"raw\",\"encoding\":\"pcm_s16le\",\"sample_rate\":24000}",
                     "\"add_timestamps\":true,\"context_id\":\"w\"", &h),
                 200);
    const char *t = h.body.data ? strstr(h.body.data, "event: timestamps\ndata: ") : NULL;
    const char *d = h.body.data ? strstr(h.body.data, "event: done") : NULL;
    CHECK_MSG(t && d && t < d, "%.300s", h.body.data ? h.body.data : "");
    CHECK(t && strstr(t, "\"words\":[\"Hello\",\"world!\"]") && strstr(t, "\"estimated\":true"));
    test_http_free(&h);
    test_server_stop(&ts);
}

/* A WebSocket session on a fresh server: handshake, then `messages` sent
 * one after another, then read until `done` (or the server closes). */
static void ws_session(test_server *ts, const char *const *messages, int n, bool until_done,
                       ws_reader *w) {
    int fd = ws_open(ts);
    REQUIRE(fd >= 0);
    for (int i = 0; i < n; i++) ws_send_text(fd, messages[i]);
    *w = (ws_reader){.fd = fd, .until_done = until_done};
    ws_read_all(w);
    close(fd);
}

#define WS_MSG(text, more, extra)                                                                  \
    "{\"model_id\":\"sonic\",\"context_id\":\"k\",\"transcript\":\"" text "\",\"continue\":" more  \
    ",\"voice\":\"alloy\",\"output_format\":{\"container\":\"raw\",\"encoding\":\"pcm_s16le\","    \
    "\"sample_rate\":22050},\"max_frames\":20," TS_GREEDY extra "}"

/* A full engine does not end a context: with one slot and no queue, the
 * piece running ahead meets BUSY and starts once the first is done (it had
 * failed the whole context with 429). Two flushes in a row get both their
 * flush_done, in order; a message to an ended context is an error that
 * leaves it running (done: false) to its `done`. */
TEST(server_cartesia_websocket_busy_flushes_and_ended) {
    test_server_opts o = {.api_key = KEY, .max_streams = 1, .max_queue = -1};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    const char *busy[] = {WS_MSG("First piece here. ", "true", ""),
                          WS_MSG("Second piece here.", "true", ""), WS_MSG("", "false", "")};
    ws_reader w;
    ws_session(&ts, busy, 3, true, &w);
    gepard_engine_stats st;
    test_server_stats(&ts, &st);
    test_note("busy: done %d, errors %d, %zu bytes of audio, %llu frames", w.done, w.errors,
              w.audio_bytes, (unsigned long long)st.frames);
    CHECK(w.done && w.errors == 0);
    CHECK_EQ_INT((long)w.audio_bytes, 2L * 20 * 1024 * 2);
    const char *flushes[] = {WS_MSG("Flushed words. ", "true", ",\"flush\":true"),
                             WS_MSG("", "true", ",\"flush\":true"), WS_MSG("", "false", ""),
                             WS_MSG("Too late.", "false", "")};
    ws_session(&ts, flushes, 4, true, &w);
    test_note("flushes: %s; errors %d (done false %d)", w.flush_ids, w.errors, w.done_false_errors);
    CHECK_MSG(strcmp(w.flush_ids, "1,2,") == 0, "flush_done ids %s", w.flush_ids);
    CHECK(w.done && w.errors == 1 && w.done_false_errors == 1);
    test_server_stop(&ts);
}

/* The close handshake echoes a valid code and answers a code a client may
 * not send (1005) with 1002; a text message that is not UTF-8 is closed
 * with 1007; a connection whose only context waits for the
 * end of a sentence that never comes is closed at the idle limit (the
 * request time limit) with 1000. */
TEST(server_cartesia_websocket_close_codes_and_idle) {
    test_server_opts o = {.api_key = KEY, .request_timeout_s = 0.5};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    const int sent[2] = {4000, 1005}, want[2] = {4000, 1002};
    for (int k = 0; k < 2; k++) {
        int fd = ws_open(&ts);
        REQUIRE(fd >= 0);
        const unsigned char mask[4] = {9, 8, 7, 6};
        unsigned char frame[8] = {0x88, 0x82, mask[0], mask[1], mask[2], mask[3]};
        frame[6] = (unsigned char)(sent[k] >> 8) ^ mask[0];
        frame[7] = (unsigned char)sent[k] ^ mask[1];
        REQUIRE(test_tcp_send(fd, (const char *)frame, 8) == 0);
        ws_reader w = {.fd = fd};
        ws_read_all(&w);
        close(fd);
        CHECK_MSG(w.close_code == want[k], "sent %d, got close %d", sent[k], w.close_code);
    }
    /* a text message that is not UTF-8 closes with 1007 */
    int fd = ws_open(&ts);
    REQUIRE(fd >= 0);
    ws_send_text(fd, "{\"context_id\":\"\xC3(\"}");
    ws_reader bad = {.fd = fd};
    ws_read_all(&bad);
    close(fd);
    CHECK_MSG(bad.close_code == 1007, "invalid UTF-8: close %d", bad.close_code);
    const char *waiting[] = {WS_MSG("A sentence that never ends", "true", "")};
    ws_reader w;
    double t0 = gp_now_s();
    ws_session(&ts, waiting, 1, false, &w);
    test_note("idle close after %.2f s with code %d", gp_now_s() - t0, w.close_code);
    CHECK_EQ_INT(w.close_code, 1000);
    CHECK(gp_now_s() - t0 < 5);
    test_server_stop(&ts);
}
