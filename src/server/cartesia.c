/* cartesia.c — Cartesia's text-to-speech API, the surface Gepard's own
 * hosted service speaks, so that code written for the `cartesia` SDKs (and
 * the voice-agent frameworks built on them) can point its base URL at
 * `gepard serve`:
 *
 *   POST /tts/bytes   the audio streamed as the response body (raw PCM,
 *                     mu-law or A-law, WAV, or MP3 at a chosen bit rate);
 *   POST /tts/sse     server-sent events: `chunk` events with base64 audio,
 *                     then `done` (or `error`), echoing context_id;
 *   GET  /voices      the server's voices as cursor pages (limit,
 *                     starting_after, ending_before, q);
 *   GET  /voices/{id} one of them.
 *
 * A request is read into the same speech options as OpenAI's route and run
 * by gp_speech_run, so batching, voices, limits and metrics are shared.
 * What Gepard cannot do is refused with a 400 that says so (word or phoneme
 * timestamps, voice embeddings, continuations); the fields that only steer
 * Cartesia's own models are accepted without effect (emotion, language,
 * locale, normalization, pronunciation_dict_id, max_buffer_delay_ms, save).
 * docs/SERVER.md has the mapping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "io/json.h"
#include "server/server_internal.h"

/* Cartesia's model ids ("sonic-3", "sonic-2-2025-03-07", ...) name this
 * server's model, as do its own name and aliases. */
static int parse_model_id(const cJSON *json, const gp_server *s, gp_api_error *e) {
    const char *model = NULL;
    if (gp_field_string(json, "model_id", "", &model, e)) return -1;
    if (!model)
        return gp_http_fail(e, 400, "model_id", "missing_model_id",
                            "model_id is required: \"%s\" (or a Cartesia model id such as "
                            "\"sonic-3\", which this server maps to it)",
                            s->model_name);
    if (gp_model_name_accepted(s, model) || strncmp(model, "sonic", 5) == 0) return 0;
    return gp_http_fail(e, 400, "model_id", "model_not_found",
                        "model_id \"%.100s\" is not served here; use \"%s\" (Cartesia's "
                        "\"sonic…\" ids are accepted as aliases)",
                        model, s->model_name);
}

/* "voice": "name", or {"mode": "id", "id": "name"}; embeddings are refused. */
static int parse_voice(const cJSON *json, const gp_voices *voices, gp_speech_options *o,
                       gp_api_error *e) {
    const cJSON *voice = cJSON_GetObjectItemCaseSensitive(json, "voice");
    if (!voice || cJSON_IsNull(voice))
        return gp_http_fail(e, 400, "voice", "missing_voice",
                            "voice is required: {\"mode\": \"id\", \"id\": NAME} with a name "
                            "from GET /voices");
    if (cJSON_IsString(voice))
        return gp_speech_voice_set(voices, voice->valuestring, "voice", o, e);
    if (!cJSON_IsObject(voice))
        return gp_http_fail(
            e, 400, "voice", "invalid_type",
            "voice must be {\"mode\": \"id\", \"id\": NAME} or the name as a string");
    const char *mode = NULL, *id = NULL;
    if (gp_field_string(voice, "mode", "voice.", &mode, e) ||
        gp_field_string(voice, "id", "voice.", &id, e))
        return -1;
    if ((mode && strcmp(mode, "embedding") == 0) ||
        cJSON_GetObjectItemCaseSensitive(voice, "embedding"))
        return gp_http_fail(e, 400, "voice.mode", "unsupported_voice_mode",
                            "voice embeddings are Cartesia's own; this server speaks with the "
                            "voices GET /voices lists: {\"mode\": \"id\", \"id\": NAME}");
    if (mode && strcmp(mode, "id") != 0)
        return gp_http_fail(e, 400, "voice.mode", "invalid_value",
                            "voice.mode must be \"id\", got \"%.60s\"", mode);
    if (!id)
        return gp_http_fail(e, 400, "voice.id", "missing_voice",
                            "voice.id is required: a name from GET /voices");
    return gp_speech_voice_set(voices, id, "voice.id", o, e);
}

