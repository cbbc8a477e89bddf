/* warm_up.c — gepard_engine_warm_up: synthetic batches of growing size run
 * through the engine before it serves anyone.
 *
 * Why: on a GPU the first step at a new batch size captures that size's
 * CUDA graphs (the backbone's step and the codec's call), the first launch
 * of each kernel loads it, and the real-time admission knows no cycle time
 * yet, so it admits one stream, then two, four... On the H200 a server's
 * first burst of 256 requests reached 1,241 s of audio per second with first
 * audio after 271 ms (p50) and two listeners running dry, the same burst
 * again 1,439 s/s, 81 ms and none. The waves here pay those costs before
 * the server says it is ready.
 *
 * The waves go through the public stream API, so they take exactly the path
 * real requests take (admission, prefill, batched steps, codec batches). */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/timing.h"
#include "engine/api_error.h"
#include "engine/engine_internal.h"
#include "gepard.h"

#define WARM_UP_TEXT "Warming up the engine."
#define WARM_UP_FRAMES 8

/* Audio is decoded (the codec's batches are part of what warms) and dropped. */
static int drop_audio(const float *samples, size_t n, void *user) {
    (void)samples;
    (void)n;
    (void)user;
    return 0;
}

/* The next wave size after n: 1, 2, 3, 4, 6, 8, then every multiple of 8
 * to 64 and eight sizes per octave above (72, 80, ... 128, 144, ... 256,
 * 288, ...). Those are the sizes a GPU captures graphs for — the
 * backbone's step (powers of two to 64, eight per octave above:
 * cuda_runner.cu) and the codec's call (multiples of 8 to 64, eight per
 * octave above: cuda_codec_calls.cu) — where a wave's streams all decode
 * at once. A big wave's do not: its streams finish their prefill over
 * several steps (the step's row budget) and its first ones end before its
 * last ones start, so its decode steps pass through smaller sizes; the
 * plugin's GEPARD_CUDA_GRAPHS_AHEAD=1 captures every size with the first. */
int gp_engine_warm_up_next_wave(int n) {
    if (n < 4) return n + 1;
    if (n < 8) return n + 2;
    if (n < 64) return n + 8;
    int p = 64;
    while (p * 2 <= n) p *= 2; /* p <= n < 2p */
    return n + p / 8;
}

/* One wave of n streams at once; 0 or the first failure's status (its
 * message in *message, which the caller frees). */
static gepard_status run_wave(gepard_engine *e, int n, int frames, char **message) {
    gepard_stream **streams = calloc((size_t)n, sizeof *streams);
    if (!streams) return GEPARD_ERR_NOMEM;
    gepard_synth_params p = gepard_synth_default_params();
    p.random_seed = 0;
    p.max_frames = frames;
    p.stop_threshold = 2.0f; /* above any probability: every stream runs all its frames */
    p.split_text = 0;
    const gepard_stream_callbacks cb = {.on_audio = drop_audio};
    gepard_status first = GEPARD_OK;
    int started = 0;
    for (; started < n; started++) {
        p.seed = (uint64_t)started + 1;
        gepard_status st = gepard_stream_start(e, WARM_UP_TEXT, &p, &cb, &streams[started]);
        if (st != GEPARD_OK) {
            first = st;
            *message = strdup(gepard_last_error());
            break;
        }
    }
    for (int i = 0; i < started; i++) {
        gepard_status st = gepard_stream_wait(streams[i], NULL);
        if (st != GEPARD_OK && first == GEPARD_OK) {
            first = st;
            *message = strdup(gepard_last_error());
        }
        gepard_stream_free(streams[i]);
    }
    free(streams);
    return first;
}

gepard_status gepard_engine_warm_up(gepard_engine *engine, int max_batch, int frames,
                                    double *seconds) {
    if (seconds) *seconds = 0;
    if (!engine) return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT, "no engine to warm up");
    const double t0 = gp_now_s();
    const int limit = engine->params.max_streams;
    if (max_batch <= 0 || max_batch > limit) max_batch = limit;
    if (frames <= 0) frames = WARM_UP_FRAMES;
    for (int n = 1;; n = gp_engine_warm_up_next_wave(n)) {
        if (n > max_batch) n = max_batch;
        char *message = NULL;
        gepard_status st = run_wave(engine, n, frames, &message);
        if (st != GEPARD_OK) {
            gepard_status rc = gp_api_failf(st, "warming up the engine (a batch of %d streams): %s",
                                            n, message ? message : "out of memory");
            free(message);
            return rc;
        }
        if (n == max_batch) break;
    }
    gp_engine_restart_counters(engine);
    if (seconds) *seconds = gp_now_s() - t0;
    return GEPARD_OK;
}
