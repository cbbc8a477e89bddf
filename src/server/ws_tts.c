/* ws_tts.c — Cartesia's WebSocket, GET /tts/websocket: text that arrives in
 * pieces (a voice agent forwarding an LLM's tokens) spoken as it becomes
 * whole sentences, several contexts per connection.
 *
 * The sockets are ws_hub.c's: the handshake, answered 101 through
 * libmicrohttpd's upgrade, and one thread of the server, the hub, that
 * serves every WebSocket (polling their sockets and an eventfd the engine's
 * callbacks write to) and calls in here for each whole message and to pump
 * each context's audio — nothing blocks on a client. This file is the
 * protocol: contexts, their utterances, the events.
 *
 * A context (context_id) takes Cartesia's generation request: its first
 * message sets the voice, output format and sampling (as /tts/sse: raw audio
 * only), and each message adds to its transcript. With "continue": true the
 * complete sentences so far are spoken at once (an unfinished one waits for
 * more text); "flush": true speaks everything buffered and answers
 * flush_done once its audio has gone out; "continue": false (the default)
 * speaks the rest and ends the context with `done`. Each spoken piece is one
 * engine stream (an utterance); at most WS_CONTEXT_AHEAD of a context run at
 * once (the one playing and the next), and their audio goes out strictly in
 * order through the context's one audio pipe (rate, speed, encoder), so the
 * client hears one signal. {"context_id",
 * "cancel": true} stops a context.
 *
 * Limits: GP_WS_MAX_CONTEXTS per connection, 1 MiB a message, 64 KiB of
 * buffered transcript a context, 8 MiB of unsent output (a client that does
 * not read is closed), and a connection idle for the request time limit is
 * closed. At shutdown new generations are refused, running contexts get the
 * drain time, then every connection is closed with 1001. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/timing.h"
#include "io/json.h"
#include "server/base64.h"
#include "server/websocket.h"
#include "server/ws_internal.h"
#include "text/clean.h"
#include "text/segment.h"

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
    gp_ws_hub_wake(u->hub);
    return stop;
}

static void on_done(gepard_status status, void *user) {
    (void)status;
    gp_ws_hub_wake(((ws_utterance *)user)->hub);
}

static void utterance_free(ws_utterance *u) {
    gepard_stream_free(u->stream);
    free(u->text);
    free(u->said);
    pthread_mutex_destroy(&u->lock);
    free(u->pcm);
    free(u->taken);
    free(u);
}

/* Cancel and hand to the hub's dying list (freed once the engine is done). */
static void utterance_drop(gp_ws_hub *h, ws_utterance *u) {
    if (!u->stream) { /* never started */
        utterance_free(u);
        return;
    }
    gepard_stream_cancel(u->stream);
    u->next = h->dying;
    h->dying = u;
}

