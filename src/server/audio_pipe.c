/* audio_pipe.c — gain, speed, rate and encoder in a row (see audio_pipe.h). */
#include "server/audio_pipe.h"

#include <stdlib.h>
#include <string.h>

int gp_audio_pipe_open(gp_audio_pipe *p, const gp_audio_pipe_params *q, gp_audio_write_fn write,
                       void *user, gp_error *err) {
    memset(p, 0, sizeof *p);
    p->gain = (float)q->volume;
    p->step = q->step;
    int rc = q->speed != 1.0 ? gp_tempo_create(q->in_rate, q->speed, &p->tempo, err) : GEPARD_OK;
    if (!rc && q->out_rate != q->in_rate)
        rc = gp_resampler_create(q->in_rate, q->out_rate, &p->resampler, err);
    if (!rc)
        rc = gp_audio_sink_open_stream_at(write, user, q->format, q->out_rate, q->bit_rate,
                                          &p->sink, err);
    if (rc) gp_audio_pipe_free(p);
    return rc;
}

int gp_audio_pipe_push(gp_audio_pipe *p, const float *x, size_t n, bool flush, gp_error *err) {
    if (!p->sink) return gp_fail(err, GEPARD_ERR_INTERNAL, "the audio encoder is closed");
    if (p->gain != 1.0f && n) { /* the encoder clips what goes past full scale */
        if (n > p->cap_gained) {
            float *g = realloc(p->gained, n * sizeof(float));
            if (!g) return gp_fail_oom(err, "volume", n * sizeof(float));
            p->gained = g;
            p->cap_gained = n;
        }
        for (size_t i = 0; i < n; i++) p->gained[i] = x[i] * p->gain;
        x = p->gained;
    }
    if (p->tempo) {
        p->n_tempo_out = 0;
        if ((n && gp_tempo_process(p->tempo, x, n, &p->tempo_out, &p->n_tempo_out,
                                   &p->cap_tempo_out, err)) ||
            (flush && gp_tempo_process(p->tempo, NULL, 0, &p->tempo_out, &p->n_tempo_out,
                                       &p->cap_tempo_out, err)))
            return -1;
        x = p->tempo_out;
        n = p->n_tempo_out;
    }
    if (p->resampler) {
        p->n_resampled = 0;
        if ((n && gp_resampler_process(p->resampler, x, n, &p->resampled, &p->n_resampled,
                                       &p->cap_resampled, err)) ||
            (flush && gp_resampler_process(p->resampler, NULL, 0, &p->resampled, &p->n_resampled,
                                           &p->cap_resampled, err)))
            return -1;
        x = p->resampled;
        n = p->n_resampled;
    }
    size_t step = p->step > 0 ? p->step : n;
    for (size_t i = 0; i < n; i += step) {
        size_t m = n - i < step ? n - i : step;
        if (gp_audio_sink_write(p->sink, x + i, m, err)) return -1;
        p->samples_out += m;
    }
    return 0;
}

int gp_audio_pipe_finish(gp_audio_pipe *p, gp_error *err) {
    gp_audio_sink *sink = p->sink;
    p->sink = NULL;
    return gp_audio_sink_close(sink, true, err);
}

void gp_audio_pipe_free(gp_audio_pipe *p) {
    gp_audio_sink_close(p->sink, false, NULL);
    gp_tempo_free(p->tempo);
    gp_resampler_free(p->resampler);
    free(p->gained);
    free(p->tempo_out);
    free(p->resampled);
    memset(p, 0, sizeof *p);
}
