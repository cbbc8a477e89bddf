/* test_server_browser.c — the playground page in headless Chromium: the page
 * loads the voices and the server's status, posts a request, plays the
 * streamed 16-bit PCM chunk by chunk through Web Audio while drawing its
 * waveform, records the run (time to first audio, real-time factor) and
 * writes the code snippet, and reports (its "?selftest=1" mode) into
 * #result; screenshots at a desktop and a phone size are taken (and kept in
 * $GEPARD_SCREENSHOTS when set: docs/playground-*.png come from there). On a
 * server with an API key the page asks for the key on 401, and after a
 * reload shows the saved one and uses it.
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
#include "io/file.h"
#include "io/json.h"
#include "server/base64.h"
#include "server_harness.h"

#define PLAYGROUND_FRAMES 1500
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

/* Evaluate a JS expression in the page; its value as a string (malloc'ed) or NULL. */
static char *cdp_eval(cdp *c, const char *js, double deadline) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "expression", js);
    cJSON_AddTrueToObject(p, "returnByValue");
    char *params = cJSON_PrintUnformatted(p);
    cJSON_Delete(p);
    cJSON *r = cdp_call(c, "Runtime.evaluate", params, true, deadline);
    free(params);
    cJSON *value = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "result"), "value");
    char *out = NULL;
    if (cJSON_IsString(value))
        out = strdup(value->valuestring);
    else if (value)
        out = cJSON_PrintUnformatted(value);
    cJSON_Delete(r);
    return out;
}

/* Poll `js` until it evaluates to "true"; false at the deadline. */
static bool cdp_wait_true(cdp *c, const char *js, double deadline) {
    while (gp_now_s() < deadline) {
        char *v = cdp_eval(c, js, deadline);
        bool yes = v && strcmp(v, "true") == 0;
        free(v);
        if (yes) return true;
        usleep(100000);
    }
    return false;
}

/* A PNG's width and height from its IHDR chunk; 0 if it is not a PNG. */
static void png_size(const unsigned char *p, size_t n, int *w, int *h) {
    *w = *h = 0;
    if (n < 24 || memcmp(p, "\x89PNG\r\n\x1a\n", 8) != 0 || memcmp(p + 12, "IHDR", 4) != 0) return;
    *w = (p[16] << 24) | (p[17] << 16) | (p[18] << 8) | p[19];
    *h = (p[20] << 24) | (p[21] << 16) | (p[22] << 8) | p[23];
}

/* Resize the page's window to width x height (CSS pixels), let it lay out,
 * and capture it as `name`.png into the test's directory and, when set,
 * $GEPARD_SCREENSHOTS. */
