/* test_hub_download.c — the Hub client's download path against the local
 * fake Hub (fake_hub.c): a fresh download lands in the standard cache
 * layout, the cache answers without network (stopped server,
 * HF_HUB_OFFLINE), a cut transfer resumes with a Range request, corrupt or
 * mis-sized downloads never leave a complete-looking blob, gated and missing
 * repos/files give actionable messages, revisions (branch, tag-like ref,
 * commit) resolve to the right snapshot, and a dead endpoint fails fast. */
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "fake_hub.h"
#include "io/file.h"
#include "io/hub.h"
#include "io/sha256.h"
#include "test.h"

#define REPO_DIR "cache/models--acme--tiny/"

/* Start the fake Hub and point the client (environment and options) at it
 * with a fresh cache; 0 on success. */
static int start_hub(fake_hub *hub, gp_hub_options *o) {
    if (fake_hub_start(hub) != 0) return -1;
    setenv("HF_ENDPOINT", hub->endpoint, 1);
    setenv("HF_HUB_CACHE", test_tmp("cache"), 1);
    setenv("HF_HOME", test_tmp("hf-home"), 1); /* no token file of the user's */
    unsetenv("HF_TOKEN");
    unsetenv("HF_TOKEN_PATH");
    unsetenv("HF_HUB_OFFLINE");
    setenv("NO_PROXY", "127.0.0.1,localhost", 1);
    *o = gp_hub_default_options();
    o->progress_bar = false;
    o->connect_timeout_s = 5;
    o->stall_timeout_s = 5;
    return 0;
}

/* Whether the file at `path` holds exactly the fake's `path_in_repo` at `commit`. */
static bool same_content(const char *path, const char *commit, const char *path_in_repo) {
    size_t want_len;
    const unsigned char *want = fake_hub_content(commit, path_in_repo, &want_len);
    char *data = NULL;
    size_t len = 0;
    gp_error err;
    bool same = want && gp_read_file(path, 0, &data, &len, &err) == 0 && len == want_len &&
                memcmp(data, want, len) == 0;
    free(data);
    return same;
}

