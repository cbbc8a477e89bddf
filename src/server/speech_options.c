/* speech_options.c — reading and validating the fields of a speech request
 * (OpenAI's plus Gepard's sampling extensions) into engine parameters, with
 * an OpenAI-shaped error naming the field for anything out of range. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/json.h"
#include "server/server_internal.h"

const char *const gp_model_aliases[GP_MODEL_ALIAS_COUNT] = {"gepard", "gepard-1.0", "tts-1",
                                                            "tts-1-hd", "gpt-4o-mini-tts"};

static bool all_digits(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9') return false;
    return true;
}

/* OpenAI's snapshot suffixes: "-2025-12-15" or "-1106". */
static bool is_version_suffix(const char *p) {
    if (*p++ != '-') return false;
    size_t n = strlen(p);
    if (n == 4) return all_digits(p, 4);
    return n == 10 && all_digits(p, 4) && p[4] == '-' && all_digits(p + 5, 2) && p[7] == '-' &&
           all_digits(p + 8, 2);
}

bool gp_model_name_accepted(const gp_server *s, const char *name) {
    if (strcmp(name, s->model_name) == 0) return true;
    for (int i = 0; i < GP_MODEL_ALIAS_COUNT; i++) {
        size_t n = strlen(gp_model_aliases[i]);
        if (strncmp(name, gp_model_aliases[i], n) == 0 &&
            (name[n] == '\0' || (i >= 2 && is_version_suffix(name + n))))
            return true;
    }
    return false;
}

const int gp_response_rates[GP_RESPONSE_RATE_COUNT] = {8000, 16000, 22050, 24000, 44100, 48000};

bool gp_response_rate_allowed(double rate) {
    for (int i = 0; i < GP_RESPONSE_RATE_COUNT; i++)
        if (rate == gp_response_rates[i]) return true;
    return false;
}

void gp_speech_options_init(gp_speech_options *o) {
    memset(o, 0, sizeof *o);
    o->params = gepard_synth_default_params();
    o->format = GP_AUDIO_MP3; /* OpenAI's default */
    o->stream = true;
    o->speed = 1.0;
    o->volume = 1.0;
    snprintf(o->voice, sizeof o->voice, "default");
}

/* Where the body has a NUL in a string (a raw 0 byte, or the escape
 * \u0000, which cJSON would turn into the string's end); len if nowhere. */
static size_t nul_offset(const char *text, size_t len) {
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\0') return i;
        if (!in_string) {
            in_string = text[i] == '"';
        } else if (text[i] == '"') {
            in_string = false;
        } else if (text[i] == '\\' && i + 1 < len) {
            if (text[i + 1] == 'u' && i + 5 < len && memcmp(text + i + 2, "0000", 4) == 0) return i;
            i++;
        }
    }
    return len;
}

int gp_request_json(const gp_http_request *r, cJSON **out, gp_api_error *e) {
    *out = NULL;
    gp_error err;
    gp_error_clear(&err);
    if (r->body.len == 0)
        return gp_http_fail(e, 400, NULL, "empty_body",
                            "the request body is empty; send a JSON object such as "
                            "{\"input\": \"Hello\", \"voice\": \"alloy\"}");
    size_t nul = nul_offset(r->body.data, r->body.len);
    if (nul < r->body.len)
        return gp_http_fail(e, 400, NULL, "invalid_json",
                            "the request body has a NUL character (\\u0000) in a string at byte "
                            "%zu; no field accepts it — remove it from the voice name or text",
                            nul);
    if (gp_json_parse(r->body.data, r->body.len, "request body", out, &err))
        return gp_http_fail(e, 400, NULL, "invalid_json", "%s", err.message);
    if (!cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return gp_http_fail(e, 400, NULL, "invalid_json", "the request body must be a JSON object");
    }
    return 0;
}

