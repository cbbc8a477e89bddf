/* test_cli_model.c — `gepard tokenize` and `gepard codes` end to end on the
 * model-tiny fixture: every generate[] and lora[] golden through the command
 * line, the CLI conventions (help, version, exit codes) and bad input. */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "golden.h"
#include "io/json.h"
#include "test.h"

#define MODEL_DIR test_fixture("model-tiny/model")

/* Parse `gepard codes` output and compare with golden <key>.codes [C][T]. */
static void compare_codes_output(const golden *g, const char *key, const char *json) {
    cJSON *root = cJSON_Parse(json);
    REQUIRE_MSG(root, "output is not JSON: %.200s", json);
    char name[64];
    snprintf(name, sizeof name, "%s.codes", key);
    int64_t dims[2];
    int32_t *want = golden_i32(g, name, dims, NULL);
    int C = (int)dims[0], T = (int)dims[1];
    const cJSON *codes = cJSON_GetObjectItem(root, "codes");
    CHECK_EQ_INT(cJSON_GetObjectItem(root, "frames")->valueint, T);
    CHECK_EQ_INT(cJSON_GetArraySize(codes), T);
    int mismatches = 0;
    for (int t = 0; t < T && t < cJSON_GetArraySize(codes); t++) {
        const cJSON *frame = cJSON_GetArrayItem(codes, t);
        CHECK_EQ_INT(cJSON_GetArraySize(frame), C);
        for (int c = 0; c < C; c++)
            if (cJSON_GetArrayItem(frame, c)->valueint != want[(size_t)c * T + t]) mismatches++;
    }
    CHECK_MSG(mismatches == 0, "%s: %d codes differ from the golden", key, mismatches);
    free(want);
    cJSON_Delete(root);
}

/* Turn a golden options object into command-line flags. */
static int options_to_args(const cJSON *o, const char **args, int n, char bufs[][64]) {
    static const struct {
        const char *json, *flag;
    } map[] = {{"temperature", "--temperature"},
               {"top_k", "--top-k"},
               {"max_frames", "--max-frames"},
               {"stop_threshold", "--stop-threshold"},
               {"repetition_penalty", "--repetition-penalty"},
               {"repetition_window", "--repetition-window"},
               {"cfg_scale", "--cfg-scale"},
               {"cfg_frames", "--cfg-frames"},
               {"cfg_uncond_mode", "--cfg-uncond"},
               {"force_stop_frames", "--force-stop-frames"}};
    int b = 0;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        const cJSON *v = cJSON_GetObjectItem(o, map[i].json);
        if (!v || cJSON_IsNull(v)) continue;
        args[n++] = map[i].flag;
        if (cJSON_IsString(v))
            snprintf(bufs[b], 64, "%s", v->valuestring);
        else
            snprintf(bufs[b], 64, "%.17g", v->valuedouble);
        args[n++] = bufs[b++];
    }
    return n;
}

static void write_ref_codes(const golden *g, const char *name, const char *path) {
    int64_t dims[2];
    int32_t *ref = golden_i32(g, name, dims, NULL);
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_printf(&b, "{\"frames\":%lld,\"codes\":[", (long long)dims[0]);
    for (int64_t t = 0; t < dims[0]; t++) {
        gp_buf_append_str(&b, t ? ",[" : "[");
        for (int64_t c = 0; c < dims[1]; c++)
            gp_buf_printf(&b, c ? ",%d" : "%d", ref[t * dims[1] + c]);
        gp_buf_append_str(&b, "]");
    }
    gp_buf_append_str(&b, "]}");
    test_write_file(path, b.data, b.len);
    gp_buf_free(&b);
    free(ref);
}

