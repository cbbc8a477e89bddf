/* server.c — the libmicrohttpd daemon: routing, the checks every request
 * gets before its body is read (method, authentication, content type, body
 * size), the small GET endpoints, readiness, the frames/s ticker and
 * graceful shutdown (see server.h). The speech routes live in speech.c. */
#include <arpa/inet.h>
#include <malloc.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/timing.h"
#include "io/json.h"
#include "server/server_internal.h"

/* libmicrohttpd's own connection limit: twice ours (it splits its limit
 * evenly between its threads, whose shares of the connections vary) plus
 * room for the connections connections.c has shut down and libmicrohttpd
 * has not closed yet. */
static unsigned mhd_connection_limit(const gp_server_params *p) {
    return (unsigned)p->max_connections * 2 + 64u * (unsigned)p->http_threads;
}

gp_server_params gp_server_default_params(void) {
    gp_server_params p = {
        .host = "127.0.0.1",
        .port = 8080,
        .wyoming_port = -1,
        .api_key = NULL,
        .model_name = "gepard-1.0",
        .max_body_bytes = 16u << 20,
        .max_input_chars = 4096,
        .max_ref_audio_bytes = 10u << 20,
        .max_ref_audio_s = 60,
        .max_frames_limit = 4000,
        .max_batch_items = 16,
        .request_timeout_s = 600,
        .connection_timeout_s = 30,
        .max_connections = 256,
        .max_connections_per_client = 128,
        .receive_timeout_s = 20,
        .http_threads = 0,
        .trim_when_idle = true,
        .word_timestamps = true,
    };
    return p;
}

/* ---- shared state ---- */

bool gp_server_backend_get(gp_server *s, gp_server_backend *out, gp_api_error *e) {
    pthread_mutex_lock(&s->lock);
    bool ok = s->ready && !s->stopping;
    if (ok) *out = s->backend;
    bool stopping = s->stopping;
    pthread_mutex_unlock(&s->lock);
    if (!ok) {
        gp_http_fail(e, 503, NULL, stopping ? "shutting_down" : "not_ready",
                     stopping ? "the server is shutting down" : "the model is still loading");
        e->retry_after_s = stopping ? 0 : 5;
    }
    return ok;
}

void gp_server_job_register(gp_server *s, gp_speech_job *j) {
    pthread_mutex_lock(&s->lock);
    j->next = s->jobs;
    s->jobs = j;
    s->n_jobs++;
    if (s->stopped) gepard_stream_cancel(j->stream); /* raced with the shutdown */
    pthread_mutex_unlock(&s->lock);
}

void gp_server_job_orphan(gp_server *s, gp_speech_job *j) {
    pthread_mutex_lock(&s->lock);
    j->next_orphan = s->orphans;
    s->orphans = j;
    pthread_mutex_unlock(&s->lock);
}

void gp_server_job_unregister(gp_server *s, gp_speech_job *j) {
    pthread_mutex_lock(&s->lock);
    for (gp_speech_job **link = &s->jobs; *link; link = &(*link)->next)
        if (*link == j) {
            *link = j->next;
            s->n_jobs--;
            break;
        }
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
}

/* ---- routing ---- */

static gp_route route_of(const char *url) {
    static const struct {
        const char *path;
        gp_route route;
    } routes[] = {{"/v1/audio/speech", GP_ROUTE_SPEECH},
                  {"/v1/audio/speech/batch", GP_ROUTE_SPEECH_BATCH},
                  {"/v1/audio/voices", GP_ROUTE_VOICES},
                  {"/v1/models", GP_ROUTE_MODELS},
                  {"/health", GP_ROUTE_HEALTH},
                  {"/ready", GP_ROUTE_READY},
                  {"/metrics", GP_ROUTE_METRICS},
                  {"/", GP_ROUTE_PLAYGROUND},
                  {"/index.html", GP_ROUTE_PLAYGROUND},
                  {"/tts/bytes", GP_ROUTE_TTS_BYTES},
                  {"/tts/sse", GP_ROUTE_TTS_SSE},
                  {"/voices", GP_ROUTE_CARTESIA_VOICES},
                  {"/tts/websocket", GP_ROUTE_TTS_WEBSOCKET}};
    size_t len = strcspn(url, "?");
    while (len > 1 && url[len - 1] == '/') len--; /* "/v1/models/" too */
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (strlen(routes[i].path) == len && strncmp(url, routes[i].path, len) == 0)
            return routes[i].route;
    return GP_ROUTE_OTHER;
}

