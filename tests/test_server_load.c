/* test_server_load.c — the server under concurrency: 16 simultaneous streams
 * with correct audio batched together, client disconnects (streaming and
 * queued) freeing their slot, 429 when slots and queue are full, the batch
 * fan-out endpoint, voices from a directory and from ref_audio, the
 * `gepard loadtest` tool, and `gepard serve` draining on SIGTERM. */
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/timing.h"
#include "io/json.h"
#include "server/base64.h"
#include "server_harness.h"
#include "test.h"

#define SPEECH_BODY(frames, seed)                                                                  \
    "{\"input\":\"Hello "                                                                          \
    "world!\",\"response_format\":\"pcm\",\"sample_rate\":22050,\"max_frames\":" #frames           \
    ",\"stop_threshold\":2,\"seed\":" #seed "}"

static char *get_metrics(test_server *ts) {
    test_http h = {0};
    test_http_get(&h, test_url(ts, "/metrics"), NULL);
    char *text = gp_buf_detach(&h.body, NULL);
    test_http_free(&h);
    return text;
}

/* Wait until the engine has no active or queued stream (or 5 s pass). */
static void wait_idle(test_server *ts, gepard_engine_stats *st) {
    double until = gp_now_s() + 5;
    do {
        test_server_stats(ts, st);
        if (st->active_streams == 0 && st->queued_streams == 0) return;
        usleep(10000);
    } while (gp_now_s() < until);
}

TEST(server_16_concurrent_streams_batched_with_correct_audio) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    /* references, one at a time */
    test_http ref[2] = {{0}, {0}};
    CHECK_EQ_INT(
        test_http_post(&ref[0], test_url(&ts, "/v1/audio/speech"), NULL, SPEECH_BODY(30, 1), NULL),
        0);
    CHECK_EQ_INT(
        test_http_post(&ref[1], test_url(&ts, "/v1/audio/speech"), NULL, SPEECH_BODY(30, 2), NULL),
        0);
    REQUIRE(ref[0].body.len == 30 * 2048 && ref[1].body.len == 30 * 2048);
    CHECK(memcmp(ref[0].body.data, ref[1].body.data, ref[0].body.len) != 0);
    test_http h[16];
    memset(h, 0, sizeof h);
    for (int i = 0; i < 16; i++)
        REQUIRE(test_http_post_async(&h[i], test_url(&ts, "/v1/audio/speech"),
                                     i % 2 ? SPEECH_BODY(30, 2) : SPEECH_BODY(30, 1)) == 0);
    for (int i = 0; i < 16; i++) test_http_join(&h[i]);
    for (int i = 0; i < 16; i++) {
        CHECK_MSG(h[i].status == 200 && h[i].curl_code == 0, "request %d: HTTP %ld curl %d", i,
                  h[i].status, h[i].curl_code);
        const gp_buf *want = &ref[i % 2].body;
        CHECK_MSG(h[i].body.len == want->len && memcmp(h[i].body.data, want->data, want->len) == 0,
                  "request %d: audio differs from the same request made alone", i);
        test_http_free(&h[i]);
    }
    char *m = get_metrics(&ts);
    double max_batch = test_metric(m, "gepard_batch_size_max");
    double mean_batch = test_metric(m, "gepard_batch_size_mean");
    test_note("batch size max %.0f, mean %.2f", max_batch, mean_batch);
    CHECK(max_batch > 1);
    /* no real-time margin here: the capacity gauge is every slot */
    test_note("cycle %.2f ms, real-time capacity %.0f streams",
              test_metric(m, "gepard_engine_cycle_seconds") * 1e3,
              test_metric(m, "gepard_realtime_capacity_streams"));
    CHECK(test_metric(m, "gepard_engine_cycle_seconds") > 0);
    CHECK(test_metric(m, "gepard_engine_step_seconds_total") > 0);
    CHECK(test_metric(m, "gepard_engine_deliver_seconds_total") > 0);
    /* waiting for a GPU is part of the step time (none on a CPU) */
    CHECK(test_metric(m, "gepard_engine_step_wait_seconds_total") >= 0);
    CHECK(test_metric(m, "gepard_engine_step_wait_seconds_total") <=
          test_metric(m, "gepard_engine_step_seconds_total"));
    /* batched codec time is part of the delivery time */
    CHECK(test_metric(m, "gepard_engine_codec_seconds_total") >= 0);
    CHECK(test_metric(m, "gepard_engine_codec_seconds_total") <=
          test_metric(m, "gepard_engine_deliver_seconds_total"));
    CHECK(test_metric(m, "gepard_engine_codec_batches_total") >= 0);
    CHECK(test_metric(m, "gepard_realtime_capacity_streams") >= 16);
    CHECK_EQ_INT(test_metric(m, "gepard_http_requests_total{route=\"speech\",code=\"200\"}"), 18);
    CHECK_EQ_INT(test_metric(m, "gepard_time_to_first_audio_seconds_count"), 18);
    CHECK_EQ_INT(test_metric(m, "gepard_real_time_factor_count"), 18);
    free(m);
    test_http_free(&ref[0]);
    test_http_free(&ref[1]);
    test_server_stop(&ts);
}

