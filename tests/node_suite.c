/* node_suite.c — running the official Node clients' suites against the
 * server (see node_suite.h). */
#include "node_suite.h"

#include <math.h>

#include <sndfile.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "io/json.h"
#include "test.h"

void test_require_node_package(const char *modules, const char *package, const char *what,
                               const char *npm_dir) {
    static char why[1024]; /* test_skip does not return */
    test_cmd_result r;
    const char *argv[] = {"node", "--version", NULL};
    bool node = test_run_program(&r, NULL, 0, 30, argv) == 0 && r.status == 0;
    test_cmd_result_free(&r);
    if (!node) {
        snprintf(why, sizeof why,
                 "node is not installed (apt-get install nodejs npm), so %s cannot run", what);
        test_skip(why);
    }
    char path[1024];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s/package.json", modules, package);
    if (stat(path, &st) != 0) {
        snprintf(why, sizeof why,
                 "%s/%s is missing — run `GEPARD_TEST_EXTRAS=1 sh scripts/install-deps.sh` or "
                 "`npm install --prefix %s` (needs the npm registry once)",
                 modules, package, npm_dir);
        test_skip(why);
    }
}

void test_node_suite(const char *script, const test_server *ts, const char *key, const char *what,
                     int expected) {
    const char *argv[] = {"node", script, ts->base, key, test_tmpdir(), NULL};
    test_cmd_result r;
    REQUIRE(test_run_program(&r, NULL, 0, 240, argv) == 0);
    int checks = 0;
    for (char *line = r.out; line && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        cJSON *j = cJSON_Parse(line);
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(j, "check"));
        const char *info = cJSON_GetStringValue(cJSON_GetObjectItem(j, "info"));
        if (name) {
            checks++;
            bool ok = cJSON_IsTrue(cJSON_GetObjectItem(j, "ok"));
            test_note("%s %s: %.300s", ok ? "ok  " : "FAIL", name, info ? info : "");
            CHECK_MSG(ok, "%s: %s: %s", what, name, info ? info : "");
        } else if (*line) {
            test_note("node: %.300s", line);
        }
        cJSON_Delete(j);
        line = end ? end + 1 : NULL;
    }
    CHECK_MSG(r.status == 0, "node exited %d: %.2000s", r.status, r.err);
    CHECK_MSG(checks == expected, "%d checks reported, want %d: %.2000s", checks, expected, r.err);
    test_cmd_result_free(&r);
}

cJSON *test_node_manifest(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.json", test_tmpdir());
    cJSON *m = NULL;
    gp_error err;
    if (gp_json_load_file(path, 1 << 22, &m, &err)) {
        test_fail(__FILE__, __LINE__, "no manifest: %s", err.message);
        return NULL;
    }
    return m;
}

double test_sndfile_seconds(const char *path, int *rate, int *channels) {
    SF_INFO info;
    memset(&info, 0, sizeof info);
    *rate = *channels = 0;
    SNDFILE *sf = sf_open(path, SFM_READ, &info);
    if (!sf) return -1;
    float buf[4096];
    sf_count_t total = 0, got;
    while ((got = sf_readf_float(sf, buf, 4096 / (info.channels > 0 ? info.channels : 1))) > 0)
        total += got;
    sf_close(sf);
    *rate = info.samplerate;
    *channels = info.channels;
    return (double)total / info.samplerate;
}

void test_node_check_manifest(const char *dir, int expected_files) {
    char path[1024];
    cJSON *m = test_node_manifest();
    if (!m) return;
    int files = 0;
    for (const cJSON *f = m->child; f; f = f->next, files++) {
        const char *file = cJSON_GetStringValue(cJSON_GetObjectItem(f, "file"));
        int rate = cJSON_GetObjectItem(f, "rate")->valueint;
        double want = cJSON_GetObjectItem(f, "seconds")->valuedouble;
        bool lossy = cJSON_IsTrue(cJSON_GetObjectItem(f, "lossy"));
        snprintf(path, sizeof path, "%s/%s", dir, file);
        int got_rate, channels;
        double secs = test_sndfile_seconds(path, &got_rate, &channels);
        CHECK_MSG(secs >= 0, "%s does not decode: %s", file, sf_strerror(NULL));
        if (secs < 0) continue;
        test_note("%s: %.3f s at %d Hz (want %.3f s at %d Hz)", file, secs, got_rate, want, rate);
        CHECK_EQ_INT(got_rate, rate);
        CHECK_EQ_INT(channels, 1);
        double tol = lossy ? 0.1 : 1024.0 / 22050;
        CHECK_MSG(fabs(secs - want) <= tol, "%s: %.3f s, want %.3f +- %.3f", file, secs, want, tol);
        int bit_rate = cJSON_GetObjectItem(f, "bit_rate")->valueint;
        if (bit_rate) {
            double bytes = cJSON_GetObjectItem(f, "bytes")->valuedouble;
            double expect = bit_rate / 8.0 * want;
            CHECK_MSG(fabs(bytes - expect) <= 0.15 * expect + 1500, "%s: %.0f bytes, ~%.0f", file,
                      bytes, expect);
        }
    }
    CHECK_EQ_INT(files, expected_files);
    cJSON_Delete(m);
}
