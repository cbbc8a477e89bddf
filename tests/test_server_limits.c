/* test_server_limits.c — the server's limits under bursts and abuse:
 * admission counts every stream the engine holds (a burst of requests that
 * arrive together gets exactly slots + queue accepted, the rest 429 with
 * Retry-After). All traffic is on loopback, with raw sockets so the requests
 * of a burst leave back to back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/timing.h"
#include "server_harness.h"
#include "test.h"

/* A request long enough (3000 frames, no early stop) that no accepted
 * stream can finish while the burst is still arriving. */
#define LONG_SPEECH                                                                                \
    "{\"input\":\"Hello world!\",\"response_format\":\"pcm\",\"max_frames\":3000,"                 \
    "\"stop_threshold\":2,\"seed\":1}"

static int speech_request(char *buf, size_t cap, const char *body) {
    return snprintf(buf, cap,
                    "POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                    strlen(body), body);
}

/* Open n connections, then write n speech requests back to back, then read
 * every status. Counts 200s and 429s (the 429s must carry Retry-After). */
static void burst(int port, int n, int *accepted, int *refused, int *other) {
    int *fd = calloc((size_t)n, sizeof *fd);
    char req[1024], head[4096];
    int len = speech_request(req, sizeof req, LONG_SPEECH);
    *accepted = *refused = *other = 0;
    for (int i = 0; i < n; i++) fd[i] = test_tcp_connect(port, 10);
    for (int i = 0; i < n; i++)
        if (fd[i] >= 0 && test_tcp_send(fd[i], req, (size_t)len) != 0) {
            close(fd[i]);
            fd[i] = -1;
        }
    for (int i = 0; i < n; i++) {
        int status = fd[i] >= 0 ? test_tcp_read_head(fd[i], head, sizeof head) : -1;
        if (status == 200) {
            (*accepted)++;
        } else if (status == 429) {
            (*refused)++;
            CHECK_MSG(strstr(head, "Retry-After: ") != NULL, "a 429 without Retry-After: %s", head);
        } else {
            (*other)++;
        }
    }
    for (int i = 0; i < n; i++)
        if (fd[i] >= 0) close(fd[i]); /* the accepted streams are cancelled */
    free(fd);
}

static void wait_idle(test_server *ts) {
    gepard_engine_stats st;
    double until = gp_now_s() + 10;
    do {
        test_server_stats(ts, &st);
        if (st.active_streams == 0 && st.queued_streams == 0) return;
        usleep(10000);
    } while (gp_now_s() < until);
    test_fail(__FILE__, __LINE__, "the engine did not go idle: %d active, %d queued",
              st.active_streams, st.queued_streams);
}

/* Issue 16, item 1: before, the check only refused when the queue was full
 * *and* every slot was admitted, so a burst that arrived before the step
 * thread admitted anything was all queued (10 of 10 accepted). */
TEST(server_burst_gets_exactly_slots_plus_queue) {
    test_server ts;
    test_server_opts o = {.max_streams = 2, .max_queue = 2};
    REQUIRE(test_server_start(&ts, &o) == 0);
    for (int round = 0; round < 2; round++) { /* twice: the limit holds after a burst too */
        int ok, busy, other;
        burst(ts.port, 10, &ok, &busy, &other);
        test_note("round %d, 2 slots + 2 queue, 10 at once: %d accepted, %d refused, %d other",
                  round, ok, busy, other);
        CHECK_EQ_INT(ok, 4); /* exactly slots + queue */
        CHECK_EQ_INT(busy, 6);
        CHECK_EQ_INT(other, 0);
        wait_idle(&ts);
    }
    gepard_engine_stats st;
    test_server_stats(&ts, &st);
    CHECK_EQ_INT(st.streams_started, 8);
    test_server_stop(&ts);
}

/* The defaults (16 slots, 64 queue places) and 120 requests at once. */
TEST(server_burst_of_120_with_the_default_limits) {
    test_server ts;
    REQUIRE(test_server_start(&ts, NULL) == 0);
    int ok, busy, other;
    burst(ts.port, 120, &ok, &busy, &other);
    test_note("16 slots + 64 queue, 120 at once: %d accepted, %d refused, %d other", ok, busy,
              other);
    CHECK_EQ_INT(ok, 80);
    CHECK_EQ_INT(busy, 40);
    CHECK_EQ_INT(other, 0);
    wait_idle(&ts);
    test_server_stop(&ts);
}
