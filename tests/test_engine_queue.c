/* test_engine_queue.c — the engine with a codec that queues its decodes (a
 * GPU's: the engine goes on while one call is in flight and delivers its
 * audio when a later cycle finds it done). The logic is host code, so it is
 * checked here on a CPU: a test accelerator decodes with the tiny codec's
 * own CPU decoder, but only when collected, and says "not done yet" to the
 * first polls of every queued call. The audio must equal the plain CPU
 * engine's, streams cancelled or freed while their audio is queued must
 * finish cleanly (every KV block back, nothing written after free: the
 * sanitizers watch), and the engine must really have gone on meanwhile. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec/codec.h"
#include "engine/api_internal.h"
#include "engine_fixture.h"
#include "gepard.h"
#include "test.h"

#define DEFERRED_SLOTS 16

/* The accelerator: slots are CPU decoder streams; a queued decode runs at
 * collect, after `defer` polls that found it "running". */
typedef struct deferred_codec {
    const gp_codec *codec;
    gp_codec_stream *slot[DEFERRED_SLOTS];
    bool used[DEFERRED_SLOTS];
    pthread_mutex_t lock;
    bool queued;
    int n, slots[DEFERRED_SLOTS], polls_left, defer;
    size_t frames;
    float *pcm[DEFERRED_SLOTS];
    float *latent; /* [n][frames][C], copied at submit */
    /* what happened */
    int submits, not_ready, collected, late_samples_dropped;
    int fail_collect_after; /* > 0: the collect of that many-th queued call fails */
} deferred_codec;

static void decode_now(deferred_codec *d, int n, const int *slots, size_t frames,
                       const float *latent, float *const *pcm) {
    const size_t C = (size_t)d->codec->fsq.channels;
    const size_t spf = (size_t)d->codec->cfg.samples_per_frame;
    float *chunk = malloc(C * GP_CODEC_STEP_FRAMES * sizeof(float));
    float *scratch_pcm = malloc(spf * GP_CODEC_STEP_FRAMES * sizeof(float));
    for (int i = 0; i < n; i++) {
        for (size_t f = 0; f < frames; f += GP_CODEC_STEP_FRAMES) {
            size_t m = frames - f < GP_CODEC_STEP_FRAMES ? frames - f : GP_CODEC_STEP_FRAMES;
            for (size_t t = 0; t < m; t++) /* frame-major -> channel-major */
                for (size_t ch = 0; ch < C; ch++)
                    chunk[ch * GP_CODEC_STEP_FRAMES + t] =
                        latent[((size_t)i * frames + f + t) * C + ch];
            /* a slot closed while queued still advances; its samples go nowhere */
            float *out = pcm[i] ? pcm[i] + f * spf : scratch_pcm;
            if (!pcm[i]) d->late_samples_dropped++;
            gp_codec_stream_push_latent(d->slot[slots[i]], chunk, GP_CODEC_STEP_FRAMES, m, out);
        }
    }
    free(chunk);
    free(scratch_pcm);
}

static void finish_queued_locked(deferred_codec *d) {
    if (!d->queued) return;
    decode_now(d, d->n, d->slots, d->frames, d->latent, d->pcm);
    free(d->latent);
    d->latent = NULL;
    d->queued = false;
    d->collected++;
}

