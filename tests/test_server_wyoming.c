/* test_server_wyoming.c — the Wyoming port (`gepard serve --wyoming-port`,
 * src/server/wyoming.c) as Home Assistant and Piper's clients use it, over
 * raw loopback TCP: describe → info, synthesize → one audio stream equal to
 * the HTTP route's samples, the streaming events (a sentence's audio before
 * the text has ended, the compatibility `synthesize` ignored, one
 * synthesize-stopped), requests in order on one connection, events split
 * across writes, and every refusal: an error event naming the problem, the
 * connection closed when a request failed and kept when only an event was
 * out of place. */
#include <cjson/cJSON.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/timing.h"
#include "server_harness.h"
#include "test.h"

#define FRAMES 12
/* greedy, fixed length: the tiny model's stop head would end at once */
#define WY_GREEDY "\"top_k\":1,\"seed\":5,\"stop_threshold\":2"

typedef struct wy_client {
    int fd;
    gp_buf in;
    bool eof;
} wy_client;

typedef struct wy_event {
    char type[64];
    cJSON *data; /* merged data (an object, maybe empty) */
    gp_buf payload;
} wy_event;

static int wy_connect(const test_server *ts, wy_client *c) {
    memset(c, 0, sizeof *c);
    gp_buf_init(&c->in);
    c->fd = test_tcp_connect(ts->wyoming_port, 10);
    return c->fd >= 0 ? 0 : -1;
}

static void wy_close(wy_client *c) {
    if (c->fd >= 0) close(c->fd);
    gp_buf_free(&c->in);
}

/* An event as the Python library writes it: data as data_length bytes. */
static void wy_send(wy_client *c, const char *type, const char *data_json) {
    gp_buf b;
    gp_buf_init(&b);
    const size_t dlen = data_json ? strlen(data_json) : 0;
    gp_buf_printf(&b, "{\"type\":\"%s\",\"version\":\"1.8.0\"", type);
    if (dlen) gp_buf_printf(&b, ",\"data_length\":%zu", dlen);
    gp_buf_append_str(&b, "}\n");
    if (dlen) gp_buf_append(&b, data_json, dlen);
    test_tcp_send(c->fd, b.data, b.len);
    gp_buf_free(&b);
}

static void wy_send_raw(wy_client *c, const char *bytes) {
    test_tcp_send(c->fd, bytes, strlen(bytes));
}

/* Read until `need` bytes are buffered; false at EOF or timeout. */
static bool wy_fill(wy_client *c, size_t need) {
    while (c->in.len < need) {
        if (gp_buf_reserve(&c->in, c->in.len + 65536)) return false;
        ssize_t r = recv(c->fd, c->in.data + c->in.len, 65536, 0);
        if (r <= 0) {
            c->eof = true;
            return false;
        }
        c->in.len += (size_t)r;
    }
    return true;
}

static void wy_event_free(wy_event *e) {
    cJSON_Delete(e->data);
    gp_buf_free(&e->payload);
    memset(e, 0, sizeof *e);
}

/* The next event; false at EOF, on a timeout or on a malformed event. */
static bool wy_read(wy_client *c, wy_event *e) {
    memset(e, 0, sizeof *e);
    gp_buf_init(&e->payload);
    char *nl = NULL;
    for (size_t want = 1;; want = c->in.len + 1) {
        if (c->in.len && (nl = memchr(c->in.data, '\n', c->in.len))) break;
        if (!wy_fill(c, want)) return false;
    }
    const size_t hlen = (size_t)(nl - c->in.data);
    cJSON *h = cJSON_ParseWithLength(c->in.data, hlen);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(h, "type");
    const cJSON *dl = cJSON_GetObjectItemCaseSensitive(h, "data_length");
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(h, "payload_length");
    const cJSON *inline_data = cJSON_GetObjectItemCaseSensitive(h, "data");
    if (!cJSON_IsString(type)) {
        cJSON_Delete(h);
        return false;
    }
    snprintf(e->type, sizeof e->type, "%s", type->valuestring);
    const size_t dlen = cJSON_IsNumber(dl) ? (size_t)dl->valuedouble : 0;
    const size_t plen = cJSON_IsNumber(pl) ? (size_t)pl->valuedouble : 0;
    e->data =
        cJSON_IsObject(inline_data) ? cJSON_Duplicate(inline_data, true) : cJSON_CreateObject();
    cJSON_Delete(h);
    if (!wy_fill(c, hlen + 1 + dlen + plen)) return false;
    if (dlen) {
        cJSON *d = cJSON_ParseWithLength(c->in.data + hlen + 1, dlen);
        if (!cJSON_IsObject(d)) {
            cJSON_Delete(d);
            return false;
        }
        for (cJSON *item = d->child, *next; item; item = next) {
            next = item->next;
            cJSON_DeleteItemFromObjectCaseSensitive(e->data, item->string);
            cJSON_AddItemToObject(e->data, item->string, cJSON_DetachItemViaPointer(d, item));
        }
        cJSON_Delete(d);
    }
    if (plen) gp_buf_append(&e->payload, c->in.data + hlen + 1 + dlen, plen);
    const size_t used = hlen + 1 + dlen + plen;
    memmove(c->in.data, c->in.data + used, c->in.len - used);
    c->in.len -= used;
    return true;
}