static void read_link(const char *path, char *out, size_t size) {
    ssize_t n = readlink(path, out, size - 1);
    out[n > 0 ? n : 0] = '\0';
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* blobs/<etag> of the fake's model.safetensors (and its .incomplete). */
static const char *model_blob(bool incomplete) {
    static char rel[256];
    snprintf(rel, sizeof rel, REPO_DIR "blobs/%s%s",
             fake_hub_etag(FAKE_HUB_MAIN, "model.safetensors"), incomplete ? ".incomplete" : "");
    return test_tmp(rel);
}

typedef struct progress_seen {
    int calls;
    uint64_t last_done, last_total;
} progress_seen;

static void on_progress(const char *what, uint64_t done, uint64_t total, void *user) {
    progress_seen *p = user;
    if (strcmp(what, "model.safetensors") != 0) return;
    p->calls++;
    p->last_done = done;
    p->last_total = total;
}

TEST(hub_fresh_download_layout) {
    fake_hub hub;
    gp_hub_options o;
    REQUIRE(start_hub(&hub, &o) == 0);
    progress_seen seen = {0};
    o.progress = on_progress;
    o.progress_user = &seen;
    size_t n;
    const gp_hub_file *files = gp_hub_gepard_files(&n);
    char *dir = NULL;
    gp_error err;
    REQUIRE_OK(gp_hub_resolve_repo(&o, "acme/tiny", files, n, &dir, &err), &err);
    CHECK_MSG(strcmp(dir, test_tmp(REPO_DIR "snapshots/" FAKE_HUB_MAIN)) == 0, "snapshot %s", dir);
    char *ref = NULL;
    size_t ref_len;
    REQUIRE_OK(gp_read_file(test_tmp(REPO_DIR "refs/main"), 0, &ref, &ref_len, &err), &err);
    CHECK(strcmp(ref, FAKE_HUB_MAIN) == 0);
    free(ref);
    static const char *present[] = {"gepard_config.json", "model.safetensors", "tokenizer.json"};
    for (int i = 0; i < 3; i++) {
        char *path = gp_path_join(dir, present[i]), want[128], got[256];
        snprintf(want, sizeof want, "../../blobs/%s", fake_hub_etag(FAKE_HUB_MAIN, present[i]));
        read_link(path, got, sizeof got);
        CHECK_MSG(strcmp(got, want) == 0, "%s links to \"%s\", expected %s", present[i], got, want);
        CHECK_MSG(same_content(path, FAKE_HUB_MAIN, present[i]), "%s content differs", present[i]);
        free(path);
    }
    CHECK(gp_path_exists(model_blob(false)));
    CHECK(!gp_path_exists(model_blob(true)));
    CHECK(gp_path_exists(test_tmp(REPO_DIR ".no_exist/" FAKE_HUB_MAIN "/config.json")));
    CHECK(gp_path_exists(test_tmp(REPO_DIR ".no_exist/" FAKE_HUB_MAIN "/tokenizer_config.json")));
    CHECK(!gp_path_exists(test_tmp(REPO_DIR "snapshots/" FAKE_HUB_MAIN "/config.json")));
    CHECK_EQ_INT(hub.cdn_gets, 1);
    CHECK_EQ_INT(hub.cdn_auth, 0);
    CHECK(seen.calls > 0 && seen.last_done == FAKE_HUB_MODEL_SIZE &&
          seen.last_total == FAKE_HUB_MODEL_SIZE);
    /* A nested path gets one more ../ per directory. */
    char *nested = NULL, got[256], want[128];
    REQUIRE_OK(gp_hub_resolve_file(&o, "acme/tiny", "nested/dir/extra.bin", &nested, &err), &err);
    read_link(nested, got, sizeof got);
    snprintf(want, sizeof want, "../../../../blobs/%s",
             fake_hub_etag(FAKE_HUB_MAIN, "nested/dir/extra.bin"));
    CHECK_MSG(strcmp(got, want) == 0, "nested link \"%s\"", got);
    CHECK(same_content(nested, FAKE_HUB_MAIN, "nested/dir/extra.bin"));
    free(nested);
    free(dir);
    fake_hub_stop(&hub);
}

TEST(hub_cache_hit_without_network) {
    fake_hub hub;
    gp_hub_options o;
    REQUIRE(start_hub(&hub, &o) == 0);
    size_t n;
    const gp_hub_file *files = gp_hub_gepard_files(&n);
    char *first = NULL, *again = NULL;
    gp_error err;
    REQUIRE_OK(gp_hub_resolve_repo(&o, "acme/tiny", files, n, &first, &err), &err);
    int requests = hub.requests;
    REQUIRE_OK(gp_hub_resolve_repo(&o, "acme/tiny", files, n, &again, &err), &err);
    CHECK_EQ_INT(hub.requests, requests); /* answered from the cache */
    free(again);
    fake_hub_stop(&hub); /* from here on any request would fail */
    REQUIRE_OK(gp_hub_resolve_repo(&o, "acme/tiny", files, n, &again, &err), &err);
    CHECK(strcmp(first, again) == 0);
    free(again);
    setenv("HF_HUB_OFFLINE", "1", 1);
    REQUIRE_OK(gp_hub_resolve_repo(&o, "acme/tiny", files, n, &again, &err), &err);
    CHECK(strcmp(first, again) == 0);
    free(again);
    char *path = NULL;
    REQUIRE_OK(gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err), &err);
    CHECK(same_content(path, FAKE_HUB_MAIN, "model.safetensors"));
    free(path);
    CHECK_ERR_CONTAINS(gp_hub_resolve_file(&o, "acme/tiny", "config.json", &path, &err), &err,
                       "not found");
    /* Asking for updates falls back to the cache when the Hub is gone (with
     * a warning, silenced here). */
    unsetenv("HF_HUB_OFFLINE");
    gp_log_set_level(GP_LOG_ERROR);
    o.refresh = true;
    REQUIRE_OK(gp_hub_resolve_repo(&o, "acme/tiny", files, n, &again, &err), &err);
    CHECK(strcmp(first, again) == 0);
    free(again);
    free(first);
}

