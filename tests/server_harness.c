/* server_harness.c — the in-process server and libcurl clients of the
 * server tests (see server_harness.h). */
#include "server_harness.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/timing.h"
#include "io/audio_file.h"
#include "test.h"

int test_server_start(test_server *ts, const test_server_opts *o) {
    memset(ts, 0, sizeof *ts);
    test_server_opts none;
    memset(&none, 0, sizeof none);
    if (!o) o = &none;
    gp_error err;
    gp_error_clear(&err);
    if (gepard_model_load(TS_MODEL, NULL, &ts->model) != GEPARD_OK ||
        gepard_codec_load(TS_CODEC, &ts->codec) != GEPARD_OK) {
        test_fail(__FILE__, __LINE__, "loading the fixtures: %s", gepard_last_error());
        return -1;
    }
    if (gp_voices_load(ts->model, ts->codec, o->voices_dir, &ts->voices, &err)) {
        test_fail(__FILE__, __LINE__, "voices: %s", err.message);
        return -1;
    }
    gepard_engine_params ep = gepard_engine_default_params();
    ep.threads = 1;
    if (o->max_streams) ep.max_streams = o->max_streams;
    if (o->max_queue) ep.max_queue = o->max_queue < 0 ? 0 : o->max_queue;
    if (gepard_engine_create(ts->model, ts->codec, &ep, &ts->engine) != GEPARD_OK) {
        test_fail(__FILE__, __LINE__, "engine: %s", gepard_last_error());
        return -1;
    }
    gp_server_params sp = gp_server_default_params();
    sp.port = 0;
    sp.api_key = o->api_key;
    if (o->max_body_bytes) sp.max_body_bytes = o->max_body_bytes;
    if (o->request_timeout_s > 0) sp.request_timeout_s = o->request_timeout_s;
    if (o->connection_timeout_s > 0) sp.connection_timeout_s = o->connection_timeout_s;
    if (o->max_connections > 0) sp.max_connections = o->max_connections;
    if (o->max_connections_per_client)
        sp.max_connections_per_client =
            o->max_connections_per_client < 0 ? 0 : o->max_connections_per_client;
    if (o->receive_timeout_s > 0) sp.receive_timeout_s = o->receive_timeout_s;
    sp.cors_origins = o->cors_origins;
    sp.word_timestamps = !o->no_word_timestamps;
    sp.access_log = o->access_log;
    sp.access_log_file = o->access_log_file;
    sp.wyoming_port = o->wyoming ? 0 : -1;
    if (gp_server_start(&sp, &ts->server, &err)) {
        test_fail(__FILE__, __LINE__, "server: %s", err.message);
        return -1;
    }
    gp_server_backend b = {ts->model,  ts->codec,      ts->engine,
                           ts->voices, ep.max_streams, ep.max_queue};
    gp_server_set_backend(ts->server, &b);
    ts->port = gp_server_port(ts->server);
    ts->wyoming_port = gp_server_wyoming_port(ts->server);
    snprintf(ts->base, sizeof ts->base, "http://127.0.0.1:%d", ts->port);
    return 0;
}

char *test_url(const test_server *ts, const char *path) {
    static __thread char bufs[8][256];
    static __thread int next;
    char *b = bufs[next++ % 8];
    snprintf(b, 256, "%s%s", ts->base, path);
    return b;
}

void test_server_stop(test_server *ts) {
    if (ts->server) gp_server_shutdown(ts->server, 5); /* let finished responses be freed */
    gp_server_free(ts->server);
    gepard_engine_free(ts->engine);
    gp_voices_free(ts->voices);
    gepard_codec_free(ts->codec);
    gepard_model_free(ts->model);
    memset(ts, 0, sizeof *ts);
}

void test_server_stats(test_server *ts, gepard_engine_stats *st) {
    gepard_engine_get_stats(ts->engine, st);
}

static size_t on_body(char *data, size_t size, size_t n, void *user) {
    test_http *h = user;
    size_t len = size * n;
    if (!h->first_seen && len > 0) {
        h->first_seen = true;
        h->t_first_body = gp_now_s();
        if (h->watch) {
            gepard_engine_stats st;
            test_server_stats(h->watch, &st);
            h->active_at_first_body = st.active_streams;
        }
    }
    gp_buf_append(&h->body, data, len);
    if (atomic_load(&h->hang_up)) return 0;
    return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *user) {
    test_http *h = user;
    gp_buf_append(&h->headers, data, size * n);
    return size * n;
}

