/* test_engine.c — the public engine API on the fixtures: batched streams
 * give the same audio as single ones, first audio arrives after the first
 * frame, cancellation (by callback, by another thread, by freeing) returns
 * every KV block, a full queue answers BUSY, and long text is segmented
 * (a later sentence's prefill marked urgent). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine_internal.h"
#include "engine_fixture.h"
#include "gepard.h"
#include "test.h"

TEST(engine_batched_streams_equal_single_runs) {
    engine_fixture f;
    REQUIRE_MSG(engine_fixture_open(&f, 8, 8, NULL, NULL) == 0, "%s", gepard_last_error());
    capture single[4], batched[4];
    memset(single, 0, sizeof single);
    memset(batched, 0, sizeof batched);
    for (int i = 0; i < 4; i++) {
        gepard_synth_params p = engine_test_params(100 + (uint64_t)i, 12 + 3 * i);
        gepard_stream_callbacks cb = {
            .on_audio = cap_audio, .on_frame = cap_frame, .user = &single[i]};
        REQUIRE_MSG(gepard_synthesize(f.engine, engine_test_texts[i], &p, &cb, NULL) == GEPARD_OK,
                    "%s", gepard_last_error());
    }
    gepard_stream *streams[4];
    for (int i = 0; i < 4; i++) {
        gepard_synth_params p = engine_test_params(100 + (uint64_t)i, 12 + 3 * i);
        gepard_stream_callbacks cb = {
            .on_audio = cap_audio, .on_frame = cap_frame, .user = &batched[i]};
        REQUIRE(gepard_stream_start(f.engine, engine_test_texts[i], &p, &cb, &streams[i]) ==
                GEPARD_OK);
    }
    for (int i = 0; i < 4; i++) {
        gepard_synth_result r;
        CHECK(gepard_stream_wait(streams[i], &r) == GEPARD_OK);
        CHECK_EQ_INT(r.frames, 12 + 3 * i);
        gepard_stream_free(streams[i]);
        CHECK_EQ_INT(batched[i].n, single[i].n);
        CHECK_MSG(single[i].n == batched[i].n &&
                      memcmp(single[i].samples, batched[i].samples, single[i].n * 4) == 0,
                  "stream %d differs when batched", i);
        CHECK_EQ_INT(single[i].frames_at_first_audio, 1);
        free(single[i].samples);
        free(batched[i].samples);
    }
    gepard_engine_stats st;
    gepard_engine_get_stats(f.engine, &st);
    test_note("steps %llu, max batch %d, mean batch %.2f", (unsigned long long)st.steps,
              st.max_batch, st.mean_batch);
    CHECK(st.max_batch > 1);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    engine_fixture_close(&f);
}

TEST(engine_cancellation_returns_kv_blocks) {
    engine_fixture f;
    REQUIRE_MSG(engine_fixture_open(&f, 4, 4, NULL, NULL) == 0, "%s", gepard_last_error());
    capture c;
    memset(&c, 0, sizeof c);
    c.cancel_after_frames = 3;
    gepard_synth_params p = engine_test_params(1, 500);
    gepard_stream_callbacks cb = {.on_audio = cap_audio, .on_frame = cap_frame, .user = &c};
    gepard_synth_result r;
    gepard_status st = gepard_synthesize(f.engine, "Hello world!", &p, &cb, &r);
    CHECK_EQ_INT(st, GEPARD_ERR_CANCELLED);
    CHECK(strstr(gepard_last_error(), "cancelled") != NULL);
    CHECK_EQ_INT(c.frames, 3);
    free(c.samples);
    /* cancel from another thread, and free a running stream */
    memset(&c, 0, sizeof c);
    gepard_stream *s;
    p.max_frames = 3000;
    p.repetition_penalty = 1.2f; /* make each step a little more work */
    REQUIRE(gepard_stream_start(f.engine, "Hello world!", &p, &cb, &s) == GEPARD_OK);
    while (c.frames < 2) usleep(1000);
    gepard_stream_cancel(s);
    CHECK_EQ_INT(gepard_stream_wait(s, &r), GEPARD_ERR_CANCELLED);
    gepard_stream_free(s);
    free(c.samples);
    capture d;
    memset(&d, 0, sizeof d);
    gepard_stream_callbacks cb2 = {.on_frame = cap_frame, .user = &d};
    REQUIRE(gepard_stream_start(f.engine, "Hello world!", &p, &cb2, &s) == GEPARD_OK);
    while (d.frames < 2) usleep(1000);
    gepard_stream_free(s); /* the engine finishes and frees it */
    for (int i = 0; i < 200; i++) {
        gepard_engine_stats es;
        gepard_engine_get_stats(f.engine, &es);
        if (es.active_streams == 0 && es.kv_blocks_used == 0) break;
        usleep(5000);
    }
    gepard_engine_stats es;
    gepard_engine_get_stats(f.engine, &es);
    CHECK_EQ_INT(es.active_streams, 0);
    CHECK_EQ_INT(es.kv_blocks_used, 0);
    engine_fixture_close(&f);
}

