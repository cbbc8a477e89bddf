/* audio_memory.h — decoding an audio file held in memory (an upload, a
 * base64 field of an HTTP request) through libsndfile's virtual I/O, with the
 * same checks as gp_audio_read: anything libsndfile reads (WAV, FLAC, Ogg,
 * MP3, AIFF, ...) becomes interleaved f32 samples, a truncated or implausible
 * file an error. The caller bounds the input size; `max_seconds` bounds the
 * decoded length so a small compressed file cannot expand without limit. */
#ifndef GP_IO_AUDIO_MEMORY_H
#define GP_IO_AUDIO_MEMORY_H

#include <stddef.h>

#include "io/audio_file.h"

/* `origin` names the data in messages ("ref_audio"). Free with gp_audio_free. */
int gp_audio_read_memory(const void *data, size_t len, double max_seconds, const char *origin,
                         gp_audio *out, gp_error *err);

#endif
