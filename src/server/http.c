/* http.c — response helpers over libmicrohttpd: JSON bodies, OpenAI-shaped
 * errors with the headers they need (Retry-After, WWW-Authenticate), bearer
 * authentication, and the socket check that notices a client has gone. */
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "io/json.h"
#include "server/server_internal.h"

int gp_http_fail(gp_api_error *e, int status, const char *param, const char *code, const char *fmt,
                 ...) {
    e->status = status;
    e->type = status == 401   ? "authentication_error"
              : status == 429 ? "rate_limit_error"
              : status >= 500 ? "server_error"
                              : "invalid_request_error";
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    e->retry_after_s = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

void gp_api_error_from_status(gp_api_error *e, gepard_status st, const char *message) {
    switch (st) {
    case GEPARD_ERR_BUSY:
        gp_http_fail(e, 429, NULL, "server_busy", "%s", message);
        e->retry_after_s = 1;
        break;
    case GEPARD_ERR_INVALID_ARGUMENT:
        gp_http_fail(e, 400, NULL, "invalid_value", "%s", message);
        break;
    case GEPARD_ERR_UNSUPPORTED: gp_http_fail(e, 400, NULL, "unsupported", "%s", message); break;
    case GEPARD_ERR_FORMAT: gp_http_fail(e, 400, NULL, "invalid_audio", "%s", message); break;
    case GEPARD_ERR_NOMEM: gp_http_fail(e, 503, NULL, "out_of_memory", "%s", message); break;
    default: gp_http_fail(e, 500, NULL, "internal_error", "%s", message); break;
    }
}

enum MHD_Result gp_http_send_response(gp_http_request *r, int status,
                                      struct MHD_Response *response) {
    if (!response) return MHD_NO;
    r->responded = true;
    if (r->request_id[0]) MHD_add_response_header(response, "x-request-id", r->request_id);
    if (r->cors_origin[0]) {
        MHD_add_response_header(response, "Access-Control-Allow-Origin", r->cors_origin);
        MHD_add_response_header(response, "Access-Control-Expose-Headers",
                                "x-request-id, X-Sample-Rate, X-Channels, X-Bit-Depth, "
                                "X-Audio-Format, X-Voice, Retry-After");
        if (strcmp(r->cors_origin, "*") != 0) MHD_add_response_header(response, "Vary", "Origin");
    }
    gp_metrics_count_request(r->server->metrics, r->route, status);
    r->log.status = status;
    enum MHD_Result ret = MHD_queue_response(r->connection, (unsigned)status, response);
    MHD_destroy_response(response);
    return ret;
}

/* Build a response owning `body`'s memory (the buffer is reset). */
static struct MHD_Response *response_from_buf(gp_buf *body) {
    size_t len = 0;
    char *data = body ? gp_buf_detach(body, &len) : NULL;
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, data ? data : (void *)"", data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) free(data);
    return resp;
}

enum MHD_Result gp_http_send(gp_http_request *r, int status, const char *content_type,
                             gp_buf *body) {
    struct MHD_Response *resp = response_from_buf(body);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return gp_http_send_response(r, status, resp);
}

enum MHD_Result gp_http_send_json(gp_http_request *r, int status, gp_buf *body) {
    return gp_http_send(r, status, "application/json", body);
}

enum MHD_Result gp_http_send_preflight(gp_http_request *r) {
    struct MHD_Response *resp = response_from_buf(NULL);
    if (!resp) return MHD_NO;
    if (r->cors_origin[0]) {
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS");
        /* what the browser asks for (OpenAI's client sends a dozen
         * X-Stainless-* headers), if it is a plain list of names */
        const char *want = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND,
                                                       "Access-Control-Request-Headers");
        size_t n = want ? strlen(want) : 0;
        bool plain = n > 0 && n < 2048;
        for (size_t i = 0; plain && i < n; i++)
            plain = (want[i] >= 'a' && want[i] <= 'z') || (want[i] >= 'A' && want[i] <= 'Z') ||
                    (want[i] >= '0' && want[i] <= '9') || strchr("-_, ", want[i]) != NULL;
        MHD_add_response_header(
            resp, "Access-Control-Allow-Headers",
            plain ? want
                  : "Authorization, Content-Type, X-Request-Id, OpenAI-Organization, "
                    "OpenAI-Project, X-Stainless-Arch, X-Stainless-Lang, "
                    "X-Stainless-OS, X-Stainless-Package-Version, "
                    "X-Stainless-Retry-Count, X-Stainless-Runtime, "
                    "X-Stainless-Runtime-Version, X-Stainless-Timeout");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    }
    return gp_http_send_response(r, 204, resp);
}

