/* engine_fixture.c — the engine tests' shared fixture (engine_fixture.h). */
#include "engine_fixture.h"

#include <stdlib.h>
#include <string.h>

#include "test.h"

int engine_fixture_open(engine_fixture *f, int max_streams, int max_queue,
                        void (*before_engine)(gepard_codec *codec, void *arg), void *arg) {
    memset(f, 0, sizeof *f);
    gepard_load_params lp = gepard_load_default_params();
    lp.weights = GEPARD_WEIGHTS_F32;
    if (gepard_model_load(test_fixture("model-tiny/model"), &lp, &f->model) ||
        gepard_codec_load(test_fixture("codec-tiny/nano-tiny.nemo"), &f->codec))
        return -1;
    if (before_engine) before_engine(f->codec, arg);
    gepard_engine_params ep = gepard_engine_default_params();
    ep.threads = 2;
    ep.max_streams = max_streams;
    ep.max_queue = max_queue;
    return gepard_engine_create(f->model, f->codec, &ep, &f->engine) ? -1 : 0;
}

void engine_fixture_close(engine_fixture *f) {
    gepard_engine_free(f->engine);
    gepard_codec_free(f->codec);
    gepard_model_free(f->model);
}

int cap_frame(const int32_t *codes, int channels, void *user) {
    (void)codes;
    (void)channels;
    ((capture *)user)->frames++;
    return 0;
}

int cap_audio(const float *x, size_t n, void *user) {
    capture *c = user;
    if (c->n == 0) {
        c->frames_at_first_audio = c->frames;
        c->first_call = n;
    }
    if (c->n + n > c->cap) {
        c->cap = (c->n + n) * 2;
        c->samples = realloc(c->samples, c->cap * sizeof(float));
    }
    memcpy(c->samples + c->n, x, n * sizeof(float));
    c->n += n;
    return (c->cancel_after_frames && c->frames >= c->cancel_after_frames) ||
           (c->cancel_after_samples && c->n >= (size_t)c->cancel_after_samples);
}

gepard_synth_params engine_test_params(uint64_t seed, int frames) {
    gepard_synth_params p = gepard_synth_default_params();
    p.random_seed = 0;
    p.seed = seed;
    p.temperature = 0.8f;
    p.stop_threshold = 1.01f;
    p.max_frames = frames;
    return p;
}

const char *const engine_test_texts[4] = {"Hello world!",
                                          "The quick brown fox jumps over the lazy dog.", "Hi",
                                          "Another sentence, with a comma."};
