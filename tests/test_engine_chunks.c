/* test_engine_chunks.c — how many of a stream's frames the engine decodes in
 * one codec call (gp_stream_frames_to_decode, gp_engine_chunk_frames): the
 * first frame at once, short chunks while the listener holds little audio,
 * whole chunks when it is ahead, everything at the end; with a GPU codec
 * chunks of 16 only while few streams are active. The GPU policy is plain
 * host logic, so it is checked here on a CPU with the tiny codec (its
 * sample rate and frame length are all the policy reads). */
#include <string.h>

#include "base/timing.h"
#include "engine/engine_internal.h"
#include "gepard.h"
#include "test.h"

typedef struct chunk_case {
    gepard_engine engine;
    gepard_stream stream;
    gp_gen_stream gen;
    double frame_s; /* seconds of audio per frame */
    int spf;
} chunk_case;

/* A stream of the engine with `delivered` frames decoded of `sampled`, whose
 * listener holds `ahead_frames` frames of audio not yet played (negative:
 * it ran dry that long ago). */
static void chunk_set(chunk_case *c, int sampled, int delivered, double ahead_frames) {
    c->gen.n_frames = sampled;
    c->gen.phase = GP_GEN_DECODE;
    c->stream.frames_delivered = delivered;
    c->stream.result.samples = (size_t)delivered * (size_t)c->spf;
    /* played = delivered - ahead, since the first sample */
    c->stream.first_audio_time =
        delivered ? gp_now_s() - (delivered - ahead_frames) * c->frame_s : 0.0;
}

/* The case around the tiny codec (false when it does not load). */
static bool chunk_open(chunk_case *c, bool gpu) {
    memset(c, 0, sizeof *c);
    gepard_codec *codec;
    if (gepard_codec_load(test_fixture("codec-tiny/nano-tiny.nemo"), &codec) != GEPARD_OK)
        return false;
    c->engine.codec = codec;
    c->engine.gpu_codec = gpu;
    c->engine.light_chunk_frames = GP_ENGINE_GPU_CHUNK_FRAMES;
    c->engine.max_chunk = gpu ? GP_ENGINE_GPU_MAX_CHUNK : GP_ENGINE_MAX_CHUNK;
    c->engine.wait_headroom = gpu ? GP_ENGINE_GPU_HEADROOM : GP_ENGINE_PAIR_HEADROOM;
    c->engine.chunk_frames = gp_engine_chunk_frames(&c->engine, 1);
    c->stream.engine = &c->engine;
    c->stream.gen = &c->gen;
    c->spf = gepard_codec_samples_per_frame(codec);
    c->frame_s = (double)c->spf / gepard_codec_sample_rate(codec);
    return true;
}

static void chunk_close(chunk_case *c) { gepard_codec_free((gepard_codec *)c->engine.codec); }

/* One situation: frames sampled and delivered, audio in hand, and how many
 * frames the stream should decode now. */
typedef struct chunk_expect {
    const char *what;
    int sampled, delivered;
    double ahead_frames;
    int want;
} chunk_expect;

static void chunk_check(chunk_case *c, const chunk_expect *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const chunk_expect *x = &cases[i];
        chunk_set(c, x->sampled, x->delivered, x->ahead_frames);
        const int got = gp_stream_frames_to_decode(&c->stream);
        CHECK_MSG(got == x->want, "%s: %d frames now, want %d", x->what, got, x->want);
    }
}