void gp_ws_reap_dying(gp_ws_hub *h, bool wait) {
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

void gp_ws_send_text(ws_conn *c, const gp_buf *json) {
    if (c->dead || c->close_sent) return;
    if (gp_ws_append_frame(&c->out, GP_WS_TEXT, json->data, json->len)) c->dead = true;
    if (c->out.len - c->out_pos > WS_MAX_OUT) {
        GP_WARN("websocket: a client does not read its audio; closing it");
        c->dead = true;
    }
}

void gp_ws_close(ws_conn *c, int code, const char *reason) {
    if (c->close_sent || c->dead) return;
    /* Wyoming has no close event: the socket closes once `out` is written */
    if (c->proto == WS_PROTO_WEBSOCKET && gp_ws_append_close(&c->out, code, reason)) c->dead = true;
    c->close_sent = true;
}

void gp_ws_send_error(ws_conn *c, const char *context_id, bool done, int status, const char *code,
                      const char *message) {
    c->speaker->error(c, context_id, done, status, code, message);
}

static void cartesia_error(ws_conn *c, const char *context_id, bool done, int status,
                           const char *code, const char *message) {
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_printf(&b,
                  "{\"type\":\"error\",\"done\":%s,\"status_code\":%d,\"title\":\"%s\","
                  "\"error_code\":\"%s\",\"message\":",
                  done ? "true" : "false", status,
                  status >= 500 ? "Server error" : "Invalid request", code);
    gp_json_append_string(&b, message);
    /* always the key (null for the connection's own errors): clients index it */
    gp_buf_append_str(&b, ",\"context_id\":");
    if (context_id && *context_id)
        gp_json_append_string(&b, context_id);
    else
        gp_buf_append_str(&b, "null");
    gp_buf_append_str(&b, "}");
    gp_ws_send_text(c, &b);
    gp_buf_free(&b);
}

static void send_event(ws_conn *c, const ws_context *x, const char *type, const char *fields) {
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_printf(&b, "{\"type\":\"%s\",%s,\"context_id\":", type, fields);
    gp_json_append_string(&b, x->id);
    gp_buf_append_str(&b, "}");
    gp_ws_send_text(c, &b);
    gp_buf_free(&b);
}

static void cartesia_done(ws_conn *c, ws_context *x) {
    send_event(c, x, "done", "\"done\":true,\"status_code\":206");
}

/* The context's encoded audio so far, in the connection's protocol. */
static void send_chunk(ws_conn *c, ws_context *x) {
    if (x->raw.len) c->speaker->audio(c, x);
}

/* Cartesia's: one chunk event. */
static void cartesia_audio(ws_conn *c, ws_context *x) {
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
    gp_ws_send_text(c, &b);
    gp_buf_free(&b);
    gp_buf_clear(&x->raw);
    x->last_chunk_s = now;
}

/* ---- contexts ---- */

static int context_write(const void *data, size_t len, void *user) {
    return gp_buf_append(&((ws_context *)user)->raw, data, len);
}

void gp_ws_context_free(gp_ws_hub *h, ws_context *x) {
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

void gp_ws_context_remove(gp_ws_hub *h, ws_conn *c, ws_context *x) {
    for (ws_context **l = &c->contexts; *l; l = &(*l)->next)
        if (*l == x) {
            *l = x->next;
            c->n_contexts--;
            break;
        }
    gp_ws_context_free(h, x);
}

ws_context *gp_ws_context_find(ws_conn *c, const char *id) {
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

/* The waiting text up to its last space, once it has waited
 * max_buffer_delay_ms (a word still being typed is not cut). */
static size_t speakable_after_delay(const ws_context *x, double now) {
    if (x->buffer_delay_ms < 0 || !x->text_since ||
        now - x->text_since < x->buffer_delay_ms / 1000.0)
        return 0;
    size_t n = x->len;
    while (n > 0 && !strchr(" \t\r\n", x->text[n - 1])) n--;
    return n;
}

/* After text was added or spoken: when the text that waits now began to. */
static void note_waiting(ws_context *x, double now, bool spoke) {
    bool blank = true;
    for (size_t i = 0; i < x->len && blank; i++) blank = strchr(" \t\r\n", x->text[i]) != NULL;
    if (blank)
        x->text_since = 0;
    else if (spoke || !x->text_since)
        x->text_since = now;
}

/* Queue an utterance for the first n bytes of the context's text (blank
 * text is only dropped); context_start_ahead starts it. */
static int context_speak(gp_ws_hub *h, ws_context *x, size_t n, int flush_id) {
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
    u->text = piece;
    gp_voiced_span_init(&u->voiced);
    pthread_mutex_init(&u->lock, NULL);
    u->chunk_flush_id = flush_id;
    if (x->tail)
        x->tail->next = u;
    else
        x->head = u;
    x->tail = u;
    return GEPARD_OK;
}

/* Start the first WS_CONTEXT_AHEAD utterances of the context that are not
 * running yet. GEPARD_OK, or the engine's status for the one that failed. */
static int context_start_ahead(ws_context *x) {
    int k = 0;
    for (ws_utterance *u = x->head; u && k < WS_CONTEXT_AHEAD; u = u->next, k++) {
        if (u->stream) continue;
        gepard_synth_params p = x->opts.params;
        p.voice = x->opts.voice_entry ? x->opts.voice_entry->voice : NULL;
        p.lora = x->opts.voice_entry ? x->opts.voice_entry->lora : NULL;
        p.split_text = 1;
        gepard_stream_callbacks cb = {.on_audio = on_audio, .on_done = on_done, .user = u};
        gepard_status st = gepard_stream_start(x->engine, u->text, &p, &cb, &u->stream);
        if (st == GEPARD_ERR_BUSY) {
            /* the engine's queue is full: try again at the hub's next pass;
             * only the piece the listener waits for runs out of time */
            u->stream = NULL;
            const double now = gp_now_s();
            if (!u->busy_since) u->busy_since = now;
            if (u == x->head && now - u->busy_since > WS_BUSY_LIMIT_S) return (int)st;
            break;
        }
        if (st != GEPARD_OK) {
            u->stream = NULL;
            return (int)st;
        }
        if (x->opts.word_timestamps)
            u->said = u->text; /* kept for the word times */
        else
            free(u->text);
        u->text = NULL;
    }
    return GEPARD_OK;
}

/* Cartesia's estimated word times of a finished utterance (word_times.h),
 * after its audio; they count from the context's start. */
static void cartesia_times(ws_conn *c, ws_context *x, const ws_utterance *u) {
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_append_str(&b, "{\"type\":\"timestamps\",\"done\":false,\"status_code\":206,"
                          "\"estimated\":true,\"word_timestamps\":");
    gp_word_times_append(&b, u->said, &u->voiced, x->native_rate, x->opts.speed, x->audio_s);
    gp_buf_append_str(&b, ",\"context_id\":");
    gp_json_append_string(&b, x->id);
    gp_buf_append_str(&b, "}");
    gp_ws_send_text(c, &b);
    gp_buf_free(&b);
}

/* A context failed: its error event, then it is gone. */
static void context_fail(gp_ws_hub *h, ws_conn *c, ws_context *x, int status, const char *code,
                         const char *message) {
    send_chunk(c, x); /* what it had made goes first */
    gp_ws_send_error(c, x->id, true, status, code, message);
    gp_ws_context_remove(h, c, x);
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
bool gp_ws_context_pump(gp_ws_hub *h, ws_conn *c, ws_context *x) {
    gp_error err;
    gp_error_clear(&err);
    const double now = gp_now_s();
    const size_t late = speakable_after_delay(x, now);
    if (late) {
        if (context_speak(h, x, late, 0) != GEPARD_OK) {
            context_fail(h, c, x, 500, "internal_error", "out of memory");
            return false;
        }
        note_waiting(x, now, true);
    }
    int st = context_start_ahead(x);
    if (st != GEPARD_OK) {
        context_fail_status(h, c, x, st);
        return false;
    }
    while (x->head && x->head->stream) {
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
            if (u->said) gp_voiced_span_feed(&u->voiced, pcm, n);
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
        st = gepard_stream_wait(u->stream, &res); /* finished: at once */
        gp_metrics_stream_finished(h->server->metrics, &res, 0);
        if (st != GEPARD_OK) {
            context_fail_status(h, c, x, st);
            return false;
        }
        x->head = u->next;
        if (!x->head) x->tail = NULL;
        if (u->said) {
            send_chunk(c, x);
            if (c->speaker->times) c->speaker->times(c, x, u);
        }
        x->audio_s += (double)u->voiced.samples / x->native_rate / x->opts.speed;
        const int first = u->flush_done_first, last = u->flush_done_last;
        utterance_free(u);
        if (first) send_chunk(c, x);
        for (int fid = first; fid && fid <= last; fid++) {
            char fields[96];
            snprintf(fields, sizeof fields,
                     "\"done\":false,\"flush_done\":true,\"flush_id\":%d,\"status_code\":206", fid);
            send_event(c, x, "flush_done", fields);
        }
        if ((st = context_start_ahead(x)) != GEPARD_OK) { /* the next takes its place */
            context_fail_status(h, c, x, st);
            return false;
        }
    }
    if (!x->head && x->ended && x->len == 0) {
        if (gp_audio_pipe_push(&x->pipe, NULL, 0, true, &err) ||
            gp_audio_pipe_finish(&x->pipe, &err)) {
            context_fail(h, c, x, 500, "encoding_failed", err.message);
            return false;
        }
        send_chunk(c, x);
        c->speaker->done(c, x);
        gp_ws_context_remove(h, c, x);
        return false;
    }
    send_chunk(c, x);
    return true;
}

/* ---- messages ---- */

static void message_cancel(gp_ws_hub *h, ws_conn *c, const cJSON *json) {
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(json, "context_id"));
    ws_context *x = id ? gp_ws_context_find(c, id) : NULL;
    if (x) gp_ws_context_remove(h, c, x); /* Cartesia answers a cancel with nothing */
}

static bool flag(const cJSON *json, const char *key, bool dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(json, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

/* A new context from its first message's options; NULL after an error event. */
static ws_context *context_open(gp_ws_hub *h, ws_conn *c, const cJSON *json, const char *id,
                                const gp_server_backend *b) {
    const gp_server *s = h->server;
    if (c->n_contexts >= GP_WS_MAX_CONTEXTS) {
        gp_ws_send_error(c, id, true, 429, "too_many_contexts",
                         "this connection has too many contexts running; end or cancel one first");
        return NULL;
    }
    gp_speech_options opts;
    gp_speech_options_init(&opts);
    gp_api_error e;
    if (gp_cartesia_options_parse(json, s, b->voices, GP_CARTESIA_WEBSOCKET, &opts, &e)) {
        char message[GP_ERROR_MESSAGE_MAX + 64];
        snprintf(message, sizeof message, "%s", e.message);
        gp_ws_send_error(c, id, true, e.status, e.code ? e.code : "invalid_request", message);
        return NULL;
    }
    return gp_ws_context_open(h, c, id, &opts, b);
}

ws_context *gp_ws_context_open(gp_ws_hub *h, ws_conn *c, const char *id,
                               const gp_speech_options *opts, const gp_server_backend *b) {
    (void)h;
    ws_context *x = calloc(1, sizeof *x);
    if (!x) {
        gp_ws_send_error(c, id, true, 500, "internal_error", "out of memory");
        return NULL;
    }
    snprintf(x->id, sizeof x->id, "%s", id);
    gp_buf_init(&x->raw);
    x->opts = *opts;
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
        gp_ws_send_error(c, id, true, 500, "internal_error", err.message);
        gp_buf_free(&x->raw);
        free(x);
        return NULL;
    }
    x->last_chunk_s = gp_now_s();
    x->engine = b->engine;
    x->native_rate = native;
    x->buffer_delay_ms = -1;
    x->next = c->contexts;
    c->contexts = x;
    c->n_contexts++;
    return x;
}

/* Add text to the context's transcript; false when the context failed. */
static bool context_append(gp_ws_hub *h, ws_conn *c, ws_context *x, const char *text) {
    size_t add = strlen(text);
    if (x->len + add > WS_MAX_TEXT) {
        context_fail(h, c, x, 400, "string_above_max_length",
                     "the context's transcript waiting to be spoken passed 64 KiB; end a "
                     "sentence or flush");
        return false;
    }
    char *grown = realloc(x->text, x->len + add + 1);
    if (!grown) {
        context_fail(h, c, x, 500, "internal_error", "out of memory");
        return false;
    }
    x->text = grown;
    memcpy(x->text + x->len, text, add);
    x->len += add;
    x->text[x->len] = '\0';
    return true;
}

/* Queue what the transcript completes (everything when `all`) as an
 * utterance; false when the context failed. */
static bool context_speak_ready(gp_ws_hub *h, ws_conn *c, ws_context *x, bool all, int flush_id) {
    const size_t n = speakable(x, all);
    if (n && context_speak(h, x, n, flush_id) != GEPARD_OK) {
        context_fail(h, c, x, 500, "internal_error", "out of memory");
        return false;
    }
    note_waiting(x, gp_now_s(), n > 0);
    return true;
}

bool gp_ws_context_flush(gp_ws_hub *h, ws_conn *c, ws_context *x) {
    return context_speak_ready(h, c, x, true, 0) && gp_ws_context_pump(h, c, x);
}

bool gp_ws_context_add_text(gp_ws_hub *h, ws_conn *c, ws_context *x, const char *text, bool end) {
    if (!context_append(h, c, x, text)) return false;
    if (end) x->ended = true;
    if (!context_speak_ready(h, c, x, x->ended, 0)) return false;
    return gp_ws_context_pump(h, c, x);
}

static void message_generate(gp_ws_hub *h, ws_conn *c, const cJSON *json) {
    gp_server *s = h->server;
    const cJSON *idj = cJSON_GetObjectItemCaseSensitive(json, "context_id");
    const char *id = cJSON_GetStringValue(idj);
    if (!id || !*id || strlen(id) >= GP_CONTEXT_ID_MAX) {
        gp_ws_send_error(c, NULL, true, 400, "invalid_context_id",
                         "every message needs a context_id: a string of 1-128 bytes that names the "
                         "utterance its transcript belongs to");
        return;
    }
    ws_context *x = gp_ws_context_find(c, id);
    const cJSON *tj = cJSON_GetObjectItemCaseSensitive(json, "transcript");
    if (tj && !cJSON_IsNull(tj) && !cJSON_IsString(tj)) {
        /* a running context goes on (done: false); no new one is made */
        gp_ws_send_error(c, id, !x, 400, "invalid_type", "transcript must be a string");
        return;
    }
    const char *text = tj && cJSON_IsString(tj) ? tj->valuestring : "";
    if (x && x->ended) {
        gp_ws_send_error(c, id, false, 400, "context_ended",
                         "this context already ended (\"continue\": false); its audio goes on; "
                         "use a new context_id for more");
        return;
    }
    if (!x) {
        /* a shutting-down server finishes its contexts but starts none */
        pthread_mutex_lock(&h->lock);
        const bool draining = h->draining;
        pthread_mutex_unlock(&h->lock);
        gp_server_backend b;
        gp_api_error e;
        if (draining || !gp_server_backend_get(s, &b, &e)) {
            gp_ws_send_error(c, id, true, 503, "shutting_down", "the server is shutting down");
            return;
        }
        if (!(x = context_open(h, c, json, id, &b))) return;
    }
    const cJSON *delay = cJSON_GetObjectItemCaseSensitive(json, "max_buffer_delay_ms");
    if (delay && !cJSON_IsNull(delay)) {
        if (!cJSON_IsNumber(delay) || delay->valuedouble < 0 || delay->valuedouble > 5000) {
            context_fail(h, c, x, 400, "invalid_value",
                         "max_buffer_delay_ms must be a number of milliseconds from 0 to 5000");
            return;
        }
        x->buffer_delay_ms = (int)delay->valuedouble;
    }
    if (!context_append(h, c, x, text)) return;
    const bool more = flag(json, "continue", false), flush = flag(json, "flush", false);
    if (!more) x->ended = true;
    const int flush_id = flush ? ++x->flushes : 0;
    if (!context_speak_ready(h, c, x, x->ended || flush, flush_id)) return;
    if (flush) {
        if (x->tail) {
            if (!x->tail->flush_done_first) x->tail->flush_done_first = flush_id;
            x->tail->flush_done_last = flush_id;
        } else {
            send_chunk(c, x);
            char fields[96];
            snprintf(fields, sizeof fields,
                     "\"done\":false,\"flush_done\":true,\"flush_id\":%d,\"status_code\":206",
                     flush_id);
            send_event(c, x, "flush_done", fields);
        }
    }
    gp_ws_context_pump(h, c, x);
}

void gp_ws_on_message(gp_ws_hub *h, ws_conn *c, int opcode, gp_buf *m) {
    if (opcode != GP_WS_TEXT) {
        gp_ws_send_error(c, NULL, true, 400, "invalid_message",
                         "messages are JSON text: a generation request or {\"context_id\", "
                         "\"cancel\": true}");
        return;
    }
    size_t bad = gp_utf8_invalid_offset(m->data ? m->data : "", m->len);
    if (bad != (size_t)-1) {
        gp_ws_close(c, GP_WS_CLOSE_DATA, "a text message is not UTF-8");
        return;
    }
    cJSON *json = NULL;
    gp_error err;
    gp_error_clear(&err);
    if (gp_json_parse(m->data ? m->data : "", m->len, "message", &json, &err) ||
        !cJSON_IsObject(json)) {
        gp_ws_send_error(c, NULL, true, 400, "invalid_json",
                         json ? "a message must be a JSON object" : err.message);
        cJSON_Delete(json);
        return;
    }
    if (c->dialect != WS_DIALECT_CARTESIA)
        gp_el_ws_on_message(h, c, json);
    else if (flag(json, "cancel", false))
        message_cancel(h, c, json);
    else
        message_generate(h, c, json);
    cJSON_Delete(json);
}

const ws_speaker gp_ws_cartesia_speaker = {.audio = cartesia_audio,
                                           .times = cartesia_times,
                                           .done = cartesia_done,
                                           .error = cartesia_error};