/* "/v1/models/{id}" and "/voices/{id}": the models or Cartesia's voices
 * route with the id kept in the request. */
static void route_resource_id(gp_http_request *r, const char *url) {
    static const struct {
        const char *prefix;
        gp_route route;
    } prefixes[] = {{"/v1/models/", GP_ROUTE_MODELS}, {"/voices/", GP_ROUTE_CARTESIA_VOICES}};
    for (size_t k = 0; k < sizeof prefixes / sizeof prefixes[0]; k++) {
        size_t n = strlen(prefixes[k].prefix);
        if (r->route != GP_ROUTE_OTHER || strncmp(url, prefixes[k].prefix, n) != 0) continue;
        size_t len = strcspn(url + n, "?");
        while (len > 0 && url[n + len - 1] == '/') len--;
        if (len == 0 || memchr(url + n, '/', len)) return;
        r->route = prefixes[k].route;
        if (len >= sizeof r->model_id) {
            r->model_id_too_long = true;
            len = sizeof r->model_id - 1;
        }
        memcpy(r->model_id, url + n, len);
        r->model_id[len] = '\0';
        return;
    }
}

/* A client's X-Request-Id is echoed if it is 1-64 characters of
 * [A-Za-z0-9._:-]; otherwise (and without one) the server makes one:
 * "req_" and 24 hex digits, a random 64-bit start plus a counter. */
static void set_request_id(gp_http_request *r) {
    const char *id = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, "X-Request-Id");
    size_t n = id ? strlen(id) : 0;
    bool sane = n > 0 && n < sizeof r->request_id;
    for (size_t i = 0; sane && i < n; i++)
        sane = (id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
               (id[i] >= '0' && id[i] <= '9') || strchr("._:-", id[i]) != NULL;
    if (sane) {
        memcpy(r->request_id, id, n + 1);
        return;
    }
    gp_server *s = r->server;
    uint64_t k = __atomic_add_fetch(&s->request_count, 1, __ATOMIC_RELAXED);
    snprintf(r->request_id, sizeof r->request_id, "req_%08llx%016llx",
             (unsigned long long)((s->request_id_seed * 0x9E3779B97F4A7C15ull) >> 32),
             (unsigned long long)(s->request_id_seed + k));
}

/* The Access-Control-Allow-Origin this request gets: its Origin if allowed
 * (or "*" when any is), else nothing. */
static void set_cors_origin(gp_http_request *r) {
    const gp_server *s = r->server;
    if (s->n_cors_origins == 0) return;
    const char *origin = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, "Origin");
    if (!origin || strlen(origin) >= sizeof r->cors_origin) return;
    for (int i = 0; i < s->n_cors_origins; i++) {
        if (strcmp(s->cors_origins[i], "*") == 0) {
            snprintf(r->cors_origin, sizeof r->cors_origin, "*");
            return;
        }
        if (strcasecmp(s->cors_origins[i], origin) == 0) {
            snprintf(r->cors_origin, sizeof r->cors_origin, "%s", origin);
            return;
        }
    }
}