TEST(engine_full_queue_is_busy) {
    engine_fixture f;
    REQUIRE_MSG(engine_fixture_open(&f, 1, 1, NULL, NULL) == 0, "%s", gepard_last_error());
    gepard_synth_params p = engine_test_params(1, 3000);
    gepard_stream *a, *b, *c = NULL;
    REQUIRE(gepard_stream_start(f.engine, "Hello world!", &p, NULL, &a) == GEPARD_OK);
    /* wait until a runs, so b stays queued */
    for (int i = 0; i < 500; i++) {
        gepard_engine_stats es;
        gepard_engine_get_stats(f.engine, &es);
        if (es.active_streams == 1) break;
        usleep(2000);
    }
    REQUIRE(gepard_stream_start(f.engine, "Hello world!", &p, NULL, &b) == GEPARD_OK);
    gepard_status st = gepard_stream_start(f.engine, "Hello world!", &p, NULL, &c);
    CHECK_EQ_INT(st, GEPARD_ERR_BUSY);
    CHECK(strstr(gepard_last_error(), "busy") || strstr(gepard_last_error(), "slots"));
    CHECK(c == NULL);
    gepard_stream_cancel(a);
    gepard_stream_cancel(b);
    gepard_stream_free(a);
    gepard_stream_free(b);
    engine_fixture_close(&f); /* also cancels anything left */
}

TEST(engine_rejects_bad_requests_early) {
    engine_fixture f;
    REQUIRE_MSG(engine_fixture_open(&f, 2, 2, NULL, NULL) == 0, "%s", gepard_last_error());
    gepard_synth_params p = gepard_synth_default_params();
    gepard_stream *s = NULL;
    CHECK_EQ_INT(gepard_stream_start(f.engine, "   ", &p, NULL, &s), GEPARD_ERR_INVALID_ARGUMENT);
    CHECK(strstr(gepard_last_error(), "empty"));
    CHECK_EQ_INT(gepard_stream_start(f.engine, "ok \xC3", &p, NULL, &s),
                 GEPARD_ERR_INVALID_ARGUMENT);
    CHECK(strstr(gepard_last_error(), "UTF-8"));
    p.max_text_bytes = 8;
    CHECK_EQ_INT(gepard_stream_start(f.engine, "a long text here", &p, NULL, &s),
                 GEPARD_ERR_INVALID_ARGUMENT);
    CHECK(strstr(gepard_last_error(), "limit"));
    p = gepard_synth_default_params();
    p.top_k = -1;
    CHECK_EQ_INT(gepard_stream_start(f.engine, "hello", &p, NULL, &s), GEPARD_ERR_INVALID_ARGUMENT);
    CHECK(s == NULL);
    p = gepard_synth_default_params();
    p.max_frames = 900000; /* more than the KV cache can ever hold */
    CHECK_EQ_INT(gepard_stream_start(f.engine, "hello", &p, NULL, &s), GEPARD_ERR_INVALID_ARGUMENT);
    CHECK(strstr(gepard_last_error(), "KV cache"));
    engine_fixture_close(&f);
}

typedef struct thread_job {
    gepard_engine *engine;
    int index;
    capture cap;
    gepard_status status;
} thread_job;

static void *synthesize_thread(void *arg) {
    thread_job *j = arg;
    gepard_synth_params p = engine_test_params(7 + (uint64_t)j->index, 10);
    gepard_stream_callbacks cb = {.on_audio = cap_audio, .on_frame = cap_frame, .user = &j->cap};
    j->status = gepard_synthesize(j->engine, engine_test_texts[j->index % 4], &p, &cb, NULL);
    return NULL;
}