static void cli_generate_case(const char *section, const char *key, const char *lora_file) {
    golden g;
    REQUIRE(golden_open(&g, "model-tiny") == 0);
    const cJSON *gc = golden_case(&g, section, key);
    REQUIRE(gc);
    const char *args[64] = {"codes", "--model", MODEL_DIR, "--seed", "7"};
    int n = 5;
    char bufs[16][64];
    n = options_to_args(cJSON_GetObjectItem(gc, "options"), args, n, bufs);
    const cJSON *ref = cJSON_GetObjectItem(gc, "ref_codes");
    if (ref) {
        write_ref_codes(&g, ref->valuestring, test_tmp("ref.json"));
        args[n++] = "--ref-codes";
        args[n++] = test_tmp("ref.json");
    }
    const cJSON *file = cJSON_GetObjectItem(gc, "file");
    char lora_path[512], alpha[32];
    if (file) {
        snprintf(lora_path, sizeof lora_path, "%s", test_fixture("model-tiny/"));
        strncat(lora_path, lora_file ? lora_file : file->valuestring,
                sizeof lora_path - strlen(lora_path) - 1);
        snprintf(alpha, sizeof alpha, "%g", cJSON_GetObjectItem(gc, "alpha")->valuedouble);
        args[n++] = "--lora";
        args[n++] = lora_path;
        args[n++] = "--lora-alpha";
        args[n++] = alpha;
    }
    args[n++] = cJSON_GetObjectItem(gc, "text")->valuestring;
    args[n] = NULL;
    test_cmd_result r;
    REQUIRE(test_run_gepard(&r, NULL, 0, 120, args) == 0);
    CHECK_MSG(r.status == 0, "exit %d: %s", r.status, r.err);
    if (r.status == 0) compare_codes_output(&g, key, r.out);
    test_cmd_result_free(&r);
    golden_close(&g);
}

TEST(cli_codes_gen0_voice) { cli_generate_case("generate", "gen0", NULL); }
TEST(cli_codes_gen1_penalty) { cli_generate_case("generate", "gen1", NULL); }
TEST(cli_codes_gen2_cfg) { cli_generate_case("generate", "gen2", NULL); }
TEST(cli_codes_gen3_cfg_audio_only) { cli_generate_case("generate", "gen3", NULL); }
TEST(cli_codes_gen4_force_stop) { cli_generate_case("generate", "gen4", NULL); }
TEST(cli_codes_genstop) { cli_generate_case("generate", "genstop", NULL); }
TEST(cli_codes_lora_safetensors) { cli_generate_case("lora", "lora0", "lora_adapter.safetensors"); }
TEST(cli_codes_lora_pt) { cli_generate_case("lora", "lora0", NULL); }

TEST(cli_tokenize_matches_golden) {
    golden g;
    REQUIRE(golden_open(&g, "model-tiny") == 0);
    const cJSON *c;
    int checked = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(g.json, "teacher_forced")) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        const char *args[] = {"tokenize", "--model", MODEL_DIR, "--layout", text, NULL};
        test_cmd_result r;
        REQUIRE(test_run_gepard(&r, NULL, 0, 30, args) == 0);
        CHECK_EQ_INT(r.status, 0);
        cJSON *out = cJSON_Parse(r.out);
        REQUIRE(out);
        char *want_ids = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "text_ids"));
        char *want_layout = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "layout_ids"));
        char *got_ids = cJSON_PrintUnformatted(cJSON_GetObjectItem(out, "ids"));
        char *got_layout = cJSON_PrintUnformatted(cJSON_GetObjectItem(out, "layout"));
        CHECK(strcmp(want_ids, got_ids) == 0);
        CHECK(strcmp(want_layout, got_layout) == 0);
        free(want_ids);
        free(want_layout);
        free(got_ids);
        free(got_layout);
        cJSON_Delete(out);
        test_cmd_result_free(&r);
        checked++;
    }
    CHECK(checked == 3);
    /* stdin and one-line output */
    const char *args[] = {"tokenize", "--model", MODEL_DIR, "-", NULL};
    test_cmd_result r;
    REQUIRE(test_run_gepard(&r, "Hello world!", 12, 30, args) == 0);
    CHECK(strcmp(r.out, "{\"ids\":[407,304,279,306,284,0]}\n") == 0);
    test_cmd_result_free(&r);
    golden_close(&g);
}

typedef struct bad_case {
    const char *args[16];
    int status;
    const char *needle;
} bad_case;

static void run_bad_cases(const bad_case *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        test_cmd_result r;
        REQUIRE(test_run_gepard(&r, NULL, 0, 60, cases[i].args) == 0);
        CHECK_MSG(r.status == cases[i].status, "case %zu (%s): exit %d, expected %d; stderr: %s", i,
                  cases[i].needle, r.status, cases[i].status, r.err);
        CHECK_MSG(strstr(r.err, cases[i].needle), "case %zu: stderr lacks \"%s\": %s", i,
                  cases[i].needle, r.err);
        CHECK_MSG(r.out_len == 0, "case %zu wrote to stdout", i);
        test_cmd_result_free(&r);
    }
}

