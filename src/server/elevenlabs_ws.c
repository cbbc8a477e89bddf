/* elevenlabs_ws.c — ElevenLabs' text-to-speech WebSockets, for voice agents
 * written against them (Pipecat's and LiveKit's ElevenLabs services, the
 * SDKs' realtime helpers) pointed at `gepard serve`:
 *
 *   GET /v1/text-to-speech/{voice_id}/stream-input        one utterance
 *   GET /v1/text-to-speech/{voice_id}/multi-stream-input  several contexts
 *
 * The voice comes from the path, the output format from ?output_format=
 * (ElevenLabs' names, as on the HTTP routes), model_id may be any
 * "eleven_…" id. The key may be a header (xi-api-key, Bearer) or, as
 * browsers cannot set headers, the first message's "xi-api-key" (or
 * "authorization": "Bearer KEY"); without it the socket is closed with 1008.
 *
 * Single stream: the first message ({"text": " ", "voice_settings", …})
 * opens the utterance; each {"text": "…"} adds text, whose whole sentences
 * are spoken at once; "flush": true speaks what is buffered; {"text": ""}
 * speaks the rest, answers {"isFinal": true} and closes the socket.
 * Multi: the same per "context_id" (absent: one default context), where
 * {"text": "", "context_id"} only keeps a context alive, {"context_id",
 * "close_context": true} stops it at once (then its isFinal) and
 * {"close_socket": true} lets every context finish (each its isFinal)
 * before the socket closes. Audio goes out as {"audio": base64} (with
 * "contextId" on the multi socket); no character alignment is sent (Gepard
 * has none). voice_settings.speed applies to a context from its first
 * message (with Gepard's sampling fields, as on HTTP, when a script sends
 * them); the other settings and generation_config steer ElevenLabs' own
 * models and are accepted without effect.
 *
 * The connection is the hub's (ws_hub.c) and each utterance a context of
 * ws_tts.c (sentences as engine streams, at most two running, one audio
 * pipe); this file turns messages into contexts and context output into
 * messages. An error is {"message", "error", "code"}; one that ends the
 * socket closes it (1008 for a client's mistake, 1011 for the server's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "server/base64.h"
#include "server/websocket.h"
#include "server/ws_internal.h"

#define EL_DEFAULT_CONTEXT "default" /* multi: a message without context_id */

/* ---- the handshake ---- */

enum MHD_Result gp_handle_elevenlabs_websocket(gp_http_request *r) {
    gp_api_error e;
    gp_server_backend b;
    ws_upgrade u = {.server = r->server,
                    .dialect = r->el_multi ? WS_DIALECT_EL_MULTI : WS_DIALECT_EL_SINGLE};
    gp_speech_options_init(&u.opts);
    if (!gp_server_backend_get(r->server, &b, &e)) return gp_http_send_error(r, &e);
    u.need_key = !gp_http_authorized(r);
    const char *model =
        MHD_lookup_connection_value(r->connection, MHD_GET_ARGUMENT_KIND, "model_id");
    if (gp_elevenlabs_voice(r, b.voices, &u.opts, &e) ||
        gp_elevenlabs_output_format(r, &u.opts, &e) ||
        gp_elevenlabs_model(r->server, model && *model ? model : NULL, &e)) {
        /* no voice list without the key */
        if (u.need_key && e.code && strcmp(e.code, "voice_not_found") == 0)
            gp_http_fail(&e, 400, "voice_id", "voice_not_found",
                         "voice \"%.100s\" does not exist here", r->model_id);
        return gp_http_send_error(r, &e);
    }
    return gp_ws_upgrade(r, &u);
}

/* ---- messages out ---- */

/* Every message goes out this way: one built in b (rc: whether building
 * failed) gets its "contextId" on the multi socket, is closed and queued; b
 * is freed. */
static void send_built(ws_conn *c, gp_buf *b, const char *context_id, int rc) {
    if (c->dialect == WS_DIALECT_EL_MULTI && context_id)
        rc |= gp_buf_append_str(b, ",\"contextId\":") | gp_json_append_string(b, context_id);
    rc |= gp_buf_append_str(b, "}");
    if (rc)
        c->dead = true;
    else
        gp_ws_send_text(c, b);
    gp_buf_free(b);
}