TEST(hub_offline_cache_miss) {
    fake_hub hub;
    gp_hub_options o;
    REQUIRE(start_hub(&hub, &o) == 0);
    setenv("HF_HUB_OFFLINE", "1", 1);
    char *path = NULL;
    gp_error err;
    CHECK_ERR_CONTAINS(gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err), &err,
                       "not in the cache and HF_HUB_OFFLINE is set");
    CHECK(strstr(err.message, "--model DIR") != NULL);
    unsetenv("HF_HUB_OFFLINE");
    o.offline = true;
    CHECK_ERR_CONTAINS(gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err), &err,
                       "not in the cache");
    CHECK_EQ_INT(hub.requests, 0);
    fake_hub_stop(&hub);
}

TEST(hub_resume_after_cut) {
    fake_hub hub;
    gp_hub_options o;
    REQUIRE(start_hub(&hub, &o) == 0);
    hub.cut_after = 100000;
    char *path = NULL;
    gp_error err;
    int rc = gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err);
    CHECK_EQ_INT(rc, GEPARD_ERR_NETWORK);
    CHECK_MSG(strstr(err.message, "interrupted") && strstr(err.message, "resume"), "message: %s",
              err.message);
    long partial = file_size(model_blob(true));
    test_note("partial download after the cut: %ld bytes", partial);
    CHECK(partial > 0 && partial <= 100000);
    CHECK(!gp_path_exists(model_blob(false)));
    CHECK(!gp_path_exists(test_tmp(REPO_DIR "snapshots/" FAKE_HUB_MAIN "/model.safetensors")));
    hub.cut_after = 0;
    REQUIRE_OK(gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err), &err);
    char range[64], want[64];
    fake_hub_last_range(&hub, range, sizeof range);
    snprintf(want, sizeof want, "bytes=%ld-", partial);
    CHECK_MSG(strcmp(range, want) == 0, "Range \"%s\", expected \"%s\"", range, want);
    CHECK(same_content(path, FAKE_HUB_MAIN, "model.safetensors"));
    CHECK(!gp_path_exists(model_blob(true)));
    free(path);
    fake_hub_stop(&hub);
}

TEST(hub_resume_when_server_ignores_range) {
    fake_hub hub;
    gp_hub_options o;
    REQUIRE(start_hub(&hub, &o) == 0);
    hub.cut_after = 50000;
    char *path = NULL;
    gp_error err;
    CHECK(gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err) != 0);
    CHECK(file_size(model_blob(true)) > 0);
    hub.cut_after = 0;
    hub.ignore_range = true; /* answers 200 with the whole file */
    REQUIRE_OK(gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err), &err);
    char range[64];
    fake_hub_last_range(&hub, range, sizeof range);
    CHECK(strncmp(range, "bytes=", 6) == 0);
    CHECK(same_content(path, FAKE_HUB_MAIN, "model.safetensors"));
    free(path);
    fake_hub_stop(&hub);
}

/* No blob, no partial file, no snapshot link. */
static void check_nothing_kept(void) {
    CHECK(!gp_path_exists(model_blob(false)));
    CHECK(!gp_path_exists(model_blob(true)));
    CHECK(!gp_path_exists(test_tmp(REPO_DIR "snapshots/" FAKE_HUB_MAIN "/model.safetensors")));
}

TEST(hub_corrupt_downloads_are_deleted) {
    fake_hub hub;
    gp_hub_options o;
    REQUIRE(start_hub(&hub, &o) == 0);
    char *path = NULL;
    gp_error err;
    hub.size_delta = 10; /* announces more than it sends */
    CHECK_ERR_CONTAINS(gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err), &err,
                       "size mismatch");
    CHECK(strstr(err.message, "deleted") != NULL);
    check_nothing_kept();
    hub.size_delta = -10; /* sends more than it announces */
    CHECK_ERR_CONTAINS(gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err), &err,
                       "more than the announced");
    check_nothing_kept();
    hub.size_delta = 0;
    hub.corrupt = true;
    CHECK_ERR_CONTAINS(gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err), &err,
                       "sha256 mismatch");
    CHECK_EQ_INT(err.code, GEPARD_ERR_FORMAT);
    check_nothing_kept();
    hub.corrupt = false;
    REQUIRE_OK(gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err), &err);
    CHECK(same_content(path, FAKE_HUB_MAIN, "model.safetensors"));
    free(path);
    fake_hub_stop(&hub);
}