TEST(cli_conventions_and_usage_errors) {
    const char *help[] = {"--help", NULL};
    test_cmd_result r;
    REQUIRE(test_run_gepard(&r, NULL, 0, 10, help) == 0);
    CHECK(r.status == 0 && strstr(r.out, "tokenize") && strstr(r.out, "codes"));
    test_cmd_result_free(&r);
    const char *version[] = {"--version", NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 10, version) == 0);
    CHECK(r.status == 0 && strncmp(r.out, "gepard ", 7) == 0);
    test_cmd_result_free(&r);
    const char *sub_help[] = {"codes", "--help", NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 10, sub_help) == 0);
    CHECK(r.status == 0 && strstr(r.out, "--cfg-uncond") && strstr(r.out, "--ref-codes"));
    test_cmd_result_free(&r);
    static const bad_case cases[] = {
        {{"frobnicate", NULL}, 2, "unknown command"},
        {{"codes", "--model", NULL}, 2, "needs a value"},
        {{"codes", "--bogus", "x", NULL}, 2, "unknown option --bogus"},
        {{"codes", "--model", "x", "--top-k", "abc", "hi", NULL}, 2, "expects an integer"},
        {{"codes", "--model", "x", "--cfg-uncond", "sideways", "hi", NULL},
         2,
         "empty_text or audio_only"},
        {{"codes", "hi", NULL}, 2, "--model DIR is required"},
        {{"codes", "--model", "/nonexistent", "hi", NULL}, 1, "no such directory"},
        {{"tokenize", "--model", "x", "a", "b", NULL}, 2, "put the text in quotes"},
    };
    run_bad_cases(cases, sizeof cases / sizeof cases[0]);
}

TEST(cli_codes_bad_input) {
    /* ref codes: out of range, and the wrong width */
    const char *range = "{\"frames\":1,\"codes\":[[9,0,0,0,0,0,0,0,0,0,0,0,0,0,"
                        "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]]}";
    const char *width = "{\"frames\":1,\"codes\":[[1,2,3]]}";
    const char *broken = "{\"frames\":1,\"codes\":[[1,2";
    test_write_file(test_tmp("range.json"), range, strlen(range));
    test_write_file(test_tmp("width.json"), width, strlen(width));
    test_write_file(test_tmp("broken.json"), broken, strlen(broken));
    char bad_utf8[] = "caf\xC3 ok";
    static bad_case cases[] = {
        {{"codes", "--model", NULL, "", NULL}, 1, "text is empty"},
        {{"codes", "--model", NULL, "   \n ", NULL}, 1, "text is empty"},
        {{"codes", "--model", NULL, "--max-frames", "9000", "Hello", NULL},
         1,
         "exceed the model's context"},
        {{"codes", "--model", NULL, "--ref-codes", NULL, "Hello", NULL}, 1, "not a code in [0, 8)"},
        {{"codes", "--model", NULL, "--ref-codes", NULL, "Hello", NULL},
         1,
         "has 3 codes, expected 32"},
        {{"codes", "--model", NULL, "--ref-codes", NULL, "Hello", NULL}, 1, "malformed JSON"},
        {{"codes", "--model", NULL, NULL, NULL}, 1, "not valid UTF-8"},
        {{"codes", "--model", NULL, "--repetition-window", "-1", "Hello", NULL}, 2, "between 0"},
    };
    const char *dir = MODEL_DIR;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) cases[i].args[2] = dir;
    cases[3].args[4] = test_tmp("range.json");
    cases[4].args[4] = test_tmp("width.json");
    cases[5].args[4] = test_tmp("broken.json");
    cases[6].args[3] = bad_utf8;
    run_bad_cases(cases, sizeof cases / sizeof cases[0]);
}