static int data_int(const wy_event *e, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e->data, key);
    return cJSON_IsNumber(v) ? (int)v->valuedouble : -1;
}

static const char *data_str(const wy_event *e, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e->data, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* One synthesis's audio events, up to audio-stop (or, for a stream, up to
 * synthesize-stopped): counts, the PCM, and whether the order held. */
typedef struct wy_audio {
    int starts, stops, chunks, stopped, errors, other;
    gp_buf pcm;
    bool ordered;         /* start, chunks, stop (, stopped): nothing out of place */
    bool format_ok;       /* every audio event said 22050 Hz, 2 bytes, 1 channel */
    bool timestamps_ok;   /* each chunk's timestamp is the audio before it */
    double first_chunk_s; /* when the first chunk came (monotonic) */
    char error_code[64];
} wy_audio;

static void wy_collect(wy_client *c, bool streaming, wy_audio *a) {
    memset(a, 0, sizeof *a);
    gp_buf_init(&a->pcm);
    a->ordered = a->format_ok = a->timestamps_ok = true;
    wy_event e;
    while (wy_read(c, &e)) {
        const bool audio = strncmp(e.type, "audio-", 6) == 0;
        if (audio && strcmp(e.type, "audio-stop") != 0 &&
            (data_int(&e, "rate") != 22050 || data_int(&e, "width") != 2 ||
             data_int(&e, "channels") != 1))
            a->format_ok = false;
        if (strcmp(e.type, "audio-start") == 0) {
            if (a->starts || a->chunks) a->ordered = false;
            a->starts++;
        } else if (strcmp(e.type, "audio-chunk") == 0) {
            if (!a->starts || a->stops) a->ordered = false;
            if (!a->chunks) a->first_chunk_s = gp_now_s();
            if (data_int(&e, "timestamp") != (int)((a->pcm.len / 2) * 1000 / 22050))
                a->timestamps_ok = false;
            a->chunks++;
            gp_buf_append(&a->pcm, e.payload.data, e.payload.len);
        } else if (strcmp(e.type, "audio-stop") == 0) {
            if (!a->starts || a->stops) a->ordered = false;
            a->stops++;
        } else if (strcmp(e.type, "synthesize-stopped") == 0) {
            if (a->starts != a->stops) a->ordered = false;
            a->stopped++;
        } else if (strcmp(e.type, "error") == 0) {
            a->errors++;
            snprintf(a->error_code, sizeof a->error_code, "%s", data_str(&e, "code"));
        } else {
            a->other++;
        }
        const bool end =
            strcmp(e.type, "error") == 0 || (streaming ? strcmp(e.type, "synthesize-stopped") == 0
                                                       : strcmp(e.type, "audio-stop") == 0);
        wy_event_free(&e);
        if (end) break;
    }
}

static void wy_audio_free(wy_audio *a) { gp_buf_free(&a->pcm); }

/* The next event is an error with `code`, and then the connection closes
 * (`closes`) or answers a ping (it goes on). */
static void expect_error(wy_client *c, const char *code, bool closes) {
    wy_event e;
    REQUIRE(wy_read(c, &e));
    CHECK_MSG(strcmp(e.type, "error") == 0 && strcmp(data_str(&e, "code"), code) == 0,
              "expected error %s, got %s %s: %s", code, e.type, data_str(&e, "code"),
              data_str(&e, "text"));
    CHECK_MSG(strlen(data_str(&e, "text")) > 20, "the error says why: \"%s\"",
              data_str(&e, "text"));
    wy_event_free(&e);
    if (closes) {
        CHECK_MSG(!wy_read(c, &e) && c->eof, "the connection closes after the error");
        wy_event_free(&e);
    } else {
        wy_send(c, "ping", "{\"text\":\"still there?\"}");
        REQUIRE(wy_read(c, &e));
        CHECK_MSG(strcmp(e.type, "pong") == 0 && strcmp(data_str(&e, "text"), "still there?") == 0,
                  "after a non-fatal error a ping gets %s", e.type);
        wy_event_free(&e);
    }
}

