/* test_cli_download.c — `gepard download` end to end against the fake Hub
 * (fake_hub.c): the default Gepard file list, --include and --revision,
 * --offline from the cache with the server gone, and the exit codes and
 * messages of a missing repo and of usage mistakes. The child process
 * inherits HF_ENDPOINT and HF_HUB_CACHE from the test. */
#include <stdlib.h>
#include <string.h>

#include "fake_hub.h"
#include "io/file.h"
#include "test.h"

#define SNAPSHOTS "cache/models--acme--tiny/snapshots/"

static int start_hub(fake_hub *hub) {
    if (fake_hub_start(hub) != 0) return -1;
    setenv("HF_ENDPOINT", hub->endpoint, 1);
    setenv("HF_HUB_CACHE", test_tmp("cache"), 1);
    setenv("HF_HOME", test_tmp("hf-home"), 1);
    unsetenv("HF_TOKEN");
    unsetenv("HF_TOKEN_PATH");
    unsetenv("HF_HUB_OFFLINE");
    setenv("NO_PROXY", "127.0.0.1,localhost", 1);
    return 0;
}

/* stdout must be exactly "<dir>\n". */
static void check_printed_dir(const test_cmd_result *r, const char *dir) {
    CHECK_MSG(r->status == 0, "exit %d: %s", r->status, r->err);
    char want[1100];
    snprintf(want, sizeof want, "%s\n", dir);
    CHECK_MSG(r->out && strcmp(r->out, want) == 0, "stdout \"%s\", expected \"%s\"", r->out, want);
}

TEST(cli_download_default_files_then_offline) {
    fake_hub hub;
    REQUIRE(start_hub(&hub) == 0);
    test_cmd_result r;
    const char *args[] = {"download", "acme/tiny", NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 60, args) == 0);
    const char *dir = test_tmp(SNAPSHOTS FAKE_HUB_MAIN);
    check_printed_dir(&r, dir);
    test_cmd_result_free(&r);
    static const char *files[] = {"gepard_config.json", "model.safetensors", "tokenizer.json"};
    for (int i = 0; i < 3; i++) {
        char *p = gp_path_join(dir, files[i]);
        CHECK_MSG(gp_path_exists(p), "%s missing", p);
        free(p);
    }
    fake_hub_stop(&hub);
    const char *offline[] = {"download", "acme/tiny", "--offline", NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 60, offline) == 0);
    check_printed_dir(&r, dir);
    test_cmd_result_free(&r);
    /* Without --offline it asks the (gone) Hub, warns, and uses the cache. */
    REQUIRE(test_run_gepard(&r, NULL, 0, 60, args) == 0);
    check_printed_dir(&r, dir);
    CHECK_MSG(strstr(r.err, "cannot reach"), "stderr: %s", r.err);
    test_cmd_result_free(&r);
}

TEST(cli_download_include_and_revision) {
    fake_hub hub;
    REQUIRE(start_hub(&hub) == 0);
    test_cmd_result r;
    const char *args[] = {"download",
                          "acme/tiny",
                          "--revision",
                          "v1",
                          "--include",
                          "tokenizer.json",
                          "--include=gepard_config.json",
                          NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 60, args) == 0);
    const char *dir = test_tmp(SNAPSHOTS FAKE_HUB_OLD);
    check_printed_dir(&r, dir);
    test_cmd_result_free(&r);
    CHECK(gp_path_exists(test_tmp(SNAPSHOTS FAKE_HUB_OLD "/tokenizer.json")));
    CHECK(gp_path_exists(test_tmp(SNAPSHOTS FAKE_HUB_OLD "/gepard_config.json")));
    CHECK(!gp_path_exists(test_tmp(SNAPSHOTS FAKE_HUB_OLD "/model.safetensors")));
    /* Extra positionals are files too. */
    const char *more[] = {"download", "acme/tiny", "nested/dir/extra.bin", NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 60, more) == 0);
    check_printed_dir(&r, test_tmp(SNAPSHOTS FAKE_HUB_MAIN));
    test_cmd_result_free(&r);
    CHECK(gp_path_exists(test_tmp(SNAPSHOTS FAKE_HUB_MAIN "/nested/dir/extra.bin")));
    fake_hub_stop(&hub);
}

TEST(cli_download_errors) {
    fake_hub hub;
    REQUIRE(start_hub(&hub) == 0);
    test_cmd_result r;
    const char *missing[] = {"download", "acme/nope", NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 60, missing) == 0);
    CHECK_EQ_INT(r.status, 1);
    CHECK_MSG(strstr(r.err, "not found") && strstr(r.err, "--revision"), "stderr: %s", r.err);
    CHECK_EQ_INT(r.out_len, 0);
    test_cmd_result_free(&r);
    const char *gated[] = {"download", "acme/gated", NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 60, gated) == 0);
    CHECK_EQ_INT(r.status, 1);
    CHECK_MSG(strstr(r.err, "gated or private"), "stderr: %s", r.err);
    test_cmd_result_free(&r);
    const char *no_repo[] = {"download", NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 60, no_repo) == 0);
    CHECK_EQ_INT(r.status, 2);
    CHECK(strstr(r.err, "REPO_ID") != NULL);
    test_cmd_result_free(&r);
    const char *bad_repo[] = {"download", "../etc", NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 60, bad_repo) == 0);
    CHECK_EQ_INT(r.status, 2);
    CHECK(strstr(r.err, "org/name") != NULL);
    test_cmd_result_free(&r);
    const char *bad_rev[] = {"download", "acme/tiny", "--revision", "../x", NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 60, bad_rev) == 0);
    CHECK_EQ_INT(r.status, 2);
    CHECK(strstr(r.err, "not a usable revision") != NULL);
    test_cmd_result_free(&r);
    const char *help[] = {"download", "--help", NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 60, help) == 0);
    CHECK_EQ_INT(r.status, 0);
    CHECK(strstr(r.out, "--revision") && strstr(r.out, "--include") && strstr(r.out, "--offline"));
    test_cmd_result_free(&r);
    CHECK_EQ_INT(hub.requests, 2); /* one HEAD each for nope and gated */
    fake_hub_stop(&hub);
}
