/* engine_fixture.h — what the engine API tests share (test_engine.c,
 * test_engine_queue.c): the tiny model and codec with an engine over them,
 * callbacks that capture a stream's frames and audio (and can cancel it),
 * and the sampling settings and texts the streams use. */
#ifndef GEPARD_TEST_ENGINE_FIXTURE_H
#define GEPARD_TEST_ENGINE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "gepard.h"

typedef struct engine_fixture {
    gepard_model *model;
    gepard_codec *codec;
    gepard_engine *engine;
} engine_fixture;

/* model-tiny (f32) and codec-tiny, an engine of 2 threads; `before_engine`
 * (may be NULL) gets the codec before the engine exists. 0 or -1 (see
 * gepard_last_error). */
int engine_fixture_open(engine_fixture *f, int max_streams, int max_queue,
                        void (*before_engine)(gepard_codec *codec, void *arg), void *arg);
void engine_fixture_close(engine_fixture *f);

/* One stream's callbacks' record; the callbacks cancel it once it has
 * cancel_after_frames frames or cancel_after_samples samples (0: never). */
typedef struct capture {
    float *samples;
    size_t n, cap;
    int frames;
    int frames_at_first_audio;
    size_t first_call; /* samples in the first audio callback */
    int cancel_after_frames, cancel_after_samples;
} capture;
int cap_frame(const int32_t *codes, int channels, void *user);
int cap_audio(const float *x, size_t n, void *user);

/* Seeded sampling at temperature 0.8 for exactly `frames` frames. */
gepard_synth_params engine_test_params(uint64_t seed, int frames);
extern const char *const engine_test_texts[4];

#endif