/* describe → info with the gepard program, its voices (the directory's and
 * the default; not the OpenAI aliases) and streaming; ping → pong. */
TEST(server_wyoming_describe_and_ping) {
    test_server_opts o = {.wyoming = true};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    REQUIRE(ts.wyoming_port > 0);
    wy_client c;
    REQUIRE(wy_connect(&ts, &c) == 0);
    wy_send(&c, "describe", NULL);
    wy_event e;
    REQUIRE(wy_read(&c, &e));
    CHECK(strcmp(e.type, "info") == 0);
    const cJSON *tts = cJSON_GetObjectItemCaseSensitive(e.data, "tts");
    REQUIRE(cJSON_GetArraySize(tts) == 1);
    const cJSON *p = cJSON_GetArrayItem(tts, 0);
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(p, "name")), "gepard") == 0);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(p, "installed")));
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(p, "supports_synthesize_streaming")));
    CHECK(cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "attribution"), "url")));
    const cJSON *voices = cJSON_GetObjectItem(p, "voices");
    CHECK_EQ_INT(cJSON_GetArraySize(voices), 1);
    const cJSON *v = cJSON_GetArrayItem(voices, 0);
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(v, "name")), "default") == 0);
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetArrayItem(cJSON_GetObjectItem(v, "languages"), 0)),
                 "en") == 0);
    for (const char *k = "asr\0handle\0intent\0wake\0mic\0snd\0"; *k; k += strlen(k) + 1)
        CHECK_MSG(cJSON_IsArray(cJSON_GetObjectItem(e.data, k)), "info has \"%s\"", k);
    wy_event_free(&e);
    wy_send(&c, "ping", "{\"text\":\"abc\"}");
    REQUIRE(wy_read(&c, &e));
    CHECK(strcmp(e.type, "pong") == 0 && strcmp(data_str(&e, "text"), "abc") == 0);
    wy_event_free(&e);
    wy_close(&c);
    test_server_stop(&ts);
}

/* A synthesize gets audio-start, chunks, audio-stop: 16-bit PCM at 22050
 * Hz, byte for byte the samples /v1/audio/speech gives for the same request
 * — with the event's data inline in the header line and split across
 * writes, as a slow client sends it. */
TEST(server_wyoming_synthesize_equals_the_http_route) {
    test_server_opts o = {.wyoming = true};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    char body[512];
    snprintf(body, sizeof body,
             "{\"input\":\"Hello world!\",\"voice\":\"default\",\"response_format\":\"pcm\","
             "\"sample_rate\":22050,\"max_frames\":%d," WY_GREEDY "}",
             FRAMES);
    test_http http = {0};
    test_http_post(&http, test_url(&ts, "/v1/audio/speech"), NULL, body, NULL);
    REQUIRE(http.status == 200);
    wy_client c;
    REQUIRE(wy_connect(&ts, &c) == 0);
    char event[512];
    snprintf(event, sizeof event,
             "{\"type\":\"synthesize\",\"data\":{\"text\":\"Hello world!\",\"voice\":{\"name\":"
             "\"default\"},\"max_frames\":%d," WY_GREEDY "}}\n",
             FRAMES);
    const size_t half = strlen(event) / 2;
    test_tcp_send(c.fd, event, half);
    usleep(50000);
    test_tcp_send(c.fd, event + half, strlen(event) - half);
    wy_audio a;
    wy_collect(&c, false, &a);
    test_note("%d chunks, %zu bytes; HTTP %zu bytes", a.chunks, a.pcm.len, http.body.len);
    CHECK(a.starts == 1 && a.stops == 1 && a.errors == 0 && a.other == 0);
    CHECK(a.ordered && a.format_ok && a.timestamps_ok);
    CHECK_EQ_INT((long)a.pcm.len, FRAMES * 1024L * 2);
    CHECK(a.pcm.len == http.body.len && memcmp(a.pcm.data, http.body.data, a.pcm.len) == 0);
    wy_audio_free(&a);
    test_http_free(&http);
    /* /metrics counts the Wyoming request */
    test_http m = {0};
    test_http_get(&m, test_url(&ts, "/metrics"), NULL);
    CHECK_EQ_INT(
        test_metric(m.body.data, "gepard_http_requests_total{route=\"wyoming\",code=\"200\"}"), 1);
    test_http_free(&m);
    wy_close(&c);
    test_server_stop(&ts);
}

