/* test_server.c — `gepard serve` over HTTP on the tiny fixtures: the GET
 * endpoints, audio byte-identical to `gepard say` in every format that is
 * deterministic, the other formats decoding, the SSE event shape, chunked
 * streaming that delivers audio while synthesis runs, whole-file responses,
 * every documented 4xx, and the request time limit. */
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "server/base64.h"
#include "server_harness.h"
#include "test.h"

TEST(server_get_endpoints) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    struct {
        const char *path, *type, *needle;
        long status;
    } cases[] = {
        {"/health", "application/json", "\"ok\"", 200},
        {"/ready", "application/json", "\"ready\"", 200},
        {"/v1/models", "application/json", "\"gepard-1.0\"", 200},
        {"/v1/audio/voices", "application/json", "\"shimmer\"", 200},
        {"/metrics", "text/plain; version=0.0.4; charset=utf-8", "gepard_active_streams 0", 200},
        {"/", "text/html; charset=utf-8", "<textarea", 200},
        {"/nope", "application/json", "\"not_found\"", 404},
        {"/v1/audio/speech", "application/json", "\"method_not_allowed\"", 405},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_http h = {0};
        CHECK_EQ_INT(test_http_get(&h, test_url(&ts, cases[i].path), NULL), 0);
        CHECK_MSG(h.status == cases[i].status, "%s: HTTP %ld", cases[i].path, h.status);
        const char *type = test_http_header(&h, "Content-Type");
        CHECK_MSG(type && strcmp(type, cases[i].type) == 0, "%s: type %s", cases[i].path,
                  type ? type : "(none)");
        CHECK_MSG(h.body.data && strstr(h.body.data, cases[i].needle), "%s: body lacks %s",
                  cases[i].path, cases[i].needle);
        if (cases[i].status == 405) {
            const char *allow = test_http_header(&h, "Allow");
            CHECK(allow && strcmp(allow, "POST") == 0);
        }
        test_http_free(&h);
    }
    test_server_stop(&ts);
}

/* `gepard say` with the options of TS_GREEDY and 20 frames, to stdout. */
static int say_stdout(const char *format, test_cmd_result *r) {
    const char *args[] = {
        "say", "--model",          TS_MODEL, "--codec",      TS_CODEC, "--top-k",  "1",    "--seed",
        "5",   "--stop-threshold", "2",      "--max-frames", "20",     "--format", format, "-o",
        "-",   "Hello world!",     NULL};
    return test_run_gepard(r, NULL, 0, 60, args);
}

TEST(server_audio_equals_say_in_every_deterministic_format) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    const char *formats[] = {"wav", "pcm", "flac", "mp3"};
    const char *types[] = {"audio/wav", "audio/pcm", "audio/flac", "audio/mpeg"};
    for (int i = 0; i < 4; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"model\":\"tts-1\",\"input\":\"Hello world!\",\"voice\":\"alloy\","
                 "\"response_format\":\"%s\",\"sample_rate\":22050,\"max_frames\":20," TS_GREEDY
                 "}",
                 formats[i]);
        test_http h = {0};
        CHECK_EQ_INT(test_http_post(&h, test_url(&ts, "/v1/audio/speech"), NULL, body, NULL), 0);
        CHECK_MSG(h.status == 200, "%s: HTTP %ld %s", formats[i], h.status, h.body.data);
        const char *rate = test_http_header(&h, "X-Sample-Rate");
        CHECK(rate && strcmp(rate, "22050") == 0);
        const char *type = test_http_header(&h, "Content-Type");
        CHECK_MSG(type && strcmp(type, types[i]) == 0, "%s: %s", formats[i], type);
        const char *te = test_http_header(&h, "Transfer-Encoding");
        CHECK(te && strcmp(te, "chunked") == 0);
        test_cmd_result r;
        REQUIRE(say_stdout(formats[i], &r) == 0);
        CHECK_MSG(r.status == 0, "say: %s", r.err);
        CHECK_MSG(r.out_len == h.body.len && memcmp(r.out, h.body.data, r.out_len) == 0,
                  "%s: the server's %zu bytes differ from say's %zu", formats[i], h.body.len,
                  r.out_len);
        if (i == 1) CHECK_EQ_INT(h.body.len, 20 * 1024 * 2);
        test_cmd_result_free(&r);
        test_http_free(&h);
    }
    test_server_stop(&ts);
}

