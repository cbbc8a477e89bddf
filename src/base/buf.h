/* buf.h — a growable byte buffer / string builder.
 *
 * Used wherever output is assembled piece by piece: JSON lines, HTTP bodies,
 * encoded audio. The buffer owns its memory; gp_buf_free releases it. Appends
 * report allocation failure through their return value (0 = ok).
 */
#ifndef GP_BASE_BUF_H
#define GP_BASE_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct gp_buf {
    char *data; /* always NUL-terminated when non-NULL */
    size_t len;
    size_t cap;
} gp_buf;

void gp_buf_init(gp_buf *b);
void gp_buf_free(gp_buf *b);
void gp_buf_clear(gp_buf *b); /* len = 0, keeps capacity */
int gp_buf_reserve(gp_buf *b, size_t extra);
int gp_buf_append(gp_buf *b, const void *data, size_t len);
int gp_buf_append_str(gp_buf *b, const char *s);
int gp_buf_printf(gp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int gp_buf_vprintf(gp_buf *b, const char *fmt, va_list ap);
/* Remove the first n bytes. */
void gp_buf_consume(gp_buf *b, size_t n);
/* Hand the memory to the caller (NUL-terminated) and reset the buffer. */
char *gp_buf_detach(gp_buf *b, size_t *len);

#endif