TEST(cli_synth_tiny_checkpoint_runs) {
    const char *args[] = {"synth", "--preset", "tiny", "--out", test_tmpdir(), "--seed", "3", NULL};
    test_cmd_result r;
    REQUIRE(test_run_gepard(&r, NULL, 0, 120, args) == 0);
    CHECK_MSG(r.status == 0, "synth failed: %s", r.err);
    test_cmd_result_free(&r);
    const char *codes[] = {"codes",
                           "--model",
                           test_tmp("model"),
                           "--max-frames",
                           "6",
                           "--seed",
                           "1",
                           "Hello there, this is a test.",
                           NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 120, codes) == 0);
    CHECK_MSG(r.status == 0, "codes failed: %s", r.err);
    CHECK(strstr(r.out, "\"frames\":6") != NULL);
    test_cmd_result_free(&r);
    /* same seed, same checkpoint bytes */
    const char *again[] = {"synth",           "--preset", "tiny", "--out",
                           test_tmp("again"), "--seed",   "3",    NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 120, again) == 0);
    test_cmd_result_free(&r);
    const char *cmp[] = {"cmp", test_tmp("model/model.safetensors"),
                         test_tmp("again/model/model.safetensors"), NULL};
    REQUIRE(test_run_program(&r, NULL, 0, 30, cmp) == 0);
    CHECK_MSG(r.status == 0, "synth is not reproducible: %s", r.out);
    test_cmd_result_free(&r);
}

/* The tiny preset's stop head is fitted to fire after ~2 s (it never fired:
 * every trial request ran 2,000 frames, 93 s of noise). For two checkpoints,
 * three texts and two sampling seeds each, a default request (max_frames
 * 2000) ends by the stop head after 8 to 130 frames (0.4-6 s; measured
 * 12-83). */
TEST(synth_tiny_stop_head_fires_within_seconds) {
    const char *seeds[] = {"3", "7"};
    const char *texts[] = {"Hi", "Hello there, this is a test.",
                           "This is a much longer sentence with many words in it, to see how the "
                           "length of the text matters."};
    for (int k = 0; k < 2; k++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/s%s", test_tmpdir(), seeds[k]);
        const char *synth[] = {"synth", "--preset", "tiny", "--out", dir, "--seed", seeds[k], NULL};
        test_cmd_result r;
        REQUIRE(test_run_gepard(&r, NULL, 0, 120, synth) == 0);
        REQUIRE_MSG(r.status == 0, "synth failed: %s", r.err);
        test_cmd_result_free(&r);
        char model[1100];
        snprintf(model, sizeof model, "%s/model", dir);
        for (int t = 0; t < 3; t++)
            for (int seed = 1; seed <= 2; seed++) {
                char s[8];
                snprintf(s, sizeof s, "%d", seed);
                const char *codes[] = {"codes", "--model", model, "--seed", s, texts[t], NULL};
                REQUIRE(test_run_gepard(&r, NULL, 0, 120, codes) == 0);
                cJSON *j = cJSON_Parse(r.out);
                int frames = j ? cJSON_GetObjectItem(j, "frames")->valueint : -1;
                cJSON_Delete(j);
                test_note("checkpoint seed %s, text %d, seed %d: %d frames", seeds[k], t, seed,
                          frames);
                CHECK_MSG(r.status == 0 && frames >= 8 && frames <= 130,
                          "checkpoint seed %s, text %d, seed %d: %d frames (exit %d)", seeds[k], t,
                          seed, frames, r.status);
                test_cmd_result_free(&r);
            }
    }
}