TEST(engine_chunks_gpu_codec_few_streams) {
    chunk_case c;
    REQUIRE_MSG(chunk_open(&c, true), "%s", gepard_last_error());
    CHECK_EQ_INT(c.engine.chunk_frames, 16);
    const chunk_expect cases[] = {
        {"the first frame", 1, 0, 0.0, 1},
        {"1 frame in hand: the pending 2 at once", 3, 1, 1.0, 2},
        {"4.5 frames in hand (< 5): the pending 3 at once", 8, 5, 4.5, 3},
        {"8 frames ahead, 15 pending: wait for 16", 25, 10, 8.0, 0},
        {"8 frames ahead, 16 pending", 26, 10, 8.0, 16},
        {"20 pending: at most GP_ENGINE_GPU_MAX_CHUNK", 30, 10, 8.0, GP_ENGINE_GPU_MAX_CHUNK},
        {"ran dry 3 frames ago, 2 pending: wait for 16", 12, 10, -3.0, 0},
        {"nothing pending", 10, 10, 8.0, 0},
    };
    chunk_check(&c, cases, sizeof cases / sizeof cases[0]);
    /* the segment's last frames go whatever their number */
    c.gen.phase = GP_GEN_DONE;
    c.gen.n_frames = 12;
    CHECK_EQ_INT(gp_stream_frames_to_decode(&c.stream), 2);
    chunk_close(&c);
}

TEST(engine_chunks_gpu_codec_under_load_take_every_frame) {
    chunk_case c;
    REQUIRE_MSG(chunk_open(&c, true), "%s", gepard_last_error());
    CHECK_EQ_INT(gp_engine_chunk_frames(&c.engine, GP_ENGINE_GPU_CHUNK_STREAMS), 16);
    c.engine.chunk_frames = gp_engine_chunk_frames(&c.engine, GP_ENGINE_GPU_CHUNK_STREAMS + 1);
    CHECK_EQ_INT(c.engine.chunk_frames, 1);
    const chunk_expect cases[] = {
        {"8 frames ahead", 11, 10, 8.0, 1},
        {"1 frame ahead", 11, 10, 1.0, 1},
    };
    chunk_check(&c, cases, sizeof cases / sizeof cases[0]);
    /* GEPARD_GPU_CHUNK_FRAMES's setting is the light-load chunk */
    c.engine.light_chunk_frames = 2;
    CHECK_EQ_INT(gp_engine_chunk_frames(&c.engine, 1), 2);
    chunk_close(&c);
}

TEST(engine_chunks_cpu_codec_pairs) {
    chunk_case c;
    REQUIRE_MSG(chunk_open(&c, false), "%s", gepard_last_error());
    /* the CPU pairs frames whatever the number of streams */
    CHECK_EQ_INT(c.engine.chunk_frames, GP_ENGINE_CHUNK_FRAMES);
    CHECK_EQ_INT(gp_engine_chunk_frames(&c.engine, 100), GP_ENGINE_CHUNK_FRAMES);
    const chunk_expect cases[] = {
        {"a lone frame, 1 frame in hand", 4, 3, 1.0, 1},
        {"a lone frame, 3 frames in hand: wait for its pair", 4, 3, 3.0, 0},
        {"a pair", 5, 3, 3.0, 2},
        {"7 pending: at most GP_ENGINE_MAX_CHUNK", 10, 3, 3.0, GP_ENGINE_MAX_CHUNK},
    };
    chunk_check(&c, cases, sizeof cases / sizeof cases[0]);
    chunk_close(&c);
}

/* The warm-up's waves (warm_up.c) meet every size a GPU captures graphs for:
 * the backbone's step (powers of two to 64, then eight sizes per octave) and
 * the codec's call (powers of two to 8, multiples of 8 to 64, eight per
 * octave above), so no capture falls in service. Walked to 4096 streams. */
TEST(engine_warm_up_waves_meet_every_graph_size) {
    enum { MAX = 4096 };
    static bool wave[MAX + 1];
    memset(wave, 0, sizeof wave);
    int waves = 0, prev = 0;
    for (int n = 1; n <= MAX; n = gp_engine_warm_up_next_wave(n)) {
        CHECK_MSG(n > prev, "wave %d after %d does not grow", n, prev);
        if (n <= prev) break;
        wave[n] = true;
        prev = n;
        waves++;
    }
    int missing = 0;
    for (int b = 1; b <= 8; b *= 2) missing += !wave[b];   /* both: powers of two */
    for (int b = 16; b <= 64; b += 8) missing += !wave[b]; /* the codec: multiples of 8 */
    for (int p = 64; p < MAX; p *= 2)                      /* both: eight per octave */
        for (int j = 1; j <= 8; j++) missing += !wave[p + j * p / 8];
    int to_1024 = 0;
    for (int n = 1; n <= 1024; n++) to_1024 += wave[n];
    test_note("%d waves up to %d streams (%d up to 1024)", waves, MAX, to_1024);
    CHECK_EQ_INT(missing, 0);
    /* and no more than those: 6 small waves, 7 to 64, 8 per octave */
    CHECK_EQ_INT(waves, 6 + 7 + 8 * 6);
}