TEST(hub_gated_repo_needs_token) {
    fake_hub hub;
    gp_hub_options o;
    REQUIRE(start_hub(&hub, &o) == 0);
    char *path = NULL;
    gp_error err;
    int rc = gp_hub_resolve_file(&o, "acme/gated", "model.safetensors", &path, &err);
    CHECK_EQ_INT(rc, GEPARD_ERR_AUTH);
    CHECK_MSG(strstr(err.message, "gated or private") && strstr(err.message, "HF_TOKEN") &&
                  strstr(err.message, "no token was found"),
              "message: %s", err.message);
    setenv("HF_TOKEN", "hf_wrong", 1);
    CHECK_ERR_CONTAINS(gp_hub_resolve_file(&o, "acme/gated", "model.safetensors", &path, &err),
                       &err, "has no access");
    CHECK(strstr(err.message, "gated or private") != NULL);
    setenv("HF_TOKEN", FAKE_HUB_TOKEN, 1);
    REQUIRE_OK(gp_hub_resolve_file(&o, "acme/gated", "model.safetensors", &path, &err), &err);
    CHECK(same_content(path, FAKE_HUB_GATED, "model.safetensors"));
    free(path);
    CHECK(hub.resolve_auth > 0);
    CHECK_EQ_INT(hub.cdn_gets, 1);
    CHECK_EQ_INT(hub.cdn_auth, 0); /* the token never goes to the CDN host */
    /* Also when the GET (not the HEAD) meets the redirect to the CDN. */
    hub.head_no_redirect = true;
    REQUIRE_OK(gp_hub_resolve_file(&o, "acme/gated", "gepard_config.json", &path, &err), &err);
    free(path);
    REQUIRE(gp_make_dirs(test_tmp("cache2"), &err) == 0);
    o.cache_dir = test_tmp("cache2");
    int resolve_auth = hub.resolve_auth;
    REQUIRE_OK(gp_hub_resolve_file(&o, "acme/gated", "model.safetensors", &path, &err), &err);
    CHECK(same_content(path, FAKE_HUB_GATED, "model.safetensors"));
    free(path);
    CHECK_EQ_INT(hub.resolve_auth, resolve_auth + 2); /* HEAD and GET */
    CHECK_EQ_INT(hub.cdn_gets, 2);
    CHECK_EQ_INT(hub.cdn_auth, 0);
    fake_hub_stop(&hub);
}

TEST(hub_not_found_messages) {
    fake_hub hub;
    gp_hub_options o;
    REQUIRE(start_hub(&hub, &o) == 0);
    char *path = NULL;
    gp_error err;
    CHECK_ERR_CONTAINS(gp_hub_resolve_file(&o, "acme/nope", "model.safetensors", &path, &err), &err,
                       "repository or file not found");
    CHECK_EQ_INT(err.code, GEPARD_ERR_NOT_FOUND);
    CHECK(strstr(err.message, "--revision") != NULL);
    CHECK_ERR_CONTAINS(gp_hub_resolve_file(&o, "acme/tiny", "missing.bin", &path, &err), &err,
                       "file missing.bin not found");
    CHECK_EQ_INT(err.code, GEPARD_ERR_NOT_FOUND);
    CHECK(gp_path_exists(test_tmp(REPO_DIR ".no_exist/" FAKE_HUB_MAIN "/missing.bin")));
    int requests = hub.requests;
    CHECK_ERR_CONTAINS(gp_hub_resolve_file(&o, "acme/tiny", "missing.bin", &path, &err), &err,
                       "not found");
    CHECK_EQ_INT(hub.requests, requests); /* remembered */
    o.revision = "nope";
    CHECK_ERR_CONTAINS(gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err), &err,
                       "revision nope not found");
    /* A required file that is missing fails the repo; optional ones do not. */
    o.revision = NULL;
    gp_hub_file list[] = {{"gepard_config.json", false}, {"missing.bin", false}};
    char *dir = NULL;
    CHECK_ERR_CONTAINS(gp_hub_resolve_repo(&o, "acme/tiny", list, 2, &dir, &err), &err,
                       "missing.bin");
    CHECK(dir == NULL);
    list[1].optional = true;
    REQUIRE_OK(gp_hub_resolve_repo(&o, "acme/tiny", list, 2, &dir, &err), &err);
    free(dir);
    CHECK_ERR_CONTAINS(gp_hub_resolve_file(&o, "../evil", "x", &path, &err), &err, "org/name");
    CHECK_ERR_CONTAINS(gp_hub_resolve_file(&o, "acme/tiny", "../x", &path, &err), &err,
                       "not a usable file name");
    fake_hub_stop(&hub);
}

