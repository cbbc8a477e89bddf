/* test_cli_say.c — `gepard say` end to end on the fixtures: WAV validity and
 * length, stdout streaming equal to the file, equality with `codes` +
 * `decode`, every output format, voice cloning from a 44.1 kHz stereo WAV,
 * saved voices, long text, and bad input. */
#include <math.h>
#include <sndfile.h>
#include <stdlib.h>
#include <string.h>

#include "aac_decode.h"
#include "fake_hub.h"
#include "io/audio_file.h"
#include "io/file.h"
#include "io/json.h"
#include "server_harness.h"
#include "test.h"

#define MODEL test_fixture("model-tiny/model")
#define CODEC test_fixture("codec-tiny/nano-tiny.nemo")

/* The tiny random model's stop head fires at once; these options give a
 * deterministic 20-frame generation. */
#define GREEDY "--top-k", "1", "--max-frames", "20", "--stop-threshold", "1.01", "--seed", "5"

static int run(test_cmd_result *r, const char *input, const char *const *args) {
    return test_run_gepard(r, input, input ? strlen(input) : 0, 120, args);
}

static float *read_wav(const char *path, SF_INFO *info) {
    memset(info, 0, sizeof *info);
    SNDFILE *sf = sf_open(path, SFM_READ, info);
    if (!sf) return NULL;
    float *x = calloc((size_t)info->frames * (size_t)info->channels + 1, sizeof(float));
    sf_readf_float(sf, x, info->frames);
    sf_close(sf);
    return x;
}

TEST(say_writes_valid_wav_equal_to_codes_and_decode) {
    const char *say[] = {"say", "--model",         MODEL,    "--codec",      CODEC, GREEDY,
                         "-o",  test_tmp("a.wav"), "--json", "Hello world!", NULL};
    test_cmd_result r;
    REQUIRE(run(&r, NULL, say) == 0);
    REQUIRE_MSG(r.status == 0, "say failed: %s", r.err);
    cJSON *summary = cJSON_Parse(r.out);
    REQUIRE_MSG(summary, "no JSON summary: %s", r.out);
    int frames = cJSON_GetObjectItem(summary, "frames")->valueint;
    CHECK_EQ_INT(frames, 20);
    CHECK(cJSON_GetObjectItem(summary, "rtf") && cJSON_GetObjectItem(summary, "ttfa_ms"));
    cJSON_Delete(summary);
    test_cmd_result_free(&r);
    SF_INFO info;
    float *a = read_wav(test_tmp("a.wav"), &info);
    REQUIRE(a);
    CHECK_EQ_INT(info.samplerate, 22050);
    CHECK_EQ_INT(info.channels, 1);
    CHECK_EQ_INT(info.frames, (long long)frames * 1024);
    CHECK_EQ_INT(info.format, SF_FORMAT_WAV | SF_FORMAT_PCM_16);
    /* codes + decode give the same audio */
    const char *codes[] = {"codes", "--model", MODEL, GREEDY, "Hello world!", NULL};
    REQUIRE(run(&r, NULL, codes) == 0);
    CHECK_EQ_INT(r.status, 0);
    test_write_file(test_tmp("c.json"), r.out, r.out_len);
    test_cmd_result_free(&r);
    const char *decode[] = {"decode", "--codec",         CODEC, "--codes", test_tmp("c.json"),
                            "-o",     test_tmp("d.wav"), NULL};
    REQUIRE(run(&r, NULL, decode) == 0);
    CHECK_EQ_INT(r.status, 0);
    test_cmd_result_free(&r);
    const char *cmp[] = {"cmp", test_tmp("a.wav"), test_tmp("d.wav"), NULL};
    REQUIRE(test_run_program(&r, NULL, 0, 10, cmp) == 0);
    CHECK_MSG(r.status == 0, "say and codes+decode differ: %s", r.out);
    test_cmd_result_free(&r);
    /* stdout streaming: raw 16-bit PCM equal to the WAV's samples */
    const char *pipe[] = {"say",  "--model", MODEL, "--codec",      CODEC,
                          GREEDY, "-o",      "-",   "Hello world!", NULL};
    REQUIRE(run(&r, NULL, pipe) == 0);
    CHECK_EQ_INT(r.status, 0);
    CHECK_EQ_INT(r.out_len, (size_t)frames * 1024 * 2);
    FILE *f = fopen(test_tmp("a.wav"), "rb");
    REQUIRE(f);
    char *wav = malloc(r.out_len + 44);
    size_t n = fread(wav, 1, r.out_len + 44, f);
    fclose(f);
    CHECK_EQ_INT(n, r.out_len + 44);
    CHECK(memcmp(wav + 44, r.out, r.out_len) == 0);
    free(wav);
    test_cmd_result_free(&r);
    free(a);
}

