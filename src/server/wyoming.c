/* wyoming.c — Home Assistant's Wyoming protocol on a port of its own
 * (`gepard serve --wyoming-port 10200`), so Home Assistant (its Wyoming
 * integration, the Assist pipeline) and other Wyoming clients speak with
 * Gepard as they do with Piper.
 *
 * An event is one line of JSON {"type", "data"?, "data_length"?,
 * "payload_length"?}, then data_length bytes of JSON merged over "data",
 * then payload_length bytes of payload. Served here:
 *   describe                  → info (one TTS program, "gepard", its voices,
 *                               supports_synthesize_streaming)
 *   synthesize {text, voice?} → audio-start, audio-chunk…, audio-stop
 *   synthesize-start {voice?}, synthesize-chunk {text}…, synthesize-stop
 *                             → the audio of each complete sentence as soon
 *                               as it is (one audio-start … audio-stop),
 *                               then synthesize-stopped. A `synthesize`
 *                               inside such a stream (Home Assistant sends
 *                               the whole text too, for older servers) is
 *                               ignored.
 *   ping {text?}              → pong {text}
 * A synthesize or synthesize-start may also carry Gepard's sampling fields
 * (temperature, top_k, seed, max_frames, … as on HTTP).
 * Audio is raw 16-bit mono PCM at the codec's rate (22 050 Hz), one chunk
 * per codec frame as it is generated. Requests on one connection are served
 * in order (a second synthesis waits for the first, as Piper's server does);
 * Home Assistant opens a connection per request.
 *
 * The sockets are the hub's (ws_hub.c) and a synthesis is a context of
 * ws_tts.c (sentences as engine streams, two running at once, one audio
 * pipe): this file turns events into contexts and context output into
 * events. A request that fails gets an error event {text, code} and its
 * connection is closed, so a client waiting for audio-stop stops waiting; an
 * event type this server does not serve gets an error event and the
 * connection goes on. Wyoming has no authentication: the port listens on
 * --host like the HTTP port. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "io/json.h"
#include "server/ws_internal.h"
#include "text/clean.h"

#define WY_VERSION "1.8.0"         /* of the protocol our events follow (the Python library's) */
#define WY_MAX_PART WS_MAX_MESSAGE /* a header line, its data, its payload */
#define WY_CONTEXT_ID "wyoming"

/* ---- events out ---- */

/* Queue one event: its header line, data (NULL: none) and payload. */
static void send_event(ws_conn *c, const char *type, const cJSON *data, const void *payload,
                       size_t n) {
    if (c->dead || c->close_sent) return;
    char *json = data ? cJSON_PrintUnformatted(data) : NULL;
    if (data && !json) {
        c->dead = true;
        return;
    }
    const size_t dlen = json ? strlen(json) : 0;
    gp_buf_printf(&c->out, "{\"type\":\"%s\",\"version\":\"%s\"", type, WY_VERSION);
    if (dlen) gp_buf_printf(&c->out, ",\"data_length\":%zu", dlen);
    if (n) gp_buf_printf(&c->out, ",\"payload_length\":%zu", n);
    int rc = gp_buf_append_str(&c->out, "}\n");
    if (!rc && dlen) rc = gp_buf_append(&c->out, json, dlen);
    if (!rc && n) rc = gp_buf_append(&c->out, payload, n);
    cJSON_free(json);
    if (rc) c->dead = true;
    if (c->out.len - c->out_pos > WS_MAX_OUT) {
        GP_WARN("wyoming: a client does not read its audio; closing it");
        c->dead = true;
    }
}

static cJSON *audio_format(int rate, uint64_t samples) {
    cJSON *d = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "rate", rate);
    cJSON_AddNumberToObject(d, "width", 2);
    cJSON_AddNumberToObject(d, "channels", 1);
    cJSON_AddNumberToObject(d, "timestamp", (double)(samples * 1000 / (uint64_t)rate));
    return d;
}

static int context_rate(const ws_context *x) {
    return x->opts.sample_rate ? x->opts.sample_rate : x->native_rate;
}

static void send_audio_start(ws_conn *c, ws_context *x) {
    if (x->wy_audio_started) return;
    cJSON *d = audio_format(context_rate(x), 0);
    send_event(c, "audio-start", d, NULL, 0);
    cJSON_Delete(d);
    x->wy_audio_started = true;
}