TEST(hub_revisions) {
    fake_hub hub;
    gp_hub_options o;
    REQUIRE(start_hub(&hub, &o) == 0);
    char *path = NULL, *ref = NULL;
    gp_error err;
    o.revision = "v1";
    REQUIRE_OK(gp_hub_resolve_file(&o, "acme/tiny", "gepard_config.json", &path, &err), &err);
    CHECK(strcmp(path, test_tmp(REPO_DIR "snapshots/" FAKE_HUB_OLD "/gepard_config.json")) == 0);
    CHECK(same_content(path, FAKE_HUB_OLD, "gepard_config.json"));
    free(path);
    REQUIRE_OK(gp_read_file(test_tmp(REPO_DIR "refs/v1"), 0, &ref, NULL, &err), &err);
    CHECK(strcmp(ref, FAKE_HUB_OLD) == 0);
    free(ref);
    /* refs/pr/1 must travel as refs%2Fpr%2F1 and is stored as refs/refs/pr/1. */
    o.revision = "refs/pr/1";
    REQUIRE_OK(gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err), &err);
    free(path);
    REQUIRE_OK(gp_read_file(test_tmp(REPO_DIR "refs/refs/pr/1"), 0, &ref, NULL, &err), &err);
    CHECK(strcmp(ref, FAKE_HUB_OLD) == 0);
    free(ref);
    /* The model blob is shared with main: fetched once. */
    o.revision = NULL;
    REQUIRE_OK(gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err), &err);
    free(path);
    CHECK_EQ_INT(hub.cdn_gets, 1);
    /* A commit hash is used as it is: no ref written, content of that commit. */
    o.revision = FAKE_HUB_MAIN;
    REQUIRE_OK(gp_hub_resolve_file(&o, "acme/tiny", "tokenizer.json", &path, &err), &err);
    CHECK(same_content(path, FAKE_HUB_MAIN, "tokenizer.json"));
    free(path);
    CHECK(!gp_path_exists(test_tmp(REPO_DIR "refs/" FAKE_HUB_MAIN)));
    /* ... and found in the cache without the server, even when refreshing. */
    fake_hub_stop(&hub);
    o.refresh = true;
    o.revision = FAKE_HUB_OLD;
    REQUIRE_OK(gp_hub_resolve_file(&o, "acme/tiny", "gepard_config.json", &path, &err), &err);
    CHECK(same_content(path, FAKE_HUB_OLD, "gepard_config.json"));
    free(path);
}

/* A local TCP port: listening (connections hang) or not (refused). */
static int local_port(bool listening, int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        (listening && listen(fd, 4) != 0) || getsockname(fd, (struct sockaddr *)&addr, &len) != 0)
        return -1;
    *port = ntohs(addr.sin_port);
    return fd;
}

TEST(hub_unreachable_endpoint) {
    int port;
    int fd = local_port(false, &port);
    REQUIRE(fd >= 0);
    char endpoint[64], want[80];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", port);
    setenv("HF_ENDPOINT", endpoint, 1);
    setenv("HF_HUB_CACHE", test_tmp("cache"), 1);
    unsetenv("HF_HUB_OFFLINE");
    gp_hub_options o = gp_hub_default_options();
    o.progress_bar = false;
    char *path = NULL;
    gp_error err;
    snprintf(want, sizeof want, "cannot reach %s", endpoint);
    int rc = gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err);
    CHECK_EQ_INT(rc, GEPARD_ERR_NETWORK);
    CHECK_MSG(strstr(err.message, want) && strstr(err.message, "--model DIR") &&
                  strstr(err.message, "HF_HUB_OFFLINE=1"),
              "message: %s", err.message);
    close(fd);
}