static void screenshot(cdp *c, const char *name, int width, int height, bool mobile,
                       double deadline) {
    char params[256];
    snprintf(params, sizeof params,
             "{\"width\":%d,\"height\":%d,\"deviceScaleFactor\":1,\"mobile\":%s}", width, height,
             mobile ? "true" : "false");
    cJSON_Delete(cdp_call(c, "Emulation.setDeviceMetricsOverride", params, true, deadline));
    free(cdp_eval(c, "window.dispatchEvent(new Event('resize')), 'ok'", deadline));
    usleep(300000);
    cJSON *r = cdp_call(c, "Page.captureScreenshot",
                        "{\"format\":\"png\",\"captureBeyondViewport\":true}", true, deadline);
    const char *b64 =
        cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "data"));
    unsigned char *png = NULL;
    size_t n = 0;
    gp_error err;
    if (!b64 || gp_base64_decode(b64, strlen(b64), 1 << 26, "screenshot", &png, &n, &err)) {
        test_fail(__FILE__, __LINE__, "%s: no screenshot", name);
        cJSON_Delete(r);
        return;
    }
    int w, h;
    png_size(png, n, &w, &h);
    test_note("%s: %zu bytes, %d x %d", name, n, w, h);
    /* the width less a scroll bar when the page is taller than the window */
    CHECK_MSG(w <= width && w >= width - 20 && h >= height, "%s: %d x %d, want %d wide, >= %d high",
              name, w, h, width, height);
    char path[1024];
    snprintf(path, sizeof path, "%s.png", name);
    test_write_file(test_tmp(path), png, n);
    const char *keep = getenv("GEPARD_SCREENSHOTS");
    if (keep && *keep) {
        snprintf(path, sizeof path, "%s/%s.png", keep, name);
        CHECK_MSG(test_write_file(path, png, n) == 0, "cannot write %s", path);
    }
    free(png);
    cJSON_Delete(r);
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
    double deadline = gp_now_s() + 90;
    char page[256];
    /* 1500 frames (3 MB of 16-bit samples): the tiny model makes them in a
     * few hundred milliseconds, faster than the page starts reading, so a
     * short reply could sit whole in the browser's pipe and come out in one
     * read (200 frames did, on a fast machine); this one cannot fit */
    snprintf(page, sizeof page,
             "%s/?selftest=1&max_frames=%d&stop_threshold=2&top_k=1&seed=3&voice=alloy", ts.base,
             PLAYGROUND_FRAMES);
    char *report = NULL;
    if (cdp_open(&c, page, deadline) == 0) {
        report = wait_for_report(&c, deadline);
        /* the finished run as a person sees it, at two window sizes */
        if (report) {
            usleep(500000);
            screenshot(&c, "playground-desktop", 1280, 900, false, deadline);
            screenshot(&c, "playground-phone", 390, 844, true, deadline);
            /* the phone layout is one column: the voice card sits below the text card */
            CHECK(cdp_wait_true(&c,
                                "document.getElementById('voice').getBoundingClientRect().top > "
                                "document.getElementById('wave').getBoundingClientRect().bottom",
                                deadline));
        }
    } else {
        test_fail(__FILE__, __LINE__, "cannot open the page over the DevTools protocol");
    }
    cdp_stop(&c);
    test_note("page report: %s", report ? report : "(none)");
    cJSON *j = report ? cJSON_Parse(report) : NULL;
    CHECK_MSG(j && cJSON_IsTrue(cJSON_GetObjectItem(j, "ok")), "the self-test failed: %s",
              report ? report : "no report before the deadline");
    if (j) {
        CHECK_EQ_INT(cJSON_GetObjectItem(j, "voices")->valueint, 14);
        CHECK_EQ_INT(cJSON_GetObjectItem(j, "samples")->valuedouble, PLAYGROUND_FRAMES * 1024);
        CHECK(cJSON_GetObjectItem(j, "chunks")->valueint >= 2); /* it streamed */
        const char *player = cJSON_GetStringValue(cJSON_GetObjectItem(j, "player"));
        CHECK_MSG(player && strcmp(player, "ok") == 0, "Web Audio: %s", player);
        CHECK(cJSON_GetObjectItem(j, "scheduled")->valueint >= 2);
        /* the waveform was drawn, the run recorded, the snippet written */
        CHECK(cJSON_GetObjectItem(j, "waveform_columns")->valueint >= 100);
        CHECK_EQ_INT(cJSON_GetObjectItem(j, "runs")->valueint, 1);
        CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, "snippet")));
        CHECK(cJSON_GetObjectItem(j, "first_chunk_ms")->valuedouble >= 0);
        CHECK(cJSON_GetObjectItem(j, "rtf")->valuedouble > 0);
        const char *server = cJSON_GetStringValue(cJSON_GetObjectItem(j, "server"));
        CHECK_MSG(server && strstr(server, "ready"), "server status: %s", server);
    }
    cJSON_Delete(j);
    free(report);
    test_server_stop(&ts);
}

/* Cloning: the page's clip (made up in the page, as an upload would be) goes
 * out as ref_audio and the run succeeds; the snippet shows it too. */