static void el_audio(ws_conn *c, ws_context *x) {
    /* every chunk of every stream: the base64 goes straight into the message */
    gp_buf b;
    gp_buf_init(&b);
    int rc = gp_buf_append_str(&b, "{\"audio\":\"");
    rc |= gp_base64_append(&b, x->raw.data, x->raw.len);
    rc |= gp_buf_append_str(&b, "\"");
    send_built(c, &b, x->id, rc);
    gp_buf_clear(&x->raw);
}

/* An utterance's estimated character alignment (word_times.h), after its
 * audio: {"audio": "", "alignment", "normalizedAlignment"}. */
static void el_times(ws_conn *c, ws_context *x, const ws_utterance *u) {
    gp_buf a, b;
    gp_buf_init(&a);
    gp_buf_init(&b);
    int rc = gp_char_times_append(&a, u->said, &u->voiced, x->native_rate, x->opts.speed,
                                  GP_CHAR_TIMES_MS) < 0;
    if (!rc) /* the estimate is the same for both keys */
        rc |= gp_buf_append_str(&b, "{\"audio\":\"\",\"alignment\":") |
              gp_buf_append_str(&b, a.data) | gp_buf_append_str(&b, ",\"normalizedAlignment\":") |
              gp_buf_append_str(&b, a.data);
    gp_buf_free(&a);
    send_built(c, &b, x->id, rc);
}

/* The isFinal of a context. */
static void el_context_final(ws_conn *c, const char *context_id) {
    gp_buf b;
    gp_buf_init(&b);
    send_built(c, &b, context_id, gp_buf_append_str(&b, "{\"isFinal\":true"));
}

/* The context is done: {"isFinal": true}; a single-stream socket then closes. */
static void el_done(ws_conn *c, ws_context *x) {
    el_context_final(c, x->id);
    if (c->dialect == WS_DIALECT_EL_SINGLE) gp_ws_close(c, GP_WS_CLOSE_NORMAL, "");
}

void gp_el_ws_send_error(ws_conn *c, const char *context_id, int status, const char *code,
                         const char *text, bool fatal) {
    /* the close code a client acts on: try again later (busy), going away
     * (shutdown), the server's fault, or the client's */
    const bool shutdown = strcmp(code, "shutting_down") == 0;
    const int close_code = status == 429 || (status == 503 && !shutdown) ? 1013
                           : shutdown                                    ? GP_WS_CLOSE_GOING_AWAY
                           : status >= 500                               ? GP_WS_CLOSE_ERROR
                                                                         : GP_WS_CLOSE_POLICY;
    gp_buf b;
    gp_buf_init(&b);
    int rc = gp_buf_append_str(&b, "{\"message\":") | gp_json_append_string(&b, text);
    rc |= gp_buf_append_str(&b, ",\"error\":") | gp_json_append_string(&b, code);
    rc |= gp_buf_printf(&b, ",\"code\":%d", close_code);
    send_built(c, &b, context_id, rc);
    if (fatal) gp_ws_close(c, close_code, code);
}

/* A context's error: a single stream's context is the socket's; a context
 * of many ends alone, with its isFinal (clients end a segment on it). */
static void el_error(ws_conn *c, const char *context_id, bool done, int status, const char *code,
                     const char *message) {
    const bool fatal = done && (c->dialect == WS_DIALECT_EL_SINGLE || !context_id);
    gp_el_ws_send_error(c, context_id, status, code, message, fatal);
    if (done && !fatal && context_id) el_context_final(c, context_id);
}

const ws_speaker gp_el_ws_speaker = {
    .audio = el_audio, .times = el_times, .done = el_done, .error = el_error};

/* ---- messages in ---- */

static bool flag(const cJSON *json, const char *key) {
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(json, key));
}

/* The first message's key when the headers had none. */
static bool check_key(gp_ws_hub *h, ws_conn *c, const cJSON *json) {
    /* "xi-api-key" (InitializeConnection), "xi_api_key" (the SDK's multi messages) */
    const char *key = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(json, "xi-api-key"));
    if (!key) key = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(json, "xi_api_key"));
    const char *auth =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(json, "authorization"));
    if (!key && auth) key = strncmp(auth, "Bearer ", 7) == 0 ? auth + 7 : auth;
    if (key && gp_http_key_matches(h->server, key)) {
        c->el_need_key = false;
        return true;
    }
    gp_el_ws_send_error(c, NULL, 401, "invalid_api_key",
                        "missing or wrong API key: send it as the xi-api-key header, or as "
                        "\"xi-api-key\" in the first message",
                        true);
    return false;
}