/* Home Assistant's stream: synthesize-start, the text in pieces, the whole
 * text once more as a plain synthesize (for older servers: ignored), then
 * synthesize-stop. The first sentence is spoken as soon as it is whole —
 * before the stream ends — and the stream's audio is one audio-start …
 * audio-stop, then synthesize-stopped. */
TEST(server_wyoming_streams_sentences_as_they_complete) {
    test_server_opts o = {.wyoming = true};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    wy_client c;
    REQUIRE(wy_connect(&ts, &c) == 0);
    char start[256];
    snprintf(start, sizeof start,
             "{\"voice\":{\"name\":\"default\"},\"max_frames\":%d," WY_GREEDY "}", FRAMES);
    wy_send(&c, "synthesize-start", start);
    wy_send(&c, "synthesize-chunk", "{\"text\":\"The first sent\"}");
    wy_send(&c, "synthesize-chunk", "{\"text\":\"ence is here. And the sec\"}");
    /* the first sentence's audio comes while the second is unfinished */
    wy_event e;
    REQUIRE(wy_read(&c, &e));
    CHECK_MSG(strcmp(e.type, "audio-start") == 0, "got %s", e.type);
    wy_event_free(&e);
    REQUIRE(wy_read(&c, &e));
    CHECK_MSG(strcmp(e.type, "audio-chunk") == 0, "got %s", e.type);
    const size_t first = e.payload.len;
    wy_event_free(&e);
    wy_send(&c, "synthesize-chunk", "{\"text\":\"ond one.\"}");
    wy_send(&c, "synthesize",
            "{\"text\":\"The first sentence is here. And the second one.\"}"); /* ignored */
    wy_send(&c, "synthesize-stop", NULL);
    /* the stream's copy as a plain synthesize, late: ignored too (as Piper) */
    wy_send(&c, "synthesize", "{\"text\":\"The first sentence is here. And the second one.\"}");
    wy_audio a;
    wy_collect(&c, true, &a);
    test_note("first chunk %zu bytes, then %d chunks, %zu bytes", first, a.chunks, a.pcm.len);
    CHECK_EQ_INT(a.starts, 0); /* already read */
    CHECK(a.stops == 1 && a.stopped == 1 && a.errors == 0 && a.other == 0 && a.format_ok);
    CHECK_EQ_INT((long)(first + a.pcm.len), 2L * FRAMES * 1024 * 2); /* two sentences */
    wy_audio_free(&a);
    wy_send(&c, "ping", "{\"text\":\"after\"}");
    REQUIRE(wy_read(&c, &e));
    CHECK_MSG(strcmp(e.type, "pong") == 0, "after the stream: %s (the late synthesize spoken?)",
              e.type);
    wy_event_free(&e);
    /* the connection serves another stream, and an empty one says only stopped */
    wy_send(&c, "synthesize-start", NULL);
    wy_send(&c, "synthesize-stop", NULL);
    wy_collect(&c, true, &a);
    CHECK(a.starts == 0 && a.chunks == 0 && a.stops == 0 && a.stopped == 1 && a.errors == 0);
    wy_audio_free(&a);
    wy_close(&c);
    test_server_stop(&ts);
}

/* Two requests written at once on one connection are answered in order,
 * each its own whole audio stream (the second waits for the first). */
TEST(server_wyoming_requests_on_one_connection_in_order) {
    test_server_opts o = {.wyoming = true};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    wy_client c;
    REQUIRE(wy_connect(&ts, &c) == 0);
    char one[256], two[256];
    snprintf(one, sizeof one, "{\"text\":\"One.\",\"max_frames\":%d," WY_GREEDY "}", FRAMES);
    snprintf(two, sizeof two, "{\"text\":\"Two.\",\"max_frames\":%d," WY_GREEDY "}", 2 * FRAMES);
    wy_send(&c, "synthesize", one);
    wy_send(&c, "synthesize", two);
    wy_send(&c, "describe", NULL); /* taken in order: after the first, as the second runs */
    wy_audio a, b;
    wy_collect(&c, false, &a);
    wy_collect(&c, false, &b);
    test_note("first %zu bytes (%d other events), second %zu bytes", a.pcm.len, a.other, b.pcm.len);
    CHECK(a.ordered && b.ordered && a.starts == 1 && b.starts == 1);
    CHECK_EQ_INT((long)a.pcm.len, FRAMES * 1024L * 2);
    CHECK_EQ_INT((long)b.pcm.len, 2L * FRAMES * 1024 * 2);
    CHECK_EQ_INT(a.other + b.other, 1); /* the info, somewhere between */
    wy_audio_free(&a);
    wy_audio_free(&b);
    wy_close(&c);
    test_server_stop(&ts);
}