TEST(server_playground_clones_from_a_clip) {
    if (access(CHROMIUM, X_OK) != 0) {
        test_note("skipped: %s is not installed", CHROMIUM);
        return;
    }
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    cdp c;
    REQUIRE(cdp_start(&c, test_tmp("chromium-profile")) == 0);
    double deadline = gp_now_s() + 90;
    char page[256];
    snprintf(page, sizeof page,
             "%s/?selftest=1&clip=1&max_frames=20&stop_threshold=2&top_k=1&seed=3", ts.base);
    char *report = NULL;
    if (cdp_open(&c, page, deadline) == 0) report = wait_for_report(&c, deadline);
    cdp_stop(&c);
    test_note("page report: %s", report ? report : "(none)");
    cJSON *j = report ? cJSON_Parse(report) : NULL;
    CHECK_MSG(j && cJSON_IsTrue(cJSON_GetObjectItem(j, "ok")), "the cloning run failed: %s",
              report ? report : "no report");
    if (j) {
        const char *clip = cJSON_GetStringValue(cJSON_GetObjectItem(j, "clip"));
        CHECK(clip && strcmp(clip, "selftest.wav") == 0);
        CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, "snippet_ref_audio")));
        CHECK_EQ_INT(cJSON_GetObjectItem(j, "samples")->valuedouble, 20 * 1024);
    }
    cJSON_Delete(j);
    free(report);
    test_server_stop(&ts);
}

/* With --api-key the page asks for the key when the server says 401 (it
 * showed "voices: HTTP 401"), uses it, and after a reload shows the saved
 * key and needs no prompt; Ctrl+Enter then speaks. */
TEST(server_playground_asks_for_the_api_key) {
    if (access(CHROMIUM, X_OK) != 0) {
        test_note("skipped: %s is not installed", CHROMIUM);
        return;
    }
    test_server_opts o = {.api_key = "sesame-1234"};
    test_server ts;
    REQUIRE(test_server_start(&ts, &o) == 0);
    cdp c;
    REQUIRE(cdp_start(&c, test_tmp("chromium-profile")) == 0);
    double deadline = gp_now_s() + 60;
    char page[256];
    snprintf(page, sizeof page, "%s/", ts.base);
    REQUIRE(cdp_open(&c, page, deadline) == 0);
    CHECK_MSG(cdp_wait_true(&c, "document.getElementById('keydialog').open", deadline),
              "no API-key prompt after the 401");
    free(cdp_eval(&c,
                  "document.getElementById('keydialog-key').value = 'sesame-1234';"
                  "document.getElementById('keydialog-save').click(); 'ok'",
                  deadline));
    CHECK_MSG(cdp_wait_true(&c, "document.getElementById('voice').options.length === 14", deadline),
              "the voices did not load with the key");
    cJSON_Delete(cdp_call(&c, "Page.reload", "{}", true, deadline));
    usleep(500000);
    CHECK_MSG(cdp_wait_true(&c,
                            "document.getElementById('voice').options.length === 14 && "
                            "!document.getElementById('keydialog').open",
                            deadline),
              "after a reload the saved key was not used");
    char *state = cdp_eval(&c, "document.getElementById('key-state').textContent", deadline);
    test_note("key state after reload: %s", state ? state : "(none)");
    CHECK_MSG(state && strstr(state, "1234") && !strstr(state, "sesame"),
              "the saved key is not shown (masked): %s", state ? state : "");
    free(state);
    /* Ctrl+Enter speaks (the tiny model's stop head ends it at once) */
    free(cdp_eval(&c,
                  "document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', ctrlKey: "
                  "true})), 'ok'",
                  deadline));
    CHECK_MSG(cdp_wait_true(&c,
                            "document.querySelectorAll('#runs tr').length === 1 && "
                            "!document.getElementById('download').hidden",
                            deadline),
              "Ctrl+Enter did not run a synthesis with the saved key");
    cdp_stop(&c);
    test_server_stop(&ts);
}