TEST(cli_bench_prints_the_required_keys) {
    const char *args[] = {
        "bench",    "--model", MODEL_DIR,   "--codec", test_fixture("codec-tiny/nano-tiny.nemo"),
        "--frames", "4",       "--compare", "f32",     "--threads",
        "2",        NULL};
    test_cmd_result r;
    REQUIRE(test_run_gepard(&r, NULL, 0, 300, args) == 0);
    REQUIRE_MSG(r.status == 0, "bench failed: %s", r.err);
    cJSON *j = cJSON_Parse(r.out);
    REQUIRE_MSG(j, "not JSON: %s", r.out);
    const char *keys[] = {"rtf",
                          "ttfa_ms",
                          "backbone_ms_per_frame",
                          "codec_ms_per_frame",
                          "peak_rss_mb",
                          "dtype",
                          "threads",
                          "mem_bandwidth_gbs",
                          "fma_peak_gflops",
                          "prefill_tokens_per_s",
                          "backbone_fraction_of_bound",
                          "codec_fraction_of_bound",
                          "machine",
                          "compare",
                          "prefill_gflops",
                          "prefill_fraction_of_fma_peak",
                          "prefill_by_level",
                          "kernels"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK_MSG(cJSON_GetObjectItem(j, keys[i]) != NULL, "missing key %s", keys[i]);
    CHECK(strcmp(cJSON_GetObjectItem(j, "dtype")->valuestring, "bf16") == 0);
    CHECK(strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "compare"), "dtype")->valuestring,
                 "f32") == 0);
    CHECK(cJSON_GetObjectItem(j, "mem_bandwidth_gbs")->valuedouble > 0.1);
    /* which kernel served each phase, and why the matrix level was chosen */
    const cJSON *k = cJSON_GetObjectItem(j, "kernels");
    const char *phases[] = {"matrix", "matrix_why", "decode", "prefill", "codec", "codec_why"};
    for (size_t i = 0; k && i < sizeof phases / sizeof phases[0]; i++)
        CHECK_MSG(cJSON_IsString(cJSON_GetObjectItem(k, phases[i])), "kernels.%s missing",
                  phases[i]);
    cJSON_Delete(j);
    test_cmd_result_free(&r);
}

/* bench --codec-only measures the codec on a GPU: without one (or without
 * --device cuda) it says so and prints nothing; --gpu-precision names the
 * codec precisions it accepts. */
TEST(cli_bench_codec_only_needs_a_gpu) {
    const char *codec = test_fixture("codec-tiny/nano-tiny.nemo");
    const char *cpu[] = {"bench", "--codec-only", "--codec", codec, "--device", "cpu", NULL};
    test_cmd_result r;
    REQUIRE(test_run_gepard(&r, NULL, 0, 60, cpu) == 0);
    test_note("%s", r.err);
    CHECK(r.status != 0 && r.out_len == 0 && strstr(r.err, "--device cuda") != NULL);
    test_cmd_result_free(&r);
    const char *nocodec[] = {"bench", "--codec-only", NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 60, nocodec) == 0);
    CHECK(r.status == 2 && r.out_len == 0 && strstr(r.err, "--codec") != NULL);
    test_cmd_result_free(&r);
    const char *bad[] = {"decode",          "--codec", codec, "--codes", "-",
                         "--gpu-precision", "f8",      "-o",  "-",       NULL};
    const char *codes = "{\"frames\":1,\"codes\":[[0]]}";
    REQUIRE(test_run_gepard(&r, codes, strlen(codes), 60, bad) == 0);
    test_note("%s", r.err);
    CHECK(r.status != 0 && strstr(r.err, "f16") != NULL);
    test_cmd_result_free(&r);
}

/* tokenize needs only tokenizer.json (a directory holding it, or the file);
 * --layout also needs the config and says so. */
TEST(cli_tokenize_with_a_bare_tokenizer) {
    const char *cp[] = {"cp", test_fixture("model-tiny/model/tokenizer.json"), test_tmpdir(), NULL};
    test_cmd_result r;
    REQUIRE(test_run_program(&r, NULL, 0, 10, cp) == 0 && r.status == 0);
    test_cmd_result_free(&r);
    const char *dir[] = {"tokenize", "--model", test_tmpdir(), "Hello world!", NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 30, dir) == 0);
    CHECK(r.status == 0 && strcmp(r.out, "{\"ids\":[407,304,279,306,284,0]}\n") == 0);
    test_cmd_result_free(&r);
    const char *file[] = {"tokenize", "--model", test_tmp("tokenizer.json"), "Hello world!", NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 30, file) == 0);
    CHECK(r.status == 0 && strcmp(r.out, "{\"ids\":[407,304,279,306,284,0]}\n") == 0);
    test_cmd_result_free(&r);
    const char *layout[] = {"tokenize", "--model", test_tmpdir(), "--layout", "Hello", NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 30, layout) == 0);
    CHECK_EQ_INT(r.status, 1);
    CHECK(strstr(r.err, "gepard_config.json") != NULL && r.out_len == 0);
    test_cmd_result_free(&r);
}
