/* test_server_openai.c — what OpenAI's clients expect of `gepard serve`
 * beyond the speech itself (issue 13): the newer voice names, dated model
 * snapshots, GET /v1/models/{id}, the models' `created`, x-request-id on
 * every response, the voice object and JSON error messages, CORS, the
 * access log, and the length of a whole FLAC file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/json.h"
#include "server_harness.h"
#include "test.h"

/* POST a short pcm request with `fields` added; returns the HTTP status and
 * leaves the response in *h. */
static long speak(test_server *ts, const char *fields, test_http *h) {
    char body[512];
    snprintf(body, sizeof body,
             "{\"input\":\"Hi\",\"response_format\":\"pcm\",\"max_frames\":2," TS_GREEDY ",%s}",
             fields);
    *h = (test_http){0};
    test_http_post(h, test_url(ts, "/v1/audio/speech"), NULL, body, NULL);
    return h->status;
}

/* The error code of an OpenAI-shaped error body, or "". */
static const char *error_code(const test_http *h) {
    static char code[64];
    code[0] = '\0';
    cJSON *j = h->body.data ? cJSON_Parse(h->body.data) : NULL;
    const char *c =
        cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "code"));
    if (c) snprintf(code, sizeof code, "%s", c);
    cJSON_Delete(j);
    return code;
}

TEST(server_openai_voice_and_model_names) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    const char *ok[] = {"\"voice\":\"marin\"",
                        "\"voice\":\"cedar\"",
                        "\"model\":\"gpt-4o-mini-tts-2025-12-15\"",
                        "\"model\":\"tts-1-hd-1106\"",
                        "\"model\":\"tts-1-1106\"",
                        "\"model\":\"gepard\""};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        test_http h;
        long st = speak(&ts, ok[i], &h);
        CHECK_MSG(st == 200, "%s: HTTP %ld %s", ok[i], st, h.body.data);
        test_http_free(&h);
    }
    const char *bad[] = {"\"model\":\"tts-1-20251215\"", "\"model\":\"gpt-4o-mini-tts-2025-12\"",
                         "\"model\":\"gepard-2025-12-15\"", "\"model\":\"tts-1-hd-11o6\"",
                         "\"model\":\"tts-2\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        test_http h;
        long st = speak(&ts, bad[i], &h);
        CHECK_MSG(st == 400 && strcmp(error_code(&h), "model_not_found") == 0, "%s: HTTP %ld %s",
                  bad[i], st, h.body.data);
        test_http_free(&h);
    }
    test_http h = {0};
    CHECK_EQ_INT(test_http_get(&h, test_url(&ts, "/v1/audio/voices"), NULL), 0);
    CHECK(h.body.data && strstr(h.body.data, "\"marin\"") && strstr(h.body.data, "\"cedar\""));
    test_http_free(&h);
    test_server_stop(&ts);
}