static long sndfile_frames(const void *data, size_t len, int *rate) {
    const char *path = test_tmp("decode.bin");
    test_write_file(path, data, len);
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *sf = sf_open(path, SFM_READ, &info);
    if (!sf) return -1;
    float buf[4096];
    long total = 0;
    sf_count_t n;
    while ((n = sf_readf_float(sf, buf, 4096 / (info.channels ? info.channels : 1))) > 0)
        total += (long)n;
    sf_close(sf);
    *rate = info.samplerate;
    return total;
}

TEST(server_other_formats_and_whole_file_responses) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    const double seconds = 20 * 1024 / 22050.0;
    /* Ogg Opus (libopusenc picks a random stream serial, so only decode it) */
    test_http h = {0};
    const char *opus =
        "{\"input\":\"Hello world!\",\"response_format\":\"opus\",\"max_frames\":20," TS_GREEDY "}";
    CHECK_EQ_INT(test_http_post(&h, test_url(&ts, "/v1/audio/speech"), NULL, opus, NULL), 0);
    CHECK_EQ_INT(h.status, 200);
    int rate = 0;
    long frames = sndfile_frames(h.body.data, h.body.len, &rate);
    CHECK_MSG(frames > 0 && rate > 0 && (double)frames / rate > seconds - 0.05 &&
                  (double)frames / rate < seconds + 0.1,
              "opus decodes to %ld frames at %d Hz, want %.3f s", frames, rate, seconds);
    test_http_free(&h);
    /* raw float32 */
    h = (test_http){0};
    const char *f32 =
        "{\"input\":\"Hello world!\",\"response_format\":\"f32\",\"max_frames\":20," TS_GREEDY "}";
    CHECK_EQ_INT(test_http_post(&h, test_url(&ts, "/v1/audio/speech"), NULL, f32, NULL), 0);
    CHECK_EQ_INT(h.body.len, 20 * 1024 * 4);
    test_http_free(&h);
    /* "stream": false: a complete WAV with real sizes and a Content-Length */
    h = (test_http){0};
    const char *whole = "{\"input\":\"Hello world!\",\"response_format\":\"wav\",\"stream\":false,"
                        "\"max_frames\":20," TS_GREEDY "}";
    CHECK_EQ_INT(test_http_post(&h, test_url(&ts, "/v1/audio/speech"), NULL, whole, NULL), 0);
    CHECK_EQ_INT(h.status, 200);
    const char *length = test_http_header(&h, "Content-Length");
    CHECK(length && atol(length) == 44 + 20 * 1024 * 2);
    frames = sndfile_frames(h.body.data, h.body.len, &rate);
    CHECK_EQ_INT(frames, 20 * 1024);
    uint32_t riff = 0;
    if (h.body.len >= 8) memcpy(&riff, h.body.data + 4, 4);
    CHECK_EQ_INT(riff, 36 + 20 * 1024 * 2);
    test_http_free(&h);
    test_server_stop(&ts);
}

TEST(server_sse_events) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    const char *raw =
        "{\"input\":\"Hello "
        "world!\",\"response_format\":\"pcm\",\"sample_rate\":22050,\"max_frames\":20," TS_GREEDY
        "}";
    const char *sse =
        "{\"input\":\"Hello "
        "world!\",\"response_format\":\"pcm\",\"sample_rate\":22050,\"stream_format\":"
        "\"sse\",\"max_frames\":20," TS_GREEDY "}";
    test_http a = {0}, b = {0};
    CHECK_EQ_INT(test_http_post(&a, test_url(&ts, "/v1/audio/speech"), NULL, raw, NULL), 0);
    CHECK_EQ_INT(test_http_post(&b, test_url(&ts, "/v1/audio/speech"), NULL, sse, NULL), 0);
    const char *type = test_http_header(&b, "Content-Type");
    CHECK(type && strcmp(type, "text/event-stream") == 0);
    gp_buf audio;
    gp_buf_init(&audio);
    int deltas = 0, done = 0;
    char *text = b.body.data;
    REQUIRE(text);
    for (char *ev = text; ev && *ev;) {
        char *end = strstr(ev, "\n\n");
        REQUIRE_MSG(end && strncmp(ev, "data: ", 6) == 0, "bad SSE framing at: %.60s", ev);
        *end = '\0';
        cJSON *j = cJSON_Parse(ev + 6);
        REQUIRE_MSG(j, "event is not JSON: %.80s", ev);
        const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(j, "type"));
        CHECK_MSG(done == 0, "an event after speech.audio.done");
        if (t && strcmp(t, "speech.audio.delta") == 0) {
            const char *b64 = cJSON_GetStringValue(cJSON_GetObjectItem(j, "audio"));
            unsigned char *bytes = NULL;
            size_t n = 0;
            gp_error err;
            CHECK(b64 &&
                  gp_base64_decode(b64, strlen(b64), 1 << 24, "audio", &bytes, &n, &err) == 0);
            gp_buf_append(&audio, bytes, n);
            free(bytes);
            deltas++;
        } else if (t && strcmp(t, "speech.audio.done") == 0) {
            cJSON *u = cJSON_GetObjectItem(j, "usage");
            int in = cJSON_GetObjectItem(u, "input_tokens")->valueint;
            int out = cJSON_GetObjectItem(u, "output_tokens")->valueint;
            CHECK(in > 0);
            CHECK_EQ_INT(out, 20);
            CHECK_EQ_INT(cJSON_GetObjectItem(u, "total_tokens")->valueint, in + out);
            done++;
        } else {
            test_fail(__FILE__, __LINE__, "unexpected event type %s", t ? t : "(none)");
        }
        cJSON_Delete(j);
        ev = end + 2;
    }
    test_note("%d delta events", deltas);
    CHECK(deltas >= 2);
    CHECK_EQ_INT(done, 1);
    CHECK_MSG(audio.len == a.body.len && memcmp(audio.data, a.body.data, audio.len) == 0,
              "SSE audio (%zu bytes) differs from the raw stream (%zu)", audio.len, a.body.len);
    gp_buf_free(&audio);
    test_http_free(&a);
    test_http_free(&b);
    test_server_stop(&ts);
}