/* Split the comma list of --cors-origin into s->cors_origins. */
static int parse_cors_origins(gp_server *s, const char *list, gp_error *err) {
    for (const char *p = list; p && *p;) {
        size_t n = strcspn(p, ",");
        const char *q = p;
        p += n + (p[n] == ',');
        while (n > 0 && (*q == ' ' || *q == '\t')) q++, n--;
        while (n > 0 && (q[n - 1] == ' ' || q[n - 1] == '\t' || q[n - 1] == '/')) n--;
        if (n == 0) continue;
        bool ok = n < 256 && (strncmp(q, "*", n) == 0 || strncmp(q, "http://", 7) == 0 ||
                              strncmp(q, "https://", 8) == 0);
        for (size_t i = 0; ok && i < n; i++) ok = q[i] > 0x20 && q[i] < 0x7f;
        if (!ok)
            return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                           "--cors-origin \"%.*s\" is not an origin; give scheme://host[:port] "
                           "as the browser sends it (https://app.example.com), or * for any",
                           (int)(n < 200 ? n : 200), q);
        char **list2 = realloc(s->cors_origins, (size_t)(s->n_cors_origins + 1) * sizeof *list2);
        if (!list2) return gp_fail_oom(err, "--cors-origin", 0);
        s->cors_origins = list2;
        if (!(list2[s->n_cors_origins] = strndup(q, n)))
            return gp_fail_oom(err, "--cors-origin", n);
        s->n_cors_origins++;
    }
    return GEPARD_OK;
}

/* Checks made when the headers are in, before any body is read. Returns
 * false after queueing an error response. */
static bool check_request_head(gp_http_request *r, enum MHD_Result *ret) {
    gp_api_error e;
    gp_server *s = r->server;
    bool bad = false;
    if (r->is_options && s->n_cors_origins > 0 && r->route != GP_ROUTE_OTHER) {
        *ret = gp_http_send_preflight(r); /* no key: browsers send none with a preflight */
        return false;
    }
    if (r->route == GP_ROUTE_OTHER) {
        bad = true;
        gp_http_fail(&e, 404, NULL, "not_found",
                     "no such endpoint; see /v1/audio/speech, /v1/audio/voices, /v1/models, "
                     "/tts/bytes, /tts/sse, /voices, /v1/text-to-speech/{voice_id}, /v1/voices, "
                     "/health, /ready, /metrics");
    } else if (gp_route_synthesizes(r->route) ? !r->is_post : !r->is_get) {
        bad = true;
        gp_http_fail(&e, 405, NULL, "method_not_allowed", "this endpoint only accepts %s",
                     gp_route_synthesizes(r->route) ? "POST" : "GET");
    } else if ((gp_route_synthesizes(r->route) || r->route == GP_ROUTE_VOICES ||
                r->route == GP_ROUTE_MODELS || r->route == GP_ROUTE_CARTESIA_VOICES ||
                r->route == GP_ROUTE_ELEVENLABS_VOICES || r->route == GP_ROUTE_TTS_WEBSOCKET) &&
               !gp_http_authorized(r)) {
        bad = true;
        gp_http_fail(&e, 401, NULL, "invalid_api_key",
                     "missing or wrong API key; send \"Authorization: Bearer <key>\" (or "
                     "\"X-API-Key: <key>\", or ElevenLabs' \"xi-api-key: <key>\")");
    } else if (r->is_post) {
        const char *type = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND,
                                                       MHD_HTTP_HEADER_CONTENT_TYPE);
        const char *length = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND,
                                                         MHD_HTTP_HEADER_CONTENT_LENGTH);
        size_t n = strlen("application/json");
        if (!type || strncasecmp(type, "application/json", n) != 0 ||
            (type[n] != '\0' && type[n] != ';' && type[n] != ' ')) {
            bad = true;
            gp_http_fail(&e, 415, NULL, "unsupported_media_type",
                         "send the request as JSON with \"Content-Type: application/json\"");
        } else if (length && strtoull(length, NULL, 10) > s->params.max_body_bytes) {
            bad = true;
            gp_http_fail(&e, 413, NULL, "request_too_large",
                         "the request body is larger than the server's limit of %zu bytes",
                         s->params.max_body_bytes);
        }
    }
    if (bad) *ret = gp_http_send_error(r, &e);
    return !bad;
}

