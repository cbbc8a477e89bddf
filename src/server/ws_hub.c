/* ws_hub.c — the sockets of the server's long-lived text-in connections:
 * Cartesia's WebSocket (the handshake through libmicrohttpd's upgrade; the
 * protocol is ws_tts.c's) and the Wyoming port (accepted here; the protocol
 * is wyoming.c's). One thread, the hub, polls every such socket, the
 * Wyoming listening socket and an eventfd the engine's callbacks write to,
 * reads and parses what arrives (WebSocket frames: websocket.c; answers
 * pings and closes), hands whole messages on, pumps each context's audio and
 * writes what is queued without ever blocking on a client. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/timing.h"
#include "server/websocket.h"
#include "server/ws_internal.h"

void gp_ws_hub_wake(gp_ws_hub *h) {
    uint64_t one = 1;
    ssize_t r = write(h->efd, &one, sizeof one);
    (void)r; /* a full counter still wakes the hub */
}

/* ---- frames and sockets ---- */

/* Whole WebSocket frames of c->in: pings answered, messages handed on. */
static void ws_parse(gp_ws_hub *h, ws_conn *c);

static void conn_read(gp_ws_hub *h, ws_conn *c) {
    for (;;) {
        if (c->proto == WS_PROTO_WYOMING && c->close_sent) c->in.len = 0; /* closing: dropped */
        if (c->proto == WS_PROTO_WYOMING && c->in.len > WS_MAX_IN) break; /* busy: later */
        if (gp_buf_reserve(&c->in, c->in.len + 65536)) {
            c->dead = true;
            return;
        }
        ssize_t r = recv(c->fd, c->in.data + c->in.len, 65536, MSG_DONTWAIT);
        if (r > 0) {
            c->in.len += (size_t)r;
            c->last_activity = gp_now_s();
            continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (r < 0 && errno == EINTR) continue;
        c->dead = true; /* closed or broken */
        break;
    }
    if (c->proto == WS_PROTO_WYOMING && c->close_sent)
        c->in.len = 0;
    else if (c->proto == WS_PROTO_WYOMING)
        gp_wy_on_input(h, c);
    else
        ws_parse(h, c);
}

static void ws_parse(gp_ws_hub *h, ws_conn *c) {
    size_t used = 0;
    while (!c->dead && used < c->in.len) {
        gp_ws_frame f;
        const char *why = NULL;
        long k = gp_ws_parse_frame((uint8_t *)c->in.data + used, c->in.len - used, WS_MAX_MESSAGE,
                                   &f, &why);
        if (k == 0) break;
        if (k < 0) {
            gp_ws_close(c, GP_WS_CLOSE_PROTOCOL, why);
            used = c->in.len;
            break;
        }
        used += (size_t)k;
        if (f.opcode == GP_WS_PING) {
            if (!c->close_sent && gp_ws_append_frame(&c->out, GP_WS_PONG, f.payload, f.len))
                c->dead = true;
            if (c->out.len - c->out_pos > WS_MAX_OUT) c->dead = true; /* pings, never reading */
        } else if (f.opcode == GP_WS_PONG) {
        } else if (f.opcode == GP_WS_CLOSE) {
            /* echo a valid code (RFC 6455 §7.4); a malformed close is a protocol error */
            int code = f.len >= 2 ? (f.payload[0] << 8) | f.payload[1] : GP_WS_CLOSE_NORMAL;
            bool valid =
                f.len != 1 && ((code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
                               (code >= 3000 && code <= 4999));
            gp_ws_close(c, valid ? code : GP_WS_CLOSE_PROTOCOL, valid ? "" : "a malformed close");
            used = c->in.len; /* nothing after a close counts */
        } else if (c->close_sent) {
        } else if (f.opcode == GP_WS_CONTINUATION ? c->msg_opcode < 0 : c->msg_opcode >= 0) {
            gp_ws_close(c, GP_WS_CLOSE_PROTOCOL, "a fragmented message is interleaved wrongly");
        } else if (c->msg.len + f.len > WS_MAX_MESSAGE) {
            gp_ws_close(c, GP_WS_CLOSE_TOO_BIG, "a message is larger than 1 MiB");
        } else {
            if (f.opcode != GP_WS_CONTINUATION) c->msg_opcode = f.opcode;
            if (f.len && gp_buf_append(&c->msg, f.payload, f.len)) c->dead = true;
            if (f.fin && !c->dead) {
                gp_ws_on_message(h, c, c->msg_opcode, &c->msg);
                gp_buf_clear(&c->msg);
                c->msg_opcode = -1;
            }
        }
    }
    memmove(c->in.data, c->in.data + used, c->in.len - used);
    c->in.len -= used;
}

/* The frame being written (the server's own frames: unmasked, whole in
 * `out`): where it starts and where it ends. */
static void current_frame(const ws_conn *c, size_t *start, size_t *end) {
    const unsigned char *b = (const unsigned char *)c->out.data;
    size_t at = 0;
    while (at < c->out.len) {
        size_t len = b[at + 1] & 0x7F, h = 2;
        if (len == 126) {
            len = ((size_t)b[at + 2] << 8) | b[at + 3];
            h = 4;
        } else if (len == 127) {
            len = 0;
            for (int i = 0; i < 8; i++) len = (len << 8) | b[at + 2 + i];
            h = 10;
        }
        if (at + h + len > c->out_pos) {
            *start = at;
            *end = at + h + len;
            return;
        }
        at += h + len;
    }
    *start = *end = c->out.len;
}

static size_t current_frame_end(const ws_conn *c) {
    size_t start, end;
    current_frame(c, &start, &end);
    return end;
}

static size_t current_frame_start(const ws_conn *c) {
    size_t start, end;
    current_frame(c, &start, &end);
    return start;
}

static void conn_write(ws_conn *c) {
    while (!c->dead && c->out_pos < c->out.len) {
        ssize_t w = send(c->fd, c->out.data + c->out_pos, c->out.len - c->out_pos,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
            c->out_pos += (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else {
            if (!(w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) c->dead = true;
            break;
        }
    }
    if (c->out_pos == c->out.len) {
        gp_buf_clear(&c->out);
        c->out_pos = 0;
    } else if (c->out_pos > ((size_t)1 << 20) && c->proto == WS_PROTO_WYOMING) {
        memmove(c->out.data, c->out.data + c->out_pos, c->out.len - c->out_pos);
        c->out.len -= c->out_pos;
        c->out_pos = 0;
    } else if (c->out_pos > ((size_t)1 << 20)) {
        /* a client reading at playback speed never empties the buffer: drop
         * what went out, up to the start of the frame being written (the
         * frames are parsed from offset 0, current_frame_end) */
        const size_t start = current_frame_start(c);
        memmove(c->out.data, c->out.data + start, c->out.len - start);
        c->out.len -= start;
        c->out_pos -= start;
    }
}

/* Shutting down: the audio not yet written is dropped (its context is
 * cancelled), the frame being written is finished, and the close goes next. */
static void conn_cut_short(ws_conn *c) {
    if (c->close_sent) return;
    if (c->proto == WS_PROTO_WYOMING) { /* what is queued goes, for the last second */
        c->close_sent = true;
        return;
    }
    c->out.len = c->out_pos ? current_frame_end(c) : 0;
    gp_ws_close(c, GP_WS_CLOSE_GOING_AWAY, "the server is shutting down");
}

static void conn_free(gp_ws_hub *h, ws_conn *c) {
    while (c->contexts) {
        ws_context *x = c->contexts;
        c->contexts = x->next;
        gp_ws_context_free(h, x);
    }
    if (c->urh)
        MHD_upgrade_action(c->urh, MHD_UPGRADE_ACTION_CLOSE); /* libmicrohttpd closes the socket */
    else
        close(c->fd);
    gp_buf_free(&c->in);
    gp_buf_free(&c->msg);
    gp_buf_free(&c->out);
    free(c);
}

/* ---- the hub ---- */

static ws_conn *conn_new(int fd, ws_proto proto, const ws_speaker *speaker,
                         struct MHD_UpgradeResponseHandle *urh) {
    ws_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    c->proto = proto;
    c->speaker = speaker;
    c->urh = urh;
    c->msg_opcode = -1;
    c->last_activity = c->opened_s = gp_now_s();
    gp_buf_init(&c->in);
    gp_buf_init(&c->msg);
    gp_buf_init(&c->out);
    return c;
}

static void hub_adopt(gp_ws_hub *h) {
    pthread_mutex_lock(&h->lock);
    ws_conn *list = h->incoming;
    h->incoming = NULL;
    pthread_mutex_unlock(&h->lock);
    while (list) {
        ws_conn *c = list;
        list = c->next;
        c->next = h->conns;
        h->conns = c;
        pthread_mutex_lock(&h->lock);
        h->live++;
        pthread_mutex_unlock(&h->lock);
        conn_read(h, c); /* bytes that came with the handshake, then what is waiting */
    }
}

/* New connections on the Wyoming port (a full server closes them at once,
 * with an error event saying why). */
static void hub_accept(gp_ws_hub *h) {
    for (;;) {
        int fd = accept4(h->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR) continue;
            /* out of descriptors: the port stays readable; a pass without it
             * lets some close instead of spinning on it */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                h->accept_pause_until = gp_now_s() + 0.1;
            return;
        }
        ws_conn *c = conn_new(fd, WS_PROTO_WYOMING, &gp_wy_speaker, NULL);
        if (!c) {
            close(fd);
            continue;
        }
        pthread_mutex_lock(&h->lock);
        const bool full = h->live >= h->server->params.max_connections;
        h->live++;
        pthread_mutex_unlock(&h->lock);
        if (full)
            gp_wy_send_error(c, "too_many_connections",
                             "the server has --max-connections connections open; try again later",
                             true);
        c->next = h->conns;
        h->conns = c;
    }
}

static void *hub_main(void *arg) {
    gp_ws_hub *h = arg;
    struct pollfd *fds = NULL;
    size_t cap = 0;
    double stop_since = 0;
    for (;;) {
        hub_adopt(h);
        pthread_mutex_lock(&h->lock);
        const bool stop = h->stop, draining = h->draining, arriving = h->incoming != NULL;
        pthread_mutex_unlock(&h->lock);
        if ((stop || draining) && h->listen_fd >= 0) { /* no new Wyoming connections */
            close(h->listen_fd);
            h->listen_fd = -1;
        }
        size_t n = 2;
        for (ws_conn *c = h->conns; c; c = c->next) n++;
        if (n > cap) {
            struct pollfd *p = realloc(fds, n * sizeof *p);
            if (p) {
                fds = p;
                cap = n;
            }
        }
        if (stop && !h->conns && !arriving) break; /* (one just handed over is closed first) */
        if (stop && !stop_since) stop_since = gp_now_s();
        size_t k = 0;
        if (cap >= n) {
            fds[k++] = (struct pollfd){.fd = h->efd, .events = POLLIN};
            const bool paused = gp_now_s() < h->accept_pause_until;
            fds[k++] = (struct pollfd){.fd = paused ? -1 : h->listen_fd,
                                       .events = POLLIN}; /* -1: ignored */
            for (ws_conn *c = h->conns; c; c = c->next) {
                /* a Wyoming client whose next request waits for this one is
                 * not read further until it has room */
                const bool room = c->proto != WS_PROTO_WYOMING || c->in.len <= WS_MAX_IN;
                fds[k++] = (struct pollfd){
                    .fd = c->fd,
                    .events = (short)((room ? POLLIN : 0) | (c->out.len ? POLLOUT : 0))};
            }
        }
        if (poll(fds, k, 100) < 0 && errno != EINTR) usleep(10000);
        if (k > 1 && (fds[1].revents & POLLIN)) hub_accept(h);
        uint64_t count;
        if (read(h->efd, &count, sizeof count) < 0) {
        } /* cleared (non-blocking) */
        const double now = gp_now_s();
        const double idle_limit = h->server->params.request_timeout_s;
        /* connections accepted just now come first in the list and were
         * not polled: they are read on the next pass */
        long i = (long)k;
        for (ws_conn *c = h->conns; c; c = c->next) i--;
        for (ws_conn **link = &h->conns; *link;) {
            ws_conn *c = *link;
            const short rev = i >= 2 && i < (long)k ? fds[i].revents : 0;
            i++;
            if (rev & (POLLIN | POLLHUP | POLLERR)) conn_read(h, c);
            /* a Wyoming client not read while its next request waits, and gone */
            if ((rev & (POLLHUP | POLLERR)) && c->proto == WS_PROTO_WYOMING &&
                c->in.len > WS_MAX_IN)
                c->dead = true;
            for (ws_context *x = c->contexts, *next; x && !c->dead; x = next) {
                next = x->next;
                gp_ws_context_pump(h, c, x);
            }
            /* a Wyoming request that waited for the one before it */
            if (c->proto == WS_PROTO_WYOMING && c->wy_held && !c->contexts && !c->dead)
                gp_wy_on_input(h, c);
            if (stop) {
                while (c->contexts) gp_ws_context_remove(h, c, c->contexts); /* cancelled */
                conn_cut_short(c);
            }
            if (!c->contexts && (stop || draining))
                gp_ws_close(c, GP_WS_CLOSE_GOING_AWAY, "the server is shutting down");
            if (!c->contexts && c->el_closing) gp_ws_close(c, GP_WS_CLOSE_NORMAL, "");
            if (c->el_need_key && now - c->opened_s > EL_WS_KEY_WAIT_S) {
                c->el_need_key = false;
                gp_el_ws_send_error(c, NULL, 401, "invalid_api_key",
                                    "no API key came: send it as the xi-api-key header, or as "
                                    "\"xi-api-key\" in the first message",
                                    true);
            }
            /* idle: nothing said for the limit and nothing being spoken (open
             * contexts waiting for text included) */
            bool speaking = false;
            for (const ws_context *x = c->contexts; x && !speaking; x = x->next)
                speaking = x->head != NULL;
            if (!speaking && now - c->last_activity > idle_limit)
                gp_ws_close(c, GP_WS_CLOSE_NORMAL, "idle for too long");
            conn_write(c);
            /* a Wyoming connection closing: once its last event is out, our
             * side is shut and what the client still sends is read and
             * dropped until it closes too (or a second) — closing with its
             * bytes unread would reset the connection, and the client
             * could lose that last event */
            if (c->proto == WS_PROTO_WYOMING && c->close_sent && !c->dead && c->out.len == 0) {
                if (!c->wy_linger_until) {
                    shutdown(c->fd, SHUT_WR);
                    c->wy_linger_until = now + 1.0;
                }
                if (now < c->wy_linger_until && !stop) {
                    link = &c->next;
                    continue;
                }
            }
            /* at shutdown a client gets a second to take its close frame */
            if (c->dead || (c->close_sent && c->out.len == 0) || (stop && now - stop_since > 1.0)) {
                *link = c->next;
                conn_free(h, c);
                pthread_mutex_lock(&h->lock);
                h->live--;
                pthread_mutex_unlock(&h->lock);
            } else {
                link = &c->next;
            }
        }
        gp_ws_reap_dying(h, false);
    }
    gp_ws_reap_dying(h, true);
    free(fds);
    return NULL;
}

/* The hub, started with the first WebSocket or with the Wyoming port
 * (listen_fd, or -1); s->lock held (so that a connection handed over cannot
 * race gp_ws_hub_stop). */
static gp_ws_hub *hub_get_locked(gp_server *s, int listen_fd) {
    gp_ws_hub *h = s->ws_hub;
    if (!h && !s->stopping && (h = calloc(1, sizeof *h))) {
        h->server = s;
        h->listen_fd = listen_fd;
        pthread_mutex_init(&h->lock, NULL);
        h->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (h->efd < 0 || pthread_create(&h->thread, NULL, hub_main, h) != 0) {
            if (h->efd >= 0) close(h->efd);
            pthread_mutex_destroy(&h->lock);
            free(h);
            h = NULL;
        } else {
            s->ws_hub = h;
        }
    }
    return h;
}

static void on_upgrade(void *cls, struct MHD_Connection *connection, void *con_cls,
                       const char *extra_in, size_t extra_in_size, MHD_socket sock,
                       struct MHD_UpgradeResponseHandle *urh) {
    (void)connection;
    gp_server *s = cls;
    /* the request (freed by libmicrohttpd's completion, after this) holds
     * what its handshake found */
    const gp_http_request *r = con_cls;
    const ws_upgrade *u = r ? r->upgrade : NULL;
    ws_conn *c = conn_new(sock, WS_PROTO_WEBSOCKET, &gp_ws_cartesia_speaker, urh);
    if (!c) {
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        return;
    }
    if (!u) { /* cannot happen (the handshake set it); refuse rather than guess */
        gp_buf_free(&c->in);
        free(c);
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        return;
    }
    c->dialect = u->dialect;
    if (u->dialect != WS_DIALECT_CARTESIA) c->speaker = &gp_el_ws_speaker;
    c->el_opts = u->opts;
    c->el_need_key = u->need_key;
    int fl = fcntl(sock, F_GETFL);
    if (fl >= 0) fcntl(sock, F_SETFL, fl | O_NONBLOCK);
    if (extra_in_size && gp_buf_append(&c->in, extra_in, extra_in_size)) c->dead = true;
    /* handed over under the server's lock: gp_ws_hub_stop cannot free the
     * hub in between, and a stopping server starts none */
    pthread_mutex_lock(&s->lock);
    gp_ws_hub *h = hub_get_locked(s, -1);
    if (h) {
        pthread_mutex_lock(&h->lock);
        c->next = h->incoming;
        h->incoming = c;
        pthread_mutex_unlock(&h->lock);
        gp_ws_hub_wake(h);
    }
    pthread_mutex_unlock(&s->lock);
    if (!h) {
        gp_buf_free(&c->in);
        free(c);
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
    }
}

int gp_ws_hub_listen(gp_server *s, int listen_fd) {
    pthread_mutex_lock(&s->lock);
    gp_ws_hub *h = s->ws_hub ? NULL : hub_get_locked(s, listen_fd);
    pthread_mutex_unlock(&s->lock);
    return h ? GEPARD_OK : GEPARD_ERR_INTERNAL;
}

static const char *header(gp_http_request *r, const char *name) {
    return MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, name);
}

static bool header_has_token(const char *value, const char *token) {
    size_t n = strlen(token);
    for (const char *p = value; p && *p;) {
        while (*p == ' ' || *p == ',' || *p == '\t') p++;
        size_t k = strcspn(p, ", \t");
        if (k == n && strncasecmp(p, token, n) == 0) return true;
        p += k;
    }
    return false;
}

/* The handshake (GET /tts/websocket): the key may also come as ?api_key= or
 * ?access_token= (browsers cannot set headers on a WebSocket). */
enum MHD_Result gp_handle_tts_websocket(gp_http_request *r) {
    ws_upgrade u = {.server = r->server, .dialect = WS_DIALECT_CARTESIA};
    gp_speech_options_init(&u.opts);
    return gp_ws_upgrade(r, &u);
}

enum MHD_Result gp_ws_upgrade(gp_http_request *r, const ws_upgrade *u) {
    gp_api_error e;
    gp_server_backend b;
    const char *upgrade = header(r, "Upgrade"), *connection = header(r, "Connection");
    const char *version = header(r, "Sec-WebSocket-Version"), *key = header(r, "Sec-WebSocket-Key");
    char accept[29];
    if (!upgrade || strcasecmp(upgrade, "websocket") != 0 || !connection ||
        !header_has_token(connection, "upgrade")) {
        gp_http_fail(&e, 426, NULL, "upgrade_required",
                     u->dialect == WS_DIALECT_CARTESIA
                         ? "/tts/websocket is a WebSocket: connect with a WebSocket client (ws:// "
                           "or wss://), or use POST /tts/bytes or /tts/sse over plain HTTP"
                         : "this is a WebSocket: connect with a WebSocket client (ws:// or "
                           "wss://), or POST /v1/text-to-speech/{voice_id}/stream over plain "
                           "HTTP");
        return gp_http_send_error(r, &e);
    }
    if (!version || strcmp(version, "13") != 0) {
        gp_http_fail(&e, 426, NULL, "unsupported_websocket_version",
                     "WebSocket version 13 (RFC 6455) is the one this server speaks");
        return gp_http_send_error(r, &e);
    }
    if (gp_ws_accept_key(key, accept)) {
        gp_http_fail(&e, 400, NULL, "invalid_websocket_key",
                     "Sec-WebSocket-Key must be the base64 of 16 bytes");
        return gp_http_send_error(r, &e);
    }
    if (!gp_server_backend_get(r->server, &b, &e)) return gp_http_send_error(r, &e);
    free(r->upgrade);
    if (!(r->upgrade = malloc(sizeof *u))) return MHD_NO; /* the request's, until it is freed */
    memcpy(r->upgrade, u, sizeof *u);
    struct MHD_Response *resp = MHD_create_response_for_upgrade(on_upgrade, r->server);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
    MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept);
    r->upgraded = true;
    return gp_http_send_response(r, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
}

static gp_ws_hub *hub_of(gp_server *s) {
    pthread_mutex_lock(&s->lock);
    gp_ws_hub *h = s->ws_hub;
    pthread_mutex_unlock(&s->lock);
    return h;
}

void gp_ws_hub_drain_begin(gp_server *s) {
    gp_ws_hub *h = hub_of(s);
    if (!h) return;
    pthread_mutex_lock(&h->lock);
    h->draining = true;
    pthread_mutex_unlock(&h->lock);
    gp_ws_hub_wake(h);
}

void gp_ws_hub_drain_wait(gp_server *s, double deadline) {
    gp_ws_hub *h = hub_of(s);
    if (!h) return;
    /* the hub closes each connection once its contexts are done */
    for (;;) {
        pthread_mutex_lock(&h->lock);
        const int live = h->live + (h->incoming != NULL);
        pthread_mutex_unlock(&h->lock);
        if (live == 0 || gp_now_s() >= deadline) break;
        usleep(20000);
    }
}

void gp_ws_hub_stop(gp_server *s) {
    pthread_mutex_lock(&s->lock);
    gp_ws_hub *h = s->ws_hub;
    s->ws_hub = NULL;
    pthread_mutex_unlock(&s->lock);
    if (!h) return;
    pthread_mutex_lock(&h->lock);
    h->stop = true;
    pthread_mutex_unlock(&h->lock);
    /* contexts still running are cancelled: the hub closes every connection */
    gp_ws_hub_wake(h);
    pthread_join(h->thread, NULL);
    close(h->efd);
    if (h->listen_fd >= 0) close(h->listen_fd);
    pthread_mutex_destroy(&h->lock);
    free(h);
}