TEST(server_streams_audio_while_synthesis_runs) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    test_http h = {0};
    h.watch = &ts;
    const char *body =
        "{\"input\":\"Hello "
        "world!\",\"response_format\":\"pcm\",\"sample_rate\":22050,\"max_frames\":400," TS_GREEDY
        "}";
    CHECK_EQ_INT(test_http_post(&h, test_url(&ts, "/v1/audio/speech"), NULL, body, NULL), 0);
    CHECK_EQ_INT(h.body.len, 400 * 1024 * 2);
    double first = h.t_first_body - h.t_start, total = h.t_end - h.t_start;
    test_note("first audio after %.0f ms, last after %.0f ms", first * 1e3, total * 1e3);
    /* the stream was still being synthesised when its first bytes arrived */
    CHECK_EQ_INT(h.active_at_first_body, 1);
    CHECK(first < total / 2);
    test_http_free(&h);
    test_server_stop(&ts);
}

/* OpenAI's pcm is 24 kHz: N frames of 1024 samples at 22.05 kHz come out as
 * N * 1024 * 24000 / 22050 samples (within one frame: the resampler's
 * filter), still streamed; "sample_rate": 22050 keeps the codec's rate;
 * 8000 serves telephony's mu-law; rates off the list are refused. */
TEST(server_pcm_defaults_to_24khz) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    const char *rates[] = {"", ",\"sample_rate\":24000", ",\"sample_rate\":22050"};
    for (int i = 0; i < 3; i++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"input\":\"Hello "
                 "world!\",\"response_format\":\"pcm\",\"max_frames\":200%s," TS_GREEDY "}",
                 rates[i]);
        test_http h = {0};
        h.watch = &ts;
        CHECK_EQ_INT(test_http_post(&h, test_url(&ts, "/v1/audio/speech"), NULL, body, NULL), 0);
        CHECK_MSG(h.status == 200, "HTTP %ld %s", h.status, h.body.data);
        const char *rate = test_http_header(&h, "X-Sample-Rate");
        const char *want_rate = i < 2 ? "24000" : "22050";
        CHECK_MSG(rate && strcmp(rate, want_rate) == 0, "X-Sample-Rate %s", rate ? rate : "-");
        long samples = (long)h.body.len / 2;
        long want = i < 2 ? (long)(200 * 1024 * 24000.0 / 22050.0 + 0.5) : 200 * 1024;
        test_note("%s: %ld samples, want %ld", want_rate, samples, want);
        CHECK_EQ_INT(h.body.len % 2, 0);
        CHECK_MSG(labs(samples - want) <= 1024, "%ld samples, want %ld (+-1024)", samples, want);
        if (i == 2) CHECK_EQ_INT(samples, want); /* the native rate is not resampled */
        CHECK_EQ_INT(h.active_at_first_body, 1); /* still streaming */
        test_http_free(&h);
    }
    /* telephony's rate, for the G.711 formats (an extension of OpenAI's list) */
    test_http t = {0};
    CHECK_EQ_INT(test_http_post(&t, test_url(&ts, "/v1/audio/speech"), NULL,
                                "{\"input\":\"Hi\",\"response_format\":\"mulaw\",\"sample_rate\":"
                                "8000,\"max_frames\":20," TS_GREEDY "}",
                                NULL),
                 0);
    CHECK_MSG(t.status == 200 && labs((long)t.body.len - 20 * 1024 * 8000 / 22050) <= 400,
              "mulaw at 8000 Hz: HTTP %ld, %zu bytes", t.status, t.body.len);
    const char *type = test_http_header(&t, "Content-Type");
    CHECK(type && strcmp(type, "audio/PCMU") == 0);
    test_http_free(&t);
    const char *bad[] = {"11025", "96000", "24000.5", "\"24000\""};
    for (int i = 0; i < 4; i++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"input\":\"Hi\",\"response_format\":\"pcm\",\"sample_rate\":%s}", bad[i]);
        test_http h = {0};
        CHECK_EQ_INT(test_http_post(&h, test_url(&ts, "/v1/audio/speech"), NULL, body, NULL), 0);
        CHECK_MSG(h.status == 400 && h.body.data && strstr(h.body.data, "sample_rate"),
                  "sample_rate %s: HTTP %ld %s", bad[i], h.status, h.body.data);
        test_http_free(&h);
    }
    test_server_stop(&ts);
}

