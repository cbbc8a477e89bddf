/* test_cuda_engine.c — the engine with the backbone and the codec on the
 * GPU (f32, the exactness path). With more streams than the light-load
 * chunking allows, the step thread decodes the new frames of every stream
 * in one codec call on the GPU (engine.c decode_new_frames_together), with
 * the backbone's step in flight or after it (GEPARD_GPU_OVERLAP_CODEC=0):
 * each stream's audio must equal, sample for sample, the same request run
 * alone. A lone request's audio goes through the codec's queue (decoded
 * while the engine steps on, engine.c queue_decode), so the runs alone
 * compare the queued path with the batched one; a third pass waits for
 * every codec call (GEPARD_ENGINE_QUEUE_CODEC=0). Skipped visibly without a
 * GPU. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_common.h"
#include "engine/engine_internal.h"
#include "gepard.h"
#include "test.h"

typedef struct heard {
    float *samples;
    size_t n, cap;
    atomic_int any; /* set at the first audio (the test thread waits on it) */
} heard;

static int hear(const float *x, size_t n, void *user) {
    heard *h = user;
    atomic_store(&h->any, 1);
    if (h->n + n > h->cap) {
        h->cap = (h->n + n) * 2;
        float *p = realloc(h->samples, h->cap * sizeof(float));
        if (!p) return 1;
        h->samples = p;
    }
    memcpy(h->samples + h->n, x, n * sizeof(float));
    h->n += n;
    return 0;
}

#define STREAMS 6

/* With `stagger` the first half of the streams (longer ones) start, and the
 * rest once the first is heard: their prefills come while others decode
 * (gathered with GEPARD_GPU_PREFILL_EVERY). */
static void batched_equal_single(bool stagger) {
    gepard_load_params lp = gepard_load_default_params();
    lp.weights = GEPARD_WEIGHTS_F32;
    lp.device = "cuda";
    lp.gpu_precision = "f32";
    gepard_model *model = NULL;
    REQUIRE_MSG(gepard_model_load(test_fixture("model-tiny/model"), &lp, &model) == GEPARD_OK, "%s",
                gepard_last_error());
    gepard_codec_params cp = gepard_codec_default_params();
    cp.device = "cuda";
    cp.gpu_precision = "f32";
    gepard_codec *codec = NULL;
    REQUIRE_MSG(gepard_codec_load_with_params(test_fixture("codec-tiny/nano-tiny.nemo"), &cp,
                                              &codec) == GEPARD_OK,
                "%s", gepard_last_error());
    gepard_engine_params ep = gepard_engine_default_params();
    ep.max_streams = 8;
    ep.max_queue = 8;
    gepard_engine *engine = NULL;
    REQUIRE_MSG(gepard_engine_create(model, codec, &ep, &engine) == GEPARD_OK, "%s",
                gepard_last_error());
    static const char *texts[STREAMS] = {"Hello world!",
                                         "The quick brown fox jumps over the lazy dog.",
                                         "Hi",
                                         "Another sentence, with a comma.",
                                         "Six streams share every step.",
                                         "And the last one."};
    heard alone[STREAMS], together[STREAMS];
    memset(alone, 0, sizeof alone);
    memset(together, 0, sizeof together);
    gepard_synth_params p[STREAMS];
    for (int i = 0; i < STREAMS; i++) {
        p[i] = gepard_synth_default_params();
        p[i].random_seed = 0;
        p[i].seed = 300 + (uint64_t)i;
        p[i].temperature = 0.8f;
        p[i].stop_threshold = 1.01f; /* the stop head never ends them: fixed lengths */
        p[i].max_frames = stagger && i < STREAMS / 2 ? 60 + 3 * i : 18 + 3 * i;
        gepard_stream_callbacks cb = {.on_audio = hear, .user = &alone[i]};
        REQUIRE_MSG(gepard_synthesize(engine, texts[i], &p[i], &cb, NULL) == GEPARD_OK, "%s",
                    gepard_last_error());
    }
    gepard_engine_stats before;
    gepard_engine_get_stats(engine, &before);
    gepard_stream *streams[STREAMS];
    for (int i = 0; i < STREAMS; i++) {
        if (stagger && i == STREAMS / 2)
            for (int wait = 0; wait < 5000 && !atomic_load(&together[0].any); wait++) usleep(1000);
        gepard_stream_callbacks cb = {.on_audio = hear, .user = &together[i]};
        REQUIRE(gepard_stream_start(engine, texts[i], &p[i], &cb, &streams[i]) == GEPARD_OK);
    }
    int differ = 0;
    for (int i = 0; i < STREAMS; i++) {
        gepard_synth_result r;
        CHECK(gepard_stream_wait(streams[i], &r) == GEPARD_OK);
        gepard_stream_free(streams[i]);
        const bool same =
            alone[i].n == together[i].n && alone[i].n > 0 &&
            memcmp(alone[i].samples, together[i].samples, alone[i].n * sizeof(float)) == 0;
        differ += !same;
        CHECK_MSG(same, "stream %d: %zu samples batched, %zu alone, or different values", i,
                  together[i].n, alone[i].n);
        free(alone[i].samples);
        free(together[i].samples);
    }
    gepard_engine_stats st;
    gepard_engine_get_stats(engine, &st);
    test_note("%d streams batched vs alone: %d differ; batched codec calls %llu (%.1f ms waited "
              "for), max batch %d; %llu cycles held a prefill",
              STREAMS, differ, (unsigned long long)(st.codec_batches - before.codec_batches),
              (st.codec_seconds - before.codec_seconds) * 1e3, st.max_batch, engine->prefill_holds);
    if (stagger && engine->prefill_every > 1)
        CHECK_MSG(engine->prefill_holds > 0, "no prefill was gathered");
    CHECK_MSG(st.codec_batches > before.codec_batches,
              "the streams' frames were never decoded together");
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    gepard_engine_free(engine);
    gepard_codec_free(codec);
    gepard_model_free(model);
}

TEST(cuda_engine_batched_streams_equal_single_runs) {
    require_cuda();
    batched_equal_single(false);
    setenv("GEPARD_GPU_OVERLAP_CODEC", "0", 1); /* read when an engine is made */
    batched_equal_single(false);
    unsetenv("GEPARD_GPU_OVERLAP_CODEC");
    setenv("GEPARD_ENGINE_QUEUE_CODEC", "0", 1);
    batched_equal_single(false);
    unsetenv("GEPARD_ENGINE_QUEUE_CODEC");
}

/* Prefills gathered into every fourth cycle (GEPARD_GPU_PREFILL_EVERY=4,
 * from one decode row on): streams that arrive while others decode wait for
 * their prefill, and every stream's audio still equals its run alone. */
TEST(cuda_engine_gathered_prefills_equal_single_runs) {
    require_cuda();
    setenv("GEPARD_GPU_PREFILL_EVERY", "4", 1);
    setenv("GEPARD_GPU_PREFILL_GATHER_ROWS", "1", 1);
    batched_equal_single(true);
    unsetenv("GEPARD_GPU_PREFILL_EVERY");
    unsetenv("GEPARD_GPU_PREFILL_GATHER_ROWS");
}
