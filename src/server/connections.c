/* connections.c — the server's own account of its TCP connections, so idle
 * or trickling clients cannot lock everyone else out.
 *
 * libmicrohttpd's idle timeout restarts with every byte, and its connection
 * limit refuses new connections once reached, probes included. So the server
 * keeps a list of its connections (libmicrohttpd's connection notifications)
 * with, for each, whether it is still *receiving* — waiting for (the rest
 * of) a request: headers and body — and the deadline by which the whole
 * request must be in: --receive-timeout after the connection opened or its
 * previous response ended, plus time for the declared body at a minimum
 * rate. Every byte does not extend it.
 *
 * - A receiving connection past its deadline is shut down (the ticker calls
 *   gp_conn_reap a few times a second).
 * - A new connection over the per-client-address share, or over the total
 *   limit, makes room by shutting down the oldest receiving connection (of
 *   that address, or of any): idle keep-alive and slow clients go first, and
 *   a probe or a real request still gets in. Connections whose request is in
 *   (a response being generated or streamed) are never chosen; if there is
 *   no receiving connection to close, the new one is closed instead.
 * - Each of these is counted in the metrics and logged as a warning (at most
 *   one line a second per kind, with the number since the last line).
 *
 * A connection is only ever shut down (shutdown(2)), never closed here:
 * libmicrohttpd sees the end of the stream and closes it itself, and its
 * "closed" notification — which comes before it closes the socket — removes
 * the entry under the same lock, so a descriptor is never touched after it
 * could have been reused.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/log.h"
#include "base/timing.h"
#include "server/server_internal.h"

/* The body a request declares gets this much extra time (bytes per second):
 * 16 MiB, the default body limit, adds 256 s. */
#define CONN_MIN_BODY_RATE (64.0 * 1024)

struct gp_conn {
    int fd;
    unsigned char ip[16]; /* IPv4 addresses as v4-mapped IPv6 */
    char ip_text[INET6_ADDRSTRLEN];
    bool receiving; /* waiting for (the rest of) a request */
    bool closing;   /* shut down by us; libmicrohttpd will close it */
    double since;   /* opened, or its previous response ended */
    double deadline;
    gp_conn *prev, *next;
};

static void conn_address(gp_conn *c, struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = info ? info->client_addr : NULL;
    memset(c->ip, 0, sizeof c->ip);
    snprintf(c->ip_text, sizeof c->ip_text, "?");
    if (sa && sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        c->ip[10] = c->ip[11] = 0xff;
        memcpy(c->ip + 12, &in->sin_addr, 4);
        inet_ntop(AF_INET, &in->sin_addr, c->ip_text, sizeof c->ip_text);
    } else if (sa && sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        memcpy(c->ip, &in6->sin6_addr, 16);
        inet_ntop(AF_INET6, &in6->sin6_addr, c->ip_text, sizeof c->ip_text);
    }
}

/* Warn about a closed connection, at most once a second per reason. Lock held. */
static void conn_warn_locked(gp_server *s, gp_conn_close_reason reason, const gp_conn *c,
                             double now) {
    s->conn_suppressed[reason]++;
    if (now - s->conn_last_warn[reason] < 1.0) return;
    int n = s->conn_suppressed[reason];
    s->conn_suppressed[reason] = 0;
    s->conn_last_warn[reason] = now;
    switch (reason) {
    case GP_CONN_CLOSE_RECEIVE_TIMEOUT:
        GP_WARN("http: closed %d connection%s that did not send a whole request within the "
                "receive timeout (%.0f s; the last from %s)",
                n, n == 1 ? "" : "s", s->params.receive_timeout_s, c->ip_text);
        break;
    case GP_CONN_CLOSE_LIMIT:
        GP_WARN("http: connection limit (%d) reached: closed %d idle or slow connection%s to make "
                "room (the last from %s); raise --max-connections if this is normal load",
                s->params.max_connections, n, n == 1 ? "" : "s", c->ip_text);
        break;
    case GP_CONN_CLOSE_PER_CLIENT:
        GP_WARN("http: client %s holds its share of connections (%d): closed %d idle, slow or new "
                "connection%s; behind a proxy raise --max-connections-per-client",
                c->ip_text, s->params.max_connections_per_client, n, n == 1 ? "" : "s");
        break;
    default: break;
    }
}

/* Shut a connection down (libmicrohttpd then closes it). Lock held. */
static void conn_close_locked(gp_server *s, gp_conn *c, gp_conn_close_reason reason, double now) {
    if (c->closing) return;
    c->closing = true;
    s->n_conns--;
    if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
    gp_metrics_connection_closed(s->metrics, reason);
    conn_warn_locked(s, reason, c, now);
}

/* The receiving connection that has waited longest for its request (of the
 * address `ip`, or of any when NULL). Lock held. */