static enum MHD_Result send_text(gp_http_request *r, int status, const char *type,
                                 const char *text) {
    gp_buf b;
    gp_buf_init(&b);
    if (gp_buf_append_str(&b, text)) return MHD_NO;
    return gp_http_send(r, status, type, &b);
}

static int append_model(gp_buf *b, const gp_server *s, const char *id) {
    int rc = gp_buf_append_str(b, "{\"id\":");
    rc |= gp_json_append_string(b, id);
    return rc | gp_buf_printf(b, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"gepard\"}",
                              s->created);
}

/* GET /v1/models: the served name and every alias ("created": the server's
 * start); GET /v1/models/{id}: any name a request may use, or 404. */
static enum MHD_Result handle_models(gp_http_request *r) {
    const gp_server *s = r->server;
    gp_buf b;
    gp_buf_init(&b);
    int rc = 0;
    if (r->model_id[0]) {
        if (r->model_id_too_long || !gp_model_name_accepted(s, r->model_id)) {
            gp_api_error e;
            gp_http_fail(&e, 404, "model", "model_not_found",
                         "The model '%.100s' does not exist; this server serves \"%s\" (see "
                         "GET /v1/models for its aliases)",
                         r->model_id, s->model_name);
            return gp_http_send_error(r, &e);
        }
        rc = append_model(&b, s, r->model_id) | gp_buf_append_str(&b, "\n");
    } else {
        rc = gp_buf_append_str(&b, "{\"object\":\"list\",\"data\":[");
        rc |= append_model(&b, s, s->model_name);
        for (int i = 0; i < GP_MODEL_ALIAS_COUNT; i++)
            if (strcmp(gp_model_aliases[i], s->model_name) != 0)
                rc |= gp_buf_append_str(&b, ",") | append_model(&b, s, gp_model_aliases[i]);
        rc |= gp_buf_append_str(&b, "]}\n");
    }
    if (rc) {
        gp_buf_free(&b);
        return MHD_NO;
    }
    return gp_http_send_json(r, 200, &b);
}