TEST(server_client_disconnect_frees_the_slot) {
    test_server ts;
    test_server_opts o = {.max_streams = 1};
    REQUIRE(test_server_start(&ts, &o) == 0);
    /* A streams until the test hangs up on it (a byte count raced the machine's
     * speed: a fast one finished A before B had left); B queues behind it and
     * gives up early */
    test_http a = {0}, b = {0};
    b.timeout_ms = 300;
    REQUIRE(test_http_post_async(&a, test_url(&ts, "/v1/audio/speech"), SPEECH_BODY(4000, 1)) == 0);
    gepard_engine_stats st;
    double until = gp_now_s() + 5;
    do {
        test_server_stats(&ts, &st);
        usleep(5000);
    } while (st.frames == 0 && gp_now_s() < until);
    REQUIRE(test_http_post_async(&b, test_url(&ts, "/v1/audio/speech"), SPEECH_BODY(3000, 2)) == 0);
    test_http_join(&b);
    CHECK_EQ_INT(b.status, 200); /* accepted into the queue, then abandoned */
    usleep(200000);              /* the server notices within 100 ms */
    test_server_stats(&ts, &st);
    CHECK_MSG(st.queued_streams == 0 && st.active_streams == 1,
              "after the queued client left: %d queued, %d active", st.queued_streams,
              st.active_streams);
    atomic_store(&a.hang_up, 1);
    test_http_join(&a);
    CHECK(a.curl_code != 0); /* we hung up */
    wait_idle(&ts, &st);
    CHECK_EQ_INT(st.active_streams, 0);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    test_note("A ran %llu frames before the slot was freed", (unsigned long long)st.frames);
    CHECK(st.frames < 4000);
    /* An abandoned stream is counted when the server reaps it (its ticker
     * runs every 100 ms), which may come after the engine freed the slot. */
    char *m = get_metrics(&ts);
    for (double settle = gp_now_s() + 5;
         test_metric(m, "gepard_client_disconnects_total") < 2 && gp_now_s() < settle;) {
        free(m);
        usleep(20000);
        m = get_metrics(&ts);
    }
    CHECK_EQ_INT(test_metric(m, "gepard_client_disconnects_total"), 2);
    CHECK_EQ_INT(test_metric(m, "gepard_active_streams"), 0);
    free(m);
    test_http_free(&a);
    test_http_free(&b);
    test_server_stop(&ts);
}

TEST(server_full_slots_and_queue_answer_429) {
    test_server ts;
    test_server_opts o = {.max_streams = 1, .max_queue = -1};
    REQUIRE(test_server_start(&ts, &o) == 0);
    test_http a = {0}, b = {0}; /* A holds the slot until the test hangs up on it */
    REQUIRE(test_http_post_async(&a, test_url(&ts, "/v1/audio/speech"), SPEECH_BODY(4000, 1)) == 0);
    gepard_engine_stats st;
    double until = gp_now_s() + 5;
    do {
        test_server_stats(&ts, &st);
        usleep(5000);
    } while (st.active_streams == 0 && gp_now_s() < until);
    CHECK_EQ_INT(
        test_http_post(&b, test_url(&ts, "/v1/audio/speech"), NULL, SPEECH_BODY(5, 1), NULL), 0);
    CHECK_EQ_INT(b.status, 429);
    const char *retry = test_http_header(&b, "Retry-After");
    CHECK(retry && atoi(retry) >= 1);
    CHECK(b.body.data && strstr(b.body.data, "\"rate_limit_error\""));
    atomic_store(&a.hang_up, 1);
    test_http_join(&a);
    test_http_free(&a);
    test_http_free(&b);
    test_server_stop(&ts);
}

