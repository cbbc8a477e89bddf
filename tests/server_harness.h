/* server_harness.h — what the server tests share: an in-process `gepard
 * serve` on the tiny fixtures (ephemeral loopback port), and small libcurl
 * clients — blocking requests that record when the first body bytes came,
 * and background requests (a thread each) that can hang up early. */
#ifndef GEPARD_TEST_SERVER_HARNESS_H
#define GEPARD_TEST_SERVER_HARNESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "gepard.h"
#include "server/server.h"

#define TS_MODEL test_fixture("model-tiny/model")
#define TS_CODEC test_fixture("codec-tiny/nano-tiny.nemo")
/* Deterministic generation on the tiny random model (its stop head fires at
 * once at the default threshold): greedy, fixed length. */
#define TS_GREEDY "\"top_k\":1,\"seed\":5,\"stop_threshold\":2"

typedef struct test_server_opts {
    int max_streams, max_queue; /* 0: 16 / 64; max_queue -1: no queue */
    const char *voices_dir;
    const char *api_key;
    size_t max_body_bytes;          /* 0: default */
    double request_timeout_s;       /* 0: default */
    int connection_timeout_s;       /* 0: default */
    int max_connections;            /* 0: default */
    int max_connections_per_client; /* 0: default, -1: none */
    double receive_timeout_s;       /* 0: default */
    const char *cors_origins;       /* NULL: no CORS */
    int access_log;                 /* gp_access_log_mode; 0: off */
    const char *access_log_file;    /* NULL: standard error */
    bool no_word_timestamps;        /* --no-word-timestamps */
    bool wyoming;                   /* a Wyoming port too (any free one) */
} test_server_opts;

typedef struct test_server {
    gepard_model *model;
    gepard_codec *codec;
    gepard_engine *engine;
    gp_voices *voices;
    gp_server *server;
    int port;
    int wyoming_port; /* -1: none */
    char base[64];    /* http://127.0.0.1:PORT */
} test_server;

/* Returns 0, or -1 after reporting why through test_fail. */
int test_server_start(test_server *ts, const test_server_opts *opts);
/* The server's base URL + path, in one of 8 rotating static buffers (so a
 * call may use a few at once). */
char *test_url(const test_server *ts, const char *path);
void test_server_stop(test_server *ts);
void test_server_stats(test_server *ts, gepard_engine_stats *st);

typedef struct test_http {
    long status;
    gp_buf body;
    gp_buf headers;
    double t_start, t_first_body, t_end;
    int curl_code; /* CURLE_* */
    /* on the first body bytes: the engine's state (when `watch` is set) */
    test_server *watch;
    int active_at_first_body;
    /* background requests */
    atomic_int hang_up; /* set by the test: hang up at the next body bytes */
    long timeout_ms;
    pthread_t thread;
    char url[256], *post_body, auth[256];
    bool first_seen;
} test_http;

/* Blocking requests; `auth` is the bearer key or NULL; `content_type` NULL
 * means application/json. Return the curl code (0 = transfer completed). */
int test_http_post(test_http *h, const char *url, const char *content_type, const char *body,
                   const char *auth);
int test_http_get(test_http *h, const char *url, const char *auth);
/* A header's value (static buffer) or NULL. */
const char *test_http_header(const test_http *h, const char *name);
void test_http_free(test_http *h);

/* Background POST of JSON; join with test_http_join. */
int test_http_post_async(test_http *h, const char *url, const char *body);
void test_http_join(test_http *h);

/* Raw loopback TCP, for what libcurl will not do (a burst written all at
 * once, idle or trickling clients). test_tcp_connect returns a blocking
 * socket connected to 127.0.0.1:port whose reads and writes give up after
 * timeout_s, or -1. */
int test_tcp_connect(int port, double timeout_s);
/* Send all of `data`; 0, or -1 on an error or timeout. */
int test_tcp_send(int fd, const char *data, size_t len);
/* Read a response head (up to the blank line, at most cap-1 bytes) into
 * buf; returns the HTTP status, or -1 if none came. */
int test_tcp_read_head(int fd, char *buf, size_t cap);

/* A Prometheus sample's value from /metrics text ("name" or "name{...}"); -1 if absent. */
double test_metric(const char *text, const char *name);

/* A 3 s, 44.1 kHz stereo "recording" (two tones and a little noise). */
void test_write_reference_wav(const char *path);

#endif