TEST(server_models_list_and_retrieve) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    long long now = (long long)time(NULL);
    test_http h = {0};
    CHECK_EQ_INT(test_http_get(&h, test_url(&ts, "/v1/models"), NULL), 0);
    CHECK_EQ_INT(h.status, 200);
    cJSON *j = h.body.data ? cJSON_Parse(h.body.data) : NULL;
    cJSON *data = cJSON_GetObjectItem(j, "data");
    const char *want[] = {"gepard-1.0", "gepard", "tts-1", "tts-1-hd", "gpt-4o-mini-tts"};
    CHECK_EQ_INT(cJSON_GetArraySize(data), 5);
    for (size_t i = 0; i < 5; i++) {
        bool found = false;
        for (int k = 0; k < cJSON_GetArraySize(data); k++) {
            cJSON *m = cJSON_GetArrayItem(data, k);
            const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(m, "id"));
            if (!id || strcmp(id, want[i]) != 0) continue;
            found = true;
            double created = cJSON_GetObjectItem(m, "created")->valuedouble;
            /* the server's start, a moment ago */
            CHECK_MSG(created >= now - 600 && created <= now + 1, "%s: created %.0f, now %lld", id,
                      created, now);
        }
        CHECK_MSG(found, "/v1/models lacks %s", want[i]);
    }
    cJSON_Delete(j);
    test_http_free(&h);

    const char *ids[] = {"tts-1", "gpt-4o-mini-tts-2025-12-15", "gepard-1.0", "tts-1-hd/"};
    for (size_t i = 0; i < 4; i++) {
        char path[128];
        snprintf(path, sizeof path, "/v1/models/%s", ids[i]);
        h = (test_http){0};
        CHECK_EQ_INT(test_http_get(&h, test_url(&ts, path), NULL), 0);
        CHECK_MSG(h.status == 200, "%s: HTTP %ld %s", path, h.status, h.body.data);
        j = h.body.data ? cJSON_Parse(h.body.data) : NULL;
        const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(j, "id"));
        const char *obj = cJSON_GetStringValue(cJSON_GetObjectItem(j, "object"));
        CHECK_MSG(id && strncmp(id, ids[i], strcspn(ids[i], "/")) == 0 &&
                      strlen(id) == strcspn(ids[i], "/"),
                  "%s: id %s", path, id ? id : "-");
        CHECK(obj && strcmp(obj, "model") == 0);
        CHECK(cJSON_GetObjectItem(j, "created")->valuedouble >= now - 600);
        cJSON_Delete(j);
        test_http_free(&h);
    }
    const char *unknown[] = {"/v1/models/whisper-1", "/v1/models/tts-1-20251"};
    for (size_t i = 0; i < 2; i++) {
        h = (test_http){0};
        CHECK_EQ_INT(test_http_get(&h, test_url(&ts, unknown[i]), NULL), 0);
        CHECK_MSG(h.status == 404 && strcmp(error_code(&h), "model_not_found") == 0,
                  "%s: HTTP %ld %s", unknown[i], h.status, h.body.data);
        const char *type = test_http_header(&h, "Content-Type");
        CHECK(type && strcmp(type, "application/json") == 0);
        test_http_free(&h);
    }
    test_server_stop(&ts);
}

/* A raw GET with extra header lines; the response head in `head`. */
static int raw_get(test_server *ts, const char *path, const char *headers, char *head, size_t cap) {
    int fd = test_tcp_connect(ts->port, 10);
    if (fd < 0) return -1;
    char req[1024];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sConnection: close\r\n\r\n",
             path, headers);
    int st = test_tcp_send(fd, req, strlen(req)) == 0 ? test_tcp_read_head(fd, head, cap) : -1;
    close(fd);
    return st;
}

/* A header's value from a raw head (static buffer), or NULL. */
static const char *head_value(const char *head, const char *name) {
    static char v[256];
    size_t n = strlen(name);
    for (const char *p = strstr(head, "\r\n"); p; p = strstr(p + 2, "\r\n")) {
        if (strncasecmp(p + 2, name, n) == 0 && p[2 + n] == ':') {
            const char *s = p + 3 + n;
            while (*s == ' ') s++;
            size_t len = strcspn(s, "\r\n");
            if (len >= sizeof v) len = sizeof v - 1;
            memcpy(v, s, len);
            v[len] = '\0';
            return v;
        }
    }
    return NULL;
}

