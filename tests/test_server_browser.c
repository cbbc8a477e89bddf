/* test_server_browser.c — the playground page in headless Chromium: the page
 * loads the voices, posts a request, plays the streamed 16-bit PCM chunk by
 * chunk through Web Audio and reports (its "?selftest=1" mode) into #result.
 *
 * The browser is driven over the DevTools protocol on a pipe
 * (--remote-debugging-pipe: NUL-terminated JSON messages, commands on fd 3,
 * replies on fd 4), which runs in real time, unlike --dump-dom's virtual
 * time. Skipped, with a note, when /usr/bin/chromium is missing: install
 * Debian's `chromium` (GEPARD_TEST_EXTRAS=1 make deps) to run it. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/timing.h"
#include "io/json.h"
#include "server_harness.h"
#include "test.h"

#define CHROMIUM "/usr/bin/chromium"

typedef struct cdp {
    pid_t pid;
    int to, from; /* our ends of the pipes */
    int next_id;
    gp_buf in;
    char session[128];
} cdp;

static int cdp_start(cdp *c, const char *profile_dir) {
    memset(c, 0, sizeof *c);
    int to[2], from[2];
    if (pipe(to) || pipe(from)) return -1;
    char profile[600];
    snprintf(profile, sizeof profile, "--user-data-dir=%s", profile_dir);
    c->pid = fork();
    if (c->pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, 1);
        dup2(devnull, 2);
        int in = fcntl(to[0], F_DUPFD, 10), out = fcntl(from[1], F_DUPFD, 10); /* clear of 3, 4 */
        dup2(in, 3);
        dup2(out, 4);
        execl(CHROMIUM, CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
              "--disable-background-networking", "--disable-dev-shm-usage", "--no-first-run",
              "--autoplay-policy=no-user-gesture-required", "--remote-debugging-pipe", profile,
              "about:blank", (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    c->to = to[1];
    c->from = from[0];
    gp_buf_init(&c->in);
    return c->pid > 0 ? 0 : -1;
}

/* Send a command; returns its id. `params` is a JSON object text. */
static int cdp_send(cdp *c, const char *method, const char *params, bool in_session) {
    int id = ++c->next_id;
    gp_buf m;
    gp_buf_init(&m);
    gp_buf_printf(&m, "{\"id\":%d,\"method\":\"%s\",\"params\":%s", id, method, params);
    if (in_session) gp_buf_printf(&m, ",\"sessionId\":\"%s\"", c->session);
    gp_buf_append(&m, "}", 2); /* with the NUL that ends a message */
    ssize_t n = write(c->to, m.data, m.len);
    gp_buf_free(&m);
    return n > 0 ? id : -1;
}

/* The reply to command `id` (other messages are skipped), or NULL at the deadline. */
static cJSON *cdp_reply(cdp *c, int id, double deadline) {
    for (;;) {
        char *nul = c->in.data ? memchr(c->in.data, '\0', c->in.len) : NULL;
        if (nul) {
            cJSON *msg = cJSON_Parse(c->in.data);
            gp_buf_consume(&c->in, (size_t)(nul - c->in.data) + 1);
            cJSON *mid = cJSON_GetObjectItem(msg, "id");
            if (mid && mid->valueint == id) return msg;
            cJSON_Delete(msg);
            continue;
        }
        double left = deadline - gp_now_s();
        if (left <= 0) return NULL;
        struct pollfd p = {c->from, POLLIN, 0};
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
        char chunk[65536];
        ssize_t n = read(c->from, chunk, sizeof chunk);
        if (n <= 0) return NULL;
        gp_buf_append(&c->in, chunk, (size_t)n);
    }
}

static cJSON *cdp_call(cdp *c, const char *method, const char *params, bool in_session,
                       double deadline) {
    int id = cdp_send(c, method, params, in_session);
    return id < 0 ? NULL : cdp_reply(c, id, deadline);
}

static void cdp_stop(cdp *c) {
    cdp_send(c, "Browser.close", "{}", false);
    double until = gp_now_s() + 5;
    int status;
    while (waitpid(c->pid, &status, WNOHANG) == 0) {
        if (gp_now_s() > until) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &status, 0);
            break;
        }
        usleep(20000);
    }
    close(c->to);
    close(c->from);
    gp_buf_free(&c->in);
}

