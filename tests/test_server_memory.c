/* test_server_memory.c — `gepard serve` gives memory back when idle (issue
 * 16, item 5): the release build ($GEPARD_RELEASE_BIN, as `make test` sets
 * it; AddressSanitizer's allocator would hide the effect) serves rounds of
 * requests on the tiny model, and its resident size is read right after
 * each round and again after 2.5 s without requests. Before, the heap kept
 * what requests freed over up to 8 arenas per CPU, so the idle size equalled
 * the busy size and crept up round after round. Skipped, with a note, when
 * the release binary is not there. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/timing.h"
#include "test.h"

#define MEM_MODEL test_fixture("model-tiny/model")
#define MEM_CODEC test_fixture("codec-tiny/nano-tiny.nemo")

/* Start `BIN serve --port 0` and read its port from stderr. */
static pid_t start_serve(const char *bin, int *port) {
    int p[2];
    if (pipe(p)) return -1;
    char model[1024], codec[1024];
    snprintf(model, sizeof model, "%s", MEM_MODEL);
    snprintf(codec, sizeof codec, "%s", MEM_CODEC);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        execl(bin, bin, "serve", "--model", model, "--codec", codec, "--port", "0", "--threads",
              "1", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char text[4096];
    size_t len = 0;
    *port = 0;
    for (double until = gp_now_s() + 30; gp_now_s() < until && len < sizeof text - 1;) {
        struct pollfd pfd = {p[0], POLLIN, 0};
        if (poll(&pfd, 1, 200) <= 0) continue;
        ssize_t k = read(p[0], text + len, sizeof text - 1 - len);
        if (k <= 0) break;
        len += (size_t)k;
        text[len] = '\0';
        const char *at = strstr(text, "127.0.0.1:");
        if (at && strstr(text, "ready")) {
            *port = atoi(at + 10);
            break;
        }
    }
    close(p[0]); /* its later warnings go nowhere (EPIPE is ignored) */
    return pid;
}

static double rss_mb(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    double mb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) mb = atof(line + 6) / 1024.0;
    if (f) fclose(f);
    return mb;
}

TEST(server_gives_memory_back_when_idle) {
    const char *bin = getenv("GEPARD_RELEASE_BIN");
    if (!bin || access(bin, X_OK) != 0) {
        test_note("SKIPPED: no release binary ($GEPARD_RELEASE_BIN; `make test` sets it)");
        return;
    }
    int port = 0;
    pid_t pid = start_serve(bin, &port);
    REQUIRE(pid > 0);
    if (port <= 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        REQUIRE_MSG(false, "%s serve did not report a port", bin);
    }
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    enum { ROUNDS = 3 };
    double busy[ROUNDS], idle[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        const char *argv[] = {
            bin,  "loadtest",   "--url", url,      "--concurrency",
            "16", "--requests", "100",   "--body", "{\"max_frames\":20,\"stop_threshold\":2}",
            NULL};
        test_cmd_result res;
        REQUIRE(test_run_program(&res, NULL, 0, 120, argv) == 0);
        CHECK_MSG(res.status == 0 && res.out && strstr(res.out, "\"ok\": 100"), "loadtest: %s",
                  res.out ? res.out : "");
        test_cmd_result_free(&res);
        busy[r] = rss_mb(pid);
        usleep(2500000); /* idle: the server trims after 1 s (+ its 100 ms tick) */
        idle[r] = rss_mb(pid);
        test_note("round %d (100 requests): RSS %.1f MB right after, %.1f MB after 2.5 s idle", r,
                  busy[r], idle[r]);
    }
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "serve exit status %d", status);
    /* Tolerances measured on the tiny model (2 shared cores): idle drops
     * ~7 MB below busy now (0 before). Idle grows 0.3-1.7 MB a round now,
     * by noise on a loaded machine (~1.8 MB every round before, with idle
     * equal to busy), so the creep is judged against the first busy peak:
     * after every round the idle size stays well under it, which the old
     * heap (idle == busy, then growing) never did. */
    for (int r = 0; r < ROUNDS; r++)
        CHECK_MSG(busy[r] - idle[r] >= 2.0, "round %d: idle RSS %.1f MB is not below busy %.1f MB",
                  r, idle[r], busy[r]);
    CHECK_MSG(
        busy[0] - idle[ROUNDS - 1] >= 3.0,
        "idle RSS after %d rounds (%.1f MB) crept up to the first round's busy size (%.1f MB)",
        ROUNDS, idle[ROUNDS - 1], busy[0]);
    CHECK_MSG(idle[ROUNDS - 1] - idle[0] <= 4.0, "idle RSS crept from %.1f to %.1f MB", idle[0],
              idle[ROUNDS - 1]);
}
