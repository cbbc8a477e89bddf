/* elevenlabs.c — ElevenLabs' text-to-speech routes, so that code written
 * for the `elevenlabs` SDKs (and the agent frameworks, automation tools and
 * apps built on them, which take a base URL) can point at `gepard serve`:
 *
 *   POST /v1/text-to-speech/{voice_id}          the whole file (Content-Length)
 *   POST /v1/text-to-speech/{voice_id}/stream   the audio streamed as it is made
 *   POST …/with-timestamps, …/stream/with-timestamps   the audio in JSON (one object,
 *                                               or a line a chunk) with the text's
 *                                               estimated character times
 *   GET  /v1/voices, /v1/voices/{voice_id}      the server's voices
 *   GET  /v2/voices                             the same, as one search page
 *
 * (and the WebSockets …/stream-input and …/multi-stream-input, whose
 * handshake gp_elevenlabs_route also recognises: elevenlabs_ws.c)
 *
 * `?output_format=` takes ElevenLabs' names (mp3_44100_128, the default;
 * pcm_16000…pcm_48000, wav_8000…wav_48000, ulaw_8000, alaw_8000,
 * opus_48000_32…192). The body's text, seed and voice_settings.speed are
 * used, with Gepard's own sampling fields (temperature, top_k, …, as on
 * /v1/audio/speech); model_id may be this server's model or any ElevenLabs
 * id ("eleven_…", which names this model here); the settings that only
 * steer ElevenLabs' models are accepted without effect (stability,
 * similarity_boost, style, use_speaker_boost, language_code,
 * apply_text_normalization, previous/next text and request ids,
 * optimize_streaming_latency, enable_logging). Pronunciation dictionaries
 * are refused with a 400 that says so. The character times are estimated
 * (word_times.h): Gepard has no alignment of text to audio. The key may come
 * as `xi-api-key`; errors take ElevenLabs' shape {"detail": {"status",
 * "message"}}. A request runs through gp_speech_run like every other route.
 * docs/SERVER.md has the mapping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "server/server_internal.h"

#define EL_TTS_PREFIX "/v1/text-to-speech/"

/* ---- routes ---- */

bool gp_elevenlabs_route(gp_http_request *r, const char *url) {
    const size_t end = strcspn(url, "?");
    if (strncmp(url, "/v1/voices", 10) == 0 || strncmp(url, "/v2/voices", 10) == 0) {
        const char *rest = url + 10;
        size_t n = end - 10;
        while (n > 0 && rest[n - 1] == '/') n--;
        if (n == 0) {
            r->route = GP_ROUTE_ELEVENLABS_VOICES;
            r->el_search = url[1] == 'v' && url[2] == '2';
            return true;
        }
        if (rest[0] != '/' || url[2] != '1' || memchr(rest + 1, '/', n - 1)) return false;
        rest++, n--;
        r->route = GP_ROUTE_ELEVENLABS_VOICES;
        r->model_id_too_long = n >= sizeof r->model_id;
        if (r->model_id_too_long) n = sizeof r->model_id - 1;
        memcpy(r->model_id, rest, n);
        r->model_id[n] = '\0';
        return true;
    }
    const size_t p = strlen(EL_TTS_PREFIX);
    if (end <= p || strncmp(url, EL_TTS_PREFIX, p) != 0) return false;
    const char *id = url + p;
    size_t n = strcspn(id, "/?");
    const char *tail = id + n;
    size_t tail_len = end - p - n;
    while (tail_len > 0 && tail[tail_len - 1] == '/') tail_len--;
    static const char *const variants[] = {"",
                                           "/stream",
                                           "/with-timestamps",
                                           "/stream/with-timestamps",
                                           "/stream-input",
                                           "/multi-stream-input"};
    int variant = -1;
    for (int k = 0; k < 6; k++)
        if (strlen(variants[k]) == tail_len && strncmp(tail, variants[k], tail_len) == 0)
            variant = k;
    if (variant < 0 || n == 0) return false;
    r->route = variant >= 4 ? GP_ROUTE_ELEVENLABS_WEBSOCKET : GP_ROUTE_ELEVENLABS_TTS;
    r->el_stream = variant == 1 || variant == 3;
    r->el_timestamps = variant == 2 || variant == 3;
    r->el_multi = variant == 5;
    r->model_id_too_long = n >= sizeof r->model_id;
    if (r->model_id_too_long) n = sizeof r->model_id - 1;
    memcpy(r->model_id, id, n);
    r->model_id[n] = '\0';
    return true;
}

/* ---- the request ---- */

static const char *query(gp_http_request *r, const char *key) {
    return MHD_lookup_connection_value(r->connection, MHD_GET_ARGUMENT_KIND, key);
}

/* ?output_format=codec_rate[_kbps]: ElevenLabs' names only, so that a
 * request this server would answer differently from ElevenLabs fails. */
