/* test_tempo.c — `speed` (io/tempo.c, libsonic), the function `gepard serve`
 * and `gepard say --speed` put the audio through: a synthetic voiced tone
 * fed in codec-frame chunks comes out 1/speed as long (within 2 %) at the
 * same pitch (dominant frequency within 1 %), and it comes out while it is
 * fed, not only at the flush. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/tempo.h"
#include "test.h"

#define RATE 22050
#define CHUNK 1024 /* one codec frame, as the engine delivers it */
#define SECONDS 3
#define F0 180.0 /* a speaking voice's fundamental */

/* A voiced, speech-like tone: F0 and four harmonics of falling strength. */
static float *make_voice(size_t n) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        double t = (double)i / RATE, v = 0;
        for (int h = 1; h <= 5; h++) v += sin(2 * M_PI * F0 * h * t) / (h * h);
        x[i] = (float)(0.4 * v);
    }
    return x;
}

/* The strongest frequency in [lo, hi] Hz in 0.25 Hz steps (Goertzel over a
 * Hann-windowed second of audio from the middle of x). */
static double dominant_hz(const float *x, size_t n, double lo, double hi) {
    size_t len = n < RATE ? n : RATE, start = (n - len) / 2;
    double best = 0, best_f = 0;
    for (double f = lo; f <= hi; f += 0.25) {
        double w = 2 * M_PI * f / RATE, c = 2 * cos(w), s1 = 0, s2 = 0;
        for (size_t i = 0; i < len; i++) {
            double win = 0.5 - 0.5 * cos(2 * M_PI * (double)i / (double)(len - 1));
            double s0 = x[start + i] * win + c * s1 - s2;
            s2 = s1;
            s1 = s0;
        }
        double p = s1 * s1 + s2 * s2 - c * s1 * s2;
        if (p > best) {
            best = p;
            best_f = f;
        }
    }
    return best_f;
}

TEST(tempo_keeps_pitch_and_scales_duration) {
    const size_t n = (size_t)RATE * SECONDS;
    float *x = make_voice(n);
    const double speeds[] = {0.25, 0.5, 0.8, 1.25, 2.0, 4.0};
    for (size_t k = 0; k < sizeof speeds / sizeof speeds[0]; k++) {
        double speed = speeds[k];
        gp_tempo *t;
        gp_error err;
        REQUIRE_OK(gp_tempo_create(RATE, speed, &t, &err), &err);
        float *out = NULL;
        size_t len = 0, cap = 0, before_flush;
        for (size_t i = 0; i < n; i += CHUNK)
            REQUIRE_OK(
                gp_tempo_process(t, x + i, n - i < CHUNK ? n - i : CHUNK, &out, &len, &cap, &err),
                &err);
        before_flush = len;
        REQUIRE_OK(gp_tempo_process(t, NULL, 0, &out, &len, &cap, &err), &err);
        gp_tempo_free(t);
        double want = (double)n / speed, ratio = (double)len / want;
        double held_ms = (double)(len - before_flush) * 1000 / RATE;
        double f = dominant_hz(out, len, F0 * 0.5, F0 * 1.5);
        test_note("speed %.2f: %zu -> %zu samples (%.4f of n/speed), %.1f ms held until the "
                  "flush, dominant %.2f Hz (input %.0f Hz)",
                  speed, n, len, ratio, held_ms, f, F0);
        /* the tolerance: the duration changes by the factor within 2 % */
        CHECK_MSG(fabs(ratio - 1) <= 0.02, "speed %g: length ratio %.4f", speed, ratio);
        /* pitch kept: within 1 % (a sixth of a semitone; resampling instead
         * would move it by the speed factor, >= 25 %) */
        CHECK_MSG(fabs(f / F0 - 1) <= 0.01, "speed %g: dominant %.2f Hz, want %.0f", speed, f, F0);
        /* streaming stays streaming: libsonic holds back at most ~50 ms of
         * output (a few pitch periods of its search window) until the end */
        CHECK_MSG(held_ms <= 50 / speed + 25, "speed %g: %.1f ms came only at the flush", speed,
                  held_ms);
        free(out);
    }
    free(x);
}

TEST(tempo_rejects_out_of_range) {
    gp_tempo *t = NULL;
    gp_error err;
    CHECK_ERR_CONTAINS(gp_tempo_create(RATE, 0.2, &t, &err), &err, "between 0.25 and 4");
    CHECK_ERR_CONTAINS(gp_tempo_create(RATE, 4.5, &t, &err), &err, "between 0.25 and 4");
    CHECK_ERR_CONTAINS(gp_tempo_create(RATE, NAN, &t, &err), &err, "between 0.25 and 4");
    CHECK(t == NULL);
}