/* A stream whose first audio comes later than the idle-connection timeout
 * (queued behind others) must not be dropped, streamed or collected whole. */
TEST(server_late_first_audio_outlives_the_idle_timeout) {
    test_server ts;
    test_server_opts o = {.max_streams = 1, .connection_timeout_s = 1};
    REQUIRE(test_server_start(&ts, &o) == 0);
    test_http a = {0}, a2 = {0}, b = {0}, c = {0};
    /* A, then A2, hold the only slot for 1.4 s whatever the machine's speed:
     * the test hangs up on both then (4000 frames took 1.0-2.5 s on
     * different machines, so A alone may end before the timeout) */
    REQUIRE(test_http_post_async(&a, test_url(&ts, "/v1/audio/speech"), SPEECH_BODY(4000, 1)) == 0);
    usleep(50000);
    REQUIRE(test_http_post_async(&a2, test_url(&ts, "/v1/audio/speech"), SPEECH_BODY(4000, 4)) ==
            0);
    usleep(50000);
    REQUIRE(test_http_post_async(&b, test_url(&ts, "/v1/audio/speech"), SPEECH_BODY(5, 2)) == 0);
    const char *whole = "{\"input\":\"Hello world!\",\"response_format\":\"wav\",\"stream\":false,"
                        "\"max_frames\":5,\"stop_threshold\":2,\"seed\":3}";
    REQUIRE(test_http_post_async(&c, test_url(&ts, "/v1/audio/speech"), whole) == 0);
    usleep(1300000);
    atomic_store(&a.hang_up, 1);
    atomic_store(&a2.hang_up, 1);
    test_http_join(&a);
    test_http_join(&a2);
    test_http_join(&b);
    test_http_join(&c);
    test_note("a took %.1f s (%zu bytes), a2 %.1f s (%zu bytes); b's first audio after %.1f s",
              a.t_end - a.t_start, a.body.len, a2.t_end - a2.t_start, a2.body.len,
              b.t_first_body - b.t_start);
    CHECK(b.t_first_body - b.t_start > 1.2);
    CHECK_MSG(
        a.body.len > 0 && (a.curl_code != 0 ? a.body.len < 4000 * 2048 : a.body.len == 4000 * 2048),
        "a: curl %d, %zu bytes (streamed, then hung up on or whole)", a.curl_code, a.body.len);
    CHECK_MSG(b.curl_code == 0 && b.body.len == 5 * 2048, "b: curl %d, %zu bytes", b.curl_code,
              b.body.len);
    CHECK_MSG(c.curl_code == 0 && c.status == 200 && c.body.len == 44 + 5 * 2048,
              "c: curl %d, HTTP %ld, %zu bytes", c.curl_code, c.status, c.body.len);
    test_http_free(&a2);
    test_http_free(&a);
    test_http_free(&b);
    test_http_free(&c);
    test_server_stop(&ts);
}

/* Decode item i's base64 audio from a batch response. */
static unsigned char *batch_audio(cJSON *data, int i, size_t *n) {
    cJSON *item = cJSON_GetArrayItem(data, i);
    const char *b64 = cJSON_GetStringValue(cJSON_GetObjectItem(item, "audio"));
    unsigned char *bytes = NULL;
    gp_error err;
    *n = 0;
    if (!b64 || gp_base64_decode(b64, strlen(b64), 1 << 26, "audio", &bytes, n, &err)) return NULL;
    return bytes;
}