/* The context's encoded audio as audio-start (first) and audio-chunk events. */
static void wy_audio(ws_conn *c, ws_context *x) {
    send_audio_start(c, x);
    cJSON *d = audio_format(context_rate(x), x->wy_samples);
    send_event(c, "audio-chunk", d, x->raw.data, x->raw.len);
    cJSON_Delete(d);
    x->wy_samples += x->raw.len / 2;
    gp_buf_clear(&x->raw);
}

/* The context is done: audio-stop (and synthesize-stopped for a stream). */
static void wy_done(ws_conn *c, ws_context *x) {
    /* a plain synthesize always gets its audio-start … audio-stop (a client
     * waits for the stop); a stream that said nothing gets neither */
    if (!x->wy_streaming) send_audio_start(c, x);
    if (x->wy_audio_started) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddNumberToObject(d, "timestamp",
                                (double)(x->wy_samples * 1000 / (uint64_t)context_rate(x)));
        send_event(c, "audio-stop", d, NULL, 0);
        cJSON_Delete(d);
    }
    if (x->wy_streaming) send_event(c, "synthesize-stopped", NULL, NULL, 0);
}

void gp_wy_send_error(ws_conn *c, const char *code, const char *text, bool fatal) {
    /* the text may quote a client's bytes cut short: it goes out as UTF-8
     * up to its first flaw (Python's reader drops a line that is not) */
    char clean[GP_ERROR_MESSAGE_MAX + 256];
    snprintf(clean, sizeof clean, "%s", text);
    const size_t bad = gp_utf8_invalid_offset(clean, strlen(clean));
    if (bad != (size_t)-1) clean[bad] = '\0';
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "text", clean);
    cJSON_AddStringToObject(d, "code", code ? code : "error");
    send_event(c, "error", d, NULL, 0);
    cJSON_Delete(d);
    if (fatal) gp_ws_close(c, 0, NULL);
}

/* A context's error: a failed request ends its connection (a Wyoming
 * client waits for audio-stop, and a closed socket is what tells it to stop
 * waiting); the status has no place in the event. */
static void wy_error(ws_conn *c, const char *context_id, bool done, int status, const char *code,
                     const char *message) {
    (void)context_id;
    (void)status;
    gp_wy_send_error(c, code, message, done);
}

/* No estimated times: a Wyoming request never asks for them. */
const ws_speaker gp_wy_speaker = {
    .audio = wy_audio, .times = NULL, .done = wy_done, .error = wy_error};

/* ---- describe → info ---- */

static cJSON *attribution(void) {
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "name", "nineninesix");
    cJSON_AddStringToObject(a, "url", "https://huggingface.co/nineninesix/gepard-1.0");
    return a;
}

/* The voices Home Assistant offers: the server's own (--voices) and the
 * model's default one (the OpenAI names only repeat the default here). */
static cJSON *voice_list(const gp_voices *voices) {
    cJSON *list = cJSON_CreateArray();
    const int n = gp_voices_listed_count(voices);
    for (int i = 0; i < n; i++) {
        const gp_voice_entry *entry = NULL;
        const char *name = gp_voices_listed(voices, i, &entry);
        if (!entry && strcmp(name, "default") != 0) continue;
        if (gp_utf8_invalid_offset(name, strlen(name)) != (size_t)-1) continue; /* not JSON */
        cJSON *v = cJSON_CreateObject();
        cJSON_AddStringToObject(v, "name", name);
        cJSON_AddItemToObject(v, "attribution", attribution());
        cJSON_AddBoolToObject(v, "installed", true);
        char description[GP_VOICE_NAME_MAX + 64];
        if (!entry)
            snprintf(description, sizeof description, "Gepard (the model's own voice)");
        else
            snprintf(description, sizeof description, "Gepard: %s%s", name,
                     entry->voice && entry->lora ? " (cloned, with an adapter)"
                     : entry->lora               ? " (an adapter)"
                                                 : " (cloned)");
        cJSON_AddStringToObject(v, "description", description);
        cJSON_AddNullToObject(v, "version");
        cJSON *languages = cJSON_AddArrayToObject(v, "languages");
        cJSON_AddItemToArray(languages, cJSON_CreateString("en"));
        cJSON_AddNullToObject(v, "speakers");
        cJSON_AddItemToArray(list, v);
    }
    return list;
}

