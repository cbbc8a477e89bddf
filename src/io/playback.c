/* playback.c — PulseAudio "simple" playback (see playback.h). */
#include "io/playback.h"

#include <pulse/error.h>
#include <pulse/simple.h>
#include <stdlib.h>

struct gp_playback {
    pa_simple *pa;
};

int gp_playback_open(int sample_rate, const char *app_name, gp_playback **out, gp_error *err) {
    *out = NULL;
    pa_sample_spec spec = {
        .format = PA_SAMPLE_FLOAT32LE, .rate = (uint32_t)sample_rate, .channels = 1};
    int error = 0;
    pa_simple *pa = pa_simple_new(NULL, app_name, PA_STREAM_PLAYBACK, NULL, "speech", &spec, NULL,
                                  NULL, &error);
    if (!pa)
        return gp_fail(err, GEPARD_ERR_IO,
                       "cannot play audio: no sound server reachable (%s) — write a file with "
                       "-o out.wav, or pipe raw PCM with -o - to a player",
                       pa_strerror(error));
    gp_playback *p = malloc(sizeof *p);
    if (!p) {
        pa_simple_free(pa);
        return gp_fail_oom(err, "playback", sizeof *p);
    }
    p->pa = pa;
    *out = p;
    return GEPARD_OK;
}

int gp_playback_write(gp_playback *p, const float *samples, size_t n, gp_error *err) {
    int error = 0;
    if (pa_simple_write(p->pa, samples, n * sizeof(float), &error) < 0)
        return gp_fail(err, GEPARD_ERR_IO, "playback failed: %s", pa_strerror(error));
    return GEPARD_OK;
}

int gp_playback_close(gp_playback *p, int drain, gp_error *err) {
    if (!p) return GEPARD_OK;
    int error = 0, rc = GEPARD_OK;
    if (drain && pa_simple_drain(p->pa, &error) < 0)
        rc = gp_fail(err, GEPARD_ERR_IO, "playback failed: %s", pa_strerror(error));
    if (!drain) pa_simple_flush(p->pa, &error);
    pa_simple_free(p->pa);
    free(p);
    return rc;
}