/* A number field in [lo, hi]; absent or null leaves *v alone. */
int gp_field_number(const cJSON *obj, const char *key, const char *prefix, double lo, double hi,
                    double *v, bool *present, gp_api_error *e) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (present) *present = false;
    if (!item || cJSON_IsNull(item)) return 0;
    char param[64];
    snprintf(param, sizeof param, "%s%s", prefix, key);
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble))
        return gp_http_fail(e, 400, param, "invalid_type", "%s must be a number", param);
    if (item->valuedouble < lo || item->valuedouble > hi)
        return gp_http_fail(e, 400, param, "invalid_value", "%s must be between %g and %g, got %g",
                            param, lo, hi, item->valuedouble);
    *v = item->valuedouble;
    if (present) *present = true;
    return 0;
}

static int get_integer(const cJSON *obj, const char *key, const char *prefix, double lo, double hi,
                       double *v, bool *present, gp_api_error *e) {
    double x = *v;
    bool here = false;
    if (gp_field_number(obj, key, prefix, lo, hi, &x, &here, e)) return -1;
    if (present) *present = here;
    if (!here) return 0;
    if (x != floor(x)) {
        char param[64];
        snprintf(param, sizeof param, "%s%s", prefix, key);
        return gp_http_fail(e, 400, param, "invalid_type", "%s must be a whole number, got %g",
                            param, x);
    }
    *v = x;
    return 0;
}

/* A string field; absent or null leaves *v alone. */
int gp_field_string(const cJSON *obj, const char *key, const char *prefix, const char **v,
                    gp_api_error *e) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!item || cJSON_IsNull(item)) return 0;
    if (!cJSON_IsString(item)) {
        char param[64];
        snprintf(param, sizeof param, "%s%s", prefix, key);
        return gp_http_fail(e, 400, param, "invalid_type", "%s must be a string", param);
    }
    *v = item->valuestring;
    return 0;
}

static int parse_model(const cJSON *obj, const gp_server *s, const char *prefix, gp_api_error *e) {
    const char *model = NULL;
    if (gp_field_string(obj, "model", prefix, &model, e)) return -1;
    if (!model || gp_model_name_accepted(s, model)) return 0;
    return gp_http_fail(e, 400, "model", "model_not_found",
                        "model \"%.100s\" is not served here; use \"%s\" (tts-1, tts-1-hd, "
                        "gpt-4o-mini-tts, their dated snapshots such as "
                        "gpt-4o-mini-tts-2025-12-15 or tts-1-1106, and gepard are accepted as "
                        "aliases)",
                        model, s->model_name);
}

int gp_speech_voice_set(const gp_voices *voices, const char *name, const char *param,
                        gp_speech_options *o, gp_api_error *e) {
    const gp_voice_entry *entry = gp_voices_find(voices, name);
    if (!entry && !gp_voices_is_builtin_name(name)) {
        gp_buf names;
        gp_buf_init(&names);
        gp_voices_append_names(voices, &names);
        gp_http_fail(e, 400, param, "voice_not_found",
                     "voice \"%.100s\" does not exist; available voices: %.700s", name,
                     names.data ? names.data : "[]");
        gp_buf_free(&names);
        return -1;
    }
    snprintf(o->voice, sizeof o->voice, "%s", name);
    o->voice_entry = entry;
    return 0;
}

static int parse_voice(const cJSON *obj, const gp_voices *voices, const char *prefix,
                       gp_speech_options *o, gp_api_error *e) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, "voice");
    char param[64];
    snprintf(param, sizeof param, "%svoice", prefix);
    if (cJSON_IsObject(item)) { /* OpenAI's custom voice: {"id": "voice_…"} */
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(item, "id");
        for (const cJSON *k = item->child; k; k = k->next)
            if (!k->string || strcmp(k->string, "id") != 0)
                return gp_http_fail(e, 400, param, "invalid_value",
                                    "%s is an object with \"%.60s\"; a voice object has only "
                                    "\"id\", the voice name: {\"id\": \"alloy\"}",
                                    param, k->string ? k->string : "");
        if (!id || cJSON_IsNull(id))
            return gp_http_fail(e, 400, param, "invalid_value",
                                "%s is an object without \"id\"; send {\"id\": \"alloy\"} or "
                                "the name as a string",
                                param);
        item = id;
    }
    if (!item || cJSON_IsNull(item)) return 0;
    if (!cJSON_IsString(item))
        return gp_http_fail(e, 400, param, "invalid_type",
                            "%s must be a voice name (a string, or an object with an \"id\")",
                            param);
    return gp_speech_voice_set(voices, item->valuestring, param, o, e);
}

