/* base64.h — standard base64 (RFC 4648, "+/" alphabet, "=" padding): audio in
 * SSE events and batch responses is encoded, ref_audio in requests decoded.
 * The decoder skips ASCII whitespace, accepts missing padding and the
 * URL-safe "-_" letters, and refuses anything else, naming the offset. */
#ifndef GP_SERVER_BASE64_H
#define GP_SERVER_BASE64_H

#include <stddef.h>

#include "base/buf.h"
#include "base/error.h"

/* Append the encoding of data[0..len) to `out`; 0 or -1 when out of memory. */
int gp_base64_append(gp_buf *out, const void *data, size_t len);

/* Decode text[0..len) into a new buffer (*data, *n; freed with free()).
 * Fails when the decoded size would exceed max_bytes. `origin` names the
 * field in messages. */
int gp_base64_decode(const char *text, size_t len, size_t max_bytes, const char *origin,
                     unsigned char **data, size_t *n, gp_error *err);

#endif