static gp_conn *oldest_receiving_locked(gp_server *s, const unsigned char *ip) {
    gp_conn *best = NULL;
    for (gp_conn *c = s->conns; c; c = c->next)
        if (c->receiving && !c->closing && (!ip || memcmp(c->ip, ip, 16) == 0) &&
            (!best || c->since <= best->since)) /* newest first: ties go to the older */
            best = c;
    return best;
}

static int count_address_locked(const gp_server *s, const unsigned char *ip) {
    int n = 0;
    for (const gp_conn *c = s->conns; c; c = c->next) n += !c->closing && !memcmp(c->ip, ip, 16);
    return n;
}

/* A new connection: register it, then make room if it is over a limit. */
static void conn_started(gp_server *s, struct MHD_Connection *connection, void **socket_context) {
    double now = gp_now_s();
    gp_conn *c = calloc(1, sizeof *c);
    if (!c) { /* cannot track it: refuse it */
        int fd = gp_http_connection_fd(connection);
        if (fd >= 0) shutdown(fd, SHUT_RDWR);
        return;
    }
    c->fd = gp_http_connection_fd(connection);
    conn_address(c, connection);
    c->receiving = true;
    c->since = now;
    c->deadline = now + s->params.receive_timeout_s;
    pthread_mutex_lock(&s->conn_lock);
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->n_conns++;
    int share = s->params.max_connections_per_client;
    if (share > 0 && count_address_locked(s, c->ip) > share) {
        gp_conn *victim = oldest_receiving_locked(s, c->ip); /* at worst the new one */
        conn_close_locked(s, victim ? victim : c, GP_CONN_CLOSE_PER_CLIENT, now);
    }
    if (s->n_conns > s->params.max_connections) {
        gp_conn *victim = oldest_receiving_locked(s, NULL);
        conn_close_locked(s, victim ? victim : c, GP_CONN_CLOSE_LIMIT, now);
    }
    pthread_mutex_unlock(&s->conn_lock);
    *socket_context = c;
}

static void conn_closed(gp_server *s, void **socket_context) {
    gp_conn *c = *socket_context;
    if (!c) return;
    pthread_mutex_lock(&s->conn_lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    if (!c->closing) s->n_conns--;
    pthread_mutex_unlock(&s->conn_lock);
    free(c);
    *socket_context = NULL;
}

void gp_conn_notify(void *cls, struct MHD_Connection *connection, void **socket_context,
                    enum MHD_ConnectionNotificationCode code) {
    gp_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        conn_started(s, connection, socket_context);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        conn_closed(s, socket_context);
}

static gp_conn *conn_of(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

void gp_conn_headers_received(gp_server *s, struct MHD_Connection *connection,
                              unsigned long long body_bytes) {
    gp_conn *c = conn_of(connection);
    if (!c) return;
    pthread_mutex_lock(&s->conn_lock);
    c->deadline += (double)body_bytes / CONN_MIN_BODY_RATE;
    pthread_mutex_unlock(&s->conn_lock);
}

void gp_conn_request_received(gp_server *s, struct MHD_Connection *connection) {
    gp_conn *c = conn_of(connection);
    if (!c) return;
    pthread_mutex_lock(&s->conn_lock);
    c->receiving = false;
    pthread_mutex_unlock(&s->conn_lock);
}

void gp_conn_response_done(gp_server *s, struct MHD_Connection *connection) {
    gp_conn *c = conn_of(connection);
    if (!c) return;
    double now = gp_now_s();
    pthread_mutex_lock(&s->conn_lock);
    c->receiving = true; /* keep-alive: the next request has its own deadline */
    c->since = now;
    c->deadline = now + s->params.receive_timeout_s;
    pthread_mutex_unlock(&s->conn_lock);
}

void gp_conn_reap(gp_server *s, double now) {
    pthread_mutex_lock(&s->conn_lock);
    for (gp_conn *c = s->conns; c; c = c->next)
        if (c->receiving && !c->closing && now > c->deadline)
            conn_close_locked(s, c, GP_CONN_CLOSE_RECEIVE_TIMEOUT, now);
    pthread_mutex_unlock(&s->conn_lock);
}

int gp_conn_open_count(gp_server *s) {
    pthread_mutex_lock(&s->conn_lock);
    int n = s->n_conns;
    pthread_mutex_unlock(&s->conn_lock);
    return n;
}

void gp_conn_free_all(gp_server *s) {
    pthread_mutex_lock(&s->conn_lock);
    gp_conn *c = s->conns;
    s->conns = NULL;
    s->n_conns = 0;
    pthread_mutex_unlock(&s->conn_lock);
    while (c) {
        gp_conn *next = c->next;
        free(c);
        c = next;
    }
}
