/* tempo.h — changing the speaking rate without changing the pitch
 * (libsonic's pitch-synchronous overlap-add, made for speech): OpenAI's
 * `speed` (0.25-4.0) for `gepard serve` and `gepard say --speed`.
 *
 * A stream: feed mono chunks as the engine delivers them and take what
 * libsonic has ready (streaming stays streaming; it holds back at most a
 * few pitch periods, ~20-40 ms), then flush once at the end. */
#ifndef GP_IO_TEMPO_H
#define GP_IO_TEMPO_H

#include <stddef.h>

#include "base/error.h"

#define GP_TEMPO_MIN 0.25
#define GP_TEMPO_MAX 4.0

typedef struct gp_tempo gp_tempo;

/* A stream for mono audio at `rate` Hz played `speed` times as fast (2.0:
 * half the duration), same pitch. */
int gp_tempo_create(int rate, double speed, gp_tempo **out, gp_error *err);
/* Feed `n` samples (or, with in == NULL, flush what is held back) and append
 * the output to *buf (grown with realloc; *len and *cap track it). */
int gp_tempo_process(gp_tempo *t, const float *in, size_t n, float **buf, size_t *len, size_t *cap,
                     gp_error *err);
void gp_tempo_free(gp_tempo *t);

#endif