static const struct {
    const char *name;
    gp_audio_format raw, wav;
} encodings[] = {{"pcm_s16le", GP_AUDIO_PCM16, GP_AUDIO_WAV16},
                 {"pcm_f32le", GP_AUDIO_F32, GP_AUDIO_WAV_FLOAT},
                 {"pcm_mulaw", GP_AUDIO_MULAW, GP_AUDIO_WAV_MULAW},
                 {"pcm_alaw", GP_AUDIO_ALAW, GP_AUDIO_WAV_ALAW}};

/* "output_format": {"container": "raw"|"wav"|"mp3", "encoding": …,
 * "sample_rate": …, "bit_rate": …}; SSE carries raw audio only. */
static int parse_output_format(const cJSON *json, bool sse, gp_speech_options *o, gp_api_error *e) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(json, "output_format");
    if (!cJSON_IsObject(f))
        return gp_http_fail(e, 400, "output_format", f ? "invalid_type" : "missing_output_format",
                            "output_format is required: {\"container\": \"raw\", \"encoding\": "
                            "\"pcm_s16le\", \"sample_rate\": 24000} (containers raw, wav, mp3)");
    const char *container = NULL, *encoding = NULL;
    double rate = 0, bit_rate = 0;
    bool has_rate = false, has_bit_rate = false;
    if (gp_field_string(f, "container", "output_format.", &container, e) ||
        gp_field_string(f, "encoding", "output_format.", &encoding, e) ||
        gp_field_number(f, "sample_rate", "output_format.", 0, 1e9, &rate, &has_rate, e) ||
        gp_field_number(f, "bit_rate", "output_format.", 0, 1e9, &bit_rate, &has_bit_rate, e))
        return -1;
    bool raw = container && strcmp(container, "raw") == 0;
    bool wav = container && strcmp(container, "wav") == 0;
    bool mp3 = container && strcmp(container, "mp3") == 0;
    if (!raw && !wav && !mp3)
        return gp_http_fail(e, 400, "output_format.container",
                            container ? "invalid_value" : "missing_container",
                            "output_format.container must be \"raw\", \"wav\" or \"mp3\"");
    if (sse && !raw)
        return gp_http_fail(e, 400, "output_format.container", "invalid_value",
                            "/tts/sse and /tts/websocket send raw audio in their events: use "
                            "\"container\": \"raw\" "
                            "(or /tts/bytes for %s)",
                            container);
    if (!has_rate || !gp_response_rate_allowed(rate))
        return gp_http_fail(e, 400, "output_format.sample_rate",
                            has_rate ? "invalid_value" : "missing_sample_rate",
                            "output_format.sample_rate must be 8000, 16000, 22050 (the codec's "
                            "own), 24000, 44100 or 48000");
    o->sample_rate = (int)rate;
    if (mp3) {
        static const int mp3_rates[] = {32000, 64000, 96000, 128000, 192000};
        bool ok = !has_bit_rate;
        for (size_t i = 0; i < sizeof mp3_rates / sizeof mp3_rates[0]; i++)
            ok |= bit_rate == mp3_rates[i];
        if (!ok)
            return gp_http_fail(e, 400, "output_format.bit_rate", "invalid_value",
                                "output_format.bit_rate must be 32000, 64000, 96000, 128000 or "
                                "192000, got %g",
                                bit_rate);
        o->format = GP_AUDIO_MP3;
        o->bit_rate = has_bit_rate ? (int)bit_rate : 0;
        return 0;
    }
    for (size_t i = 0; encoding && i < sizeof encodings / sizeof encodings[0]; i++)
        if (strcmp(encoding, encodings[i].name) == 0) {
            o->format = raw ? encodings[i].raw : encodings[i].wav;
            return 0;
        }
    return gp_http_fail(e, 400, "output_format.encoding",
                        encoding ? "invalid_value" : "missing_encoding",
                        "output_format.encoding must be pcm_s16le, pcm_f32le, pcm_mulaw or "
                        "pcm_alaw for the %s container",
                        container);
}