static int dq_slot_open(void *impl, int *slot, gp_error *err) {
    deferred_codec *d = impl;
    pthread_mutex_lock(&d->lock);
    int s = 0;
    while (s < DEFERRED_SLOTS && d->used[s]) s++;
    int rc = GEPARD_OK;
    if (s == DEFERRED_SLOTS)
        rc = gp_fail(err, GEPARD_ERR_BUSY, "test codec: no free slot");
    else if (!d->slot[s])
        rc = gp_codec_stream_create(&d->codec->dec, &d->slot[s], err);
    else
        gp_codec_stream_reset(d->slot[s]);
    if (!rc) {
        d->used[s] = true;
        *slot = s;
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

static int dq_slot_reset(void *impl, int slot, gp_error *err) {
    (void)err;
    deferred_codec *d = impl;
    pthread_mutex_lock(&d->lock);
    finish_queued_locked(d); /* the GPU keeps order the same way */
    gp_codec_stream_reset(d->slot[slot]);
    pthread_mutex_unlock(&d->lock);
    return GEPARD_OK;
}

static void dq_slot_close(void *impl, int slot) {
    deferred_codec *d = impl;
    pthread_mutex_lock(&d->lock);
    d->used[slot] = false;
    for (int i = 0; d->queued && i < d->n; i++)
        if (d->slots[i] == slot) d->pcm[i] = NULL;
    pthread_mutex_unlock(&d->lock);
}

static int dq_decode(void *impl, int n, const int *slots, size_t frames, const float *latent,
                     float *const *pcm, gp_error *err) {
    (void)err;
    deferred_codec *d = impl;
    pthread_mutex_lock(&d->lock);
    finish_queued_locked(d);
    decode_now(d, n, slots, frames, latent, pcm);
    pthread_mutex_unlock(&d->lock);
    return GEPARD_OK;
}

static int dq_submit(void *impl, int n, const int *slots, size_t frames, const float *latent,
                     float *const *pcm, gp_error *err) {
    deferred_codec *d = impl;
    if (n > DEFERRED_SLOTS) return gp_fail(err, GEPARD_ERR_INTERNAL, "test codec: %d streams", n);
    pthread_mutex_lock(&d->lock);
    finish_queued_locked(d);
    const size_t bytes = (size_t)n * frames * (size_t)d->codec->fsq.channels * sizeof(float);
    d->latent = malloc(bytes);
    memcpy(d->latent, latent, bytes);
    d->n = n;
    d->frames = frames;
    for (int i = 0; i < n; i++) {
        d->slots[i] = slots[i];
        d->pcm[i] = pcm[i];
    }
    d->queued = true;
    d->polls_left = d->defer;
    d->submits++;
    pthread_mutex_unlock(&d->lock);
    return GEPARD_OK;
}

static int dq_collect(void *impl, bool wait, bool *done, gp_error *err) {
    deferred_codec *d = impl;
    pthread_mutex_lock(&d->lock);
    if (d->queued && d->fail_collect_after && d->submits >= d->fail_collect_after) {
        /* as a GPU error: the call is dropped, its samples never come */
        free(d->latent);
        d->latent = NULL;
        d->queued = false;
        pthread_mutex_unlock(&d->lock);
        return gp_fail(err, GEPARD_ERR_INTERNAL, "test codec: the device failed");
    }
    if (d->queued && !wait && d->polls_left > 0) {
        d->polls_left--;
        d->not_ready++;
        *done = false;
    } else {
        finish_queued_locked(d);
        *done = true;
    }
    pthread_mutex_unlock(&d->lock);
    return GEPARD_OK;
}

/* Freed by the codec (gp_codec_set_accel / gp_codec_free); the test keeps
 * its counters in `seen` first. */
static deferred_codec seen;

static void dq_release(void *impl) {
    deferred_codec *d = impl;
    seen = *d;
    seen.queued = d->queued;
    for (int i = 0; i < DEFERRED_SLOTS; i++) gp_codec_stream_free(d->slot[i]);
    free(d->latent);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

/* Hand `codec` the test accelerator (before any stream exists). */
static void install_deferred(gepard_codec *codec, int defer) {
    deferred_codec *d = calloc(1, sizeof *d);
    gp_codec_accel *a = calloc(1, sizeof *a);
    d->codec = codec->codec;
    d->defer = defer;
    pthread_mutex_init(&d->lock, NULL);
    a->impl = d;
    snprintf(a->name, sizeof a->name, "test queue");
    a->slot_open = dq_slot_open;
    a->slot_reset = dq_slot_reset;
    a->slot_close = dq_slot_close;
    a->decode = dq_decode;
    a->submit = dq_submit;
    a->collect = dq_collect;
    a->release = dq_release;
    gp_codec_set_accel(codec->codec, a);
}

static deferred_codec *deferred_of(gepard_codec *codec) { return codec->codec->accel->impl; }

static void with_deferred(gepard_codec *codec, void *defer) {
    install_deferred(codec, *(const int *)defer);
}

/* defer < 0: the plain CPU codec; else the queueing test accelerator. */
static int case_open(engine_fixture *c, int defer) {
    return engine_fixture_open(c, 8, 8, defer >= 0 ? with_deferred : NULL, &defer);
}

/* The engine finishes every stream (freed ones included) and gives every KV
 * block back within two seconds. */
static void check_engine_idle(gepard_engine *engine) {
    gepard_engine_stats es;
    for (int i = 0; i < 400; i++) {
        gepard_engine_get_stats(engine, &es);
        if (es.active_streams == 0 && es.kv_blocks_used == 0) break;
        usleep(5000);
    }
    CHECK_EQ_INT(es.active_streams, 0);
    CHECK_EQ_INT(es.kv_blocks_used, 0);
}

/* Six streams at once (frames 20, 27, ..., 55: more than the engine's light
 * load at first, then fewer as they end), then the first alone. */
#define RUN_STREAMS 6
static int run_streams(engine_fixture *c, capture out[RUN_STREAMS + 1]) {
    memset(out, 0, (RUN_STREAMS + 1) * sizeof *out);
    gepard_stream *streams[RUN_STREAMS];
    for (int i = 0; i < RUN_STREAMS; i++) {
        gepard_synth_params p = engine_test_params(200 + (uint64_t)i, 20 + 7 * i);
        gepard_stream_callbacks cb = {
            .on_audio = cap_audio, .on_frame = cap_frame, .user = &out[i]};
        if (gepard_stream_start(c->engine, engine_test_texts[i % 4], &p, &cb, &streams[i]) !=
            GEPARD_OK)
            return -1;
    }
    int rc = 0;
    for (int i = 0; i < RUN_STREAMS; i++) {
        gepard_synth_result r;
        if (gepard_stream_wait(streams[i], &r) != GEPARD_OK || r.frames != (size_t)(20 + 7 * i))
            rc = -1;
        gepard_stream_free(streams[i]);
    }
    gepard_synth_params p = engine_test_params(200, 20);
    gepard_stream_callbacks cb = {
        .on_audio = cap_audio, .on_frame = cap_frame, .user = &out[RUN_STREAMS]};
    if (gepard_synthesize(c->engine, engine_test_texts[0], &p, &cb, NULL) != GEPARD_OK) rc = -1;
    return rc;
}

TEST(engine_queued_codec_equals_cpu_codec) {
    engine_fixture plain, queued;
    REQUIRE_MSG(case_open(&plain, -1) == 0, "%s", gepard_last_error());
    REQUIRE_MSG(case_open(&queued, 2) == 0, "%s", gepard_last_error());
    capture a[RUN_STREAMS + 1], b[RUN_STREAMS + 1];
    CHECK_MSG(run_streams(&plain, a) == 0, "%s", gepard_last_error());
    CHECK_MSG(run_streams(&queued, b) == 0, "%s", gepard_last_error());
    const deferred_codec *d = deferred_of(queued.codec);
    test_note("queued calls %d, polls that found one running %d", d->submits, d->not_ready);
    /* the engine went on while its audio was queued */
    CHECK(d->submits > 0);
    CHECK(d->not_ready > 0);
    CHECK(!d->queued);
    /* The same decoder fed the same frames in other chunks: the CPU
     * decoder's streaming is exact, so within 1e-6 (measured: 0). */
    for (int i = 0; i <= RUN_STREAMS; i++) {
        CHECK_EQ_INT(b[i].frames, a[i].frames);
        CHECK_EQ_INT(b[i].n, a[i].n);
        double worst = 0;
        for (size_t k = 0; k < a[i].n && k < b[i].n; k++) {
            double e = a[i].samples[k] > b[i].samples[k] ? a[i].samples[k] - b[i].samples[k]
                                                         : b[i].samples[k] - a[i].samples[k];
            if (e > worst) worst = e;
        }
        test_note("stream %d: %zu samples, max difference %.3g", i, a[i].n, worst);
        CHECK_MSG(worst <= 1e-6, "stream %d: queued audio differs by %g", i, worst);
        free(a[i].samples);
        free(b[i].samples);
    }
    gepard_engine_stats st;
    gepard_engine_get_stats(queued.engine, &st);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    engine_fixture_close(&queued);
    /* queued only while the load is light (GEPARD_ENGINE_QUEUE_CODEC=light):
     * the batched calls in between are waited for */
    setenv("GEPARD_ENGINE_QUEUE_CODEC", "light", 1); /* read when an engine is made */
    REQUIRE_MSG(case_open(&queued, 1) == 0, "%s", gepard_last_error());
    unsetenv("GEPARD_ENGINE_QUEUE_CODEC");
    capture a2[RUN_STREAMS + 1], b2[RUN_STREAMS + 1];
    CHECK_MSG(run_streams(&plain, a2) == 0, "%s", gepard_last_error());
    CHECK_MSG(run_streams(&queued, b2) == 0, "%s", gepard_last_error());
    for (int i = 0; i <= RUN_STREAMS; i++) {
        CHECK_MSG(a2[i].n == b2[i].n && a2[i].n > 0 &&
                      memcmp(a2[i].samples, b2[i].samples, a2[i].n * sizeof(float)) == 0,
                  "stream %d: light-load queue differs", i);
        free(a2[i].samples);
        free(b2[i].samples);
    }
    engine_fixture_close(&plain);
    engine_fixture_close(&queued);
}

TEST(engine_queued_codec_cancel_and_free_while_queued) {
    engine_fixture c;
    REQUIRE_MSG(case_open(&c, 3) == 0, "%s", gepard_last_error());
    const int spf = gepard_codec_samples_per_frame(c.codec);
    /* cancelled by its audio callback after some audio */
    capture x;
    memset(&x, 0, sizeof x);
    x.cancel_after_samples = 3 * spf;
    gepard_synth_params p = engine_test_params(7, 400);
    gepard_stream_callbacks cb = {.on_audio = cap_audio, .on_frame = cap_frame, .user = &x};
    gepard_synth_result r;
    CHECK_EQ_INT(gepard_synthesize(c.engine, engine_test_texts[1], &p, &cb, &r),
                 GEPARD_ERR_CANCELLED);
    CHECK(x.n >= (size_t)(3 * spf));
    free(x.samples);
    /* cancelled from another thread, and freed while running, beside a
     * stream that completes */
    capture y, z, w;
    memset(&y, 0, sizeof y);
    memset(&z, 0, sizeof z);
    memset(&w, 0, sizeof w);
    gepard_stream *sy, *sz, *sw;
    p.max_frames = 3000;
    gepard_stream_callbacks cby = {.on_audio = cap_audio, .on_frame = cap_frame, .user = &y};
    gepard_stream_callbacks cbz = {.on_audio = cap_audio, .on_frame = cap_frame, .user = &z};
    REQUIRE(gepard_stream_start(c.engine, engine_test_texts[0], &p, &cby, &sy) == GEPARD_OK);
    REQUIRE(gepard_stream_start(c.engine, engine_test_texts[3], &p, &cbz, &sz) == GEPARD_OK);
    gepard_synth_params pw = engine_test_params(9, 30);
    gepard_stream_callbacks cbw = {.on_audio = cap_audio, .on_frame = cap_frame, .user = &w};
    REQUIRE(gepard_stream_start(c.engine, engine_test_texts[2], &pw, &cbw, &sw) == GEPARD_OK);
    while (y.frames < 40 || z.frames < 40) usleep(1000);
    gepard_stream_cancel(sy);
    gepard_stream_free(sz); /* the engine finishes and frees it */
    CHECK_EQ_INT(gepard_stream_wait(sy, &r), GEPARD_ERR_CANCELLED);
    gepard_stream_free(sy);
    CHECK_EQ_INT(gepard_stream_wait(sw, &r), GEPARD_OK);
    CHECK_EQ_INT(r.frames, 30);
    CHECK_EQ_INT(w.n, (size_t)30 * (size_t)spf); /* every frame's audio, none lost */
    gepard_stream_free(sw);
    check_engine_idle(c.engine);
    const deferred_codec *d = deferred_of(c.codec);
    test_note("queued calls %d, polls that found one running %d", d->submits, d->not_ready);
    CHECK(d->not_ready > 0);
    free(y.samples);
    free(z.samples);
    free(w.samples);
    engine_fixture_close(&c);
    CHECK(!seen.queued); /* nothing left queued when the codec went */
}

TEST(engine_queued_codec_failure_stops_its_streams) {
    engine_fixture c;
    REQUIRE_MSG(case_open(&c, 1) == 0, "%s", gepard_last_error());
    deferred_of(c.codec)->fail_collect_after = 3;
    /* six streams (the loaded regime waits for each call), then one alone */
    capture x[RUN_STREAMS];
    memset(x, 0, sizeof x);
    gepard_stream *s[RUN_STREAMS];
    for (int i = 0; i < RUN_STREAMS; i++) {
        gepard_synth_params p = engine_test_params(300 + (uint64_t)i, 60);
        gepard_stream_callbacks cb = {.on_audio = cap_audio, .on_frame = cap_frame, .user = &x[i]};
        REQUIRE(gepard_stream_start(c.engine, engine_test_texts[i % 4], &p, &cb, &s[i]) ==
                GEPARD_OK);
    }
    int failed = 0;
    for (int i = 0; i < RUN_STREAMS; i++) {
        gepard_synth_result r;
        const gepard_status st = gepard_stream_wait(s[i], &r);
        if (st != GEPARD_OK) {
            failed++;
            CHECK_EQ_INT(st, GEPARD_ERR_INTERNAL);
            CHECK_MSG(strstr(gepard_last_error(), "the device failed") != NULL, "message: %s",
                      gepard_last_error());
        }
        gepard_stream_free(s[i]);
        free(x[i].samples);
    }
    test_note("%d of %d streams stopped by the failed codec call", failed, RUN_STREAMS);
    CHECK(failed > 0);
    check_engine_idle(c.engine);
    /* the engine goes on: a new request after the failure completes */
    deferred_of(c.codec)->fail_collect_after = 0;
    capture y;
    memset(&y, 0, sizeof y);
    gepard_synth_params p = engine_test_params(9, 25);
    gepard_stream_callbacks cb = {.on_audio = cap_audio, .on_frame = cap_frame, .user = &y};
    CHECK_EQ_INT(gepard_synthesize(c.engine, engine_test_texts[0], &p, &cb, NULL), GEPARD_OK);
    CHECK_EQ_INT(y.n, (size_t)25 * (size_t)gepard_codec_samples_per_frame(c.codec));
    free(y.samples);
    engine_fixture_close(&c);
}

/* By default (GP_ENGINE_FIRST_AUDIO_FRAMES = 3) under load (six streams:
 * chunks of one frame) a stream's first audio goes out holding three frames;
 * a stream of two frames gets both when it ends; a lone stream (light load)
 * still gets its first frame at once; and the audio is that of an engine
 * made with GEPARD_ENGINE_FIRST_AUDIO_FRAMES=1 (no hold), sample for sample. */
TEST(engine_first_audio_held_under_load) {
    engine_fixture plain, held;
    setenv("GEPARD_ENGINE_FIRST_AUDIO_FRAMES", "1", 1); /* read when an engine is made */
    const int opened_plain = case_open(&plain, -1);
    unsetenv("GEPARD_ENGINE_FIRST_AUDIO_FRAMES");
    REQUIRE_MSG(opened_plain == 0, "%s", gepard_last_error());
    const int opened = case_open(&held, 1);
    REQUIRE_MSG(opened == 0, "%s", gepard_last_error());
    const int spf = gepard_codec_samples_per_frame(held.codec);
    enum { N = 7 };
    capture a[N], b[N];
    for (int pass = 0; pass < 2; pass++) {
        engine_fixture *c = pass ? &held : &plain;
        capture *out = pass ? b : a;
        memset(out, 0, N * sizeof *out);
        gepard_stream *streams[N];
        for (int i = 0; i < N; i++) {
            const int frames = i == N - 1 ? 2 : 20 + 7 * i;
            gepard_synth_params p = engine_test_params(300 + (uint64_t)i, frames);
            gepard_stream_callbacks cb = {
                .on_audio = cap_audio, .on_frame = cap_frame, .user = &out[i]};
            REQUIRE_MSG(gepard_stream_start(c->engine, engine_test_texts[i % 4], &p, &cb,
                                            &streams[i]) == GEPARD_OK,
                        "%s", gepard_last_error());
        }
        for (int i = 0; i < N; i++) {
            gepard_synth_result r;
            CHECK(gepard_stream_wait(streams[i], &r) == GEPARD_OK);
            gepard_stream_free(streams[i]);
        }
    }
    for (int i = 0; i < N; i++) {
        CHECK_MSG(a[i].n == b[i].n && a[i].n == (size_t)a[i].frames * (size_t)spf &&
                      memcmp(a[i].samples, b[i].samples, a[i].n * sizeof(float)) == 0,
                  "stream %d: audio with the first frames held differs (%zu against %zu samples)",
                  i, b[i].n, a[i].n);
        test_note("stream %d: %d frames, first callback %zu samples (%zu without the hold)", i,
                  b[i].frames, b[i].first_call, a[i].first_call);
    }
    /* the later streams started under load: their first audio holds 3 frames
     * or more; the two-frame stream's came in one piece at its end */
    for (int i = N - 3; i < N - 1; i++)
        CHECK_MSG(b[i].first_call >= (size_t)(3 * spf), "stream %d: first audio %zu samples", i,
                  b[i].first_call);
    CHECK_MSG(b[N - 1].first_call == (size_t)(2 * spf), "two-frame stream: first audio %zu",
              b[N - 1].first_call);
    /* a lone stream: a light load, its first frame at once */
    capture lone;
    memset(&lone, 0, sizeof lone);
    gepard_synth_params p = engine_test_params(400, 12);
    gepard_stream_callbacks cb = {.on_audio = cap_audio, .on_frame = cap_frame, .user = &lone};
    CHECK(gepard_synthesize(held.engine, engine_test_texts[0], &p, &cb, NULL) == GEPARD_OK);
    CHECK_MSG(lone.first_call == (size_t)spf, "lone stream: first audio %zu samples, not one frame",
              lone.first_call);
    for (int i = 0; i < N; i++) {
        free(a[i].samples);
        free(b[i].samples);
    }
    free(lone.samples);
    check_engine_idle(held.engine);
    engine_fixture_close(&plain);
    engine_fixture_close(&held);
}