/* Each wrong input gets an error event that names it: a request that
 * cannot be served closes its connection (the client stops waiting for
 * audio-stop); an event merely out of place leaves it open. */
TEST(server_wyoming_refusals) {
    test_server_opts o = {.wyoming = true};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    static const struct {
        const char *raw; /* written as is */
        const char *code;
        bool closes;
    } cases[] = {
        {"{\"type\":\"synthesize\",\"data\":{\"text\":\"Hi.\",\"voice\":{\"name\":\"nobody\"}}}\n",
         "voice_not_found", true},
        {"{\"type\":\"synthesize\",\"data\":{\"text\":\"  \"}}\n", "empty_text", true},
        {"{\"type\":\"synthesize\",\"data\":{}}\n", "invalid_text", true},
        {"{\"type\":\"synthesize\",\"data\":{\"text\":\"Hi.\",\"temperature\":-1}}\n",
         "invalid_value", true},
        {"{\"type\":\"synthesize\",\"data\":{\"text\":\"Hi.\",\"voice\":\"default\"}}\n",
         "invalid_voice", true},
        {"this is not json\n", "invalid_event", true},
        {"{\"data\":{}}\n", "invalid_event", true},
        {"{\"type\":\"synthesize\",\"data_length\":-3}\n", "invalid_event", true},
        {"{\"type\":\"synthesize\",\"data_length\":4}\nnope", "invalid_event", true},
        {"{\"type\":\"synthesize\",\"data\":{\"text\":\"\xC3\x28\"}}\n", "invalid_event", true},
        {"{\"type\":\"synthesize-chunk\",\"data\":{\"text\":\"Hi.\"}}\n", "no_stream", false},
        {"{\"type\":\"synthesize-stop\"}\n", "no_stream", false},
        {"{\"type\":\"transcribe\",\"data\":{\"language\":\"en\"}}\n", "unsupported_event", false},
        {"{\"type\":\"synthesize-start\"}\n{\"type\":\"synthesize-start\"}\n", "stream_open", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wy_client c;
        REQUIRE(wy_connect(&ts, &c) == 0);
        wy_send_raw(&c, cases[i].raw);
        test_note("case %zu: %s", i, cases[i].code);
        expect_error(&c, cases[i].code, cases[i].closes);
        wy_close(&c);
    }
    /* a header line over 1 MiB, even whole */
    {
        wy_client c;
        REQUIRE(wy_connect(&ts, &c) == 0);
        const size_t n = ((size_t)1 << 20) + 100;
        char *big = malloc(n + 64);
        REQUIRE(big);
        int k = snprintf(big, 64, "{\"type\":\"ping\",\"pad\":\"");
        memset(big + k, 'a', n);
        memcpy(big + k + n, "\"}\n", 4);
        test_tcp_send(c.fd, big, strlen(big));
        free(big);
        expect_error(&c, "invalid_event", true);
        wy_close(&c);
    }
    /* a payload the server has no use for is skipped whole */
    wy_client c;
    REQUIRE(wy_connect(&ts, &c) == 0);
    wy_send_raw(&c, "{\"type\":\"ping\",\"payload_length\":5}\n12345");
    wy_event e;
    REQUIRE(wy_read(&c, &e));
    CHECK(strcmp(e.type, "pong") == 0);
    wy_event_free(&e);
    wy_close(&c);
    test_server_stop(&ts);
}

/* Shutting down with a long synthesis running returns within the drain
 * time and closes the Wyoming connection; new connections are refused. */
TEST(server_wyoming_shutdown_with_a_synthesis_running) {
    test_server_opts o = {.wyoming = true};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    wy_client c;
    REQUIRE(wy_connect(&ts, &c) == 0);
    wy_send(&c, "synthesize", "{\"text\":\"A long one.\",\"max_frames\":4000," WY_GREEDY "}");
    wy_event e;
    REQUIRE(wy_read(&c, &e)); /* audio-start: it runs */
    wy_event_free(&e);
    const double t0 = gp_now_s();
    gp_server_shutdown(ts.server, 0.2);
    const double took = gp_now_s() - t0;
    test_note("shutdown took %.2f s", took);
    CHECK(took < 3.0);
    bool closed = false;
    for (int i = 0; i < 100000 && !closed; i++) {
        closed = !wy_read(&c, &e) && c.eof;
        wy_event_free(&e);
    }
    CHECK_MSG(closed, "the connection is closed");
    CHECK(test_tcp_connect(ts.wyoming_port, 1) < 0);
    wy_close(&c);
    test_server_stop(&ts);
}
