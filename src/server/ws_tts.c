/* ws_tts.c — Cartesia's WebSocket, GET /tts/websocket: text that arrives in
 * pieces (a voice agent forwarding an LLM's tokens) spoken as it becomes
 * whole sentences, several contexts per connection.
 *
 * The handshake is an ordinary request (gp_handle_tts_websocket): checked,
 * answered 101 through libmicrohttpd's upgrade, after which libmicrohttpd
 * hands over the socket. From then on one thread of the server, the hub,
 * serves every WebSocket: it polls their sockets and an eventfd the engine's
 * callbacks write to, parses frames (websocket.c), answers messages, and
 * writes each context's audio as it comes — nothing blocks on a client.
 *
 * A context (context_id) takes Cartesia's generation request: its first
 * message sets the voice, output format and sampling (as /tts/sse: raw audio
 * only), and each message adds to its transcript. With "continue": true the
 * complete sentences so far are spoken at once (an unfinished one waits for
 * more text); "flush": true speaks everything buffered and answers
 * flush_done once its audio has gone out; "continue": false (the default)
 * speaks the rest and ends the context with `done`. Each spoken piece is one
 * engine stream (an utterance); the pieces of a context start as soon as
 * their text is there, run side by side in the engine's batch, and their
 * audio goes out strictly in order through the context's one audio pipe
 * (rate, speed, encoder), so the client hears one signal. {"context_id",
 * "cancel": true} stops a context.
 *
 * Limits: GP_WS_MAX_CONTEXTS per connection, 1 MiB a message, 64 KiB of
 * buffered transcript a context, 8 MiB of unsent output (a client that does
 * not read is closed), and a connection idle for the request time limit is
 * closed. At shutdown new generations are refused, running contexts get the
 * drain time, then every connection is closed with 1001. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "base/timing.h"
#include "io/json.h"
#include "server/base64.h"
#include "server/server_internal.h"
#include "server/websocket.h"
#include "text/clean.h"
#include "text/segment.h"

#define WS_MAX_MESSAGE ((size_t)1 << 20)
#define WS_MAX_TEXT ((size_t)64 << 10)
#define WS_MAX_OUT ((size_t)8 << 20)

typedef struct ws_utterance {
    gepard_stream *stream;
    gp_ws_hub *hub;
    pthread_mutex_t lock; /* pcm, n, cap, overflow: engine thread → hub */
    float *pcm;
    size_t n, cap;
    bool overflow;
    float *taken; /* hub only */
    size_t cap_taken;
    int chunk_flush_id; /* the flush that spoke it (0: none), on its chunks */
    int flush_done_id;  /* flush_done to send once it has gone out (0: none) */
    struct ws_utterance *next;
} ws_utterance;

typedef struct ws_context {
    char id[GP_CONTEXT_ID_MAX];
    gp_speech_options opts;
    gp_audio_pipe pipe;
    gp_buf raw; /* encoded audio not yet sent */
    char *text; /* transcript not yet spoken */
    size_t len;
    bool ended;  /* "continue": false came: the rest is spoken, then done */
    int flushes; /* flush ids given so far */
    int raw_flush_id;
    ws_utterance *head, *tail;
    double last_chunk_s;
    struct ws_context *next;
} ws_context;

typedef struct ws_conn {
    int fd;
    struct MHD_UpgradeResponseHandle *urh;
    gp_buf in, msg, out;
    size_t out_pos;
    int msg_opcode; /* of the fragmented message being assembled; -1: none */
    ws_context *contexts;
    int n_contexts;
    bool close_sent, dead;
    double last_activity;
    struct ws_conn *next;
} ws_conn;

struct gp_ws_hub {
    gp_server *server;
    pthread_t thread;
    int efd;
    pthread_mutex_t lock; /* incoming, stop, draining, live */
    ws_conn *incoming;
    bool stop, draining;
    int live;            /* connections adopted and not yet closed */
    ws_conn *conns;      /* hub thread only */
    ws_utterance *dying; /* cancelled, waiting for the engine to let go */
};

static void hub_wake(gp_ws_hub *h) {
    uint64_t one = 1;
    ssize_t r = write(h->efd, &one, sizeof one);
    (void)r; /* a full counter still wakes the hub */
}

