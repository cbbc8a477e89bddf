/* playback.h — playing audio on the speakers through the desktop's sound
 * server (PulseAudio or PipeWire's PulseAudio interface). Opening fails with
 * a clear message when no sound server is reachable. */
#ifndef GP_IO_PLAYBACK_H
#define GP_IO_PLAYBACK_H

#include <stddef.h>

#include "base/error.h"

typedef struct gp_playback gp_playback;

int gp_playback_open(int sample_rate, const char *app_name, gp_playback **out, gp_error *err);
/* Queue mono samples; blocks when the server's buffer is full. */
int gp_playback_write(gp_playback *p, const float *samples, size_t n, gp_error *err);
/* Wait until everything queued has been played (drain = true) or drop it,
 * then close. */
int gp_playback_close(gp_playback *p, int drain, gp_error *err);

#endif
