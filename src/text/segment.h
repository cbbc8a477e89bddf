/* segment.h — splitting long text into pieces the model speaks comfortably.
 *
 * Gepard was trained on utterances of a sentence or a few; very long inputs
 * wander. Text is cut at sentence ends (. ! ? … and their CJK forms, and
 * blank lines), never after an abbreviation ("Dr.", "e.g."), an initial
 * ("J. R. Tolkien") or inside a number ("3.14", "1,000"); sentences are packed
 * together up to a target length; a sentence longer than the maximum is cut
 * at clause punctuation (, ; : — –) and, failing that, between words — never
 * inside a word. The segmenter is an iterator over the cleaned text, so an
 * hour of text streams in bounded memory.
 */
#ifndef GP_TEXT_SEGMENT_H
#define GP_TEXT_SEGMENT_H

#include <stddef.h>

typedef struct gp_segment_options {
    size_t target_bytes; /* pack sentences up to about this much (default 200) */
    size_t max_bytes;    /* never exceed this unless a single word does (default 360) */
} gp_segment_options;

gp_segment_options gp_segment_default_options(void);

/* Find the next segment of text[0..len) starting at *pos. Returns 1 and sets
 * [*begin, *end) (leading/trailing spaces excluded) and advances *pos, or 0
 * at the end of the text. */
int gp_segment_next(const char *text, size_t len, size_t *pos, const gp_segment_options *opts,
                    size_t *begin, size_t *end);

#endif