TEST(say_all_output_formats) {
    const char *names[] = {"x.flac", "x.ogg", "x.mp3", "x.pcm", "x.f32", "y.wav"};
    for (size_t i = 0; i < 6; i++) {
        const char *say[] = {"say",
                             "--model",
                             MODEL,
                             "--codec",
                             CODEC,
                             GREEDY,
                             "-o",
                             test_tmp(names[i]),
                             i == 5 ? "--float" : "--json",
                             "Hello world!",
                             NULL};
        test_cmd_result r;
        REQUIRE(run(&r, NULL, say) == 0);
        CHECK_MSG(r.status == 0, "%s: %s", names[i], r.err);
        test_cmd_result_free(&r);
        if (i == 3 || i == 4) {
            FILE *f = fopen(test_tmp(names[i]), "rb");
            REQUIRE(f);
            fseek(f, 0, SEEK_END);
            CHECK_EQ_INT(ftell(f), 20 * 1024 * (i == 3 ? 2 : 4));
            fclose(f);
            continue;
        }
        SF_INFO info;
        float *x = read_wav(test_tmp(names[i]), &info);
        CHECK_MSG(x != NULL, "%s does not decode", names[i]);
        if (i == 5) CHECK_EQ_INT(info.format, SF_FORMAT_WAV | SF_FORMAT_FLOAT);
        if (i == 0) CHECK_EQ_INT(info.frames, 20 * 1024);
        free(x);
    }
}

/* Telephony: --rate resamples what -o gets (libsoxr), here 20 frames of
 * 22050 Hz into 8 kHz mu-law in WAV, read back by libsndfile; a raw .ulaw
 * has a byte a sample; a rate off the list and --rate without -o are usage
 * errors. */
TEST(say_rate_and_g711) {
    const char *wav[] = {"say",          "--model",   MODEL,    "--codec",
                         CODEC,          GREEDY,      "-o",     test_tmp("call.wav"),
                         "--format",     "wav-mulaw", "--rate", "8000",
                         "Hello world!", NULL};
    test_cmd_result r;
    REQUIRE(run(&r, NULL, wav) == 0);
    CHECK_MSG(r.status == 0, "%s", r.err);
    test_cmd_result_free(&r);
    SF_INFO info;
    float *x = read_wav(test_tmp("call.wav"), &info);
    REQUIRE_MSG(x, "the mu-law WAV does not decode");
    const long want = 20 * 1024 * 8000 / 22050;
    test_note("%lld samples at %d Hz (want ~%ld), format 0x%x", (long long)info.frames,
              info.samplerate, want, info.format);
    CHECK_EQ_INT(info.samplerate, 8000);
    CHECK_EQ_INT(info.format & SF_FORMAT_SUBMASK, SF_FORMAT_ULAW);
    CHECK(labs((long)info.frames - want) <= 2);
    free(x);
    const char *raw[] = {"say",    "--model", MODEL,          "--codec",
                         CODEC,    GREEDY,    "-o",           test_tmp("call.ulaw"),
                         "--rate", "8000",    "Hello world!", NULL};
    REQUIRE(run(&r, NULL, raw) == 0);
    CHECK_MSG(r.status == 0, "%s", r.err);
    test_cmd_result_free(&r);
    FILE *f = fopen(test_tmp("call.ulaw"), "rb");
    REQUIRE(f);
    fseek(f, 0, SEEK_END);
    CHECK(labs(ftell(f) - want) <= 2);
    fclose(f);
    const char *bad[][8] = {
        {"say", "--model", MODEL, "-o", test_tmp("a.wav"), "--rate", "11025", NULL},
        {"say", "--model", MODEL, "--play", "--rate", "8000", "Hi", NULL}};
    for (int i = 0; i < 2; i++) {
        REQUIRE(run(&r, NULL, bad[i]) == 0);
        CHECK_MSG(r.status == 2 && strstr(r.err, "--rate"), "exit %d: %s", r.status, r.err);
        test_cmd_result_free(&r);
    }
}