TEST(server_every_response_has_a_request_id) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    char seen[4][80] = {{0}};
    const char *paths[] = {"/health", "/health", "/nope", "/v1/models/nope"};
    long statuses[] = {200, 200, 404, 404};
    for (int i = 0; i < 4; i++) {
        test_http h = {0};
        CHECK_EQ_INT(test_http_get(&h, test_url(&ts, paths[i]), NULL), 0);
        CHECK_EQ_INT(h.status, statuses[i]);
        const char *id = test_http_header(&h, "x-request-id");
        CHECK_MSG(id && strncmp(id, "req_", 4) == 0 && strlen(id) == 28, "%s: x-request-id %s",
                  paths[i], id ? id : "(none)");
        snprintf(seen[i], sizeof seen[i], "%s", id ? id : "");
        for (int k = 0; k < i; k++)
            CHECK_MSG(strcmp(seen[k], seen[i]) != 0, "id %s twice", seen[i]);
        test_http_free(&h);
    }
    test_http h;
    CHECK_EQ_INT(speak(&ts, "\"voice\":\"alloy\"", &h), 200); /* a streamed response too */
    const char *id = test_http_header(&h, "x-request-id");
    CHECK(id && strncmp(id, "req_", 4) == 0);
    test_http_free(&h);

    char head[4096];
    CHECK_EQ_INT(raw_get(&ts, "/health", "X-Request-Id: client-42.a:b_c\r\n", head, sizeof head),
                 200);
    const char *echo = head_value(head, "x-request-id");
    CHECK_MSG(echo && strcmp(echo, "client-42.a:b_c") == 0, "echo: %s", echo ? echo : "(none)");
    const char *insane[] = {"X-Request-Id: two words\r\n", "X-Request-Id: <script>\r\n",
                            "X-Request-Id: "
                            "0123456789012345678901234567890123456789012345678901234567890123456789"
                            "\r\n"};
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(raw_get(&ts, "/health", insane[i], head, sizeof head), 200);
        const char *v = head_value(head, "x-request-id");
        CHECK_MSG(v && strncmp(v, "req_", 4) == 0, "%s → %s", insane[i], v ? v : "(none)");
    }
    test_server_stop(&ts);
}

/* POST `body` as is; the status, and the error message in `msg`. */
static long post_raw(test_server *ts, const char *body, size_t len, char *msg, size_t cap) {
    char *copy = malloc(len + 1);
    memcpy(copy, body, len);
    copy[len] = '\0';
    test_http h = {0};
    /* the harness sends strlen(body) bytes: a raw NUL goes through test_tcp */
    test_http_post(&h, test_url(ts, "/v1/audio/speech"), NULL, copy, NULL);
    free(copy);
    long st = h.status;
    msg[0] = '\0';
    cJSON *j = h.body.data ? cJSON_Parse(h.body.data) : NULL;
    const char *m =
        cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "message"));
    snprintf(msg, cap, "%s", m ? m : (h.body.data ? h.body.data : ""));
    cJSON_Delete(j);
    test_http_free(&h);
    return st;
}