TEST(server_batch_fans_one_text_out_to_several_voices) {
    const char *dir = test_tmp("voices");
    REQUIRE(mkdir(dir, 0755) == 0);
    test_write_reference_wav(test_tmp("voices/vox.wav"));
    test_server ts;
    test_server_opts o = {.voices_dir = dir};
    REQUIRE(test_server_start(&ts, &o) == 0);
    const char *body = "{\"input\":\"Hello world!\",\"voices\":[\"alloy\",\"default\",\"vox\"],"
                       "\"response_format\":\"wav\",\"max_frames\":12," TS_GREEDY "}";
    test_http h = {0};
    CHECK_EQ_INT(test_http_post(&h, test_url(&ts, "/v1/audio/speech/batch"), NULL, body, NULL), 0);
    CHECK_MSG(h.status == 200, "HTTP %ld: %s", h.status, h.body.data);
    cJSON *j = cJSON_Parse(h.body.data);
    cJSON *data = cJSON_GetObjectItem(j, "data");
    REQUIRE(cJSON_GetArraySize(data) == 3);
    size_t n[3];
    unsigned char *audio[3];
    for (int i = 0; i < 3; i++) {
        audio[i] = batch_audio(data, i, &n[i]);
        CHECK_MSG(audio[i] && n[i] == 44 + 12 * 2048, "item %d: %zu bytes", i, n[i]);
        uint32_t data_size = 0;
        if (audio[i] && n[i] >= 44) memcpy(&data_size, audio[i] + 40, 4);
        CHECK_EQ_INT(data_size, 12 * 2048); /* a complete WAV with real sizes */
        CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetArrayItem(data, i), "frames")->valueint, 12);
    }
    CHECK(audio[0] && audio[1] && memcmp(audio[0], audio[1], n[0]) == 0); /* both default */
    CHECK(audio[0] && audio[2] && memcmp(audio[0], audio[2], n[0]) != 0); /* vox differs */
    cJSON *usage = cJSON_GetObjectItem(j, "usage");
    CHECK_EQ_INT(cJSON_GetObjectItem(usage, "output_tokens")->valueint, 36);
    for (int i = 0; i < 3; i++) free(audio[i]);
    cJSON_Delete(j);
    test_http_free(&h);
    char *m = get_metrics(&ts);
    test_note("batch size max %.0f", test_metric(m, "gepard_batch_size_max"));
    CHECK(test_metric(m, "gepard_batch_size_max") >= 2);
    free(m);
    /* option sets: per-item seeds over shared options */
    h = (test_http){0};
    body =
        "{\"input\":\"Hello world!\",\"items\":[{\"seed\":1},{\"seed\":2,\"temperature\":0.5}],"
        "\"response_format\":\"pcm\",\"sample_rate\":22050,\"max_frames\":6,\"stop_threshold\":2}";
    CHECK_EQ_INT(test_http_post(&h, test_url(&ts, "/v1/audio/speech/batch"), NULL, body, NULL), 0);
    j = cJSON_Parse(h.body.data);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "data")), 2);
    cJSON_Delete(j);
    test_http_free(&h);
    test_server_stop(&ts);
}

static char *read_whole(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    gp_buf b;
    gp_buf_init(&b);
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) gp_buf_append(&b, chunk, k);
    fclose(f);
    return gp_buf_detach(&b, n);
}

/* POST a pcm request with `extra` fields; returns the body (caller frees). */
static char *speak(test_server *ts, const char *extra, size_t *n) {
    char *body = malloc(strlen(extra) + 256);
    sprintf(
        body,
        "{\"input\":\"Hello "
        "world!\",\"response_format\":\"pcm\",\"sample_rate\":22050,\"max_frames\":12," TS_GREEDY
        "%s}",
        extra);
    test_http h = {0};
    test_http_post(&h, test_url(ts, "/v1/audio/speech"), NULL, body, NULL);
    free(body);
    if (h.status != 200) test_fail(__FILE__, __LINE__, "HTTP %ld: %s", h.status, h.body.data);
    char *out = gp_buf_detach(&h.body, n);
    test_http_free(&h);
    return out;
}

static char *say_pcm(const char *opt, const char *value, size_t *n) {
    const char *args[] = {
        "say", "--model",          TS_MODEL, "--codec",      TS_CODEC, "--top-k", "1",   "--seed",
        "5",   "--stop-threshold", "2",      "--max-frames", "12",     opt,       value, "-o",
        "-",   "Hello world!",     NULL};
    test_cmd_result r;
    if (test_run_gepard(&r, NULL, 0, 60, args) != 0 || r.status != 0) {
        test_fail(__FILE__, __LINE__, "say %s %s failed: %s", opt, value, r.err);
        test_cmd_result_free(&r);
        return NULL;
    }
    *n = r.out_len;
    char *out = r.out;
    r.out = NULL;
    test_cmd_result_free(&r);
    return out;
}

