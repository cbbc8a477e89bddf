/* realtime_note.h — the one line `gepard say` prints (on a terminal) when audio
 * that is played as it arrives — on the speakers or through stdout — came
 * slower than real time on the CPU: it stuttered, and a lighter weight format
 * would help (issue 15: a default that is real time, or says so). */
#ifndef GP_ENGINE_REALTIME_NOTE_H
#define GP_ENGINE_REALTIME_NOTE_H

#include <stdbool.h>
#include <stddef.h>

#include "gepard.h"

/* Writes the note into buf and returns true when one is due: at least a
 * second of audio, a real-time factor above 1, on the CPU. */
bool gp_realtime_note(char *buf, size_t size, const gepard_synth_result *r, const char *device,
                      gepard_weight_format weights);

#endif