TEST(server_voice_objects_nul_and_json_errors) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    struct {
        const char *fields;
        long status;
        const char *needle; /* in the error message */
    } cases[] = {
        {"\"voice\":{\"id\":\"alloy\"}", 200, NULL},
        {"\"voice\":{\"id\":\"cedar\"}", 200, NULL},
        {"\"voice\":{}", 400, "without \"id\""},
        {"\"voice\":{\"name\":\"alloy\"}", 400, "\"name\""},
        {"\"voice\":{\"id\":\"alloy\",\"name\":\"x\"}", 400, "\"name\""},
        {"\"voice\":{\"id\":7}", 400, "voice must be a voice name"},
        {"\"voice\":\"al\\u0000loy\"", 400, "NUL"},
        {"\"voice\":\"alloy\",\"instructions\":\"a\\u0000\"", 400, "NUL"},
        {"\"voice\":\"alloy\",\"instructions\":\"\\\\u0000 is fine escaped\"", 200, NULL},
        {"\"voice\":\"alloy\",\"instructions\":\"x\\ud800y\"", 400, "lone UTF-16 surrogate"},
        {"\"voice\":\"alloy\",\"instructions\":\"x\\udc00\"", 400, "lone UTF-16 surrogate"},
        {"\"voice\":\"alloy\",\"instructions\":\"x\\ud800\\u0041\"", 400, "lone UTF-16 surrogate"},
        {"\"voice\":\"alloy\",\"instructions\":\"\\ud83d\\ude00\"", 200, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512], msg[512];
        snprintf(body, sizeof body,
                 "{\"input\":\"Hi\",\"response_format\":\"pcm\",\"max_frames\":2," TS_GREEDY ",%s}",
                 cases[i].fields);
        long st = post_raw(&ts, body, strlen(body), msg, sizeof msg);
        CHECK_MSG(st == cases[i].status && (!cases[i].needle || strstr(msg, cases[i].needle)),
                  "%s: HTTP %ld %s", cases[i].fields, st, msg);
        if (cases[i].needle) test_note("%s → %s", cases[i].fields, msg);
    }
    /* nested past cJSON's limit of 1000 */
    gp_buf deep;
    gp_buf_init(&deep);
    gp_buf_append_str(&deep, "{\"input\":\"Hi\",\"x\":");
    for (int i = 0; i < 1100; i++) gp_buf_append_str(&deep, "[");
    for (int i = 0; i < 1100; i++) gp_buf_append_str(&deep, "]");
    gp_buf_append_str(&deep, "}");
    char msg[512];
    long st = post_raw(&ts, deep.data, deep.len, msg, sizeof msg);
    CHECK_MSG(st == 400 && strstr(msg, "nested deeper than 1000"), "deep: HTTP %ld %s", st, msg);
    test_note("deep → %s", msg);
    gp_buf_free(&deep);
    /* a raw NUL byte in a string */
    int fd = test_tcp_connect(ts.port, 10);
    REQUIRE(fd >= 0);
    const char raw[] = "{\"input\":\"Hi\",\"voice\":\"al\0loy\"}";
    char req[512], head[2048];
    int n = snprintf(req, sizeof req,
                     "POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                     sizeof raw - 1);
    memcpy(req + n, raw, sizeof raw - 1);
    CHECK_EQ_INT(test_tcp_send(fd, req, (size_t)n + sizeof raw - 1), 0);
    CHECK_EQ_INT(test_tcp_read_head(fd, head, sizeof head), 400);
    close(fd);
    test_server_stop(&ts);
}

/* A raw request with `method` and extra header lines; the response head. */
static int raw_request(test_server *ts, const char *method, const char *path, const char *headers,
                       char *head, size_t cap) {
    int fd = test_tcp_connect(ts->port, 10);
    if (fd < 0) return -1;
    char req[2048];
    snprintf(req, sizeof req,
             "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Length: 0\r\nConnection: "
             "close\r\n\r\n",
             method, path, headers);
    int st = test_tcp_send(fd, req, strlen(req)) == 0 ? test_tcp_read_head(fd, head, cap) : -1;
    close(fd);
    return st;
}

