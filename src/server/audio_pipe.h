/* audio_pipe.h — what happens to a response's samples between the engine
 * and the bytes of its body: a gain (Cartesia's volume), the speaking rate
 * (libsonic; OpenAI's speed), the sample rate (libsoxr) and the encoder
 * (io/audio_sink.h), in that order, each kept across calls so that a
 * stream's audio is one continuous signal however it arrives. Used by a
 * speech request (speech_job.c) and by each context of a WebSocket
 * (ws_tts.c). */
#ifndef GP_SERVER_AUDIO_PIPE_H
#define GP_SERVER_AUDIO_PIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "io/audio_sink.h"
#include "io/resample.h"
#include "io/tempo.h"

typedef struct gp_audio_pipe {
    float gain;              /* 1: none */
    gp_tempo *tempo;         /* NULL: speed 1 */
    gp_resampler *resampler; /* NULL: the input rate goes out as is */
    gp_audio_sink *sink;
    size_t step;          /* samples per encoder call (a codec frame) */
    uint64_t samples_out; /* given to the encoder */
    float *gained, *tempo_out, *resampled;
    size_t cap_gained, n_tempo_out, cap_tempo_out, n_resampled, cap_resampled;
} gp_audio_pipe;

typedef struct gp_audio_pipe_params {
    int in_rate, out_rate; /* the codec's; the response's */
    double speed, volume;  /* 1: unchanged */
    gp_audio_format format;
    int bit_rate; /* lossy formats; 0: the format's default */
    size_t step;  /* samples per encoder call; 0: all at once */
} gp_audio_pipe_params;

/* Encoded bytes go to write(data, len, user). */
int gp_audio_pipe_open(gp_audio_pipe *p, const gp_audio_pipe_params *params,
                       gp_audio_write_fn write, void *user, gp_error *err);
/* Push n samples; `flush`: the end of the audio, so the speed and rate
 * changers give out what they hold (the encoder stays open). */
int gp_audio_pipe_push(gp_audio_pipe *p, const float *x, size_t n, bool flush, gp_error *err);
/* Finish the encoder (its last bytes) and free it; then nothing more may
 * be pushed. */
int gp_audio_pipe_finish(gp_audio_pipe *p, gp_error *err);
/* Free everything (an unfinished encoder is dropped). */
void gp_audio_pipe_free(gp_audio_pipe *p);

#endif