int gp_elevenlabs_output_format(gp_http_request *r, gp_speech_options *o, gp_api_error *e) {
    const char *f = query(r, "output_format");
    if (!f) f = "mp3_44100_128";
    static const struct {
        const char *name;
        gp_audio_format format;
        int rate, kbps;
    } formats[] = {
        {"mp3_22050_32", GP_AUDIO_MP3, 22050, 32},
        {"mp3_24000_48", GP_AUDIO_MP3, 24000, 48},
        {"mp3_44100_32", GP_AUDIO_MP3, 44100, 32},
        {"mp3_44100_64", GP_AUDIO_MP3, 44100, 64},
        {"mp3_44100_96", GP_AUDIO_MP3, 44100, 96},
        {"mp3_44100_128", GP_AUDIO_MP3, 44100, 128},
        {"mp3_44100_192", GP_AUDIO_MP3, 44100, 192},
        {"pcm_8000", GP_AUDIO_PCM16, 8000, 0},
        {"pcm_16000", GP_AUDIO_PCM16, 16000, 0},
        {"pcm_22050", GP_AUDIO_PCM16, 22050, 0},
        {"pcm_24000", GP_AUDIO_PCM16, 24000, 0},
        {"pcm_32000", GP_AUDIO_PCM16, 32000, 0},
        {"pcm_44100", GP_AUDIO_PCM16, 44100, 0},
        {"pcm_48000", GP_AUDIO_PCM16, 48000, 0},
        {"wav_8000", GP_AUDIO_WAV16, 8000, 0},
        {"wav_16000", GP_AUDIO_WAV16, 16000, 0},
        {"wav_22050", GP_AUDIO_WAV16, 22050, 0},
        {"wav_24000", GP_AUDIO_WAV16, 24000, 0},
        {"wav_32000", GP_AUDIO_WAV16, 32000, 0},
        {"wav_44100", GP_AUDIO_WAV16, 44100, 0},
        {"wav_48000", GP_AUDIO_WAV16, 48000, 0},
        {"ulaw_8000", GP_AUDIO_MULAW, 8000, 0},
        {"alaw_8000", GP_AUDIO_ALAW, 8000, 0},
        {"opus_48000_32", GP_AUDIO_OPUS, 48000, 32},
        {"opus_48000_64", GP_AUDIO_OPUS, 48000, 64},
        {"opus_48000_96", GP_AUDIO_OPUS, 48000, 96},
        {"opus_48000_128", GP_AUDIO_OPUS, 48000, 128},
        {"opus_48000_192", GP_AUDIO_OPUS, 48000, 192},
    };
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (strcmp(f, formats[i].name) == 0) {
            o->format = formats[i].format;
            o->sample_rate = formats[i].rate;
            o->bit_rate = formats[i].kbps * 1000;
            return 0;
        }
    return gp_http_fail(e, 400, "output_format", "invalid_output_format",
                        "output_format \"%.60s\" is not one of ElevenLabs' formats: mp3_22050_32, "
                        "mp3_24000_48, mp3_44100_{32,64,96,128,192}, pcm_{8000,16000,22050,24000,"
                        "32000,44100,48000}, wav_ at the same rates, ulaw_8000, alaw_8000, "
                        "opus_48000_{32,64,96,128,192}",
                        f);
}

int gp_elevenlabs_model(const gp_server *s, const char *model, gp_api_error *e) {
    if (!model || gp_model_name_accepted(s, model) || strncmp(model, "eleven_", 7) == 0) return 0;
    return gp_http_fail(e, 400, "model_id", "model_not_found",
                        "model_id \"%.100s\" is not served here; use \"%s\" (ElevenLabs' "
                        "\"eleven_…\" ids are accepted as aliases)",
                        model, s->model_name);
}

int gp_elevenlabs_voice(const gp_http_request *r, const gp_voices *voices, gp_speech_options *o,
                        gp_api_error *e) {
    if (r->model_id_too_long)
        return gp_http_fail(e, 400, "voice_id", "voice_not_found",
                            "voice_id is longer than any voice name here; GET /v1/voices lists "
                            "them");
    return gp_speech_voice_set(voices, r->model_id, "voice_id", o, e);
}

/* voice_settings: speed is used; the rest steers ElevenLabs' own models. */
static int parse_voice_settings(const cJSON *json, gp_speech_options *o, gp_api_error *e) {
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(json, "voice_settings");
    if (!vs || cJSON_IsNull(vs)) return 0;
    if (!cJSON_IsObject(vs))
        return gp_http_fail(e, 400, "voice_settings", "invalid_type",
                            "voice_settings must be an object {\"speed\": 1.0, …}");
    static const char *const unit[] = {"stability", "similarity_boost", "style"};
    for (size_t i = 0; i < sizeof unit / sizeof unit[0]; i++) {
        double v = 0;
        if (gp_field_number(vs, unit[i], "voice_settings.", 0, 1, &v, NULL, e)) return -1;
    }
    const cJSON *boost = cJSON_GetObjectItemCaseSensitive(vs, "use_speaker_boost");
    if (boost && !cJSON_IsNull(boost) && !cJSON_IsBool(boost))
        return gp_http_fail(e, 400, "voice_settings.use_speaker_boost", "invalid_type",
                            "voice_settings.use_speaker_boost must be true or false");
    return gp_field_number(vs, "speed", "voice_settings.", 0.25, 4.0, &o->speed, NULL, e);
}