TEST(server_cors_origins) {
    char head[4096];
    const char *preflight = "Origin: https://app.example\r\nAccess-Control-Request-Method: "
                            "POST\r\nAccess-Control-Request-Headers: authorization, "
                            "content-type, x-stainless-os\r\n";
    /* off by default: OPTIONS is 405 and no response allows an origin */
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    CHECK_EQ_INT(raw_request(&ts, "OPTIONS", "/v1/audio/speech", preflight, head, sizeof head),
                 405);
    CHECK_EQ_INT(raw_get(&ts, "/health", "Origin: https://app.example\r\n", head, sizeof head),
                 200);
    CHECK(head_value(head, "Access-Control-Allow-Origin") == NULL);
    test_server_stop(&ts);

    test_server_opts o = {0};
    o.cors_origins = "https://app.example, http://localhost:5173/";
    o.api_key = "k";
    REQUIRE(test_server_start(&ts, &o) == 0);
    const char *paths[] = {"/v1/audio/speech", "/v1/models", "/v1/models/tts-1",
                           "/v1/audio/voices"};
    for (int i = 0; i < 4; i++) {
        /* a preflight needs no key */
        CHECK_EQ_INT(raw_request(&ts, "OPTIONS", paths[i], preflight, head, sizeof head), 204);
        const char *v = head_value(head, "Access-Control-Allow-Origin");
        CHECK_MSG(v && strcmp(v, "https://app.example") == 0, "%s: %s", paths[i], v ? v : "-");
        v = head_value(head, "Access-Control-Allow-Methods");
        CHECK(v && strstr(v, "POST") && strstr(v, "GET"));
        v = head_value(head, "Access-Control-Allow-Headers");
        CHECK_MSG(v && strstr(v, "authorization") && strstr(v, "x-stainless-os"), "%s",
                  v ? v : "-");
        CHECK(head_value(head, "x-request-id") != NULL);
    }
    CHECK_EQ_INT(raw_request(&ts, "OPTIONS", "/nope", preflight, head, sizeof head), 404);
    /* the second origin (configured with a trailing slash) */
    CHECK_EQ_INT(raw_get(&ts, "/v1/models",
                         "Origin: http://localhost:5173\r\nAuthorization: Bearer k\r\n", head,
                         sizeof head),
                 200);
    const char *v = head_value(head, "Access-Control-Allow-Origin");
    CHECK_MSG(v && strcmp(v, "http://localhost:5173") == 0, "%s", v ? v : "-");
    v = head_value(head, "Access-Control-Expose-Headers");
    CHECK(v && strstr(v, "x-request-id") && strstr(v, "X-Sample-Rate"));
    CHECK(head_value(head, "Vary") != NULL);
    /* errors carry it too, so the page can read them */
    CHECK_EQ_INT(raw_get(&ts, "/v1/models", "Origin: https://app.example\r\n", head, sizeof head),
                 401);
    v = head_value(head, "Access-Control-Allow-Origin");
    CHECK(v && strcmp(v, "https://app.example") == 0);
    /* another origin: answered, but not allowed */
    CHECK_EQ_INT(raw_request(&ts, "OPTIONS", "/v1/audio/speech",
                             "Origin: https://evil.example\r\nAccess-Control-Request-Method: "
                             "POST\r\n",
                             head, sizeof head),
                 204);
    CHECK(head_value(head, "Access-Control-Allow-Origin") == NULL);
    test_server_stop(&ts);

    o = (test_server_opts){0};
    o.cors_origins = "*";
    REQUIRE(test_server_start(&ts, &o) == 0);
    CHECK_EQ_INT(raw_get(&ts, "/health", "Origin: https://any.example\r\n", head, sizeof head),
                 200);
    v = head_value(head, "Access-Control-Allow-Origin");
    CHECK(v && strcmp(v, "*") == 0);
    test_server_stop(&ts);

    o.cors_origins = "app.example";
    gp_server_params sp = gp_server_default_params();
    sp.port = 0;
    sp.cors_origins = o.cors_origins;
    gp_server *s = NULL;
    gp_error err;
    gp_error_clear(&err);
    CHECK(gp_server_start(&sp, &s, &err) != 0 && strstr(err.message, "not an origin"));
    test_note("%s", err.message);
    gp_server_free(s);
}

/* The whole of a small text file (caller frees), or NULL. */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    gp_buf b;
    gp_buf_init(&b);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) gp_buf_append(&b, chunk, n);
    fclose(f);
    gp_buf_append(&b, "", 1);
    size_t len;
    return gp_buf_detach(&b, &len);
}

/* The line of the access log whose request_id is `id` (JSON), or NULL. */
static cJSON *log_line(const char *text, const char *id) {
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        cJSON *j = cJSON_ParseWithLength(p, len);
        const char *rid = cJSON_GetStringValue(cJSON_GetObjectItem(j, "request_id"));
        if (rid && strcmp(rid, id) == 0) return j;
        cJSON_Delete(j);
        p = nl ? nl + 1 : NULL;
    }
    return NULL;
}