/* ---- utterances: engine callbacks ---- */

static int on_audio(const float *x, size_t n, void *user) {
    ws_utterance *u = user;
    int stop = 0;
    pthread_mutex_lock(&u->lock);
    if (u->n + n > u->cap) {
        size_t cap = u->cap ? u->cap * 2 : 16384;
        while (cap < u->n + n) cap *= 2;
        float *p = cap <= (size_t)22050 * 600 ? realloc(u->pcm, cap * sizeof(float)) : NULL;
        if (!p) {
            u->overflow = true;
            stop = 1;
        } else {
            u->pcm = p;
            u->cap = cap;
        }
    }
    if (!stop) {
        memcpy(u->pcm + u->n, x, n * sizeof(float));
        u->n += n;
    }
    pthread_mutex_unlock(&u->lock);
    hub_wake(u->hub);
    return stop;
}

static void on_done(gepard_status status, void *user) {
    (void)status;
    hub_wake(((ws_utterance *)user)->hub);
}

static void utterance_free(ws_utterance *u) {
    gepard_stream_free(u->stream);
    pthread_mutex_destroy(&u->lock);
    free(u->pcm);
    free(u->taken);
    free(u);
}

/* Cancel and hand to the hub's dying list (freed once the engine is done). */
static void utterance_drop(gp_ws_hub *h, ws_utterance *u) {
    gepard_stream_cancel(u->stream);
    u->next = h->dying;
    h->dying = u;
}

static void reap_dying(gp_ws_hub *h, bool wait) {
    ws_utterance **link = &h->dying;
    while (*link) {
        ws_utterance *u = *link;
        if (wait || gepard_stream_done(u->stream)) {
            *link = u->next;
            utterance_free(u);
        } else {
            link = &u->next;
        }
    }
}

/* ---- sending ---- */

static void conn_send_text(ws_conn *c, const gp_buf *json) {
    if (c->dead || c->close_sent) return;
    if (gp_ws_append_frame(&c->out, GP_WS_TEXT, json->data, json->len)) c->dead = true;
    if (c->out.len - c->out_pos > WS_MAX_OUT) {
        GP_WARN("websocket: a client does not read its audio; closing it");
        c->dead = true;
    }
}

static void conn_close(ws_conn *c, int code, const char *reason) {
    if (c->close_sent || c->dead) return;
    if (gp_ws_append_close(&c->out, code, reason)) c->dead = true;
    c->close_sent = true;
}

/* An error event: for a context (done: it is over) or for the connection. */
static void send_error(ws_conn *c, const char *context_id, int status, const char *code,
                       const char *message) {
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_printf(&b,
                  "{\"type\":\"error\",\"done\":true,\"status_code\":%d,\"title\":\"%s\","
                  "\"error_code\":\"%s\",\"message\":",
                  status, status >= 500 ? "Server error" : "Invalid request", code);
    gp_json_append_string(&b, message);
    if (context_id && *context_id) {
        gp_buf_append_str(&b, ",\"context_id\":");
        gp_json_append_string(&b, context_id);
    }
    gp_buf_append_str(&b, "}");
    conn_send_text(c, &b);
    gp_buf_free(&b);
}

static void send_event(ws_conn *c, const ws_context *x, const char *type, const char *fields) {
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_printf(&b, "{\"type\":\"%s\",%s,\"context_id\":", type, fields);
    gp_json_append_string(&b, x->id);
    gp_buf_append_str(&b, "}");
    conn_send_text(c, &b);
    gp_buf_free(&b);
}

/* The context's encoded audio so far as one chunk event. */
static void send_chunk(ws_conn *c, ws_context *x) {
    if (!x->raw.len) return;
    double now = gp_now_s();
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_append_str(&b, "{\"type\":\"chunk\",\"data\":\"");
    gp_base64_append(&b, x->raw.data, x->raw.len);
    gp_buf_printf(&b, "\",\"done\":false,\"status_code\":206,\"step_time\":%.3f",
                  (now - x->last_chunk_s) * 1000.0);
    if (x->raw_flush_id) gp_buf_printf(&b, ",\"flush_id\":%d", x->raw_flush_id);
    gp_buf_append_str(&b, ",\"context_id\":");
    gp_json_append_string(&b, x->id);
    gp_buf_append_str(&b, "}");
    conn_send_text(c, &b);
    gp_buf_free(&b);
    gp_buf_clear(&x->raw);
    x->last_chunk_s = now;
}