static enum MHD_Result handle_get(gp_http_request *r) {
    gp_server *s = r->server;
    gp_server_backend b;
    gp_api_error e;
    gp_buf out;
    gp_buf_init(&out);
    switch (r->route) {
    case GP_ROUTE_HEALTH: return send_text(r, 200, "application/json", "{\"status\":\"ok\"}\n");
    case GP_ROUTE_READY:
        if (!gp_server_backend_get(s, &b, &e)) {
            e.retry_after_s = 0;
            return gp_http_send_error(r, &e);
        }
        return send_text(r, 200, "application/json", "{\"status\":\"ready\"}\n");
    case GP_ROUTE_MODELS: return handle_models(r);
    case GP_ROUTE_VOICES:
        if (!gp_server_backend_get(s, &b, &e)) return gp_http_send_error(r, &e);
        if (gp_voices_append_listing(b.voices, &out) || gp_buf_append_str(&out, "\n")) break;
        return gp_http_send_json(r, 200, &out);
    case GP_ROUTE_METRICS: {
        pthread_mutex_lock(&s->lock);
        b = s->backend; /* the engine lives until gp_server_shutdown returns */
        bool ready = s->ready;
        pthread_mutex_unlock(&s->lock);
        if (gp_metrics_render(s->metrics, ready ? b.engine : NULL, b.max_streams, b.max_queue,
                              gp_conn_open_count(s), &out))
            break;
        return gp_http_send(r, 200, "text/plain; version=0.0.4; charset=utf-8", &out);
    }
    case GP_ROUTE_PLAYGROUND: return gp_handle_playground(r);
    case GP_ROUTE_CARTESIA_VOICES: return gp_handle_cartesia_voices(r);
    case GP_ROUTE_ELEVENLABS_VOICES: return gp_handle_elevenlabs_voices(r);
    case GP_ROUTE_ELEVENLABS_WEBSOCKET: return gp_handle_elevenlabs_websocket(r);
    case GP_ROUTE_TTS_WEBSOCKET: return gp_handle_tts_websocket(r);
    default: break;
    }
    gp_buf_free(&out);
    return MHD_NO;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    (void)version;
    gp_server *s = cls;
    gp_http_request *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        *con_cls = r;
        r->server = s;
        r->connection = connection;
        r->route = route_of(url);
        route_resource_id(r, url);
        if (r->route == GP_ROUTE_OTHER) gp_elevenlabs_route(r, url);
        set_request_id(r);
        r->is_options = strcmp(method, "OPTIONS") == 0;
        gp_access_entry_begin(&r->log, r->request_id, method, r->route);
        set_cors_origin(r);
        r->is_get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
        r->is_post = strcmp(method, "POST") == 0;
        gp_buf_init(&r->body);
        const char *length = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                         MHD_HTTP_HEADER_CONTENT_LENGTH);
        unsigned long long body = length ? strtoull(length, NULL, 10) : 0;
        gp_conn_headers_received(
            s, connection,
            body < s->params.max_body_bytes ? body : (unsigned long long)s->params.max_body_bytes);
        enum MHD_Result ret = MHD_YES;
        if (!check_request_head(r, &ret)) return ret;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (r->responded || r->body_too_large) return MHD_YES;
        if (r->body.len + n > s->params.max_body_bytes || gp_buf_append(&r->body, upload_data, n)) {
            r->body_too_large = true;
            gp_buf_free(&r->body);
        }
        return MHD_YES;
    }
    gp_conn_request_received(s, connection); /* the last call: the whole request is in */
    if (r->responded) return MHD_YES;
    if (r->body_too_large) {
        gp_api_error e;
        gp_http_fail(&e, 413, NULL, "request_too_large",
                     "the request body is larger than the server's limit of %zu bytes",
                     s->params.max_body_bytes);
        return gp_http_send_error(r, &e);
    }
    if (r->route == GP_ROUTE_SPEECH) return gp_handle_speech(r);
    if (r->route == GP_ROUTE_SPEECH_BATCH) return gp_handle_speech_batch(r);
    if (r->route == GP_ROUTE_TTS_BYTES || r->route == GP_ROUTE_TTS_SSE) return gp_handle_tts(r);
    if (r->route == GP_ROUTE_ELEVENLABS_TTS) return gp_handle_elevenlabs_tts(r);
    return handle_get(r);
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    gp_server *s = cls;
    (void)toe;
    gp_http_request *r = *con_cls;
    /* an upgraded socket is the WebSocket thread's: no next request to wait for */
    if (!r || !r->upgraded) gp_conn_response_done(s, connection);
    if (!r) return;
    if (gp_route_synthesizes(r->route)) /* back to idle */
        MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT,
                                  (unsigned)s->params.connection_timeout_s);
    gp_speech_pending_free(r);
    if (!r->log_by_job) gp_access_log_write(s, &r->log);
    gp_buf_free(&r->body);
    free(r->upgrade);
    free(r);
    *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    GP_INFO("http: %s", line);
}

/* Every 100 ms: close connections past their receive deadline, resume
 * suspended connections whose client left or whose deadline passed, free
 * orphaned jobs, trim the heap when idle; once a second: sample the
 * engine's frame counter for frames/s. */
/* Once the engine has been idle (no stream, no request job) for a second
 * after some work, give the freed heap back to the system: the allocator
 * keeps what requests freed — per-stream buffers, encoders, connection
 * state, spread over its arenas — and the resident size otherwise only
 * grows to the high-water mark of each arena (see docs/SERVER.md, "Memory"). */
