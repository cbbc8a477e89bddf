/* audio_file.h — reading and writing audio files through libsndfile.
 *
 * gp_audio_read accepts anything libsndfile decodes (WAV, FLAC, OGG, AIFF, ...)
 * and returns interleaved f32 samples in [-1, 1] with the rate and channel
 * count, or a message saying why the file is unusable (missing, not audio,
 * truncated). A file whose data ends before its header says is refused rather
 * than silently shortened. Raw little-endian float32 files (".f32") are read by
 * gp_audio_read_f32 with the rate given by the caller. gp_audio_write_wav writes
 * mono or multi-channel WAV, 16-bit PCM or 32-bit float, atomically (temporary
 * file + rename), so a failed write never leaves a half-written file.
 */
#ifndef GP_IO_AUDIO_FILE_H
#define GP_IO_AUDIO_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

typedef struct gp_audio {
    float *samples; /* interleaved, frames * channels */
    size_t frames;
    int channels;
    int sample_rate;
} gp_audio;

int gp_audio_read(const char *path, gp_audio *out, gp_error *err);
/* Raw little-endian float32 mono samples. */
int gp_audio_read_f32(const char *path, gp_audio *out, gp_error *err);
void gp_audio_free(gp_audio *audio);

/* Write WAV: 16-bit PCM (clipped to [-1, 1]) or, with `float32`, IEEE float. */
int gp_audio_write_wav(const char *path, const float *samples, size_t frames, int channels,
                       int sample_rate, bool float32, gp_error *err);
/* Write raw little-endian float32 samples atomically. */
int gp_audio_write_f32(const char *path, const float *samples, size_t count, gp_error *err);

#endif
