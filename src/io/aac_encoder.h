/* aac_encoder.h — AAC-LC in ADTS framing with FFmpeg's native encoder
 * (libavcodec): OpenAI's `response_format: "aac"`. ADTS puts a 7-byte header
 * before every 1024-sample frame, so the bytes can be played as they arrive
 * (no container to finish). Used by audio_sink.c. */
#ifndef GP_IO_AAC_ENCODER_H
#define GP_IO_AAC_ENCODER_H

#include <stddef.h>

#include "base/error.h"

/* Receives each ADTS frame; non-zero stops the encoder (a failed write). */
typedef int (*gp_aac_write_fn)(const void *data, size_t len, void *user);

typedef struct gp_aac_encoder gp_aac_encoder;

/* Mono at `rate` Hz (one of AAC's rates: 8000 ... 96000; 22050 and 24000
 * included), `bitrate` bits per second. */
int gp_aac_encoder_create(int rate, int bitrate, gp_aac_write_fn write, void *user,
                          gp_aac_encoder **out, gp_error *err);
/* Encode samples in [-1, 1]; whole frames go out as soon as they are full.
 * Returns 0, or non-zero when the encoder or the write failed. */
int gp_aac_encoder_write(gp_aac_encoder *e, const float *x, size_t n);
/* The last partial frame and the encoder's delayed frames. */
int gp_aac_encoder_finish(gp_aac_encoder *e);
void gp_aac_encoder_free(gp_aac_encoder *e);

#endif