TEST(server_access_log_json_and_plain) {
    const char *path = test_tmp("access.jsonl");
    unlink(path);
    test_server_opts o = {0};
    o.access_log = GP_ACCESS_LOG_JSON;
    o.access_log_file = path;
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    struct {
        const char *method, *path, *body, *id;
        long status;
        const char *route, *voice;
        long frames; /* -1: null */
    } cases[] = {
        {"POST", "/v1/audio/speech",
         "{\"input\":\"Hi\",\"voice\":\"cedar\",\"response_format\":\"pcm\",\"max_frames\":"
         "20," TS_GREEDY "}",
         "log-stream", 200, "speech", "cedar", 20},
        {"POST", "/v1/audio/speech",
         "{\"input\":\"Hi\",\"voice\":\"alloy\",\"stream\":false,\"response_format\":\"wav\","
         "\"max_frames\":7," TS_GREEDY "}",
         "log-whole", 200, "speech", "alloy", 7},
        {"POST", "/v1/audio/speech/batch",
         "{\"input\":\"Hi\",\"voices\":[\"ash\",\"marin\"],\"max_frames\":5," TS_GREEDY "}",
         "log-batch", 200, "speech_batch", "ash", 10},
        {"POST", "/v1/audio/speech", "{\"input\":\"Hi\",\"voice\":\"nobody\"}", "log-400", 400,
         "speech", NULL, -1},
        {"GET", "/health", NULL, "log-health", 200, "health", NULL, -1},
        {"GET", "/nope", NULL, "log-404", 404, "other", NULL, -1},
    };
    int n_cases = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n_cases; i++) {
        char head[4096], req[2048];
        int fd = test_tcp_connect(ts.port, 30);
        REQUIRE(fd >= 0);
        size_t blen = cases[i].body ? strlen(cases[i].body) : 0;
        snprintf(req, sizeof req,
                 "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-Id: %s\r\nContent-Type: "
                 "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                 cases[i].method, cases[i].path, cases[i].id, blen,
                 cases[i].body ? cases[i].body : "");
        CHECK_EQ_INT(test_tcp_send(fd, req, strlen(req)), 0);
        CHECK_EQ_INT(test_tcp_read_head(fd, head, sizeof head), cases[i].status);
        char sink[4096];
        while (read(fd, sink, sizeof sink) > 0) { /* the body, to the end */
        }
        close(fd);
    }
    test_server_stop(&ts); /* every stream freed: every line written */
    char *text = slurp(path);
    REQUIRE_MSG(text, "no access log at %s", path);
    int lines = 0;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    CHECK_EQ_INT(lines, n_cases);
    for (int i = 0; i < n_cases; i++) {
        cJSON *j = log_line(text, cases[i].id);
        CHECK_MSG(j, "no line for %s in:\n%s", cases[i].id, text);
        if (!j) continue;
        const char *route = cJSON_GetStringValue(cJSON_GetObjectItem(j, "route"));
        const char *method = cJSON_GetStringValue(cJSON_GetObjectItem(j, "method"));
        const char *voice = cJSON_GetStringValue(cJSON_GetObjectItem(j, "voice"));
        cJSON *frames = cJSON_GetObjectItem(j, "frames"), *ttfa = cJSON_GetObjectItem(j, "ttfa_ms");
        CHECK_EQ_INT(cJSON_GetObjectItem(j, "status")->valueint, cases[i].status);
        CHECK_MSG(route && strcmp(route, cases[i].route) == 0, "%s: route %s", cases[i].id,
                  route ? route : "-");
        CHECK(method && strcmp(method, cases[i].method) == 0);
        CHECK_MSG(cases[i].voice ? voice && strcmp(voice, cases[i].voice) == 0 : voice == NULL,
                  "%s: voice %s", cases[i].id, voice ? voice : "null");
        if (cases[i].frames >= 0) {
            CHECK_MSG(cJSON_IsNumber(frames) && frames->valueint == cases[i].frames,
                      "%s: frames %d", cases[i].id, cJSON_IsNumber(frames) ? frames->valueint : -1);
            CHECK(cJSON_IsNumber(ttfa) && ttfa->valuedouble > 0);
        } else {
            CHECK(cJSON_IsNull(frames) && cJSON_IsNull(ttfa));
        }
        CHECK(cJSON_GetObjectItem(j, "duration_ms")->valuedouble >= 0);
        CHECK(cJSON_IsFalse(cJSON_GetObjectItem(j, "disconnected")));
        CHECK(strlen(cJSON_GetStringValue(cJSON_GetObjectItem(j, "time"))) == 24);
        cJSON_Delete(j);
    }
    test_note("%s", text);
    free(text);

    /* plain, appended to the same file */
    o.access_log = GP_ACCESS_LOG_PLAIN;
    REQUIRE(test_server_start(&ts, &o) == 0);
    test_http h;
    CHECK_EQ_INT(speak(&ts, "\"voice\":\"marin\"", &h), 200);
    char id[80];
    snprintf(id, sizeof id, "%s", test_http_header(&h, "x-request-id"));
    test_http_free(&h);
    test_server_stop(&ts);
    text = slurp(path);
    REQUIRE(text);
    const char *line = strstr(text, id);
    const char *want = " POST speech 200 voice=marin frames=2 ttfa_ms=";
    CHECK_MSG(line && strncmp(line + strlen(id), want, strlen(want)) == 0, "plain line: %s",
              line ? line : text);
    free(text);
    /* off: nothing written */
    o.access_log = GP_ACCESS_LOG_OFF;
    unlink(path);
    REQUIRE(test_server_start(&ts, &o) == 0);
    CHECK_EQ_INT(speak(&ts, "\"voice\":\"marin\"", &h), 200);
    test_http_free(&h);
    test_server_stop(&ts);
    CHECK(access(path, F_OK) != 0);
}