TEST(hub_stalled_server_times_out) {
    int port;
    int fd = local_port(true, &port); /* accepts into the backlog, never answers */
    REQUIRE(fd >= 0);
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", port);
    gp_hub_options o = gp_hub_default_options();
    o.progress_bar = false;
    o.endpoint = endpoint;
    o.cache_dir = test_tmp("cache");
    o.stall_timeout_s = 1;
    char *path = NULL;
    gp_error err;
    time_t t0 = time(NULL);
    CHECK_ERR_CONTAINS(gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err), &err,
                       "cannot reach");
    test_note("gave up after %ld s: %s", (long)(time(NULL) - t0), err.message);
    CHECK(time(NULL) - t0 < 10);
    close(fd);
}

TEST(hub_lock_serialises_downloads) {
    fake_hub hub;
    gp_hub_options o;
    REQUIRE(start_hub(&hub, &o) == 0);
    gp_error err;
    const char *etag = fake_hub_etag(FAKE_HUB_MAIN, "model.safetensors");
    REQUIRE_OK(gp_make_dirs(test_tmp("cache/.locks/models--acme--tiny"), &err), &err);
    char rel[160];
    snprintf(rel, sizeof rel, "cache/.locks/models--acme--tiny/%s.lock", etag);
    int lock = open(test_tmp(rel), O_RDWR | O_CREAT, 0644);
    REQUIRE(lock >= 0 && flock(lock, LOCK_EX) == 0); /* "another process" is downloading */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char *path = NULL;
        gp_error child_err;
        int rc = gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &child_err);
        free(path);
        _exit(rc == 0 ? 0 : 1);
    }
    REQUIRE(pid > 0);
    usleep(400 * 1000);
    int status = 0;
    CHECK(waitpid(pid, &status, WNOHANG) == 0); /* still waiting for the lock */
    CHECK(!gp_path_exists(model_blob(true)));
    flock(lock, LOCK_UN);
    close(lock);
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(gp_path_exists(model_blob(false)));
    CHECK_EQ_INT(hub.cdn_gets, 1);
    fake_hub_stop(&hub);
}

TEST(hub_write_failure_keeps_partial_for_resume) {
    fake_hub hub;
    gp_hub_options o;
    REQUIRE(start_hub(&hub, &o) == 0);
    /* A file size limit makes writes fail the way a full disk does. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit saved, limit;
    REQUIRE(getrlimit(RLIMIT_FSIZE, &saved) == 0);
    limit = saved;
    limit.rlim_cur = 64 * 1024;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &limit) == 0);
    char *path = NULL;
    gp_error err;
    int rc = gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err);
    REQUIRE(setrlimit(RLIMIT_FSIZE, &saved) == 0);
    CHECK_EQ_INT(rc, GEPARD_ERR_IO);
    CHECK_MSG(strstr(err.message, "cannot write"), "message: %s", err.message);
    long partial = file_size(model_blob(true));
    CHECK(partial > 0 && partial <= 64 * 1024);
    REQUIRE_OK(gp_hub_resolve_file(&o, "acme/tiny", "model.safetensors", &path, &err), &err);
    CHECK(same_content(path, FAKE_HUB_MAIN, "model.safetensors"));
    free(path);
    fake_hub_stop(&hub);
}

TEST(hub_resolve_model_by_repo_id) {
    fake_hub hub;
    gp_hub_options o;
    REQUIRE(start_hub(&hub, &o) == 0);
    REQUIRE(chdir(test_tmpdir()) == 0);
    char *dir = NULL;
    gp_error err;
    REQUIRE_OK(gp_hub_resolve_model(&o, "acme/tiny", &dir, &err), &err);
    CHECK(strcmp(dir, test_tmp(REPO_DIR "snapshots/" FAKE_HUB_MAIN)) == 0);
    char *cfg = gp_path_join(dir, "gepard_config.json");
    CHECK(same_content(cfg, FAKE_HUB_MAIN, "gepard_config.json"));
    free(cfg);
    free(dir);
    fake_hub_stop(&hub);
}