static int parse_format(const cJSON *obj, const char *prefix, gp_speech_options *o,
                        gp_api_error *e) {
    const char *name = NULL, *stream_format = NULL;
    char param[64];
    if (gp_field_string(obj, "response_format", prefix, &name, e)) return -1;
    if (name) {
        const char *why = NULL;
        int f = gp_audio_format_parse(name, &why);
        snprintf(param, sizeof param, "%sresponse_format", prefix);
        if (f < 0)
            return gp_http_fail(
                e, 400, param, "unsupported_format", "%s",
                why ? why
                    : "response_format must be mp3, opus, aac, flac, wav or pcm (or "
                      "f32, wav-float)");
        o->format = (gp_audio_format)f;
    }
    if (gp_field_string(obj, "stream_format", prefix, &stream_format, e)) return -1;
    if (stream_format) {
        snprintf(param, sizeof param, "%sstream_format", prefix);
        if (strcmp(stream_format, "sse") == 0)
            o->sse = true;
        else if (strcmp(stream_format, "audio") == 0)
            o->sse = false;
        else
            return gp_http_fail(e, 400, param, "invalid_value",
                                "stream_format must be \"audio\" or \"sse\"");
    }
    const cJSON *stream = cJSON_GetObjectItemCaseSensitive(obj, "stream");
    if (stream && !cJSON_IsNull(stream)) {
        if (!cJSON_IsBool(stream))
            return gp_http_fail(e, 400, "stream", "invalid_type", "stream must be true or false");
        o->stream = cJSON_IsTrue(stream);
    }
    return 0;
}

/* OpenAI's pcm is 24 kHz; the codec makes 22.05 kHz. Headerless pcm is
 * resampled to 24 kHz unless the request asks for another rate; the
 * formats with a header keep the native rate unless asked (docs/SERVER.md). */
static int parse_sample_rate(const cJSON *obj, const char *prefix, gp_speech_options *o,
                             gp_api_error *e) {
    double rate = 0;
    bool here = false;
    if (get_integer(obj, "sample_rate", prefix, 0, 1e9, &rate, &here, e)) return -1;
    if (!here) return 0;
    if (!gp_response_rate_allowed(rate)) {
        char param[64];
        snprintf(param, sizeof param, "%ssample_rate", prefix);
        return gp_http_fail(e, 400, param, "invalid_value",
                            "%s must be 24000 (OpenAI's rate), 22050 (the codec's own), 8000, "
                            "16000, 44100 or 48000, got %g",
                            param, rate);
    }
    o->sample_rate = (int)rate;
    return 0;
}

/* OpenAI's speed: the speaking rate changes, the pitch stays (libsonic,
 * applied to the audio as it is delivered; io/tempo.h). */
static int parse_speed(const cJSON *obj, const char *prefix, gp_speech_options *o,
                       gp_api_error *e) {
    return gp_field_number(obj, "speed", prefix, GP_TEMPO_MIN, GP_TEMPO_MAX, &o->speed, NULL, e);
}