/* The older top-level "speed": "slowest" … "fastest", or -1 … 1. */
static int parse_legacy_speed(const cJSON *json, double *speed, gp_api_error *e) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(json, "speed");
    if (!item || cJSON_IsNull(item)) return 0;
    if (cJSON_IsString(item)) {
        static const struct {
            const char *name;
            double speed;
        } names[] = {
            {"slowest", 0.6}, {"slow", 0.8}, {"normal", 1.0}, {"fast", 1.25}, {"fastest", 1.5}};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strcmp(item->valuestring, names[i].name) == 0) {
                *speed = names[i].speed;
                return 0;
            }
        return gp_http_fail(e, 400, "speed", "invalid_value",
                            "speed must be slowest, slow, normal, fast or fastest (or "
                            "generation_config.speed, 0.6-1.5)");
    }
    double v = 0;
    if (gp_field_number(json, "speed", "", -1, 1, &v, NULL, e)) return -1;
    *speed = v < 0 ? 1 + 0.4 * v : 1 + 0.5 * v; /* -1 → 0.6x, 1 → 1.5x */
    return 0;
}

/* generation_config {speed 0.6-1.5, volume 0.5-2, emotion}: speed changes
 * the speaking rate (libsonic, as OpenAI's speed), volume scales the
 * samples; emotion only steers Cartesia's sonic-3 and is accepted as such. */
static int parse_generation(const cJSON *json, gp_speech_options *o, gp_api_error *e) {
    if (parse_legacy_speed(json, &o->speed, e)) return -1;
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(json, "generation_config");
    if (!g || cJSON_IsNull(g)) return 0;
    if (!cJSON_IsObject(g))
        return gp_http_fail(e, 400, "generation_config", "invalid_type",
                            "generation_config must be an object {\"speed\": …, \"volume\": …}");
    return gp_field_number(g, "speed", "generation_config.", 0.6, 1.5, &o->speed, NULL, e) ||
                   gp_field_number(g, "volume", "generation_config.", 0.5, 2.0, &o->volume, NULL, e)
               ? -1
               : 0;
}

/* A boolean field that must not be true (a feature Gepard lacks). */
static int refuse_true(const cJSON *json, const char *key, const char *why, gp_api_error *e) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(json, key);
    if (!item || cJSON_IsNull(item) || cJSON_IsFalse(item)) return 0;
    if (!cJSON_IsBool(item))
        return gp_http_fail(e, 400, key, "invalid_type", "%s must be true or false", key);
    return gp_http_fail(e, 400, key, "unsupported_feature", "%s", why);
}

/* add_timestamps: word times estimated from the audio (word_times.h), as
 * events of /tts/sse and the WebSocket; /tts/bytes has nowhere to put them
 * (as Cartesia's). */
static int parse_timestamps(const cJSON *json, const gp_server *s, gp_cartesia_route route,
                            gp_speech_options *o, gp_api_error *e) {
    const char *why = route == GP_CARTESIA_BYTES
                          ? "word timestamps come as events: use /tts/sse or the WebSocket "
                            "(/tts/websocket)"
                          : "word timestamps are off on this server (--no-word-timestamps): "
                            "Gepard has no alignment of words to its audio frames";
    if (route != GP_CARTESIA_BYTES && s->params.word_timestamps) {
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(json, "add_timestamps");
        if (item && !cJSON_IsNull(item) && !cJSON_IsBool(item))
            return gp_http_fail(e, 400, "add_timestamps", "invalid_type",
                                "add_timestamps must be true or false");
        o->word_timestamps = cJSON_IsTrue(item);
        return 0;
    }
    return refuse_true(json, "add_timestamps", why, e);
}

