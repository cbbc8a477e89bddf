/* test_engine_chunks.c — how many of a stream's frames the engine decodes in
 * one codec call (gp_stream_frames_to_decode, gp_engine_chunk_frames): the
 * first frame at once, short chunks while the listener holds little audio,
 * whole chunks when it is ahead, everything at the end; with a GPU codec
 * chunks of 4 only while few streams are active. The GPU policy is plain
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

static void chunk_open(chunk_case *c, const gepard_codec *codec, bool gpu) {
    memset(c, 0, sizeof *c);
    c->engine.codec = codec;
    c->engine.gpu_codec = gpu;
    c->engine.light_chunk_frames = GP_ENGINE_GPU_CHUNK_FRAMES;
    c->engine.wait_headroom = gpu ? GP_ENGINE_GPU_HEADROOM : GP_ENGINE_PAIR_HEADROOM;
    c->engine.chunk_frames = gp_engine_chunk_frames(&c->engine, 1);
    c->stream.engine = &c->engine;
    c->stream.gen = &c->gen;
    c->spf = gepard_codec_samples_per_frame(codec);
    c->frame_s = (double)c->spf / gepard_codec_sample_rate(codec);
}

TEST(engine_chunks_gpu_codec_few_streams) {
    gepard_codec *codec;
    REQUIRE_MSG(gepard_codec_load(test_fixture("codec-tiny/nano-tiny.nemo"), &codec) == GEPARD_OK,
                "%s", gepard_last_error());
    chunk_case c;
    chunk_open(&c, codec, true);
    CHECK_EQ_INT(c.engine.chunk_frames, 4);
    /* the first frame goes alone, at once */
    chunk_set(&c, 1, 0, 0);
    CHECK_EQ_INT(gp_stream_frames_to_decode(&c.stream), 1);
    /* a listener with 1 or 4.5 frames in hand (< 5): whatever is pending goes now */
    chunk_set(&c, 3, 1, 1.0);
    CHECK_EQ_INT(gp_stream_frames_to_decode(&c.stream), 2);
    chunk_set(&c, 8, 5, 4.5);
    CHECK_EQ_INT(gp_stream_frames_to_decode(&c.stream), 3);
    /* 8 frames ahead: waits for a chunk of 4, never more than GP_ENGINE_MAX_CHUNK */
    chunk_set(&c, 13, 10, 8.0);
    CHECK_EQ_INT(gp_stream_frames_to_decode(&c.stream), 0);
    chunk_set(&c, 14, 10, 8.0);
    CHECK_EQ_INT(gp_stream_frames_to_decode(&c.stream), 4);
    chunk_set(&c, 17, 10, 8.0);
    CHECK_EQ_INT(gp_stream_frames_to_decode(&c.stream), GP_ENGINE_MAX_CHUNK);
    /* a listener that ran dry gains nothing from a short chunk: wait for 4 */
    chunk_set(&c, 12, 10, -3.0);
    CHECK_EQ_INT(gp_stream_frames_to_decode(&c.stream), 0);
    /* the segment's last frames go whatever their number */
    chunk_set(&c, 12, 10, 8.0);
    c.gen.phase = GP_GEN_DONE;
    CHECK_EQ_INT(gp_stream_frames_to_decode(&c.stream), 2);
    /* nothing pending: nothing to do */
    chunk_set(&c, 10, 10, 8.0);
    CHECK_EQ_INT(gp_stream_frames_to_decode(&c.stream), 0);
    gepard_codec_free(codec);
}

TEST(engine_chunks_gpu_codec_under_load_take_every_frame) {
    gepard_codec *codec;
    REQUIRE_MSG(gepard_codec_load(test_fixture("codec-tiny/nano-tiny.nemo"), &codec) == GEPARD_OK,
                "%s", gepard_last_error());
    chunk_case c;
    chunk_open(&c, codec, true);
    CHECK_EQ_INT(gp_engine_chunk_frames(&c.engine, GP_ENGINE_GPU_CHUNK_STREAMS), 4);
    c.engine.chunk_frames = gp_engine_chunk_frames(&c.engine, GP_ENGINE_GPU_CHUNK_STREAMS + 1);
    CHECK_EQ_INT(c.engine.chunk_frames, 1);
    /* far ahead or not, a new frame goes at once: one codec call per step */
    chunk_set(&c, 11, 10, 8.0);
    CHECK_EQ_INT(gp_stream_frames_to_decode(&c.stream), 1);
    chunk_set(&c, 11, 10, 1.0);
    CHECK_EQ_INT(gp_stream_frames_to_decode(&c.stream), 1);
    /* GEPARD_GPU_CHUNK_FRAMES's setting is the light-load chunk */
    c.engine.light_chunk_frames = 2;
    CHECK_EQ_INT(gp_engine_chunk_frames(&c.engine, 1), 2);
    gepard_codec_free(codec);
}

TEST(engine_chunks_cpu_codec_pairs) {
    gepard_codec *codec;
    REQUIRE_MSG(gepard_codec_load(test_fixture("codec-tiny/nano-tiny.nemo"), &codec) == GEPARD_OK,
                "%s", gepard_last_error());
    chunk_case c;
    chunk_open(&c, codec, false);
    /* the CPU pairs frames whatever the number of streams */
    CHECK_EQ_INT(c.engine.chunk_frames, GP_ENGINE_CHUNK_FRAMES);
    CHECK_EQ_INT(gp_engine_chunk_frames(&c.engine, 100), GP_ENGINE_CHUNK_FRAMES);
    /* a lone frame goes while the listener holds less than 2 frames, else waits */
    chunk_set(&c, 4, 3, 1.0);
    CHECK_EQ_INT(gp_stream_frames_to_decode(&c.stream), 1);
    chunk_set(&c, 4, 3, 3.0);
    CHECK_EQ_INT(gp_stream_frames_to_decode(&c.stream), 0);
    chunk_set(&c, 5, 3, 3.0);
    CHECK_EQ_INT(gp_stream_frames_to_decode(&c.stream), 2);
    gepard_codec_free(codec);
}
