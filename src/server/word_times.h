/* word_times.h — word timestamps *estimated* from the audio, for the
 * clients of Cartesia's API that ask for them (voice-agent frameworks send
 * "add_timestamps": true and use the times to know which words a listener
 * has heard when it interrupts). Gepard has no alignment of text to frames,
 * so these are not measured: the words are spread over the utterance's
 * voiced span (its first to last sample above -34 dBFS), each given time in
 * proportion to its letters, with a pause after , ; : (2 letters' worth) and
 * . ! ? (4). The events say "estimated": true. */
#ifndef GP_SERVER_WORD_TIMES_H
#define GP_SERVER_WORD_TIMES_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* Where an utterance's voice starts and ends, fed its samples as they come. */
typedef struct gp_voiced_span {
    uint64_t samples;    /* seen so far */
    int64_t first, last; /* sample indices above the threshold; -1: none yet */
} gp_voiced_span;

void gp_voiced_span_init(gp_voiced_span *v);
void gp_voiced_span_feed(gp_voiced_span *v, const float *x, size_t n);

/* Append Cartesia's word_timestamps object {"words":[…],"start":[…],"end":[…]}
 * for `text` spoken over the span `v` of samples at `rate`, played at
 * `speed`, starting `offset_s` seconds into the stream. Returns the number of
 * words, or -1 (memory). */
int gp_word_times_append(gp_buf *out, const char *text, const gp_voiced_span *v, int rate,
                         double speed, double offset_s);
/* Append ElevenLabs' alignment {"chars":[…],"charStartTimesMs":[…],
 * "charDurationsMs":[…]} for `text` over the same estimate: every code point
 * a character (spaces included), a word's span shared by its characters, the
 * spaces sharing the pause between two words (trailing spaces reach the end
 * of the audio); times from the utterance's start, in whole milliseconds
 * (start and duration) or seconds (start and end) by `style`. Returns the
 * number of characters, or -1. */
typedef enum gp_char_times_style {
    GP_CHAR_TIMES_MS = 0,  /* the WebSockets': chars, charStartTimesMs, charDurationsMs */
    GP_CHAR_TIMES_SECONDS, /* HTTP's: characters, character_start/end_times_seconds */
} gp_char_times_style;
int gp_char_times_append(gp_buf *out, const char *text, const gp_voiced_span *v, int rate,
                         double speed, gp_char_times_style style);

#endif