int gp_cartesia_options_parse(const cJSON *json, const gp_server *s, const gp_voices *voices,
                              gp_cartesia_route route, gp_speech_options *o, gp_api_error *e) {
    const char *language = NULL, *locale = NULL, *context_id = NULL;
    if (parse_model_id(json, s, e) || parse_voice(json, voices, o, e) ||
        parse_output_format(json, route != GP_CARTESIA_BYTES, o, e) ||
        parse_generation(json, o, e) || gp_speech_sampling_parse(json, s, "", &o->params, e) ||
        gp_field_string(json, "language", "", &language, e) ||
        gp_field_string(json, "locale", "", &locale, e) ||
        gp_field_string(json, "context_id", "", &context_id, e) ||
        parse_timestamps(json, s, route, o, e) ||
        refuse_true(json, "add_phoneme_timestamps",
                    "phoneme timestamps are not available: "
                    "Gepard speaks from text tokens, not "
                    "phonemes",
                    e) ||
        (route != GP_CARTESIA_WEBSOCKET &&
         refuse_true(json, "continue",
                     "continuations are for the WebSocket (/tts/websocket); over HTTP send the "
                     "whole transcript",
                     e)))
        return -1;
    if (language && locale)
        return gp_http_fail(e, 400, "locale", "invalid_value",
                            "a request may set language or locale, not both");
    if (context_id) {
        if (strlen(context_id) >= sizeof o->context_id)
            return gp_http_fail(e, 400, "context_id", "invalid_value",
                                "context_id is longer than %zu bytes", sizeof o->context_id - 1);
        snprintf(o->context_id, sizeof o->context_id, "%s", context_id);
    }
    o->stream = true;
    o->sse = route == GP_CARTESIA_SSE;
    o->sse_style = GP_SSE_CARTESIA;
    return 0;
}

int gp_cartesia_request_parse(const cJSON *json, const gp_server *s, const gp_voices *voices,
                              bool sse, const char **text, gp_speech_options *o, gp_api_error *e) {
    return gp_speech_text_parse(json, s, "transcript", text, e) ||
                   gp_cartesia_options_parse(json, s, voices,
                                             sse ? GP_CARTESIA_SSE : GP_CARTESIA_BYTES, o, e)
               ? -1
               : 0;
}

static int parse_tts(gp_http_request *r, const cJSON *json, const gp_voices *voices,
                     const char **text, gp_speech_options *o, gp_api_error *e) {
    return gp_cartesia_request_parse(json, r->server, voices, r->route == GP_ROUTE_TTS_SSE, text, o,
                                     e);
}

enum MHD_Result gp_handle_tts(gp_http_request *r) { return gp_speech_handle(r, parse_tts); }

/* ---- voices ---- */

static int append_voice(gp_buf *b, const gp_server *s, const char *name,
                        const gp_voice_entry *entry) {
    char created[32];
    time_t t = (time_t)s->created;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int rc = gp_buf_append_str(b, "{\"id\":");
    rc |= gp_json_append_string(b, name);
    rc |= gp_buf_append_str(b, ",\"name\":");
    rc |= gp_json_append_string(b, name);
    char description[GP_VOICE_NAME_MAX + 160];
    gp_voice_describe(entry, description, sizeof description);
    rc |= gp_buf_append_str(b, ",\"description\":");
    rc |= gp_json_append_string(b, description);
    rc |= gp_buf_printf(b,
                        ",\"tagline\":\"\",\"is_owner\":true,\"is_public\":false,\"access\":"
                        "\"private\",\"visibility\":\"owner\",\"language\":\"en\",\"locales\":[],"
                        "\"gender\":null,\"country\":null,\"created_at\":\"%s\"}",
                        created);
    return rc;
}

/* A query argument, or NULL. */
static const char *query(gp_http_request *r, const char *key) {
    return MHD_lookup_connection_value(r->connection, MHD_GET_ARGUMENT_KIND, key);
}