/* Open `url` in a new page and attach to it. */
static int cdp_open(cdp *c, const char *url, double deadline) {
    char params[512];
    snprintf(params, sizeof params, "{\"url\":\"%s\"}", url);
    cJSON *r = cdp_call(c, "Target.createTarget", params, false, deadline);
    const char *target =
        cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "targetId"));
    if (!target) {
        cJSON_Delete(r);
        return -1;
    }
    snprintf(params, sizeof params, "{\"targetId\":\"%s\",\"flatten\":true}", target);
    cJSON_Delete(r);
    r = cdp_call(c, "Target.attachToTarget", params, false, deadline);
    const char *session =
        cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "sessionId"));
    if (session) snprintf(c->session, sizeof c->session, "%s", session);
    cJSON_Delete(r);
    return session ? 0 : -1;
}

/* The text of #result once the self-test has written it (malloc'ed), or NULL. */
static char *wait_for_report(cdp *c, double deadline) {
    const char *expr = "{\"expression\":\"(document.getElementById('result')||{}).textContent"
                       "||''\",\"returnByValue\":true}";
    while (gp_now_s() < deadline) {
        cJSON *r = cdp_call(c, "Runtime.evaluate", expr, true, deadline);
        cJSON *value = cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "result"), "value");
        const char *text = cJSON_GetStringValue(value);
        char *out = text && strncmp(text, "SELFTEST ", 9) == 0 ? strdup(text + 9) : NULL;
        cJSON_Delete(r);
        if (out) return out;
        usleep(100000);
    }
    return NULL;
}

TEST(server_playground_streams_in_headless_chromium) {
    if (access(CHROMIUM, X_OK) != 0) {
        test_note("skipped: %s is not installed (apt-get install chromium, or "
                  "GEPARD_TEST_EXTRAS=1 make deps)",
                  CHROMIUM);
        return;
    }
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    cdp c;
    REQUIRE(cdp_start(&c, test_tmp("chromium-profile")) == 0);
    double deadline = gp_now_s() + 45;
    char page[256];
    snprintf(page, sizeof page,
             "%s/?selftest=1&max_frames=200&stop_threshold=2&top_k=1&seed=3&voice=alloy", ts.base);
    char *report = NULL;
    if (cdp_open(&c, page, deadline) == 0)
        report = wait_for_report(&c, deadline);
    else
        test_fail(__FILE__, __LINE__, "cannot open the page over the DevTools protocol");
    cdp_stop(&c);
    test_note("page report: %s", report ? report : "(none)");
    cJSON *j = report ? cJSON_Parse(report) : NULL;
    CHECK_MSG(j && cJSON_IsTrue(cJSON_GetObjectItem(j, "ok")), "the self-test failed: %s",
              report ? report : "no report before the deadline");
    if (j) {
        CHECK_EQ_INT(cJSON_GetObjectItem(j, "voices")->valueint, 14);
        CHECK_EQ_INT(cJSON_GetObjectItem(j, "samples")->valuedouble, 200 * 1024);
        CHECK(cJSON_GetObjectItem(j, "chunks")->valueint >= 2); /* it streamed */
        const char *player = cJSON_GetStringValue(cJSON_GetObjectItem(j, "player"));
        CHECK_MSG(player && strcmp(player, "ok") == 0, "Web Audio: %s", player);
        CHECK(cJSON_GetObjectItem(j, "scheduled")->valueint >= 2);
    }
    cJSON_Delete(j);
    free(report);
    test_server_stop(&ts);
}