static int parse_request(gp_http_request *r, const cJSON *json, const gp_voices *voices,
                         const char **text, gp_speech_options *o, gp_api_error *e) {
    const gp_server *s = r->server;
    if (r->el_timestamps && !s->params.word_timestamps)
        return gp_http_fail(e, 400, NULL, "timestamps_not_supported",
                            "this server answers no estimated timestamps (gepard serve "
                            "--no-word-timestamps): Gepard has no alignment of text to audio");
    const cJSON *dicts =
        cJSON_GetObjectItemCaseSensitive(json, "pronunciation_dictionary_locators");
    if (cJSON_GetArraySize(dicts) > 0)
        return gp_http_fail(e, 400, "pronunciation_dictionary_locators", "not_supported",
                            "pronunciation dictionaries are not offered by this server");
    double seed = 0;
    bool seeded = false;
    const char *model = NULL;
    if (gp_speech_text_parse(json, s, "text", text, e) ||
        gp_field_string(json, "model_id", "", &model, e) || gp_elevenlabs_model(s, model, e) ||
        gp_elevenlabs_voice(r, voices, o, e) || gp_elevenlabs_output_format(r, o, e) ||
        parse_voice_settings(json, o, e) || gp_speech_sampling_parse(json, s, "", &o->params, e) ||
        gp_field_number(json, "seed", "", 0, 4294967295.0, &seed, &seeded, e))
        return -1;
    if (seeded) {
        o->params.seed = (uint64_t)seed;
        o->params.random_seed = 0;
    }
    o->stream = r->el_stream;
    if (r->el_timestamps) { /* the audio in JSON, then its estimated character times */
        o->sse = true;
        o->sse_style = r->el_stream ? GP_SSE_EL_LINES : GP_SSE_EL_OBJECT;
        o->word_timestamps = true;
        o->stream = true;
    }
    return 0;
}

enum MHD_Result gp_handle_elevenlabs_tts(gp_http_request *r) {
    return gp_speech_handle(r, parse_request);
}

/* ---- voices ---- */

static int append_voice(gp_buf *b, const char *name, const gp_voice_entry *entry) {
    int rc = gp_buf_append_str(b, "{\"voice_id\":");
    rc |= gp_json_append_string(b, name);
    rc |= gp_buf_append_str(b, ",\"name\":");
    rc |= gp_json_append_string(b, name);
    char description[GP_VOICE_NAME_MAX + 160];
    gp_voice_describe(entry, description, sizeof description);
    rc |= gp_buf_printf(
        b, ",\"category\":\"%s\",\"description\":", entry && entry->voice ? "cloned" : "premade");
    rc |= gp_json_append_string(b, description);
    return rc | gp_buf_append_str(b, ",\"labels\":{\"language\":\"en\"},\"samples\":null,"
                                     "\"preview_url\":null,\"settings\":null,\"is_owner\":true}");
}

/* GET /v1/voices {"voices": […]}, /v2/voices (a search: one page, `search`
 * keeps the names that contain it), /v1/voices/{id} one voice or 404. */
enum MHD_Result gp_handle_elevenlabs_voices(gp_http_request *r) {
    gp_api_error e;
    gp_server_backend be;
    if (!gp_server_backend_get(r->server, &be, &e)) return gp_http_send_error(r, &e);
    const gp_voices *v = be.voices;
    gp_buf b;
    gp_buf_init(&b);
    int rc = 0;
    if (r->model_id[0] || r->model_id_too_long) {
        const int i = r->model_id_too_long ? -1 : gp_voices_listed_index(v, r->model_id);
        if (i < 0) {
            gp_http_fail(&e, 404, "voice_id", "voice_not_found",
                         "voice \"%.100s\" does not exist here; GET /v1/voices lists them",
                         r->model_id);
            return gp_http_send_error(r, &e);
        }
        const gp_voice_entry *entry;
        const char *name = gp_voices_listed(v, i, &entry);
        rc = append_voice(&b, name, entry);
    } else {
        const char *search = r->el_search ? query(r, "search") : NULL;
        rc = gp_buf_append_str(&b, "{\"voices\":[");
        int count = 0;
        for (int i = 0, n = gp_voices_listed_count(v); i < n; i++) {
            const gp_voice_entry *entry;
            const char *name = gp_voices_listed(v, i, &entry);
            if (search && *search && !strcasestr(name, search)) continue;
            rc |= (count++ ? gp_buf_append_str(&b, ",") : 0) | append_voice(&b, name, entry);
        }
        rc |= gp_buf_append_str(&b, "]");
        if (r->el_search)
            rc |= gp_buf_printf(&b,
                                ",\"has_more\":false,\"total_count\":%d,"
                                "\"next_page_token\":null",
                                count);
        rc |= gp_buf_append_str(&b, "}");
    }
    if (rc || gp_buf_append_str(&b, "\n")) {
        gp_buf_free(&b);
        return MHD_NO;
    }
    return gp_http_send_json(r, 200, &b);
}