TEST(say_voice_cloning_from_44k_stereo_wav) {
    test_write_reference_wav(test_tmp("ref.wav"));
    const char *with_voice[] = {"say",          "--model",
                                MODEL,          "--codec",
                                CODEC,          GREEDY,
                                "--voice",      test_tmp("ref.wav"),
                                "--save-voice", test_tmp("voice.safetensors"),
                                "-o",           test_tmp("v.wav"),
                                "Hello world!", NULL};
    test_cmd_result r;
    REQUIRE(run(&r, NULL, with_voice) == 0);
    REQUIRE_MSG(r.status == 0, "voice cloning failed: %s", r.err);
    test_cmd_result_free(&r);
    /* the saved voice reproduces the same audio */
    const char *saved[] = {"say",          "--model",
                           MODEL,          "--codec",
                           CODEC,          GREEDY,
                           "--voice",      test_tmp("voice.safetensors"),
                           "-o",           test_tmp("s.wav"),
                           "Hello world!", NULL};
    REQUIRE(run(&r, NULL, saved) == 0);
    CHECK_MSG(r.status == 0, "saved voice failed: %s", r.err);
    test_cmd_result_free(&r);
    const char *cmp[] = {"cmp", test_tmp("v.wav"), test_tmp("s.wav"), NULL};
    REQUIRE(test_run_program(&r, NULL, 0, 10, cmp) == 0);
    CHECK_MSG(r.status == 0, "saved voice differs from the original");
    test_cmd_result_free(&r);
    /* and the voice changes the audio */
    const char *plain[] = {"say", "--model",         MODEL,          "--codec", CODEC, GREEDY,
                           "-o",  test_tmp("p.wav"), "Hello world!", NULL};
    REQUIRE(run(&r, NULL, plain) == 0);
    test_cmd_result_free(&r);
    const char *cmp2[] = {"cmp", "-s", test_tmp("v.wav"), test_tmp("p.wav"), NULL};
    REQUIRE(test_run_program(&r, NULL, 0, 10, cmp2) == 0);
    CHECK_MSG(r.status != 0, "the voice had no effect");
    test_cmd_result_free(&r);
}

TEST(say_long_text_is_split_and_continuous) {
    const char *text =
        "This is the first sentence, and it is long enough that the next ones will not fit with "
        "it into one piece of two hundred bytes. Here comes a second one, which says nothing "
        "much at all but takes some room! And a third, to be sure, with a question at the end of "
        "it? Dr. Smith agreed at 3.30 p.m. with everything that was said before, and so did Mr. "
        "J. R. Jones of No. 5 Main St. in the town.";
    const char *say[] = {"say",  "--model",
                         MODEL,  "--codec",
                         CODEC,  "--top-k",
                         "1",    "--max-frames",
                         "6",    "--stop-threshold",
                         "1.01", "--json",
                         "-o",   test_tmp("long.wav"),
                         "-f",   "-",
                         NULL};
    test_cmd_result r;
    REQUIRE(run(&r, text, say) == 0);
    REQUIRE_MSG(r.status == 0, "say failed: %s", r.err);
    cJSON *s = cJSON_Parse(r.out);
    REQUIRE(s);
    int segments = cJSON_GetObjectItem(s, "segments")->valueint;
    int frames = cJSON_GetObjectItem(s, "frames")->valueint;
    test_note("%d segments, %d frames", segments, frames);
    CHECK(segments >= 2);
    CHECK_EQ_INT(frames, segments * 6);
    cJSON_Delete(s);
    test_cmd_result_free(&r);
    SF_INFO info;
    float *x = read_wav(test_tmp("long.wav"), &info);
    REQUIRE(x);
    CHECK_EQ_INT(info.frames, (long long)frames * 1024);
    free(x);
}

typedef struct say_bad {
    const char *args[24];
    const char *input;
    int status;
    const char *needle;
} say_bad;