enum MHD_Result gp_http_send_error(gp_http_request *r, const gp_api_error *e) {
    gp_buf b;
    gp_buf_init(&b);
    int rc = 0;
    if (r->route == GP_ROUTE_ELEVENLABS_TTS || r->route == GP_ROUTE_ELEVENLABS_VOICES ||
        r->route == GP_ROUTE_ELEVENLABS_WEBSOCKET) {
        /* ElevenLabs' shape: {"detail": {"status": code, "message": …}} */
        rc |= gp_buf_append_str(&b, "{\"detail\":{\"status\":");
        rc |= gp_json_append_string(&b, e->code ? e->code : "error");
        rc |= gp_buf_append_str(&b, ",\"message\":");
        rc |= gp_json_append_string(&b, e->message);
        rc |= gp_buf_append_str(&b, ",\"param\":");
        rc |= e->param[0] ? gp_json_append_string(&b, e->param) : gp_buf_append_str(&b, "null");
        rc |= gp_buf_append_str(&b, "}}\n");
    } else {
        rc |= gp_buf_append_str(&b, "{\"error\":{\"message\":");
        rc |= gp_json_append_string(&b, e->message);
        rc |= gp_buf_append_str(&b, ",\"type\":");
        rc |= gp_json_append_string(&b, e->type ? e->type : "invalid_request_error");
        rc |= gp_buf_append_str(&b, ",\"param\":");
        rc |= e->param[0] ? gp_json_append_string(&b, e->param) : gp_buf_append_str(&b, "null");
        rc |= gp_buf_append_str(&b, ",\"code\":");
        rc |= e->code ? gp_json_append_string(&b, e->code) : gp_buf_append_str(&b, "null");
        rc |= gp_buf_append_str(&b, "}}\n");
    }
    if (rc) {
        gp_buf_free(&b);
        return MHD_NO;
    }
    struct MHD_Response *resp = response_from_buf(&b);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (e->retry_after_s > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", e->retry_after_s);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, v);
    }
    if (e->status == 401) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (e->status == 405) {
        const char *allow = gp_route_synthesizes(r->route) ? "POST" : "GET, HEAD";
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    }
    return gp_http_send_response(r, e->status, resp);
}

/* Compare every byte of the key whatever the input, so timing says nothing. */
static bool key_matches(const char *given, const char *key) {
    size_t n = strlen(given), k = strlen(key);
    unsigned diff = (unsigned)(n != k);
    for (size_t i = 0; i < k; i++)
        diff |= (unsigned char)key[i] ^ (unsigned char)(i < n ? given[i] : 0);
    return diff == 0;
}

bool gp_http_key_matches(const gp_server *s, const char *given) {
    return !s->api_key || !*s->api_key || key_matches(given, s->api_key);
}

bool gp_http_authorized(gp_http_request *r) {
    const char *key = r->server->api_key;
    if (!key || !*key) return true;
    const char *h =
        MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (h && strncasecmp(h, "Bearer ", 7) == 0) {
        h += 7;
        while (*h == ' ') h++;
        return key_matches(h, key);
    }
    /* Cartesia's older clients send the key as X-API-Key, ElevenLabs' as xi-api-key */
    h = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, "X-API-Key");
    if (!h) h = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, "xi-api-key");
    if (h) return key_matches(h, key);
    /* a browser cannot set a WebSocket's headers: Cartesia's WebSocket takes
     * the key in the query (only there: elsewhere it would end up in logs) */
    if (r->route != GP_ROUTE_TTS_WEBSOCKET) return false;
    h = MHD_lookup_connection_value(r->connection, MHD_GET_ARGUMENT_KIND, "api_key");
    if (!h) h = MHD_lookup_connection_value(r->connection, MHD_GET_ARGUMENT_KIND, "access_token");
    return h && key_matches(h, key);
}

bool gp_http_peer_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
    if (!(p.revents & POLLIN)) return false;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0; /* end of file: the client closed the connection */
}

int gp_http_connection_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}

void gp_http_allow_long_request(gp_http_request *r) {
    double s = r->server->params.request_timeout_s + r->server->params.connection_timeout_s;
    MHD_set_connection_option(r->connection, MHD_CONNECTION_OPTION_TIMEOUT,
                              (unsigned)(s < 1e6 ? s + 1 : 1e6));
}