static void trim_when_idle(gp_server *s, const gepard_engine_stats *st, double now) {
    bool idle = st->active_streams == 0 && st->queued_streams == 0;
    pthread_mutex_lock(&s->lock);
    idle = idle && s->n_jobs == 0 && !s->orphans;
    pthread_mutex_unlock(&s->lock);
    if (!idle || st->streams_started != s->trim_seen_streams) {
        s->trim_seen_streams = st->streams_started;
        s->idle_since = now;
        s->trim_pending = true; /* work since the last look */
        return;
    }
    if (s->trim_pending && now - s->idle_since >= 1.0) {
        s->trim_pending = false;
#ifdef __GLIBC__
        malloc_trim(0);
#endif
    }
}

static void *ticker_main(void *arg) {
    gp_server *s = arg;
    double last = 0;
    pthread_mutex_lock(&s->lock);
    while (!s->stopped) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long ns = ts.tv_nsec + 100000000L;
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&s->changed, &s->lock, &ts);
        if (s->stopped) break;
        bool ready = s->ready;
        gepard_engine *engine = s->backend.engine;
        pthread_mutex_unlock(&s->lock);
        double now = gp_now_s();
        gp_conn_reap(s, now);
        gp_wake_check(s, now);
        gp_job_reap(s, false);
        if (ready) {
            gepard_engine_stats st;
            gepard_engine_get_stats(engine, &st);
            if (s->params.trim_when_idle) trim_when_idle(s, &st, now);
            if (now - last >= 0.999) {
                last = now;
                gp_metrics_sample_frames(s->metrics, now, st.frames);
            }
        }
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- life cycle ---- */

int gp_server_resolve_host(const char *host, int port, struct sockaddr_storage *addr,
                           socklen_t *addr_len, bool *ipv6, gp_error *err) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0 || !res)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "cannot use the address \"%s\": %s", host,
                       gai_strerror(rc));
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    if (addr_len) *addr_len = res->ai_addrlen;
    *ipv6 = res->ai_family == AF_INET6;
    freeaddrinfo(res);
    return GEPARD_OK;
}

/* libmicrohttpd's accept policy: once shutdown has begun, a new connection
 * is closed at once, so the drain only waits for the streams it had. */