/* ---- contexts ---- */

static int context_write(const void *data, size_t len, void *user) {
    return gp_buf_append(&((ws_context *)user)->raw, data, len);
}

static void context_free(gp_ws_hub *h, ws_context *x) {
    while (x->head) {
        ws_utterance *u = x->head;
        x->head = u->next;
        utterance_drop(h, u);
    }
    gp_audio_pipe_free(&x->pipe);
    gp_buf_free(&x->raw);
    free(x->text);
    free(x);
}

static void context_remove(gp_ws_hub *h, ws_conn *c, ws_context *x) {
    for (ws_context **l = &c->contexts; *l; l = &(*l)->next)
        if (*l == x) {
            *l = x->next;
            c->n_contexts--;
            break;
        }
    context_free(h, x);
}

static ws_context *context_find(ws_conn *c, const char *id) {
    for (ws_context *x = c->contexts; x; x = x->next)
        if (strcmp(x->id, id) == 0) return x;
    return NULL;
}

/* Whether the text (trimmed) ends a sentence: . ! ? … 。！？, maybe
 * followed by one closing quote or bracket. */
static bool ends_sentence(const char *t, size_t n) {
    while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\n' || t[n - 1] == '\t')) n--;
    if (n > 0 && strchr("\"')]", t[n - 1])) n--;
    if (n == 0) return false;
    if (strchr(".!?", t[n - 1])) return true;
    static const char *const wide[] = {"\xE2\x80\xA6", "\xE3\x80\x82", "\xEF\xBC\x81",
                                       "\xEF\xBC\x9F"};
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
        if (n >= 3 && memcmp(t + n - 3, wide[i], 3) == 0) return true;
    return false;
}

/* How much of the buffered text to speak now: all of it, or (continuing)
 * up to the end of its last complete sentence. */
static size_t speakable(const ws_context *x, bool all) {
    if (all || ends_sentence(x->text, x->len)) return x->len;
    size_t pos = 0, last = 0, b, e;
    while (pos < x->len && gp_segment_next(x->text, x->len, &pos, NULL, &b, &e))
        if (pos < x->len) last = pos; /* a cut with text after it: at a sentence end (or long) */
    return last;
}

/* Start an utterance for the first n bytes of the context's text (blank
 * text is only dropped). GEPARD_OK, or the engine's status. */
static int context_speak(gp_ws_hub *h, ws_context *x, const gp_server_backend *b, size_t n,
                         int flush_id) {
    bool blank = true;
    for (size_t i = 0; i < n && blank; i++) blank = strchr(" \t\r\n", x->text[i]) != NULL;
    char *piece = blank ? NULL : strndup(x->text, n);
    memmove(x->text, x->text + n, x->len - n);
    x->len -= n;
    if (blank) return GEPARD_OK;
    ws_utterance *u = piece ? calloc(1, sizeof *u) : NULL;
    if (!u) {
        free(piece);
        return GEPARD_ERR_NOMEM;
    }
    u->hub = h;
    pthread_mutex_init(&u->lock, NULL);
    u->chunk_flush_id = flush_id;
    gepard_synth_params p = x->opts.params;
    p.voice = x->opts.voice_entry ? x->opts.voice_entry->voice : NULL;
    p.lora = x->opts.voice_entry ? x->opts.voice_entry->lora : NULL;
    p.split_text = 1;
    gepard_stream_callbacks cb = {.on_audio = on_audio, .on_done = on_done, .user = u};
    gepard_status st = gepard_stream_start(b->engine, piece, &p, &cb, &u->stream);
    free(piece);
    if (st != GEPARD_OK) {
        pthread_mutex_destroy(&u->lock);
        free(u);
        return (int)st;
    }
    if (x->tail)
        x->tail->next = u;
    else
        x->head = u;
    x->tail = u;
    return GEPARD_OK;
}

/* A context failed: its error event, then it is gone. */
static void context_fail(gp_ws_hub *h, ws_conn *c, ws_context *x, int status, const char *code,
                         const char *message) {
    send_chunk(c, x); /* what it had made goes first */
    send_error(c, x->id, status, code, message);
    context_remove(h, c, x);
}