static enum MHD_Result send_voice(gp_http_request *r, const gp_voices *v) {
    int i = r->model_id_too_long ? -1 : gp_voices_listed_index(v, r->model_id);
    if (i < 0) {
        gp_api_error e;
        gp_http_fail(&e, 404, "id", "voice_not_found",
                     "voice \"%.100s\" does not exist here; GET /voices lists them", r->model_id);
        return gp_http_send_error(r, &e);
    }
    const gp_voice_entry *entry;
    const char *name = gp_voices_listed(v, i, &entry);
    gp_buf b;
    gp_buf_init(&b);
    if (append_voice(&b, r->server, name, entry) || gp_buf_append_str(&b, "\n")) {
        gp_buf_free(&b);
        return MHD_NO;
    }
    return gp_http_send_json(r, 200, &b);
}

/* GET /voices: {"data": [...], "has_more": …, "next_page": …}; pages of
 * `limit` (1-100, default 10) after `starting_after` or before
 * `ending_before`; `q` keeps the names that contain it (any case); a
 * `gender` filter matches none (the voices have no gender recorded). */
enum MHD_Result gp_handle_cartesia_voices(gp_http_request *r) {
    gp_api_error e;
    gp_server_backend be;
    if (!gp_server_backend_get(r->server, &be, &e)) return gp_http_send_error(r, &e);
    const gp_voices *v = be.voices;
    if (r->model_id[0] || r->model_id_too_long) return send_voice(r, v);
    const char *limit_s = query(r, "limit"), *after = query(r, "starting_after"),
               *before = query(r, "ending_before"), *q = query(r, "q"),
               *gender = query(r, "gender");
    long limit = 10;
    if (limit_s) {
        char *end;
        limit = strtol(limit_s, &end, 10);
        if (*limit_s == '\0' || *end != '\0' || limit < 1 || limit > 100) {
            gp_http_fail(&e, 400, "limit", "invalid_value",
                         "limit must be a whole number from 1 to 100");
            return gp_http_send_error(r, &e);
        }
    }
    const char *cursor = after ? after : before;
    int n = gp_voices_listed_count(v), at = cursor ? gp_voices_listed_index(v, cursor) : -1;
    if (cursor && at < 0) {
        gp_http_fail(&e, 400, after ? "starting_after" : "ending_before", "invalid_value",
                     "no voice \"%.100s\" to page from; GET /voices lists them", cursor);
        return gp_http_send_error(r, &e);
    }
    /* the matching voices, in order, past the cursor */
    int *match = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!match) return MHD_NO;
    int m = 0;
    for (int i = 0; i < n && !(gender && *gender); i++) {
        const gp_voice_entry *entry;
        const char *name = gp_voices_listed(v, i, &entry);
        if (after && i <= at) continue;
        if (before && !after && i >= at) continue;
        if (q && *q && !strcasestr(name, q)) continue;
        match[m++] = i;
    }
    int from = before && !after && m > limit ? m - (int)limit : 0;
    int count = m - from < limit ? m - from : (int)limit;
    gp_buf b;
    gp_buf_init(&b);
    int rc = gp_buf_append_str(&b, "{\"data\":[");
    for (int k = 0; k < count; k++) {
        const gp_voice_entry *entry;
        const char *name = gp_voices_listed(v, match[from + k], &entry);
        rc |= (k ? gp_buf_append_str(&b, ",") : 0) | append_voice(&b, r->server, name, entry);
    }
    bool more = before && !after ? from > 0 : from + count < m;
    rc |= gp_buf_printf(&b, "],\"has_more\":%s,\"next_page\":", more ? "true" : "false");
    if (more) {
        const gp_voice_entry *entry;
        int edge = before && !after ? match[from] : match[from + count - 1];
        rc |= gp_json_append_string(&b, gp_voices_listed(v, edge, &entry));
    } else {
        rc |= gp_buf_append_str(&b, "null");
    }
    rc |= gp_buf_append_str(&b, "}\n");
    free(match);
    if (rc) {
        gp_buf_free(&b);
        return MHD_NO;
    }
    return gp_http_send_json(r, 200, &b);
}