/* A new context from its first message (voice_settings.speed applies). */
static ws_context *open_context(gp_ws_hub *h, ws_conn *c, const cJSON *json, const char *id) {
    pthread_mutex_lock(&h->lock);
    const bool draining = h->draining;
    pthread_mutex_unlock(&h->lock);
    gp_server_backend b;
    gp_api_error e;
    if (draining || !gp_server_backend_get(h->server, &b, &e)) {
        gp_el_ws_send_error(c, id, 503, "shutting_down", "the server is shutting down", true);
        return NULL;
    }
    if (c->n_contexts >= GP_WS_MAX_CONTEXTS) {
        gp_el_ws_send_error(c, id, 429, "too_many_contexts",
                            "this socket has too many contexts open; close one first", false);
        return NULL;
    }
    gp_speech_options o = c->el_opts;
    /* each utterance's estimated character times after its audio, unless
     * the server refuses estimated times (--no-word-timestamps) */
    o.word_timestamps = h->server->params.word_timestamps;
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(json, "voice_settings");
    /* and Gepard's sampling fields (temperature, top_k, seed, max_frames, …
     * as on HTTP), which ElevenLabs' clients do not send but a script may */
    if ((cJSON_IsObject(vs) &&
         gp_field_number(vs, "speed", "voice_settings.", 0.25, 4.0, &o.speed, NULL, &e)) ||
        gp_speech_sampling_parse(json, h->server, "", &o.params, &e)) {
        gp_el_ws_send_error(c, id, 400, "invalid_value", e.message,
                            c->dialect == WS_DIALECT_EL_SINGLE);
        return NULL;
    }
    return gp_ws_context_open(h, c, id, &o, &b);
}

void gp_el_ws_on_message(gp_ws_hub *h, ws_conn *c, const cJSON *json) {
    if (c->el_need_key && !check_key(h, c, json)) return;
    const bool multi = c->dialect == WS_DIALECT_EL_MULTI;
    if (multi && flag(json, "close_socket")) { /* every context finishes, then the socket closes */
        c->el_closing = true;
        for (ws_context *x = c->contexts, *next; x; x = next) {
            next = x->next;
            gp_ws_context_add_text(h, c, x, "", true);
        }
        return;
    }
    const cJSON *idj = cJSON_GetObjectItemCaseSensitive(json, "context_id");
    const char *id = multi ? cJSON_GetStringValue(idj) : "0";
    if (multi && idj && (!id || !*id || strlen(id) >= GP_CONTEXT_ID_MAX)) {
        gp_el_ws_send_error(c, NULL, 400, "invalid_context_id",
                            "context_id must be a string of 1-128 bytes", false);
        return;
    }
    if (!id) id = EL_DEFAULT_CONTEXT;
    ws_context *x = gp_ws_context_find(c, id);
    if (multi && flag(json, "close_context")) {
        /* the text not yet flushed is dropped; what was (whole sentences
         * and flushes, queued) finishes, then its isFinal */
        if (!x) {
            gp_el_ws_send_error(c, id, 400, "context_not_found", "no such context is open", false);
            return;
        }
        x->len = 0;
        gp_ws_context_add_text(h, c, x, "", true);
        return;
    }
    const cJSON *tj = cJSON_GetObjectItemCaseSensitive(json, "text");
    if (tj && !cJSON_IsString(tj)) {
        gp_el_ws_send_error(c, id, 400, "invalid_text", "text must be a string", !multi);
        return;
    }
    const char *text = cJSON_IsString(tj) ? tj->valuestring : NULL;
    if (x && x->ended) {
        gp_el_ws_send_error(c, id, 400, "context_ended",
                            multi ? "this context is closing; use a new context_id"
                                  : "the stream has ended ({\"text\": \"\"} came)",
                            false);
        return;
    }
    if (multi && text && !*text) { /* a keep-alive (with a flush, a flush) */
        if (x && flag(json, "flush")) gp_ws_context_flush(h, c, x);
        return;
    }
    if (!x && c->el_closing) {
        gp_el_ws_send_error(c, id, 400, "socket_closing",
                            "close_socket came: this socket takes no new context", false);
        return;
    }
    if (!x && !(x = open_context(h, c, json, id))) return;
    if (text && !*text) { /* single: the end of the input */
        gp_ws_context_add_text(h, c, x, "", true);
        return;
    }
    if (text && !gp_ws_context_add_text(h, c, x, text, false)) return;
    if (flag(json, "flush")) gp_ws_context_flush(h, c, x);
}