/* The 36-bit sample count in a FLAC stream's STREAMINFO, or -1. */
static long long flac_total_samples(const test_http *h, int *rate) {
    const unsigned char *p = (const unsigned char *)h->body.data;
    if (!p || h->body.len < 42 || memcmp(p, "fLaC", 4) != 0) return -1;
    const unsigned char *si = p + 8;
    *rate = (si[10] << 12) | (si[11] << 4) | (si[12] >> 4);
    return ((long long)(si[13] & 0x0F) << 32) | ((long long)si[14] << 24) | (si[15] << 16) |
           (si[16] << 8) | si[17];
}

TEST(server_whole_flac_has_its_length) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    struct {
        const char *fields;
        long long samples; /* -1: about 20 * 1024 * 24000 / 22050 */
        int rate;
    } cases[] = {
        {"\"stream\":false", 20 * 1024, 22050},
        {"\"stream\":false,\"sample_rate\":24000", -1, 24000},
        {"\"stream\":true", 0, 22050}, /* streamed: 0, "unknown" (it cannot seek back) */
    };
    for (int i = 0; i < 3; i++) {
        char body[512];
        snprintf(
            body, sizeof body,
            "{\"input\":\"Hello world!\",\"response_format\":\"flac\",\"max_frames\":20," TS_GREEDY
            ",%s}",
            cases[i].fields);
        test_http h = {0};
        CHECK_EQ_INT(test_http_post(&h, test_url(&ts, "/v1/audio/speech"), NULL, body, NULL), 0);
        CHECK_EQ_INT(h.status, 200);
        int rate = 0;
        long long n = flac_total_samples(&h, &rate);
        test_note("%s: STREAMINFO says %lld samples at %d Hz", cases[i].fields, n, rate);
        CHECK_EQ_INT(rate, cases[i].rate);
        if (cases[i].samples >= 0)
            CHECK_EQ_INT(n, cases[i].samples);
        else
            CHECK(llabs(n - (long long)(20 * 1024 * 24000.0 / 22050)) <= 1);
        test_http_free(&h);
    }
    test_server_stop(&ts);
}

/* A --voices directory that is not there is reported at once, before the
 * model loads (here the model does not exist either: its error must not be
 * the one reported). */
