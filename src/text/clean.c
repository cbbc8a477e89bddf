/* clean.c — text hygiene before synthesis (see clean.h). */
#include "text/clean.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

size_t gp_utf8_invalid_offset(const char *text, size_t len) {
    size_t i = 0;
    while (i < len) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t n =
            utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(len - i), &cp);
        if (n <= 0 || cp < 0) return i;
        i += (size_t)n;
    }
    return (size_t)-1;
}

/* Whitespace-like code points that become a plain space. */
static bool is_space_like(utf8proc_int32_t cp) {
    if (cp == ' ' || cp == '\t' || cp == '\v' || cp == '\f') return true;
    if (cp == 0x00A0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x202F ||
        cp == 0x205F || cp == 0x3000 || cp == 0xFEFF || cp == 0x200B)
        return true;
    return false;
}

static bool is_line_break(utf8proc_int32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0085 || cp == 0x2028 || cp == 0x2029;
}

/* Other control and format characters are dropped (become a space). */
static bool is_control(utf8proc_int32_t cp) {
    utf8proc_category_t cat = utf8proc_category(cp);
    return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CS ||
           cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CN ||
           (cat == UTF8PROC_CATEGORY_CF && cp != 0x200D && cp != 0x200C);
}

int gp_text_clean(const char *text, size_t len, size_t max_bytes, char **out, size_t *out_len,
                  gp_error *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    if (max_bytes && len > max_bytes)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "the text is %zu bytes, over the limit of %zu — split it into smaller "
                       "requests or raise the limit",
                       len, max_bytes);
    size_t bad = gp_utf8_invalid_offset(text, len);
    if (bad != (size_t)-1)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "the text is not valid UTF-8 (bad byte 0x%02x at offset %zu) — convert it "
                       "to UTF-8 first",
                       (unsigned char)text[bad], bad);
    char *buf = malloc(len + 1);
    if (!buf) return gp_fail_oom(err, "text", len);
    size_t o = 0;
    int pending_space = 0; /* 0 none, 1 space, 2 line break, 3 blank line */
    size_t i = 0;
    while (i < len) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t n =
            utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(len - i), &cp);
        if (is_line_break(cp)) {
            /* CRLF counts as one break */
            bool crlf = cp == '\r' && i + 1 < len && text[i + 1] == '\n';
            pending_space = pending_space >= 2 ? 3 : 2;
            i += (size_t)n + (crlf ? 1 : 0);
            continue;
        }
        if (is_space_like(cp) || is_control(cp)) {
            if (pending_space < 1) pending_space = 1;
            i += (size_t)n;
            continue;
        }
        if (pending_space && o > 0) {
            if (pending_space == 1)
                buf[o++] = ' ';
            else if (pending_space == 2)
                buf[o++] = '\n';
            else {
                buf[o++] = '\n';
                buf[o++] = '\n';
            }
        }
        pending_space = 0;
        memcpy(buf + o, text + i, (size_t)n);
        o += (size_t)n;
        i += (size_t)n;
    }
    buf[o] = '\0';
    if (o == 0) {
        free(buf);
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "the text is empty (nothing but spaces or control characters) — give some "
                       "words to speak");
    }
    *out = buf;
    if (out_len) *out_len = o;
    return GEPARD_OK;
}