static bool same(const char *a, size_t na, const char *b, size_t nb) {
    return a && b && na == nb && memcmp(a, b, na) == 0;
}

TEST(server_voices_from_directory_and_ref_audio) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s", test_tmp("voices"));
    REQUIRE(mkdir(dir, 0755) == 0);
    char clip[600], saved[600], lora[600], notes[600];
    snprintf(clip, sizeof clip, "%s/vox.wav", dir);
    snprintf(saved, sizeof saved, "%s/kept.voice.safetensors", dir);
    snprintf(lora, sizeof lora, "%s/tuned.lora.safetensors", dir);
    snprintf(notes, sizeof notes, "%s/README.txt", dir);
    test_write_reference_wav(clip);
    test_write_file(notes, "not a voice", 11);
    char fixture_lora[1024];
    snprintf(fixture_lora, sizeof fixture_lora, "%s",
             test_fixture("model-tiny/lora_adapter.safetensors"));
    char *abs_lora = realpath(fixture_lora, NULL);
    REQUIRE(abs_lora && symlink(abs_lora, lora) == 0); /* a link, not a copy */
    /* references from `gepard say`, which also saves the clip's voice */
    size_t n_clip = 0, n_lora = 0;
    const char *args[] = {
        "say", "--model",      TS_MODEL, "--codec",          TS_CODEC, "--top-k",
        "1",   "--seed",       "5",      "--stop-threshold", "2",      "--max-frames",
        "12",  "--voice",      clip,     "--save-voice",     saved,    "-o",
        "-",   "Hello world!", NULL};
    test_cmd_result r;
    REQUIRE(test_run_gepard(&r, NULL, 0, 60, args) == 0);
    REQUIRE_MSG(r.status == 0, "say: %s", r.err);
    char *want_clip = r.out;
    n_clip = r.out_len;
    r.out = NULL;
    test_cmd_result_free(&r);
    char *want_lora = say_pcm("--lora", abs_lora, &n_lora);
    free(abs_lora);
    test_server ts;
    test_server_opts o = {.voices_dir = dir};
    REQUIRE(test_server_start(&ts, &o) == 0);
    /* the listing */
    test_http h = {0};
    test_http_get(&h, test_url(&ts, "/v1/audio/voices"), NULL);
    cJSON *j = cJSON_Parse(h.body.data);
    cJSON *names = cJSON_GetObjectItem(j, "voices");
    char *names_text = cJSON_PrintUnformatted(names);
    test_note("voices: %s", names_text);
    CHECK(names_text && strstr(names_text, "\"kept\"") && strstr(names_text, "\"tuned\"") &&
          strstr(names_text, "\"vox\"") && strstr(names_text, "\"alloy\"") &&
          !strstr(names_text, "README"));
    free(names_text);
    cJSON_Delete(j);
    test_http_free(&h);
    /* each voice sounds as `gepard say` makes it */
    size_t n;
    char *got = speak(&ts, ",\"voice\":\"vox\"", &n);
    CHECK_MSG(same(got, n, want_clip, n_clip), "voice vox differs from say --voice");
    free(got);
    got = speak(&ts, ",\"voice\":\"kept\"", &n);
    CHECK_MSG(same(got, n, want_clip, n_clip), "the saved voice differs from say --voice");
    free(got);
    got = speak(&ts, ",\"voice\":{\"id\":\"tuned\"}", &n);
    CHECK_MSG(same(got, n, want_lora, n_lora), "the LoRA voice differs from say --lora");
    free(got);
    /* ref_audio: the same clip, base64 in the request */
    size_t n_wav = 0;
    char *wav = read_whole(clip, &n_wav);
    gp_buf extra;
    gp_buf_init(&extra);
    gp_buf_append_str(&extra, ",\"ref_audio\":\"");
    gp_base64_append(&extra, wav, n_wav);
    gp_buf_append_str(&extra, "\"");
    got = speak(&ts, extra.data, &n);
    CHECK_MSG(same(got, n, want_clip, n_clip), "ref_audio differs from say --voice");
    free(got);
    gp_buf_free(&extra);
    free(wav);
    free(want_clip);
    free(want_lora);
    test_server_stop(&ts);
}