TEST(say_bad_input) {
    char invalid[] = "bad \xff\xfe text";
    test_write_file(test_tmp("bad.txt"), invalid, strlen(invalid));
    say_bad cases[] = {
        {{"say", "--model", NULL, "--codec", NULL, "-o", NULL, "", NULL}, NULL, 1, "text is empty"},
        {{"say", "--model", NULL, "--codec", NULL, "-o", NULL, " \t\n ", NULL},
         NULL,
         1,
         "text is empty"},
        {{"say", "--model", NULL, "--codec", NULL, "-o", NULL, "-f", NULL, NULL},
         NULL,
         1,
         "not valid UTF-8"},
        {{"say", "--model", NULL, "--codec", NULL, "-o", "x.xyz", "hi", NULL}, NULL, 2, "--format"},
        {{"say", "--model", NULL, "--codec", NULL, "--format", "vorbis", "-o", NULL, "hi", NULL},
         NULL,
         2,
         "--format must be"},
        {{"say", "--model", NULL, "--codec", NULL, "--speed", "5", "-o", NULL, "hi", NULL},
         NULL,
         2,
         "--speed must be between 0.25 and 4"},
        {{"say", "--model", NULL, "--codec", NULL, "-o", NULL, "--voice", "/nonexistent.wav", "hi",
          NULL},
         NULL,
         1,
         "no such voice file"},
        {{"say", "--model", NULL, "--codec", "/nonexistent.nemo", "-o", NULL, "hi", NULL},
         NULL,
         1,
         "nonexistent"},
        {{"say", "--model", NULL, "--codec", NULL, "-o", NULL, "--voice", NULL, "hi", NULL},
         NULL,
         1,
         "bad.txt"},
    };
    const size_t n = sizeof cases / sizeof cases[0];
    /* test_fixture/test_tmp return rotating buffers: keep our own copies */
    char *model = strdup(MODEL), *codec = strdup(CODEC), *bad = strdup(test_tmp("bad.txt"));
    char outs[sizeof cases / sizeof cases[0]][512];
    for (size_t i = 0; i < n; i++) {
        snprintf(outs[i], sizeof outs[i], "%s/o%zu.wav", test_tmpdir(), i);
        cases[i].args[2] = model;
        if (!cases[i].args[4]) cases[i].args[4] = codec;
        for (int k = 5; cases[i].args[k - 1] || k < 7; k++)
            if (!cases[i].args[k] && strcmp(cases[i].args[k - 1], "-o") == 0)
                cases[i].args[k] = outs[i];
    }
    cases[2].args[8] = bad;
    cases[8].args[8] = bad;
    for (size_t i = 0; i < n; i++) {
        test_cmd_result r;
        REQUIRE(run(&r, cases[i].input, cases[i].args) == 0);
        CHECK_MSG(r.status == cases[i].status, "case %zu: exit %d, want %d: %s", i, r.status,
                  cases[i].status, r.err);
        CHECK_MSG(strstr(r.err, cases[i].needle), "case %zu: stderr lacks \"%s\": %s", i,
                  cases[i].needle, r.err);
        test_cmd_result_free(&r);
    }
    free(model);
    free(codec);
    free(bad);
    /* No output file may exist after a failure. */
    const char *ls[] = {"sh", "-c", "ls -A \"$0\" | grep -v -e '^bad.txt$' || true", test_tmpdir(),
                        NULL};
    test_cmd_result r;
    REQUIRE(test_run_program(&r, NULL, 0, 10, ls) == 0);
    CHECK_MSG(r.out_len == 0, "files left behind: %s", r.out);
    test_cmd_result_free(&r);
}

/* The whole path a new user takes: repo ids for model and codec, downloaded
 * into an empty Hugging Face cache from a (fake) Hub, then synthesis; a
 * second run works with the Hub gone. */
