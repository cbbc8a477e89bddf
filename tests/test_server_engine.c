/* test_server_engine.c — the engine hooks the server relies on: cancelling a
 * queued stream takes it out of the queue at once (a client that leaves
 * while waiting must not hold a queue place until a slot frees), the frame
 * counter in the stats, and gepard_stream_free waiting for the running step
 * so no callback touches the caller's data after it returns. */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "server_harness.h"
#include "test.h"

typedef struct counter {
    atomic_int calls;
} counter;

static int count_audio(const float *samples, size_t n, void *user) {
    (void)samples;
    (void)n;
    atomic_fetch_add(&((counter *)user)->calls, 1);
    return 0;
}

static gepard_synth_params long_params(void) {
    gepard_synth_params p = gepard_synth_default_params();
    p.stop_threshold = 2;
    p.max_frames = 3000;
    p.random_seed = 0;
    p.seed = 1;
    return p;
}

static int load(gepard_model **m, gepard_codec **c, gepard_engine **e, int max_streams) {
    gepard_engine_params ep = gepard_engine_default_params();
    ep.threads = 1;
    ep.max_streams = max_streams;
    if (gepard_model_load(TS_MODEL, NULL, m) || gepard_codec_load(TS_CODEC, c) ||
        gepard_engine_create(*m, *c, &ep, e)) {
        test_fail(__FILE__, __LINE__, "%s", gepard_last_error());
        return -1;
    }
    return 0;
}

TEST(engine_cancel_takes_a_queued_stream_out_at_once) {
    gepard_model *m = NULL;
    gepard_codec *c = NULL;
    gepard_engine *e = NULL;
    REQUIRE(load(&m, &c, &e, 1) == 0);
    gepard_synth_params p = long_params();
    counter ca = {0}, cb = {0};
    gepard_stream_callbacks cba = {.on_audio = count_audio, .user = &ca};
    gepard_stream_callbacks cbb = {.on_audio = count_audio, .user = &cb};
    gepard_stream *a = NULL, *b = NULL;
    REQUIRE(gepard_stream_start(e, "Hello world!", &p, &cba, &a) == GEPARD_OK);
    REQUIRE(gepard_stream_start(e, "Hello world!", &p, &cbb, &b) == GEPARD_OK);
    gepard_engine_stats st;
    gepard_engine_get_stats(e, &st);
    CHECK_EQ_INT(st.queued_streams + st.active_streams, 2);
    while (atomic_load(&ca.calls) == 0) usleep(1000); /* a holds the only slot */
    gepard_stream_cancel(b);
    CHECK(gepard_stream_done(b)); /* at once, while a still runs */
    gepard_engine_get_stats(e, &st);
    CHECK_EQ_INT(st.queued_streams, 0);
    CHECK_EQ_INT(st.active_streams, 1);
    gepard_synth_result r;
    CHECK_EQ_INT(gepard_stream_wait(b, &r), GEPARD_ERR_CANCELLED);
    CHECK_EQ_INT(atomic_load(&cb.calls), 0);
    gepard_stream_free(b);
    gepard_stream_free(a);
    gepard_engine_free(e);
    gepard_codec_free(c);
    gepard_model_free(m);
}

TEST(engine_stats_count_frames_and_free_waits_for_the_step) {
    gepard_model *m = NULL;
    gepard_codec *c = NULL;
    gepard_engine *e = NULL;
    REQUIRE(load(&m, &c, &e, 4) == 0);
    gepard_synth_params p = long_params();
    p.max_frames = 10;
    REQUIRE(gepard_synthesize(e, "Hello world!", &p, NULL, NULL) == GEPARD_OK);
    gepard_engine_stats st;
    gepard_engine_get_stats(e, &st);
    CHECK_EQ_INT(st.frames, 10);
    CHECK(st.steps >= 10);
    /* free a running stream: no callback may run once it returns */
    p = long_params();
    counter n = {0};
    gepard_stream_callbacks cb = {.on_audio = count_audio, .user = &n};
    gepard_stream *s = NULL;
    REQUIRE(gepard_stream_start(e, "Hello world!", &p, &cb, &s) == GEPARD_OK);
    while (atomic_load(&n.calls) < 3) usleep(1000);
    gepard_stream_free(s);
    int after_free = atomic_load(&n.calls);
    usleep(50000);
    CHECK_EQ_INT(atomic_load(&n.calls), after_free);
    gepard_engine_get_stats(e, &st);
    CHECK_EQ_INT(st.active_streams, 0);
    gepard_engine_free(e);
    gepard_codec_free(c);
    gepard_model_free(m);
}

/* Issue 16, item 1, at the API: streams started faster than the step thread
 * admits them still count against slots + queue (2 + 2 here), so exactly 4
 * of 10 are accepted and 6 fail with GEPARD_ERR_BUSY. */
TEST(engine_start_burst_admits_exactly_slots_plus_queue) {
    gepard_model *m = NULL;
    gepard_codec *c = NULL;
    gepard_engine *e = NULL;
    gepard_engine_params ep = gepard_engine_default_params();
    ep.threads = 1;
    ep.max_streams = 2;
    ep.max_queue = 2;
    REQUIRE(gepard_model_load(TS_MODEL, NULL, &m) == GEPARD_OK &&
            gepard_codec_load(TS_CODEC, &c) == GEPARD_OK &&
            gepard_engine_create(m, c, &ep, &e) == GEPARD_OK);
    gepard_synth_params p = long_params();
    gepard_stream *s[10] = {0};
    int ok = 0, busy = 0;
    for (int i = 0; i < 10; i++) {
        gepard_status st = gepard_stream_start(e, "Hello world!", &p, NULL, &s[i]);
        if (st == GEPARD_OK) ok++;
        if (st == GEPARD_ERR_BUSY) busy++;
    }
    test_note("2 slots + 2 queue, 10 started at once: %d accepted, %d busy", ok, busy);
    CHECK_EQ_INT(ok, 4);
    CHECK_EQ_INT(busy, 6);
    for (int i = 0; i < 10; i++) gepard_stream_free(s[i]); /* cancels */
    gepard_engine_free(e);
    gepard_codec_free(c);
    gepard_model_free(m);
}