static enum MHD_Result accept_unless_stopping(void *cls, const struct sockaddr *addr,
                                              socklen_t addrlen) {
    (void)addr;
    (void)addrlen;
    gp_server *s = cls;
    pthread_mutex_lock(&s->lock);
    bool stopping = s->stopping;
    pthread_mutex_unlock(&s->lock);
    return stopping ? MHD_NO : MHD_YES;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

int gp_server_start(const gp_server_params *params, gp_server **out, gp_error *err) {
    *out = NULL;
    gp_server *s = calloc(1, sizeof *s);
    if (!s) return gp_fail_oom(err, "server", sizeof *s);
    s->params = params ? *params : gp_server_default_params();
    if (s->params.max_batch_items < 1) s->params.max_batch_items = 1;
    if (s->params.max_batch_items > GP_SERVER_MAX_BATCH)
        s->params.max_batch_items = GP_SERVER_MAX_BATCH;
    if (s->params.max_frames_limit < 1) s->params.max_frames_limit = 1;
    if (s->params.max_connections < 1) s->params.max_connections = 1;
    if (s->params.max_connections_per_client < 0) s->params.max_connections_per_client = 0;
    if (!(s->params.receive_timeout_s > 0)) s->params.receive_timeout_s = 20;
    if (s->params.http_threads < 1) { /* audio encoding runs on them: one per CPU, at least 4 */
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        s->params.http_threads = cpus < 4 ? 4 : cpus > 64 ? 64 : (int)cpus;
    }
    if (s->params.http_threads > 256) s->params.http_threads = 256;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->conn_lock, NULL);
    pthread_mutex_init(&s->wake_lock, NULL);
    pthread_cond_init(&s->voice_cond, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->changed, &attr);
    pthread_condattr_destroy(&attr);
    s->host = strdup(s->params.host ? s->params.host : "127.0.0.1");
    s->api_key = dup_or_null(s->params.api_key);
    s->model_name = strdup(s->params.model_name ? s->params.model_name : "gepard-1.0");
    s->created = (long long)time(NULL);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    s->request_id_seed = ((uint64_t)now.tv_nsec << 32) ^ (uint64_t)now.tv_sec ^
                         ((uint64_t)getpid() << 16) ^ (uint64_t)(uintptr_t)s;
    s->params.host = s->host;
    s->params.api_key = s->api_key;
    s->params.model_name = s->model_name;
    struct sockaddr_storage addr;
    bool ipv6 = false;
    int rc = GEPARD_OK;
    if (!s->host || !s->model_name || (params && params->api_key && !s->api_key) ||
        gp_metrics_create(&s->metrics))
        rc = gp_fail_oom(err, "server", 0);
    if (!rc) rc = parse_cors_origins(s, s->params.cors_origins, err);
    if (!rc) rc = gp_access_log_open(s, err);
    s->params.access_log_file = NULL; /* the caller's string */
    s->params.cors_origins = NULL;    /* the caller's string; s->cors_origins has copies */
    if (!rc) rc = gp_server_resolve_host(s->host, s->params.port, &addr, NULL, &ipv6, err);
    if (!rc) {
        /* A few threads over epoll serve every connection; nothing blocks on
         * them: waiting connections are suspended (wake.c). */
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                         MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG |
                         (ipv6 ? MHD_USE_IPv6 : 0);
        s->daemon = MHD_start_daemon(
            flags, (uint16_t)s->params.port, accept_unless_stopping, s, on_request, s,
            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_THREAD_POOL_SIZE,
            (unsigned)s->params.http_threads, MHD_OPTION_CONNECTION_LIMIT,
            /* our limits (connections.c) make room by closing idle connections;
             * libmicrohttpd's own (split between its threads) refuses only
             * beyond, while those close */
            mhd_connection_limit(&s->params), MHD_OPTION_NOTIFY_CONNECTION, gp_conn_notify, s,
            MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024, MHD_OPTION_CONNECTION_TIMEOUT,
            (unsigned)s->params.connection_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
            (size_t)128 * 1024, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
            MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s, MHD_OPTION_END);
        if (!s->daemon)
            rc = gp_fail(err, GEPARD_ERR_IO,
                         "cannot listen on %s port %d — is the port in use or the address not "
                         "on this machine?",
                         s->host, s->params.port);
    }
    if (!rc) {
        const union MHD_DaemonInfo *info =
            MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
        s->port = info ? info->port : s->params.port;
        s->wyoming_port = -1;
        if (pthread_create(&s->ticker, NULL, ticker_main, s) != 0)
            rc = gp_fail(err, GEPARD_ERR_INTERNAL, "cannot start the metrics thread");
        else
            s->ticker_started = true;
    }
    if (!rc && s->params.wyoming_port >= 0) {
        int fd = -1, bound = -1;
        rc = gp_wy_listen(s->host, s->params.wyoming_port, &fd, &bound, err);
        if (!rc && gp_ws_hub_listen(s, fd)) {
            close(fd);
            rc = gp_fail(err, GEPARD_ERR_INTERNAL, "cannot start the Wyoming thread");
        }
        if (!rc) s->wyoming_port = bound;
    }
    if (!rc && gp_voice_worker_start(s) != 0)
        rc = gp_fail(err, GEPARD_ERR_INTERNAL, "cannot start the voice thread");
    if (rc) {
        gp_server_free(s);
        return rc;
    }
    *out = s;
    return GEPARD_OK;
}

int gp_server_port(const gp_server *s) { return s->port; }