TEST(say_from_hub_repo_ids_then_offline) {
    fake_hub hub;
    REQUIRE(fake_hub_start(&hub) == 0);
    setenv("HF_ENDPOINT", hub.endpoint, 1);
    setenv("HF_HUB_CACHE", test_tmp("hub-cache"), 1);
    unsetenv("HF_HUB_OFFLINE");
    unsetenv("HF_TOKEN");
    const char *say[] = {
        "say",  "--model", FAKE_HUB_MODEL_REPO, "--codec",      FAKE_HUB_CODEC_REPO,
        GREEDY, "-o",      test_tmp("hub.wav"), "Hello world!", NULL};
    test_cmd_result r;
    REQUIRE(run(&r, NULL, say) == 0);
    CHECK_MSG(r.status == 0, "say from the Hub failed: %s", r.err);
    test_cmd_result_free(&r);
    CHECK(hub.gets >= 2);
    fake_hub_stop(&hub);
    const char *again[] = {
        "say",  "--model", FAKE_HUB_MODEL_REPO,   "--codec",      FAKE_HUB_CODEC_REPO,
        GREEDY, "-o",      test_tmp("again.wav"), "Hello world!", NULL};
    REQUIRE(run(&r, NULL, again) == 0);
    CHECK_MSG(r.status == 0, "offline rerun failed: %s", r.err);
    test_cmd_result_free(&r);
    const char *cmp[] = {"cmp", test_tmp("hub.wav"), test_tmp("again.wav"), NULL};
    REQUIRE(test_run_program(&r, NULL, 0, 10, cmp) == 0);
    CHECK(r.status == 0);
    test_cmd_result_free(&r);
    /* an unknown repo with the Hub down: the message says what to do */
    const char *missing[] = {
        "say", "--model",         "nobody/nothing", "--codec", FAKE_HUB_CODEC_REPO,
        "-o",  test_tmp("x.wav"), "Hello",          NULL};
    REQUIRE(run(&r, NULL, missing) == 0);
    CHECK_EQ_INT(r.status, 1);
    CHECK_MSG(strstr(r.err, "cannot reach") && strstr(r.err, "--model"), "message: %s", r.err);
    test_cmd_result_free(&r);
}

/* `say --speed` goes through the server's speed changer (io/tempo.c): the
 * file is 1/speed as long (the 2 %); `-o x.aac` writes ADTS AAC
 * that libavcodec decodes. */
TEST(say_speed_and_aac) {
    const double speeds[] = {0.5, 2.0};
    for (int i = 0; i < 2; i++) {
        char speed[16];
        snprintf(speed, sizeof speed, "%g", speeds[i]);
        const char *say[] = {"say",     "--model", MODEL, "--codec",         CODEC,          GREEDY,
                             "--speed", speed,     "-o",  test_tmp("s.wav"), "Hello world!", NULL};
        test_cmd_result r;
        REQUIRE(run(&r, NULL, say) == 0);
        REQUIRE_MSG(r.status == 0, "say --speed %s failed: %s", speed, r.err);
        test_cmd_result_free(&r);
        SF_INFO info;
        float *a = read_wav(test_tmp("s.wav"), &info);
        REQUIRE(a);
        double want = 20 * 1024 / speeds[i], ratio = (double)info.frames / want;
        test_note("--speed %s: %lld samples, %.4f of %.0f", speed, (long long)info.frames, ratio,
                  want);
        CHECK_MSG(fabs(ratio - 1) <= 0.02, "--speed %s: %lld samples", speed,
                  (long long)info.frames);
        free(a);
    }
    const char *say[] = {"say", "--model",         MODEL,          "--codec", CODEC, GREEDY,
                         "-o",  test_tmp("a.aac"), "Hello world!", NULL};
    test_cmd_result r;
    REQUIRE(run(&r, NULL, say) == 0);
    REQUIRE_MSG(r.status == 0, "say -o a.aac failed: %s", r.err);
    test_cmd_result_free(&r);
    char *bytes = NULL;
    size_t len = 0, n = 0;
    gp_error err;
    REQUIRE_OK(gp_read_file(test_tmp("a.aac"), 1 << 24, &bytes, &len, &err), &err);
    test_aac_info ai;
    float *x = test_aac_decode(bytes, len, &n, &ai);
    test_note("a.aac: %zu bytes, %zu samples at %d Hz", len, n, ai.rate);
    CHECK(x && ai.rate == 22050 && ai.channels == 1 && ai.bad_frames == 0);
    CHECK(n >= 20 * 1024 && n <= 20 * 1024 + 2048); /* priming + last-frame padding */
    free(x);
    free(bytes);
}