static void send_info(ws_conn *c, const gp_server_backend *b) {
    cJSON *d = cJSON_CreateObject();
    cJSON *program = cJSON_CreateObject();
    cJSON_AddStringToObject(program, "name", "gepard");
    cJSON_AddItemToObject(program, "attribution", attribution());
    cJSON_AddBoolToObject(program, "installed", true);
    cJSON_AddStringToObject(program, "description",
                            "Gepard-1.0 text to speech, streamed as it is generated (gepard.c)");
    cJSON_AddStringToObject(program, "version", gepard_version());
    cJSON_AddItemToObject(program, "voices", voice_list(b->voices));
    cJSON_AddBoolToObject(program, "supports_synthesize_streaming", true);
    cJSON_AddItemToObject(d, "asr", cJSON_CreateArray());
    cJSON *tts = cJSON_AddArrayToObject(d, "tts");
    cJSON_AddItemToArray(tts, program);
    static const char *const other[] = {"handle", "intent", "wake", "mic", "snd"};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        cJSON_AddItemToObject(d, other[i], cJSON_CreateArray());
    send_event(c, "info", d, NULL, 0);
    cJSON_Delete(d);
}

/* ---- synthesis ---- */

/* The backend for a new request, or an error event (closing) and false. */
static bool backend_for_request(gp_ws_hub *h, ws_conn *c, gp_server_backend *b) {
    pthread_mutex_lock(&h->lock);
    const bool draining = h->draining;
    pthread_mutex_unlock(&h->lock);
    gp_api_error e;
    if (draining) {
        gp_wy_send_error(c, "shutting_down", "the server is shutting down", true);
        return false;
    }
    if (!gp_server_backend_get(h->server, b, &e)) { /* loading, or stopping */
        gp_wy_send_error(c, e.code ? e.code : "not_ready", e.message, true);
        return false;
    }
    return true;
}

/* A new context for a request's `voice` ({name, speaker, language}); NULL
 * after an error event. */
static ws_context *open_request(gp_ws_hub *h, ws_conn *c, const cJSON *data, bool streaming) {
    gp_server_backend b;
    if (!backend_for_request(h, c, &b)) return NULL;
    gp_speech_options o;
    gp_speech_options_init(&o);
    o.format = GP_AUDIO_PCM16;
    o.sample_rate = 0; /* the codec's */
    const cJSON *voice = cJSON_GetObjectItemCaseSensitive(data, "voice");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(voice, "name");
    gp_api_error e;
    if (voice && !cJSON_IsNull(voice) && !cJSON_IsObject(voice)) {
        gp_metrics_count_request(h->server->metrics, GP_ROUTE_WYOMING, 400);
        gp_wy_send_error(c, "invalid_voice",
                         "voice must be an object {\"name\": …} (the names info lists)", true);
        return NULL;
    }
    if (name && !cJSON_IsNull(name)) {
        if (!cJSON_IsString(name) ||
            gp_speech_voice_set(b.voices, name->valuestring, "voice.name", &o, &e)) {
            gp_metrics_count_request(h->server->metrics, GP_ROUTE_WYOMING, 400);
            gp_wy_send_error(c, "voice_not_found",
                             cJSON_IsString(name) ? e.message
                                                  : "voice.name must be a string: a voice "
                                                    "name from the info event",
                             true);
            return NULL;
        }
    }
    /* Gepard's sampling fields (temperature, top_k, seed, max_frames, …, as
     * on HTTP), which no Wyoming client sends but a script may */
    if (gp_speech_sampling_parse(data, h->server, "", &o.params, &e)) {
        gp_metrics_count_request(h->server->metrics, GP_ROUTE_WYOMING, 400);
        gp_wy_send_error(c, "invalid_value", e.message, true);
        return NULL;
    }
    ws_context *x = gp_ws_context_open(h, c, WY_CONTEXT_ID, &o, &b);
    if (!x) return NULL;
    x->wy_streaming = streaming;
    gp_metrics_count_request(h->server->metrics, GP_ROUTE_WYOMING, 200);
    return x;
}

/* The text of a synthesize or synthesize-chunk; NULL after an error event. */
static const char *event_text(ws_conn *c, const cJSON *data, const char *type, bool fatal) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(data, "text");
    if (!cJSON_IsString(t)) {
        char why[128];
        snprintf(why, sizeof why, "%s needs \"text\": a string", type);
        gp_wy_send_error(c, "invalid_text", why, fatal);
        return NULL;
    }
    if (strlen(t->valuestring) > WS_MAX_TEXT) {
        gp_wy_send_error(c, "text_too_long",
                         "the text is longer than 64 KiB; send it as a stream "
                         "(synthesize-start, synthesize-chunk…, synthesize-stop) or in parts",
                         true);
        return NULL;
    }
    return t->valuestring;
}