/* `gepard loadtest …` against a test server: its exit status checked, the
 * JSON it printed (NULL when it printed none). */
static cJSON *loadtest_json(const char *const *args) {
    test_cmd_result r;
    if (test_run_gepard(&r, NULL, 0, 60, args) != 0) return NULL;
    CHECK_MSG(r.status == 0, "loadtest: %s", r.err);
    cJSON *j = cJSON_Parse(r.out);
    CHECK_MSG(j, "not JSON: %s", r.out);
    test_cmd_result_free(&r);
    return j;
}

TEST(server_loadtest_command_reports_json) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    const char *args[] = {"loadtest",
                          "--url",
                          ts.base,
                          "--concurrency",
                          "3",
                          "--requests",
                          "6",
                          "--body",
                          "{\"max_frames\":8,\"stop_threshold\":2,\"top_k\":1}",
                          NULL};
    cJSON *j = loadtest_json(args);
    REQUIRE(j);
    CHECK_EQ_INT(cJSON_GetObjectItem(j, "ok")->valueint, 6);
    CHECK_EQ_INT(cJSON_GetObjectItem(j, "failed")->valueint, 0);
    double audio = cJSON_GetObjectItem(j, "audio_seconds")->valuedouble;
    CHECK(audio > 6 * 8 * 1024 / 22050.0 - 0.01 && audio < 6 * 8 * 1024 / 22050.0 + 0.01);
    cJSON *ttfa = cJSON_GetObjectItem(j, "ttfa_ms");
    CHECK(cJSON_GetObjectItem(ttfa, "p50") && cJSON_GetObjectItem(ttfa, "p99"));
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "rtf"), "p90"));
    cJSON_Delete(j);
    test_server_stop(&ts);
}

/* --threads splits the requests and the concurrency over several event loops
 * (11 requests, 5 at a time, 3 loops: shares of 3/4/4 requests and 2/2/1 in
 * flight, the first wave spread over --ramp): every request is run once and
 * reported once, with its exact audio. */
TEST(server_loadtest_threads_share_the_requests) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    const char *args[] = {"loadtest",
                          "--url",
                          ts.base,
                          "--concurrency",
                          "5",
                          "--requests",
                          "11",
                          "--threads",
                          "3",
                          "--ramp",
                          "0.3",
                          "--body",
                          "{\"max_frames\":8,\"stop_threshold\":2,\"top_k\":1}",
                          NULL};
    cJSON *j = loadtest_json(args);
    REQUIRE(j);
    CHECK_EQ_INT(cJSON_GetObjectItem(j, "client_threads")->valueint, 3);
    CHECK_EQ_INT(cJSON_GetObjectItem(j, "requests")->valueint, 11);
    CHECK_EQ_INT(cJSON_GetObjectItem(j, "ok")->valueint, 11);
    CHECK_EQ_INT(cJSON_GetObjectItem(j, "failed")->valueint, 0);
    const double audio = cJSON_GetObjectItem(j, "audio_seconds")->valuedouble,
                 want = 11 * 8 * 1024 / 22050.0;
    CHECK_MSG(fabs(audio - want) < 0.01, "audio_seconds %g, want %g", audio, want);
    gepard_engine_stats st;
    test_server_stats(&ts, &st);
    test_note("engine: %d streams started, largest batch %d", (int)st.streams_started,
              (int)st.max_batch);
    CHECK_EQ_INT((int)st.streams_started, 11);
    CHECK((int)st.max_batch <= 5);
    cJSON_Delete(j);
    test_server_stop(&ts);
}

/* A soak in miniature: --duration keeps the requests coming for 2 s, --sample
 * scrapes /metrics (process_* and stream gauges) every 0.4 s, and at the end
 * the server's count of answered requests equals the client's. */