static void context_fail_status(gp_ws_hub *h, ws_conn *c, ws_context *x, int st) {
    gp_api_error e;
    gp_api_error_from_status(&e, (gepard_status)st, gepard_last_error());
    context_fail(h, c, x, e.status, e.code ? e.code : "synthesis_failed", e.message);
}

/* Move the head utterances' audio into the pipe and out as chunks, retire
 * finished ones (flush_done after their audio), and end the context when
 * nothing is left and its input has ended. Returns false when the context
 * was removed. */
static bool context_pump(gp_ws_hub *h, ws_conn *c, ws_context *x) {
    gp_error err;
    gp_error_clear(&err);
    while (x->head) {
        ws_utterance *u = x->head;
        const bool done = gepard_stream_done(u->stream); /* before taking: no audio after done */
        pthread_mutex_lock(&u->lock);
        float *pcm = u->pcm;
        size_t n = u->n, cap = u->cap;
        bool overflow = u->overflow;
        u->pcm = u->taken;
        u->cap = u->cap_taken;
        u->n = 0;
        pthread_mutex_unlock(&u->lock);
        u->taken = pcm;
        u->cap_taken = cap;
        if (n) {
            x->raw_flush_id = u->chunk_flush_id;
            if (gp_audio_pipe_push(&x->pipe, pcm, n, false, &err)) {
                context_fail(h, c, x, 500, "encoding_failed", err.message);
                return false;
            }
        }
        if (overflow) {
            context_fail(h, c, x, 500, "synthesis_failed", "out of memory holding the audio");
            return false;
        }
        if (!done) break;
        gepard_synth_result res;
        gepard_status st = gepard_stream_wait(u->stream, &res); /* finished: at once */
        gp_metrics_stream_finished(h->server->metrics, &res, 0);
        if (st != GEPARD_OK) {
            context_fail_status(h, c, x, st);
            return false;
        }
        x->head = u->next;
        if (!x->head) x->tail = NULL;
        const int flush_done = u->flush_done_id;
        utterance_free(u);
        if (flush_done) {
            send_chunk(c, x);
            char fields[96];
            snprintf(fields, sizeof fields,
                     "\"done\":false,\"flush_done\":true,\"flush_id\":%d,\"status_code\":206",
                     flush_done);
            send_event(c, x, "flush_done", fields);
        }
    }
    if (!x->head && x->ended && x->len == 0) {
        if (gp_audio_pipe_push(&x->pipe, NULL, 0, true, &err) ||
            gp_audio_pipe_finish(&x->pipe, &err)) {
            context_fail(h, c, x, 500, "encoding_failed", err.message);
            return false;
        }
        send_chunk(c, x);
        send_event(c, x, "done", "\"done\":true,\"status_code\":206");
        context_remove(h, c, x);
        return false;
    }
    send_chunk(c, x);
    return true;
}

/* ---- messages ---- */

static void message_cancel(gp_ws_hub *h, ws_conn *c, const cJSON *json) {
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(json, "context_id"));
    ws_context *x = id ? context_find(c, id) : NULL;
    if (x) context_remove(h, c, x); /* Cartesia answers a cancel with nothing */
}