TEST(server_cli_checks_the_voices_directory_first) {
    const char *args[] = {"serve",
                          "--model",
                          "/nonexistent/gepard-model",
                          "--codec",
                          "/nonexistent/codec.nemo",
                          "--voices",
                          "/nonexistent/voices",
                          "--port",
                          "0",
                          NULL};
    test_cmd_result r;
    REQUIRE(test_run_gepard(&r, NULL, 0, 30, args) == 0);
    test_note("%s", r.err);
    CHECK(r.status != 0);
    CHECK_MSG(r.err && strstr(r.err, "/nonexistent/voices: the voices directory does not exist"),
              "%s", r.err);
    CHECK(r.err && !strstr(r.err, "listening")); /* nothing started */
    test_cmd_result_free(&r);
}

/* Out-of-range numbers for the options this work added are refused before
 * anything loads: serve --realtime-margin / --warm-up, loadtest --duration /
 * --sample, bench --frames-per-call. */
TEST(server_cli_refuses_bad_margin_and_soak_options) {
    const char *margin[] = {"serve", "--model", "/nonexistent/m", "--realtime-margin", "-1", NULL};
    const char *duration[] = {"loadtest", "--duration", "-5", NULL};
    const char *sample[] = {"loadtest", "--duration", "1", "--sample", "x", NULL};
    const char *warm[] = {"serve", "--model", "/nonexistent/m", "--warm-up", "-1", NULL};
    const char *per_call[] = {
        "bench", "--codec", "/nonexistent/c", "--codec-only", "--frames-per-call", "0", NULL};
    const struct {
        const char *const *args;
        const char *want;
    } cases[] = {{margin, "realtime-margin"},
                 {duration, "duration"},
                 {sample, "sample"},
                 {warm, "warm-up"},
                 {per_call, "frames-per-call"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_cmd_result r;
        REQUIRE(test_run_gepard(&r, NULL, 0, 30, cases[i].args) == 0);
        test_note("%s", r.err);
        CHECK_MSG(r.status == 2 && r.err && strstr(r.err, cases[i].want) && r.out_len == 0,
                  "%s: exit %d, %s", cases[i].want, r.status, r.err);
        test_cmd_result_free(&r);
    }
}

/* `gepard serve` with one voice says "1 voice" (it said "1 voices"). */
TEST(server_cli_ready_line_counts_voices) {
    char voices[1024], cmd[4096];
    snprintf(voices, sizeof voices, "%s/voices", test_tmpdir());
    REQUIRE(mkdir(voices, 0755) == 0);
    char wav[1100];
    snprintf(wav, sizeof wav, "%s/solo.wav", voices);
    test_write_reference_wav(wav);
    const char *bin = getenv("GEPARD_BIN");
    if (!bin || !*bin) bin = "build/asan/gepard";
    /* start it, wait for the ready line (at most 100 s), stop it */
    snprintf(cmd, sizeof cmd,
             "'%s' serve --model '%s' --codec '%s' --voices '%s' --port 0 2>'%s/err' & pid=$!; "
             "i=0; while [ $i -lt 500 ] && ! grep -q 'ready' '%s/err'; do sleep 0.2; "
             "i=$((i+1)); done; kill $pid; wait $pid; cat '%s/err' >&2",
             bin, test_fixture("model-tiny/model"), test_fixture("codec-tiny/nano-tiny.nemo"),
             voices, test_tmpdir(), test_tmpdir(), test_tmpdir());
    const char *argv[] = {"sh", "-c", cmd, NULL};
    test_cmd_result r;
    REQUIRE(test_run_program(&r, NULL, 0, 150, argv) == 0);
    test_note("%s", r.err);
    CHECK_MSG(r.err && strstr(r.err, "ready (1 voice from"), "%s", r.err);
    CHECK(r.err && !strstr(r.err, "1 voices"));
    test_cmd_result_free(&r);
}