int gp_server_wyoming_port(const gp_server *s) { return s->wyoming_port; }

int gp_server_open_connections(gp_server *s) { return gp_conn_open_count(s); }

void gp_server_set_backend(gp_server *s, const gp_server_backend *b) {
    pthread_mutex_lock(&s->lock);
    s->backend = *b;
    s->ready = true;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
}

/* Wait (lock held) until no job is left or `until` (monotonic seconds). */
static void wait_jobs_locked(gp_server *s, double until) {
    while (s->n_jobs > 0 && gp_now_s() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long ns = ts.tv_nsec + 100000000L;
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&s->changed, &s->lock, &ts);
    }
}

void gp_server_shutdown(gp_server *s, double drain_s) {
    pthread_mutex_lock(&s->lock);
    if (s->stopped || !s->daemon) {
        pthread_mutex_unlock(&s->lock);
        return;
    }
    s->stopping = true;
    pthread_mutex_unlock(&s->lock);
    /* No new connections from here on: accept_unless_stopping closes them.
     * (Not MHD_quiesce_daemon: with epoll and a thread pool, libmicrohttpd
     * 0.9.75 removes the listening socket from each worker's epoll set in
     * two threads at once and aborts the process when it loses that race —
     * "Failed to remove listen FD from epoll set", seen in CI.) */
    gp_ws_hub_drain_begin(s); /* WebSockets: no new generations */
    const double drain_until = gp_now_s() + (drain_s > 0 ? drain_s : 0);
    pthread_mutex_lock(&s->lock);
    if (s->n_jobs > 0) GP_INFO("waiting up to %.0f s for %d streams", drain_s, s->n_jobs);
    wait_jobs_locked(s, drain_until);
    if (s->n_jobs > 0) GP_WARN("cancelling %d unfinished streams", s->n_jobs);
    s->stopped = true;
    for (gp_speech_job *j = s->jobs; j; j = j->next) gepard_stream_cancel(j->stream);
    pthread_cond_broadcast(&s->changed);
    wait_jobs_locked(s, gp_now_s() + 5); /* cancelled streams end at the next step */
    pthread_mutex_unlock(&s->lock);
    if (s->ticker_started) pthread_join(s->ticker, NULL);
    s->ticker_started = false;
    gp_ws_hub_drain_wait(s, drain_until);
    gp_ws_hub_stop(s);       /* before libmicrohttpd: it must not stop with upgraded sockets */
    gp_voice_worker_stop(s); /* requests still waiting for a voice get 503 */
    /* libmicrohttpd must not be stopped with suspended connections: resume
     * them until none suspends again (their streams are cancelled by now). */
    for (double until = gp_now_s() + 5; gp_wake_resume_all(s) > 0 && gp_now_s() < until;)
        usleep(10000);
    MHD_stop_daemon(s->daemon); /* closes connections; joins its threads */
    gp_job_reap(s, true);       /* streams of the last connections closed */
    s->daemon = NULL;
}

void gp_server_free(gp_server *s) {
    if (!s) return;
    if (s->daemon) gp_server_shutdown(s, 0);
    if (s->ticker_started) {
        pthread_mutex_lock(&s->lock);
        s->stopped = true;
        pthread_cond_broadcast(&s->changed);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->ticker, NULL);
    }
    gp_voice_worker_stop(s);
    gp_conn_free_all(s);
    gp_metrics_free(s->metrics);
    pthread_mutex_destroy(&s->conn_lock);
    pthread_mutex_destroy(&s->wake_lock);
    pthread_cond_destroy(&s->voice_cond);
    pthread_cond_destroy(&s->changed);
    pthread_mutex_destroy(&s->lock);
    free(s->host);
    free(s->api_key);
    free(s->model_name);
    gp_access_log_close(s);
    for (int i = 0; i < s->n_cors_origins; i++) free(s->cors_origins[i]);
    free(s->cors_origins);
    free(s);
}
