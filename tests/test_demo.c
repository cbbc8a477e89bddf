/* test_demo.c — `make demo` (scripts/demo.sh) for someone without network
 * access: the failure names the model's and the codec's files and offers
 * the synthetic route, which then speaks without any download; and the
 * build `make demo` starts runs in parallel. */
#include <limits.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

/* Run scripts/demo.sh with `bin` in the test's directory, `env` (shell
 * assignments) before it. */
static int run_demo(test_cmd_result *r, const char *env, const char *bin) {
    char repo[PATH_MAX], abs_bin[PATH_MAX], cmd[4 * PATH_MAX];
    if (!getcwd(repo, sizeof repo) || !realpath(bin, abs_bin)) return -1;
    snprintf(cmd, sizeof cmd, "cd '%s' && %s sh '%s/scripts/demo.sh' '%s'", test_tmpdir(), env,
             repo, abs_bin);
    const char *argv[] = {"sh", "-c", cmd, NULL};
    return test_run_program(r, NULL, 0, 300, argv);
}

static const char *gepard_bin(void) {
    const char *b = getenv("GEPARD_BIN");
    return b && *b ? b : "build/asan/gepard";
}

TEST(demo_offline_names_the_files_and_offers_the_synthetic_route) {
    char env[PATH_MAX + 64];
    snprintf(env, sizeof env, "HF_HOME='%s' HF_HUB_OFFLINE=1", test_tmp("hf"));
    test_cmd_result r;
    REQUIRE(run_demo(&r, env, gepard_bin()) == 0);
    test_note("%s", r.err);
    CHECK_EQ_INT(r.status, 1);
    const char *want[] = {"nemo-nano-codec-22khz-1.89kbps-21.5fps.nemo", "model.safetensors",
                          "make demo MODEL=", "make demo SYNTHETIC=1"};
    for (int k = 0; k < 4; k++)
        CHECK_MSG(strstr(r.err, want[k]), "demo's message lacks \"%s\"", want[k]);
    test_cmd_result_free(&r);
}

/* The synthetic route writes ~270 MB of random weights and decodes with a
 * codec of the real widths: the release build when there is one. */
TEST(demo_synthetic_route_speaks_without_downloads) {
    const char *bin = getenv("GEPARD_RELEASE_BIN");
    if (!bin || !*bin) bin = "build/release/gepard";
    if (access(bin, X_OK) != 0) test_skip("no release build (make all) for the synthetic demo");
    char env[PATH_MAX + 64];
    snprintf(env, sizeof env, "SYNTHETIC=1 SYNTH_DIR='%s' HF_HUB_OFFLINE=1", test_tmp("synth"));
    test_cmd_result r;
    REQUIRE(run_demo(&r, env, bin) == 0);
    CHECK_MSG(r.status == 0, "exit %d: %s", r.status, r.err);
    CHECK(strstr(r.err, "noise"));
    test_cmd_result_free(&r);
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *sf = sf_open(test_tmp("demo.wav"), SFM_READ, &info);
    REQUIRE_MSG(sf, "no demo.wav");
    sf_close(sf);
    test_note("demo.wav: %lld samples at %d Hz", (long long)info.frames, info.samplerate);
    CHECK_EQ_INT(info.samplerate, 22050);
    /* two sentences, each ended by the tiny preset's stop head (or the
     * demo's cap of 200 frames) */
    CHECK(info.frames > 0 && info.frames <= 2 * 200 * 1024);
}

/* `make demo` builds with -j (it ran one compiler at a time). */
TEST(make_demo_builds_in_parallel) {
    if (access("Makefile", R_OK) != 0) test_skip("not run from the repository root");
    const char *argv[] = {"make", "-n", "--no-print-directory", "demo", "JOBS=3", NULL};
    test_cmd_result r;
    REQUIRE(test_run_program(&r, NULL, 0, 120, argv) == 0);
    const char *line = strstr(r.out, "-j3 all");
    CHECK_MSG(line, "make -n demo shows no parallel build: %.2000s", r.out);
    test_cmd_result_free(&r);
}