static bool flag(const cJSON *json, const char *key, bool dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(json, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

/* A new context from its first message's options; NULL after an error event. */
static ws_context *context_open(gp_ws_hub *h, ws_conn *c, const cJSON *json, const char *id,
                                const gp_server_backend *b) {
    gp_server *s = h->server;
    if (c->n_contexts >= GP_WS_MAX_CONTEXTS) {
        send_error(c, id, 429, "too_many_contexts",
                   "this connection has too many contexts running; end or cancel one first");
        return NULL;
    }
    ws_context *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    snprintf(x->id, sizeof x->id, "%s", id);
    gp_buf_init(&x->raw);
    gp_speech_options_init(&x->opts);
    gp_api_error e;
    if (gp_cartesia_options_parse(json, s, b->voices, GP_CARTESIA_WEBSOCKET, &x->opts, &e)) {
        char message[GP_ERROR_MESSAGE_MAX + 64];
        snprintf(message, sizeof message, "%s", e.message);
        send_error(c, id, e.status, e.code ? e.code : "invalid_request", message);
        free(x);
        return NULL;
    }
    gp_error err;
    gp_error_clear(&err);
    const int native = gepard_codec_sample_rate(b->codec);
    gp_audio_pipe_params pp = {.in_rate = native,
                               .out_rate = x->opts.sample_rate ? x->opts.sample_rate : native,
                               .speed = x->opts.speed,
                               .volume = x->opts.volume,
                               .format = x->opts.format,
                               .step = (size_t)gepard_codec_samples_per_frame(b->codec)};
    if (gp_audio_pipe_open(&x->pipe, &pp, context_write, x, &err)) {
        send_error(c, id, 500, "internal_error", err.message);
        gp_buf_free(&x->raw);
        free(x);
        return NULL;
    }
    x->last_chunk_s = gp_now_s();
    x->next = c->contexts;
    c->contexts = x;
    c->n_contexts++;
    return x;
}

static void message_generate(gp_ws_hub *h, ws_conn *c, const cJSON *json) {
    gp_server *s = h->server;
    const cJSON *idj = cJSON_GetObjectItemCaseSensitive(json, "context_id");
    const char *id = cJSON_GetStringValue(idj);
    if (!id || !*id || strlen(id) >= GP_CONTEXT_ID_MAX) {
        send_error(c, NULL, 400, "invalid_context_id",
                   "every message needs a context_id: a string of 1-128 bytes that names the "
                   "utterance its transcript belongs to");
        return;
    }
    bool draining;
    pthread_mutex_lock(&h->lock);
    draining = h->draining;
    pthread_mutex_unlock(&h->lock);
    gp_server_backend b;
    gp_api_error e;
    if (draining || !gp_server_backend_get(s, &b, &e)) {
        send_error(c, id, 503, "shutting_down", "the server is shutting down");
        return;
    }
    const cJSON *tj = cJSON_GetObjectItemCaseSensitive(json, "transcript");
    if (tj && !cJSON_IsNull(tj) && !cJSON_IsString(tj)) {
        send_error(c, id, 400, "invalid_type", "transcript must be a string");
        return;
    }
    const char *text = tj && cJSON_IsString(tj) ? tj->valuestring : "";
    ws_context *x = context_find(c, id);
    if (x && x->ended) {
        send_error(c, id, 400, "context_ended",
                   "this context already ended (\"continue\": false); use a new context_id");
        return;
    }
    if (!x && !(x = context_open(h, c, json, id, &b))) return;
    size_t add = strlen(text);
    if (x->len + add > WS_MAX_TEXT) {
        context_fail(h, c, x, 400, "string_above_max_length",
                     "the context's transcript waiting to be spoken passed 64 KiB; end a "
                     "sentence or flush");
        return;
    }
    char *grown = realloc(x->text, x->len + add + 1);
    if (!grown) {
        context_fail(h, c, x, 500, "internal_error", "out of memory");
        return;
    }
    x->text = grown;
    memcpy(x->text + x->len, text, add);
    x->len += add;
    x->text[x->len] = '\0';
    const bool more = flag(json, "continue", false), flush = flag(json, "flush", false);
    if (!more) x->ended = true;
    const int flush_id = flush ? ++x->flushes : 0;
    const size_t n = speakable(x, x->ended || flush);
    if (n) {
        int st = context_speak(h, x, &b, n, flush_id);
        if (st != GEPARD_OK) {
            context_fail_status(h, c, x, st);
            return;
        }
    }
    if (flush) {
        if (x->tail) {
            x->tail->flush_done_id = flush_id;
        } else {
            send_chunk(c, x);
            char fields[96];
            snprintf(fields, sizeof fields,
                     "\"done\":false,\"flush_done\":true,\"flush_id\":%d,\"status_code\":206",
                     flush_id);
            send_event(c, x, "flush_done", fields);
        }
    }
    context_pump(h, c, x);
}

static void on_message(gp_ws_hub *h, ws_conn *c, int opcode, gp_buf *m) {
    if (opcode != GP_WS_TEXT) {
        send_error(c, NULL, 400, "invalid_message",
                   "messages are JSON text: a generation request or {\"context_id\", "
                   "\"cancel\": true}");
        return;
    }
    size_t bad = gp_utf8_invalid_offset(m->data ? m->data : "", m->len);
    if (bad != (size_t)-1) {
        conn_close(c, GP_WS_CLOSE_DATA, "a text message is not UTF-8");
        return;
    }
    cJSON *json = NULL;
    gp_error err;
    gp_error_clear(&err);
    if (gp_json_parse(m->data ? m->data : "", m->len, "message", &json, &err) ||
        !cJSON_IsObject(json)) {
        send_error(c, NULL, 400, "invalid_json",
                   json ? "a message must be a JSON object" : err.message);
        cJSON_Delete(json);
        return;
    }
    if (flag(json, "cancel", false))
        message_cancel(h, c, json);
    else
        message_generate(h, c, json);
    cJSON_Delete(json);
}

/* ---- frames and sockets ---- */

static void conn_read(gp_ws_hub *h, ws_conn *c) {
    for (;;) {
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
    size_t used = 0;
    while (!c->dead && used < c->in.len) {
        gp_ws_frame f;
        const char *why = NULL;
        long k = gp_ws_parse_frame((uint8_t *)c->in.data + used, c->in.len - used, WS_MAX_MESSAGE,
                                   &f, &why);
        if (k == 0) break;
        if (k < 0) {
            conn_close(c, GP_WS_CLOSE_PROTOCOL, why);
            used = c->in.len;
            break;
        }
        used += (size_t)k;
        if (f.opcode == GP_WS_PING) {
            if (gp_ws_append_frame(&c->out, GP_WS_PONG, f.payload, f.len)) c->dead = true;
        } else if (f.opcode == GP_WS_PONG) {
        } else if (f.opcode == GP_WS_CLOSE) {
            int code = f.len >= 2 ? (f.payload[0] << 8) | f.payload[1] : GP_WS_CLOSE_NORMAL;
            conn_close(c, code == 1005 || code == 1006 ? GP_WS_CLOSE_NORMAL : code, "");
            used = c->in.len; /* nothing after a close counts */
        } else if (c->close_sent) {
        } else if (f.opcode == GP_WS_CONTINUATION ? c->msg_opcode < 0 : c->msg_opcode >= 0) {
            conn_close(c, GP_WS_CLOSE_PROTOCOL, "a fragmented message is interleaved wrongly");
        } else if (c->msg.len + f.len > WS_MAX_MESSAGE) {
            conn_close(c, GP_WS_CLOSE_TOO_BIG, "a message is larger than 1 MiB");
        } else {
            if (f.opcode != GP_WS_CONTINUATION) c->msg_opcode = f.opcode;
            if (f.len && gp_buf_append(&c->msg, f.payload, f.len)) c->dead = true;
            if (f.fin && !c->dead) {
                on_message(h, c, c->msg_opcode, &c->msg);
                gp_buf_clear(&c->msg);
                c->msg_opcode = -1;
            }
        }
    }
    memmove(c->in.data, c->in.data + used, c->in.len - used);
    c->in.len -= used;
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
    }
}

static void conn_free(gp_ws_hub *h, ws_conn *c) {
    while (c->contexts) {
        ws_context *x = c->contexts;
        c->contexts = x->next;
        context_free(h, x);
    }
    MHD_upgrade_action(c->urh, MHD_UPGRADE_ACTION_CLOSE); /* libmicrohttpd closes the socket */
    gp_buf_free(&c->in);
    gp_buf_free(&c->msg);
    gp_buf_free(&c->out);
    free(c);
}

/* ---- the hub ---- */

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

static void *hub_main(void *arg) {
    gp_ws_hub *h = arg;
    struct pollfd *fds = NULL;
    size_t cap = 0;
    for (;;) {
        hub_adopt(h);
        pthread_mutex_lock(&h->lock);
        const bool stop = h->stop, draining = h->draining;
        pthread_mutex_unlock(&h->lock);
        size_t n = 1;
        for (ws_conn *c = h->conns; c; c = c->next) n++;
        if (n > cap) {
            struct pollfd *p = realloc(fds, n * sizeof *p);
            if (p) {
                fds = p;
                cap = n;
            }
        }
        if (stop && !h->conns) break;
        size_t k = 0;
        if (cap >= n) {
            fds[k++] = (struct pollfd){.fd = h->efd, .events = POLLIN};
            for (ws_conn *c = h->conns; c; c = c->next)
                fds[k++] = (struct pollfd){.fd = c->fd,
                                           .events = (short)(POLLIN | (c->out.len ? POLLOUT : 0))};
        }
        if (poll(fds, k, 100) < 0 && errno != EINTR) usleep(10000);
        uint64_t count;
        if (read(h->efd, &count, sizeof count) < 0) {
        } /* cleared (non-blocking) */
        const double now = gp_now_s();
        const double idle_limit = h->server->params.request_timeout_s;
        size_t i = 1;
        for (ws_conn **link = &h->conns; *link;) {
            ws_conn *c = *link;
            const short rev = i < k ? fds[i].revents : 0;
            i++;
            if (rev & (POLLIN | POLLHUP | POLLERR)) conn_read(h, c);
            for (ws_context *x = c->contexts, *next; x && !c->dead; x = next) {
                next = x->next;
                context_pump(h, c, x);
            }
            if (stop)
                while (c->contexts) context_remove(h, c, c->contexts); /* cancelled */
            if (!c->contexts && (stop || draining))
                conn_close(c, GP_WS_CLOSE_GOING_AWAY, "the server is shutting down");
            if (!c->contexts && now - c->last_activity > idle_limit)
                conn_close(c, GP_WS_CLOSE_NORMAL, "idle for too long");
            conn_write(c);
            if (c->dead || (c->close_sent && c->out.len == 0) || stop) {
                *link = c->next;
                conn_free(h, c);
                pthread_mutex_lock(&h->lock);
                h->live--;
                pthread_mutex_unlock(&h->lock);
            } else {
                link = &c->next;
            }
        }
        reap_dying(h, false);
    }
    reap_dying(h, true);
    free(fds);
    return NULL;
}

/* The hub, started with the first WebSocket. */
static gp_ws_hub *hub_get(gp_server *s) {
    pthread_mutex_lock(&s->lock);
    gp_ws_hub *h = s->ws_hub;
    if (!h && !s->stopping && (h = calloc(1, sizeof *h))) {
        h->server = s;
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
    pthread_mutex_unlock(&s->lock);
    return h;
}

static void on_upgrade(void *cls, struct MHD_Connection *connection, void *con_cls,
                       const char *extra_in, size_t extra_in_size, MHD_socket sock,
                       struct MHD_UpgradeResponseHandle *urh) {
    (void)connection;
    (void)con_cls;
    gp_server *s = cls;
    gp_ws_hub *h = hub_get(s);
    ws_conn *c = h ? calloc(1, sizeof *c) : NULL;
    if (!c) {
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        return;
    }
    c->fd = sock;
    c->urh = urh;
    c->msg_opcode = -1;
    c->last_activity = gp_now_s();
    gp_buf_init(&c->in);
    gp_buf_init(&c->msg);
    gp_buf_init(&c->out);
    int fl = fcntl(sock, F_GETFL);
    if (fl >= 0) fcntl(sock, F_SETFL, fl | O_NONBLOCK);
    if (extra_in_size && gp_buf_append(&c->in, extra_in, extra_in_size)) c->dead = true;
    pthread_mutex_lock(&h->lock);
    c->next = h->incoming;
    h->incoming = c;
    pthread_mutex_unlock(&h->lock);
    hub_wake(h);
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
    gp_api_error e;
    gp_server_backend b;
    const char *upgrade = header(r, "Upgrade"), *connection = header(r, "Connection");
    const char *version = header(r, "Sec-WebSocket-Version"), *key = header(r, "Sec-WebSocket-Key");
    char accept[29];
    if (!upgrade || strcasecmp(upgrade, "websocket") != 0 || !connection ||
        !header_has_token(connection, "upgrade")) {
        gp_http_fail(&e, 426, NULL, "upgrade_required",
                     "/tts/websocket is a WebSocket: connect with a WebSocket client (ws:// or "
                     "wss://), or use POST /tts/bytes or /tts/sse over plain HTTP");
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
    hub_wake(h);
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
    hub_wake(h);
    pthread_join(h->thread, NULL);
    close(h->efd);
    pthread_mutex_destroy(&h->lock);
    free(h);
}