/* The connection's open stream (synthesize-start without its stop yet). */
static ws_context *open_stream(ws_conn *c) {
    ws_context *x = c->contexts;
    return x && x->wy_streaming && !x->ended ? x : NULL;
}

static bool is_blank(const char *t) {
    for (; *t; t++)
        if (!strchr(" \t\r\n", *t)) return false;
    return true;
}

/* Act on one event; false when it must wait until the connection's current
 * synthesis is done (it is not consumed then). */
static bool on_event(gp_ws_hub *h, ws_conn *c, const char *type, const cJSON *data) {
    ws_context *stream = open_stream(c);
    if (strcmp(type, "describe") == 0) {
        gp_server_backend b;
        if (backend_for_request(h, c, &b)) send_info(c, &b);
    } else if (strcmp(type, "ping") == 0) {
        cJSON *d = cJSON_CreateObject();
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(data, "text");
        if (cJSON_IsString(t))
            cJSON_AddStringToObject(d, "text", t->valuestring);
        else
            cJSON_AddNullToObject(d, "text");
        send_event(c, "pong", d, NULL, 0);
        cJSON_Delete(d);
    } else if (strcmp(type, "synthesize") == 0) {
        /* a streaming client sends the whole text too, for older servers */
        if (c->wy_streamed) return true;
        if (c->contexts) return false;
        const char *text = event_text(c, data, type, true);
        if (!text) return true;
        if (is_blank(text)) {
            gp_metrics_count_request(h->server->metrics, GP_ROUTE_WYOMING, 400);
            gp_wy_send_error(c, "empty_text", "synthesize needs some text to speak", true);
            return true;
        }
        ws_context *x = open_request(h, c, data, false);
        if (x) gp_ws_context_add_text(h, c, x, text, true);
    } else if (strcmp(type, "synthesize-start") == 0) {
        if (stream) {
            gp_wy_send_error(c, "stream_open",
                             "synthesize-start came while a stream was open; end it with "
                             "synthesize-stop first",
                             true);
            return true;
        }
        if (c->contexts) return false;
        c->wy_streamed = true;
        open_request(h, c, data, true);
    } else if (strcmp(type, "synthesize-chunk") == 0 || strcmp(type, "synthesize-stop") == 0) {
        const bool stop = strcmp(type, "synthesize-stop") == 0;
        if (!stream) {
            char why[160];
            snprintf(why, sizeof why, "%s came outside a stream: send synthesize-start first",
                     type);
            gp_wy_send_error(c, "no_stream", why, false);
            return true;
        }
        const char *text = stop ? "" : event_text(c, data, type, true);
        if (text) gp_ws_context_add_text(h, c, stream, text, stop);
    } else {
        char why[200];
        snprintf(why, sizeof why,
                 "\"%.60s\" is not served here: this is a text-to-speech service (describe, "
                 "synthesize, synthesize-start/-chunk/-stop, ping)",
                 type);
        gp_wy_send_error(c, "unsupported_event", why, false);
    }
    return true;
}

/* A length field of a header: absent (0) or a whole number up to the limit. */
static bool length_field(const cJSON *header, const char *key, size_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(header, key);
    *out = 0;
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > (double)WY_MAX_PART ||
        v->valuedouble != (double)(size_t)v->valuedouble)
        return false;
    *out = (size_t)v->valuedouble;
    return true;
}

/* Parse the JSON object at p[0..n) (UTF-8); NULL when it is not one. */
static cJSON *parse_object(const char *p, size_t n) {
    if (gp_utf8_invalid_offset(p, n) != (size_t)-1) return NULL;
    cJSON *json = NULL;
    gp_error err;
    gp_error_clear(&err);
    if (gp_json_parse(p, n, "event", &json, &err)) return NULL;
    if (!cJSON_IsObject(json)) {
        cJSON_Delete(json);
        return NULL;
    }
    return json;
}

void gp_wy_event_free(gp_wy_event *ev) {
    cJSON_Delete(ev->header);
    cJSON_Delete(ev->data);
    memset(ev, 0, sizeof *ev);
}