/* Gathered prefills (GEPARD_GPU_PREFILL_EVERY=4): under load a waiting
 * prefill is held three cycles and goes with the fourth; at once when
 * gathering is off, under a light load, when one of the waiting streams
 * already ran part of its prefill, or when enough streams wait. */
TEST(engine_gathered_prefills_go_every_fourth_cycle) {
    gepard_engine e;
    memset(&e, 0, sizeof e);
    e.prefill_every = 4;
    e.gather_min_rows = GP_ENGINE_GATHER_MIN_DECODE_ROWS;
    const int load = GP_ENGINE_GATHER_MIN_DECODE_ROWS + 100;
    CHECK(gp_engine_prefill_now(&e, load, 0, false)); /* nothing waits */
    for (int round = 0; round < 3; round++) {
        for (int cycle = 0; cycle < 3; cycle++)
            CHECK_MSG(!gp_engine_prefill_now(&e, load, 1 + cycle, false),
                      "round %d: cycle %d should hold the prefill", round, cycle);
        CHECK_MSG(gp_engine_prefill_now(&e, load, 4, false), "round %d: the fourth cycle prefills",
                  round);
    }
    CHECK_EQ_INT((int)e.prefill_holds, 9);
    /* a prefill already begun goes on at once, and restarts the count */
    CHECK(!gp_engine_prefill_now(&e, load, 1, false));
    CHECK(gp_engine_prefill_now(&e, load, 2, true));
    CHECK(!gp_engine_prefill_now(&e, load, 1, false));
    /* a light load prefills at once */
    CHECK(gp_engine_prefill_now(&e, GP_ENGINE_GATHER_MIN_DECODE_ROWS - 1, 1, false));
    /* so do many waiting streams */
    CHECK(!gp_engine_prefill_now(&e, load, 1, false));
    CHECK(gp_engine_prefill_now(&e, load, GP_ENGINE_GATHER_MAX_STREAMS, false));
    /* gathering off: every cycle */
    e.prefill_every = 1;
    for (int cycle = 0; cycle < 4; cycle++) CHECK(gp_engine_prefill_now(&e, load, 1, false));
}

/* What gathering counts: streams in prefill, and whether one of them must
 * not wait — its prefill begun, or a later sentence of a stream whose
 * listener is already playing the earlier ones (prefill_urgent, set by
 * gp_stream_begin_segment), which would otherwise fall silent for up to
 * prefill_every - 1 more cycles at every sentence boundary. */
TEST(engine_gathering_never_holds_a_playing_streams_next_sentence) {
    gp_gen_stream s[3];
    memset(s, 0, sizeof s);
    gp_gen_stream *list[3] = {&s[0], &s[1], &s[2]};
    s[0].phase = GP_GEN_DECODE;
    s[1].phase = GP_GEN_PREFILL;
    s[2].phase = GP_GEN_PREFILL;
    bool started = true;
    CHECK_EQ_INT(gp_gen_prefill_waiting(list, 3, &started), 2);
    CHECK(!started); /* two new arrivals: they may be gathered */
    s[2].prefill_urgent = true;
    CHECK_EQ_INT(gp_gen_prefill_waiting(list, 3, &started), 2);
    CHECK(started);
    s[2].prefill_urgent = false;
    s[1].cond.fed = 3;
    CHECK_EQ_INT(gp_gen_prefill_waiting(list, 3, &started), 2);
    CHECK(started);
}