TEST(server_loadtest_soak_samples_the_server) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    const char *args[] = {"loadtest",
                          "--url",
                          ts.base,
                          "--concurrency",
                          "2",
                          "--duration",
                          "2",
                          "--sample",
                          "0.4",
                          "--body",
                          "{\"max_frames\":4,\"stop_threshold\":2}",
                          NULL};
    cJSON *j = loadtest_json(args);
    REQUIRE(j);
    const int ok = cJSON_GetObjectItem(j, "ok")->valueint;
    const double wall = cJSON_GetObjectItem(j, "wall_seconds")->valuedouble;
    test_note("%d requests in %.2f s", ok, wall);
    CHECK(ok > 2 && cJSON_GetObjectItem(j, "failed")->valueint == 0);
    CHECK(wall >= 2.0 && wall < 10.0);
    const cJSON *srv = cJSON_GetObjectItem(j, "server");
    REQUIRE(srv);
    const cJSON *samples = cJSON_GetObjectItem(srv, "samples");
    test_note("%d samples; counts_match %s", cJSON_GetArraySize(samples),
              cJSON_IsTrue(cJSON_GetObjectItem(srv, "counts_match")) ? "true" : "false");
    CHECK(cJSON_GetArraySize(samples) >= 3);
    const cJSON *first = cJSON_GetArrayItem(samples, 0);
    CHECK(cJSON_GetObjectItem(first, "rss_mb")->valuedouble > 1);
    CHECK(cJSON_GetObjectItem(first, "open_fds")->valuedouble > 2);
    CHECK(cJSON_IsNumber(cJSON_GetObjectItem(first, "active")));
    CHECK(cJSON_IsObject(cJSON_GetObjectItem(srv, "rss_mb")));
    CHECK_EQ_INT(cJSON_GetObjectItem(srv, "speech_200_answered")->valueint, ok);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(srv, "counts_match")));
    cJSON_Delete(j);
    test_server_stop(&ts);
}

/* Start `gepard serve --port 0 --warm-up 3`; returns its pid, fills the
 * port from its "listening on" line and `said` with what it wrote up to
 * "ready". */
