/* tempo.c — speed change with preserved pitch through libsonic (see
 * tempo.h). libsonic takes int counts, so input goes in bounded pieces and
 * every piece's output is read out at once. */
#include "io/tempo.h"

#include <sonic.h>
#include <stdlib.h>

#define TEMPO_PIECE 8192 /* samples fed to libsonic at a time */

struct gp_tempo {
    sonicStream sonic;
    double speed;
};

int gp_tempo_create(int rate, double speed, gp_tempo **out, gp_error *err) {
    *out = NULL;
    if (!(speed >= GP_TEMPO_MIN && speed <= GP_TEMPO_MAX))
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "speed %g is out of range: it must be between %g and %g", speed,
                       GP_TEMPO_MIN, GP_TEMPO_MAX);
    if (rate < 1000 || rate > 768000)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "cannot change the speed of %d Hz audio (rates must be 1 kHz - 768 kHz)",
                       rate);
    gp_tempo *t = calloc(1, sizeof *t);
    if (!t) return gp_fail_oom(err, "speed changer", sizeof *t);
    t->sonic = sonicCreateStream(rate, 1);
    if (!t->sonic) {
        free(t);
        return gp_fail_oom(err, "libsonic stream", 0);
    }
    sonicSetSpeed(t->sonic, (float)speed);
    sonicSetPitch(t->sonic, 1.0f);
    sonicSetRate(t->sonic, 1.0f);
    sonicSetQuality(t->sonic, 1); /* search every pitch period: cleaner speech */
    t->speed = speed;
    *out = t;
    return GEPARD_OK;
}

/* Move everything libsonic has ready onto the end of *buf. */
static int drain(gp_tempo *t, float **buf, size_t *len, size_t *cap, gp_error *err) {
    for (;;) {
        int avail = sonicSamplesAvailable(t->sonic);
        if (avail <= 0) return GEPARD_OK;
        if (*len + (size_t)avail > *cap) {
            size_t c = *cap ? *cap : 4096;
            while (c < *len + (size_t)avail) c *= 2;
            float *p = realloc(*buf, c * sizeof(float));
            if (!p) return gp_fail_oom(err, "speed-changed audio", c * sizeof(float));
            *buf = p;
            *cap = c;
        }
        int got = sonicReadFloatFromStream(t->sonic, *buf + *len, avail);
        if (got <= 0) return GEPARD_OK;
        *len += (size_t)got;
    }
}

int gp_tempo_process(gp_tempo *t, const float *in, size_t n, float **buf, size_t *len, size_t *cap,
                     gp_error *err) {
    if (!in) {
        if (!sonicFlushStream(t->sonic)) return gp_fail_oom(err, "libsonic flush", 0);
        return drain(t, buf, len, cap, err);
    }
    for (size_t i = 0; i < n; i += TEMPO_PIECE) {
        int m = (int)(n - i < TEMPO_PIECE ? n - i : TEMPO_PIECE);
        /* libsonic reads the samples; its prototype just lacks the const. */
        if (!sonicWriteFloatToStream(t->sonic, (float *)(in + i), m))
            return gp_fail_oom(err, "libsonic input", (size_t)m * sizeof(float));
        int rc = drain(t, buf, len, cap, err);
        if (rc) return rc;
    }
    return GEPARD_OK;
}

void gp_tempo_free(gp_tempo *t) {
    if (!t) return;
    sonicDestroyStream(t->sonic);
    free(t);
}
