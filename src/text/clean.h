/* clean.h — input hygiene for text to be spoken: validates UTF-8, turns
 * control characters and unusual spaces into plain spaces, collapses runs of
 * spaces, keeps line breaks as separators (at most a blank line), trims.
 * Used by `gepard say`, the server and the engine; `gepard codes` passes
 * text verbatim, as the upstream runner does. */
#ifndef GP_TEXT_CLEAN_H
#define GP_TEXT_CLEAN_H

#include <stddef.h>

#include "base/error.h"

/* Fails on invalid UTF-8 (naming the byte offset), on text that is empty
 * after cleaning, and on text longer than max_bytes (0 = no limit).
 * *out is malloc'ed and NUL-terminated. */
int gp_text_clean(const char *text, size_t len, size_t max_bytes, char **out, size_t *out_len,
                  gp_error *err);

/* Byte offset of the first invalid UTF-8 sequence, or (size_t)-1 if valid. */
size_t gp_utf8_invalid_offset(const char *text, size_t len);

#endif