static pid_t spawn_serve(int *port, int *err_fd, char *said, size_t said_size) {
    int p[2];
    if (pipe(p)) return -1;
    const char *bin = getenv("GEPARD_BIN");
    if (!bin || !*bin) bin = "build/asan/gepard";
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        execl(bin, bin, "serve", "--model", TS_MODEL, "--codec", TS_CODEC, "--port", "0",
              "--threads", "1", "--drain", "20", "--warm-up", "3", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    *err_fd = p[0];
    char line[4096] = {0};
    size_t len = 0;
    double until = gp_now_s() + 20;
    *port = 0;
    while (gp_now_s() < until && len < sizeof line - 1) {
        struct pollfd pfd = {p[0], POLLIN, 0};
        if (poll(&pfd, 1, 200) <= 0) continue;
        ssize_t k = read(p[0], line + len, sizeof line - 1 - len);
        if (k <= 0) break;
        len += (size_t)k;
        line[len] = '\0';
        const char *at = strstr(line, "ready");
        const char *port_at = strstr(line, "127.0.0.1:");
        if (at && port_at) {
            *port = atoi(port_at + 10);
            break;
        }
    }
    snprintf(said, said_size, "%s", line);
    return pid;
}

TEST(server_cli_drains_streams_on_sigterm) {
    int port = 0, err_fd = -1;
    char said[4096] = {0};
    pid_t pid = spawn_serve(&port, &err_fd, said, sizeof said);
    REQUIRE(pid > 0);
    /* the warm-up ran before "ready" (batches of 1, 2, 3 streams) */
    CHECK_MSG(strstr(said, "warming up (batches of 1 to 3 streams)") &&
                  strstr(said, "warmed up in"),
              "no warm-up before ready: %s", said);
    if (port <= 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        REQUIRE_MSG(false, "gepard serve did not report a port");
    }
    char u[128];
    snprintf(u, sizeof u, "http://127.0.0.1:%d/v1/audio/speech", port);
    test_http a = {0};
    REQUIRE(test_http_post_async(&a, u, SPEECH_BODY(150, 1)) == 0);
    /* SIGTERM while the stream runs: it must still be delivered whole */
    usleep(150000);
    kill(pid, SIGTERM);
    /* a connection made during the drain is closed without an answer */
    usleep(100000);
    char health[128];
    snprintf(health, sizeof health, "http://127.0.0.1:%d/health", port);
    test_http h = {0};
    h.timeout_ms = 2000;
    CHECK(test_http_get(&h, health, NULL) != 0);
    test_http_free(&h);
    test_http_join(&a);
    CHECK_EQ_INT(a.status, 200);
    CHECK_EQ_INT(a.curl_code, 0);
    CHECK_EQ_INT(a.body.len, 150 * 2048);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %d", status);
    char tail[4096] = {0};
    ssize_t k = read(err_fd, tail, sizeof tail - 1);
    if (k > 0) tail[k] = '\0';
    CHECK_MSG(strstr(tail, "terminated"), "stderr: %s", tail);
    CHECK_MSG(!strstr(tail, "ERROR: AddressSanitizer") && !strstr(tail, "LeakSanitizer"),
              "sanitizer report: %s", tail);
    close(err_fd);
    /* and nothing listens any more */
    test_http b = {0};
    b.timeout_ms = 2000;
    CHECK(test_http_get(&b, u, NULL) != 0);
    test_http_free(&a);
    test_http_free(&b);
}

/* ref_audio is turned into a voice on the server's voice thread while the
 * connection waits suspended: a whole file, a batch item, and the same
 * voice streamed, all sound the same. */
TEST(server_ref_audio_in_whole_file_and_batch_requests) {
    const char *clip = test_tmp("ref.wav");
    test_write_reference_wav(clip);
    size_t n_wav = 0;
    char *wav = read_whole(clip, &n_wav);
    REQUIRE(wav);
    gp_buf b64;
    gp_buf_init(&b64);
    gp_base64_append(&b64, wav, n_wav);
    free(wav);
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    size_t n_stream = 0;
    gp_buf extra;
    gp_buf_init(&extra);
    gp_buf_printf(&extra, ",\"ref_audio\":\"%s\"", b64.data);
    char *streamed = speak(&ts, extra.data, &n_stream);
    gp_buf_free(&extra);
    REQUIRE(streamed && n_stream == 12 * 2048);
    gp_buf body;
    gp_buf_init(&body);
    gp_buf_printf(&body,
                  "{\"input\":\"Hello "
                  "world!\",\"response_format\":\"pcm\",\"sample_rate\":22050,\"stream\":false,"
                  "\"max_frames\":12," TS_GREEDY ",\"ref_audio\":\"%s\"}",
                  b64.data);
    test_http h = {0};
    CHECK_EQ_INT(test_http_post(&h, test_url(&ts, "/v1/audio/speech"), NULL, body.data, NULL), 0);
    CHECK_MSG(h.status == 200 && same(h.body.data, h.body.len, streamed, n_stream),
              "whole file: HTTP %ld, %zu bytes", h.status, h.body.len);
    test_http_free(&h);
    gp_buf_clear(&body);
    gp_buf_printf(
        &body,
        "{\"input\":\"Hello "
        "world!\",\"response_format\":\"pcm\",\"sample_rate\":22050,\"max_frames\":12," TS_GREEDY
        ",\"items\":[{},{\"ref_audio\":\"%s\"}]}",
        b64.data);
    h = (test_http){0};
    CHECK_EQ_INT(test_http_post(&h, test_url(&ts, "/v1/audio/speech/batch"), NULL, body.data, NULL),
                 0);
    CHECK_MSG(h.status == 200, "batch: HTTP %ld: %s", h.status, h.body.data);
    cJSON *j = cJSON_Parse(h.body.data);
    cJSON *data = cJSON_GetObjectItem(j, "data");
    size_t n0 = 0, n1 = 0;
    unsigned char *a0 = batch_audio(data, 0, &n0), *a1 = batch_audio(data, 1, &n1);
    CHECK(a0 && a1 && n0 == n_stream && n1 == n_stream);
    CHECK(same((char *)a1, n1, streamed, n_stream));  /* the cloned voice */
    CHECK(!same((char *)a0, n0, streamed, n_stream)); /* the default voice */
    free(a0);
    free(a1);
    cJSON_Delete(j);
    test_http_free(&h);
    gp_buf_free(&body);
    gp_buf_free(&b64);
    free(streamed);
    test_server_stop(&ts);
}