TEST(engine_many_threads_at_once) {
    engine_fixture f;
    REQUIRE_MSG(engine_fixture_open(&f, 4, 32, NULL, NULL) == 0, "%s", gepard_last_error());
    enum { N = 12 };
    thread_job jobs[N];
    pthread_t threads[N];
    for (int i = 0; i < N; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].engine = f.engine;
        jobs[i].index = i;
        pthread_create(&threads[i], NULL, synthesize_thread, &jobs[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(threads[i], NULL);
        CHECK_EQ_INT(jobs[i].status, GEPARD_OK);
        CHECK_EQ_INT(jobs[i].cap.n, 10 * 1024);
        free(jobs[i].cap.samples);
    }
    gepard_engine_stats st;
    gepard_engine_get_stats(f.engine, &st);
    CHECK_EQ_INT(st.streams_finished, N);
    CHECK(st.max_batch > 1 && st.max_batch <= 4);
    engine_fixture_close(&f);
}

/* gepard_engine_warm_up runs waves of 1, 2, 3, 4, 6 streams (max_streams 6)
 * through the engine, leaves nothing held, and the counters start again
 * from zero — exactly, not less the last cycle's times — while the cycle
 * the admission measured stays. A stream after it counts alone. */
TEST(engine_warm_up_runs_batches_and_restarts_counters) {
    engine_fixture f;
    REQUIRE_MSG(engine_fixture_open(&f, 6, 0, NULL, NULL) == 0, "%s", gepard_last_error());
    double seconds = -1;
    REQUIRE_MSG(gepard_engine_warm_up(f.engine, 0, 4, &seconds) == GEPARD_OK, "%s",
                gepard_last_error());
    test_note("warm-up %.3f s", seconds);
    CHECK(seconds > 0);
    gepard_engine_stats st;
    gepard_engine_get_stats(f.engine, &st);
    CHECK_EQ_INT(st.steps, 0);
    CHECK_EQ_INT(st.frames, 0);
    CHECK_EQ_INT(st.streams_started, 0);
    CHECK_EQ_INT(st.streams_finished, 0);
    CHECK_EQ_INT(st.max_batch, 0);
    CHECK_MSG(st.step_seconds == 0 && st.deliver_seconds == 0,
              "the last warm-up cycle's times leaked in: step %g s, deliver %g s", st.step_seconds,
              st.deliver_seconds);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    CHECK_EQ_INT(st.active_streams, 0);
    CHECK_MSG(st.cycle_ms > 0, "the admission has no measured cycle after the warm-up");
    gepard_synth_params p = engine_test_params(7, 5);
    capture c;
    memset(&c, 0, sizeof c);
    gepard_stream_callbacks cb = {.on_audio = cap_audio, .on_frame = cap_frame, .user = &c};
    REQUIRE(gepard_synthesize(f.engine, engine_test_texts[0], &p, &cb, NULL) == GEPARD_OK);
    gepard_engine_get_stats(f.engine, &st);
    CHECK_EQ_INT(st.frames, 5);
    CHECK_EQ_INT(st.streams_started, 1);
    CHECK_EQ_INT(st.max_batch, 1);
    CHECK(c.n > 0);
    free(c.samples);
    CHECK(gepard_engine_warm_up(NULL, 0, 0, NULL) == GEPARD_ERR_INVALID_ARGUMENT);
    engine_fixture_close(&f);
}

/* Which sentence each frame came from, and whether its generation stream
 * was marked urgent for gathered prefills (read on the step thread, where
 * the frame callback runs and the stream's state is stable). */
typedef struct urgency_probe {
    gepard_stream *_Atomic stream;
    int frames[2], urgent[2];
} urgency_probe;

static int probe_frame(const int32_t *codes, int channels, void *user) {
    (void)codes;
    (void)channels;
    urgency_probe *u = user;
    gepard_stream *s = atomic_load(&u->stream);
    if (!s || !s->gen) return 0;
    int seg = s->result.segments > 0 ? 1 : 0;
    u->frames[seg]++;
    u->urgent[seg] += s->gen->prefill_urgent;
    return 0;
}

/* A later sentence of a split text is marked urgent (its listener is
 * playing the earlier ones), the first one is not: gathered prefills
 * (GEPARD_GPU_PREFILL_EVERY) hold only new arrivals. */
TEST(engine_later_sentences_prefill_urgently) {
    engine_fixture f;
    REQUIRE_MSG(engine_fixture_open(&f, 2, 2, NULL, NULL) == 0, "%s", gepard_last_error());
    urgency_probe u;
    memset(&u, 0, sizeof u);
    gepard_synth_params p = engine_test_params(7, 30);
    p.split_text = 1;
    gepard_stream_callbacks cb = {.on_frame = probe_frame, .user = &u};
    gepard_stream *s;
    /* a first sentence past the segmenter's 200-byte packing target */
    const char *text =
        "This is the first sentence, and it goes on for quite a while, on and on, so that the "
        "segmenter reaches its packing target of two hundred bytes before the sentence ends and "
        "cannot put the next one beside it. And here comes the second sentence.";
    REQUIRE(gepard_stream_start(f.engine, text, &p, &cb, &s) == GEPARD_OK);
    atomic_store(&u.stream, s);
    gepard_synth_result res;
    REQUIRE(gepard_stream_wait(s, &res) == GEPARD_OK);
    test_note("segments %d; frames seen %d / %d, urgent %d / %d", res.segments, u.frames[0],
              u.frames[1], u.urgent[0], u.urgent[1]);
    CHECK_EQ_INT(res.segments, 2);
    CHECK(u.frames[0] > 0 && u.frames[1] > 0);
    CHECK_EQ_INT(u.urgent[0], 0);
    CHECK_EQ_INT(u.urgent[1], u.frames[1]);
    gepard_stream_free(s);
    engine_fixture_close(&f);
}