long gp_wy_parse_event(const char *p, size_t avail, gp_wy_event *ev, const char **why,
                       size_t *need) {
    memset(ev, 0, sizeof *ev);
    *why = NULL;
    *need = avail + 1;
    const char *nl = memchr(p, '\n', avail < WY_MAX_PART + 1 ? avail : WY_MAX_PART + 1);
    if (!nl) {
        if (avail <= WY_MAX_PART) return 0;
        *why = "an event's header line is longer than 1 MiB";
        return -1;
    }
    const size_t hlen = (size_t)(nl - p);
    if (hlen == 0 || (hlen == 1 && p[0] == '\r')) return (long)hlen + 1; /* a blank line */
    cJSON *header = parse_object(p, hlen);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(header, "type");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(header, "data");
    size_t dlen = 0, plen = 0;
    if (!header || !cJSON_IsString(type) || !*type->valuestring ||
        (data && !cJSON_IsNull(data) && !cJSON_IsObject(data)) ||
        !length_field(header, "data_length", &dlen) ||
        !length_field(header, "payload_length", &plen)) {
        cJSON_Delete(header);
        *why = "an event is one line of JSON {\"type\": \"…\", \"data\": {…}, \"data_length\": N, "
               "\"payload_length\": N} in UTF-8, then its data and payload";
        return -1;
    }
    const size_t total = hlen + 1 + dlen + plen;
    if (avail < total) {
        cJSON_Delete(header);
        *need = total;
        return 0;
    }
    cJSON *merged = cJSON_IsObject(data) ? cJSON_Duplicate(data, true) : cJSON_CreateObject();
    cJSON *extra = dlen ? parse_object(nl + 1, dlen) : NULL;
    if (!merged || (dlen && !extra)) {
        cJSON_Delete(merged);
        cJSON_Delete(extra);
        cJSON_Delete(header);
        *why = merged ? "an event's data (data_length bytes) is not a JSON object in UTF-8"
                      : "out of memory reading an event";
        return -1;
    }
    for (cJSON *item = extra ? extra->child : NULL, *next; item; item = next) { /* over "data" */
        next = item->next;
        cJSON_DeleteItemFromObjectCaseSensitive(merged, item->string);
        cJSON_AddItemToObject(merged, item->string, cJSON_DetachItemViaPointer(extra, item));
    }
    cJSON_Delete(extra);
    ev->header = header;
    ev->type = type->valuestring;
    ev->data = merged;
    ev->payload = nl + 1 + dlen;
    ev->payload_len = plen;
    return (long)total;
}

void gp_wy_on_input(gp_ws_hub *h, ws_conn *c) {
    size_t used = 0;
    c->wy_held = false;
    /* an event known to be unfinished is not parsed again until it can be */
    while (!c->dead && !c->close_sent && used < c->in.len && c->in.len - used >= c->wy_need) {
        gp_wy_event ev;
        const char *why = NULL;
        size_t need = 0;
        long k = gp_wy_parse_event(c->in.data + used, c->in.len - used, &ev, &why, &need);
        if (k < 0) {
            gp_wy_send_error(c, "invalid_event", why, true);
            used = c->in.len; /* nothing after a broken event is read */
            break;
        }
        if (k == 0) {
            c->wy_need = need;
            break;
        }
        c->wy_need = 0;
        const bool taken = !ev.type || on_event(h, c, ev.type, ev.data);
        gp_wy_event_free(&ev);
        if (!taken) { /* it waits for the running synthesis */
            c->wy_held = true;
            break;
        }
        used += (size_t)k;
    }
    memmove(c->in.data, c->in.data + used, c->in.len - used);
    c->in.len -= used;
}

/* ---- the listening socket ---- */

int gp_wy_listen(const char *host, int port, int *fd, int *bound_port, gp_error *err) {
    struct sockaddr_storage addr;
    socklen_t len = 0;
    bool ipv6 = false;
    int rc = gp_server_resolve_host(host, port, &addr, &len, &ipv6, err);
    if (rc) return rc;
    int s = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (s >= 0) setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (s < 0 || bind(s, (struct sockaddr *)&addr, len) != 0 || listen(s, 128) != 0) {
        const int e = errno;
        if (s >= 0) close(s);
        return gp_fail(err, GEPARD_ERR_IO,
                       "cannot listen on %s port %d for Wyoming (%s) — is the port in use? "
                       "--wyoming-port picks another",
                       host, port, strerror(e));
    }
    len = sizeof addr;
    *bound_port = port;
    if (getsockname(s, (struct sockaddr *)&addr, &len) == 0)
        *bound_port = addr.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&addr)->sin6_port)
                                                 : ntohs(((struct sockaddr_in *)&addr)->sin_port);
    *fd = s;
    return GEPARD_OK;
}