typedef struct bad_case {
    const char *path, *content_type, *body, *auth;
    long status;
    const char *code, *param;
} bad_case;

TEST(server_bad_requests_get_openai_errors) {
    test_server ts;
    test_server_opts o = {.api_key = "sesame", .max_body_bytes = 8192};
    REQUIRE(test_server_start(&ts, &o) == 0);
    char long_input[5200], big[10000];
    snprintf(long_input, sizeof long_input, "{\"input\":\"%04100d\"}", 0);
    memset(big, ' ', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[0] = '{';
    big[sizeof big - 2] = '}';
    const char *S = "/v1/audio/speech", *K = "sesame";
    bad_case cases[] = {
        {S, NULL, "{\"input\":\"hi\"}", NULL, 401, "invalid_api_key", NULL},
        {S, NULL, "{\"input\":\"hi\"}", "wrong", 401, "invalid_api_key", NULL},
        {"/v1/models", NULL, NULL, NULL, 401, "invalid_api_key", NULL},
        {S, "text/plain", "{\"input\":\"hi\"}", K, 415, "unsupported_media_type", NULL},
        {S, NULL, "{\"input\": \"hi\",", K, 400, "invalid_json", NULL},
        {S, NULL, "[1,2]", K, 400, "invalid_json", NULL},
        {S, NULL, "", K, 400, "empty_body", NULL},
        {S, NULL, "{\"voice\":\"alloy\"}", K, 400, "missing_input", "input"},
        {S, NULL, "{\"input\":\" \\n \"}", K, 400, "empty_input", "input"},
        {S, NULL, "{\"input\":7}", K, 400, "invalid_type", "input"},
        {S, NULL, long_input, K, 400, "string_above_max_length", "input"},
        {S, NULL, big, K, 413, "request_too_large", NULL},
        {S, NULL, "{\"input\":\"hi\",\"voice\":\"nobody\"}", K, 400, "voice_not_found", "voice"},
        {S, NULL, "{\"input\":\"hi\",\"top_k\":\"x\"}", K, 400, "invalid_type", "top_k"},
        {S, NULL, "{\"input\":\"hi\",\"top_k\":-1}", K, 400, "invalid_value", "top_k"},
        {S, NULL, "{\"input\":\"hi\",\"max_frames\":0}", K, 400, "invalid_value", "max_frames"},
        {S, NULL, "{\"input\":\"hi\",\"seed\":1.5}", K, 400, "invalid_type", "seed"},
        {S, NULL, "{\"input\":\"hi\",\"response_format\":\"ogg-vorbis\"}", K, 400,
         "unsupported_format", "response_format"},
        {S, NULL, "{\"input\":\"hi\",\"speed\":0.2}", K, 400, "invalid_value", "speed"},
        {S, NULL, "{\"input\":\"hi\",\"speed\":\"fast\"}", K, 400, "invalid_type", "speed"},
        {S, NULL, "{\"input\":\"hi\",\"speed\":9}", K, 400, "invalid_value", "speed"},
        {S, NULL, "{\"input\":\"hi\",\"stream_format\":\"ws\"}", K, 400, "invalid_value",
         "stream_format"},
        {S, NULL, "{\"input\":\"hi\",\"model\":\"whisper-1\"}", K, 400, "model_not_found", "model"},
        {S, NULL, "{\"input\":\"hi\",\"ref_audio\":\"%%%\"}", K, 400, "invalid_ref_audio",
         "ref_audio"},
        {S, NULL, "{\"input\":\"hi\",\"ref_audio\":\"aGVsbG8gd29ybGQ=\"}", K, 400,
         "invalid_ref_audio", "ref_audio"},
        {"/v1/audio/speech/batch", NULL, "{\"input\":\"hi\"}", K, 400, "invalid_type", "voices"},
        {"/v1/audio/speech/batch", NULL, "{\"input\":\"hi\",\"voices\":[]}", K, 400,
         "invalid_value", "voices"},
        {"/v1/audio/speech/batch", NULL, "{\"input\":\"hi\",\"voices\":[\"alloy\",\"zed\"]}", K,
         400, "voice_not_found", "voices[1].voice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        test_http h = {0};
        if (c->body)
            test_http_post(&h, test_url(&ts, c->path), c->content_type, c->body, c->auth);
        else
            test_http_get(&h, test_url(&ts, c->path), c->auth);
        CHECK_MSG(h.status == c->status, "case %zu: HTTP %ld, want %ld: %s", i, h.status, c->status,
                  h.body.data ? h.body.data : "");
        cJSON *j = h.body.data ? cJSON_Parse(h.body.data) : NULL;
        cJSON *e = cJSON_GetObjectItem(j, "error");
        CHECK_MSG(e && cJSON_IsString(cJSON_GetObjectItem(e, "message")) &&
                      cJSON_IsString(cJSON_GetObjectItem(e, "type")) &&
                      cJSON_GetObjectItem(e, "param") && cJSON_GetObjectItem(e, "code"),
                  "case %zu: not an OpenAI error: %s", i, h.body.data ? h.body.data : "");
        const char *code = cJSON_GetStringValue(cJSON_GetObjectItem(e, "code"));
        const char *param = cJSON_GetStringValue(cJSON_GetObjectItem(e, "param"));
        CHECK_MSG(code && strcmp(code, c->code) == 0, "case %zu: code %s, want %s", i,
                  code ? code : "null", c->code);
        if (c->param)
            CHECK_MSG(param && strcmp(param, c->param) == 0, "case %zu: param %s, want %s", i,
                      param ? param : "null", c->param);
        if (c->status == 401) CHECK(test_http_header(&h, "WWW-Authenticate") != NULL);
        if (i == 12) CHECK(strstr(h.body.data, "alloy") != NULL); /* lists the voices */
        cJSON_Delete(j);
        test_http_free(&h);
    }
    /* a body too large without a Content-Length (chunked upload) */
    test_http h = {0};
    test_http_post(&h, test_url(&ts, S), "application/json\r\nTransfer-Encoding: chunked", big, K);
    CHECK_MSG(h.status == 413, "chunked oversize body: HTTP %ld", h.status);
    test_http_free(&h);
    /* health needs no key; the right key works */
    h = (test_http){0};
    test_http_get(&h, test_url(&ts, "/health"), NULL);
    CHECK_EQ_INT(h.status, 200);
    test_http_free(&h);
    h = (test_http){0};
    test_http_get(&h, test_url(&ts, "/v1/models"), K);
    CHECK_EQ_INT(h.status, 200);
    test_http_free(&h);
    test_server_stop(&ts);
}

TEST(server_request_time_limit_stops_a_stream) {
    test_server ts;
    test_server_opts o = {.request_timeout_s = 0.3};
    REQUIRE(test_server_start(&ts, &o) == 0);
    test_http h = {0};
    const char *body =
        "{\"input\":\"Hello "
        "world!\",\"response_format\":\"pcm\",\"sample_rate\":22050,\"max_frames\":3000," TS_GREEDY
        "}";
    int rc = test_http_post(&h, test_url(&ts, "/v1/audio/speech"), NULL, body, NULL);
    test_note("curl %d after %.2f s with %zu bytes", rc, h.t_end - h.t_start, h.body.len);
    CHECK(rc != 0); /* the chunked stream ends without its final chunk */
    CHECK_EQ_INT(h.status, 200);
    CHECK(h.body.len < 3000 * 2048);
    CHECK(h.t_end - h.t_start < 10);
    gepard_engine_stats st;
    test_server_stats(&ts, &st);
    CHECK_EQ_INT(st.active_streams, 0);
    test_http_free(&h);
    test_server_stop(&ts);
}
