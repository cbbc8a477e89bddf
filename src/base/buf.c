/* buf.c — growable byte buffer (see buf.h). */
#include "base/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gp_buf_init(gp_buf *b) {
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void gp_buf_free(gp_buf *b) {
    free(b->data);
    gp_buf_init(b);
}

void gp_buf_clear(gp_buf *b) {
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

int gp_buf_reserve(gp_buf *b, size_t extra) {
    if (extra > ((size_t)-1) / 2 - b->len) return -1;
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

int gp_buf_append(gp_buf *b, const void *data, size_t len) {
    if (gp_buf_reserve(b, len) != 0) return -1;
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

int gp_buf_append_str(gp_buf *b, const char *s) { return gp_buf_append(b, s, strlen(s)); }

int gp_buf_vprintf(gp_buf *b, const char *fmt, va_list ap) {
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0) return -1;
    if (gp_buf_reserve(b, (size_t)n) != 0) return -1;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int gp_buf_printf(gp_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = gp_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

void gp_buf_consume(gp_buf *b, size_t n) {
    if (n >= b->len) {
        gp_buf_clear(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

char *gp_buf_detach(gp_buf *b, size_t *len) {
    if (!b->data && gp_buf_reserve(b, 0) != 0) return NULL;
    char *p = b->data;
    if (len) *len = b->len;
    gp_buf_init(b);
    return p;
}