static int perform(test_http *h, const char *url, const char *content_type, const char *body,
                   const char *auth) {
    CURL *c = curl_easy_init();
    if (!c) return -1;
    struct curl_slist *hdrs = NULL;
    char line[512];
    if (body) {
        snprintf(line, sizeof line, "Content-Type: %s",
                 content_type ? content_type : "application/json");
        hdrs = curl_slist_append(hdrs, line);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    if (auth) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", auth);
        hdrs = curl_slist_append(hdrs, line);
    }
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, h);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, h->timeout_ms > 0 ? h->timeout_ms : 60000L);
    h->t_start = gp_now_s();
    CURLcode rc = curl_easy_perform(c);
    h->t_end = gp_now_s();
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &h->status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    h->curl_code = (int)rc;
    return (int)rc;
}

int test_http_post(test_http *h, const char *url, const char *content_type, const char *body,
                   const char *auth) {
    return perform(h, url, content_type, body ? body : "", auth);
}

int test_http_get(test_http *h, const char *url, const char *auth) {
    return perform(h, url, NULL, NULL, auth);
}

const char *test_http_header(const test_http *h, const char *name) {
    static char value[256];
    size_t n = strlen(name);
    for (const char *p = h->headers.data; p && *p;) {
        const char *end = strstr(p, "\r\n");
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > n && strncasecmp(p, name, n) == 0 && p[n] == ':') {
            const char *v = p + n + 1;
            while (*v == ' ') v++;
            size_t vl = len - (size_t)(v - p);
            if (vl >= sizeof value) vl = sizeof value - 1;
            memcpy(value, v, vl);
            value[vl] = '\0';
            return value;
        }
        p = end ? end + 2 : NULL;
    }
    return NULL;
}

void test_http_free(test_http *h) {
    gp_buf_free(&h->body);
    gp_buf_free(&h->headers);
    free(h->post_body);
    h->post_body = NULL;
}

static void *async_main(void *arg) {
    test_http *h = arg;
    perform(h, h->url, NULL, h->post_body, h->auth[0] ? h->auth : NULL);
    return NULL;
}

int test_http_post_async(test_http *h, const char *url, const char *body) {
    snprintf(h->url, sizeof h->url, "%s", url);
    h->post_body = strdup(body);
    return pthread_create(&h->thread, NULL, async_main, h);
}

void test_http_join(test_http *h) { pthread_join(h->thread, NULL); }

int test_tcp_connect(int port, double timeout_s) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct timeval tv = {.tv_sec = (time_t)timeout_s,
                         .tv_usec = (suseconds_t)((timeout_s - (double)(time_t)timeout_s) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int test_tcp_send(int fd, const char *data, size_t len) {
    while (len > 0) {
        ssize_t k = send(fd, data, len, MSG_NOSIGNAL);
        if (k <= 0) return -1;
        data += k;
        len -= (size_t)k;
    }
    return 0;
}

int test_tcp_read_head(int fd, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
    while (len + 1 < cap && !strstr(buf, "\r\n\r\n")) {
        ssize_t k = recv(fd, buf + len, 1, 0); /* byte by byte: leave the body unread */
        if (k <= 0) break;
        len += (size_t)k;
        buf[len] = '\0';
    }
    int status = -1;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) return -1;
    return status;
}

double test_metric(const char *text, const char *name) {
    size_t n = strlen(name);
    for (const char *p = text; p && *p;) {
        if (strncmp(p, name, n) == 0 && p[n] == ' ') return atof(p + n + 1);
        const char *nl = strchr(p, '\n');
        p = nl ? nl + 1 : NULL;
    }
    return -1;
}

void test_write_reference_wav(const char *path) {
    const int rate = 44100, n = rate * 3;
    float *x = malloc((size_t)n * 2 * sizeof(float));
    unsigned s = 1;
    for (int i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        float noise = ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.05f;
        x[2 * i] = 0.4f * sinf(2 * (float)M_PI * 220 * (float)i / rate) + noise;
        x[2 * i + 1] = 0.3f * sinf(2 * (float)M_PI * 330 * (float)i / rate) - noise;
    }
    gp_error err;
    if (gp_audio_write_wav(path, x, (size_t)n, 2, rate, false, &err))
        test_fail(__FILE__, __LINE__, "%s", err.message);
    free(x);
}