int gp_speech_sampling_parse(const cJSON *obj, const gp_server *s, const char *prefix,
                             gepard_synth_params *p, gp_api_error *e) {
    double v;
    bool here;
#define NUMBER(key, field, lo, hi)                                                                 \
    v = p->field;                                                                                  \
    if (gp_field_number(obj, key, prefix, lo, hi, &v, NULL, e)) return -1;                         \
    p->field = (float)v
#define INTEGER(key, field, lo, hi)                                                                \
    v = p->field;                                                                                  \
    if (get_integer(obj, key, prefix, lo, hi, &v, NULL, e)) return -1;                             \
    p->field = (int)v
    NUMBER("temperature", temperature, 0, 100);
    INTEGER("top_k", top_k, 0, 1000000);
    NUMBER("repetition_penalty", repetition_penalty, 0.01, 100);
    INTEGER("repetition_window", repetition_window, 0, 1000000);
    INTEGER("max_frames", max_frames, 1, s->params.max_frames_limit);
    NUMBER("stop_threshold", stop_threshold, -1000, 1000);
    NUMBER("cfg_scale", cfg_scale, -100, 100);
    INTEGER("cfg_frames", cfg_frames, -1, 1000000);
    INTEGER("force_stop_frames", force_stop_frames, -1, 1000000);
#undef NUMBER
#undef INTEGER
    v = 0;
    if (get_integer(obj, "seed", prefix, 0, 9007199254740992.0, &v, &here, e)) return -1;
    if (here) {
        p->seed = (uint64_t)v;
        p->random_seed = 0;
    }
    const char *mode = NULL;
    if (gp_field_string(obj, "cfg_uncond", prefix, &mode, e)) return -1;
    if (mode) {
        if (strcmp(mode, "empty_text") == 0)
            p->cfg_uncond = GEPARD_CFG_EMPTY_TEXT;
        else if (strcmp(mode, "audio_only") == 0)
            p->cfg_uncond = GEPARD_CFG_AUDIO_ONLY;
        else
            return gp_http_fail(e, 400, "cfg_uncond", "invalid_value",
                                "cfg_uncond must be \"empty_text\" or \"audio_only\"");
    }
    return 0;
}

int gp_speech_options_parse(const cJSON *obj, const gp_server *s, const gp_voices *voices,
                            const char *prefix, gp_speech_options *o, gp_api_error *e) {
    const char *ignored = NULL;
    if (parse_model(obj, s, prefix, e) || parse_voice(obj, voices, prefix, o, e) ||
        parse_format(obj, prefix, o, e) || parse_sample_rate(obj, prefix, o, e) ||
        parse_speed(obj, prefix, o, e) || gp_speech_sampling_parse(obj, s, prefix, &o->params, e) ||
        gp_field_string(obj, "instructions", prefix, &ignored, e))
        return -1;
    const char *ref = NULL;
    if (gp_field_string(obj, "ref_audio", prefix, &ref, e)) return -1;
    if (ref) {
        o->ref_audio = ref;
        o->ref_audio_len = strlen(ref);
    }
    return 0;
}

int gp_speech_text_parse(const cJSON *obj, const gp_server *s, const char *key, const char **text,
                         gp_api_error *e) {
    *text = NULL;
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!item || cJSON_IsNull(item))
        return gp_http_fail(e, 400, key, "missing_input", "%s is required: the text to speak", key);
    if (!cJSON_IsString(item))
        return gp_http_fail(e, 400, key, "invalid_type", "%s must be a string", key);
    const char *t = item->valuestring;
    size_t len = strlen(t), chars = 0;
    for (size_t i = 0; i < len; i++) chars += ((unsigned char)t[i] & 0xC0) != 0x80;
    bool blank = true;
    for (size_t i = 0; i < len && blank; i++) blank = strchr(" \t\r\n\v\f", t[i]) != NULL;
    if (blank)
        return gp_http_fail(e, 400, key, "empty_input", "%s is empty — give some words to speak",
                            key);
    if (chars > s->params.max_input_chars)
        return gp_http_fail(e, 400, key, "string_above_max_length",
                            "%s has %zu characters; the limit is %zu — split the text into "
                            "several requests",
                            key, chars, s->params.max_input_chars);
    *text = t;
    return 0;
}

int gp_speech_input_parse(const cJSON *obj, const gp_server *s, const char **input,
                          gp_api_error *e) {
    return gp_speech_text_parse(obj, s, "input", input, e);
}
