/* base64.c — base64 encoding and checked decoding (see base64.h). */
#include "server/base64.h"

#include <stdint.h>
#include <stdlib.h>

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int gp_base64_append(gp_buf *out, const void *data, size_t len) {
    const unsigned char *p = data;
    if (len > ((size_t)-1) / 2) return -1;
    if (gp_buf_reserve(out, (len + 2) / 3 * 4) != 0) return -1;
    char *w = out->data + out->len;
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *w++ = b64_alphabet[v >> 18];
        *w++ = b64_alphabet[(v >> 12) & 63];
        *w++ = b64_alphabet[(v >> 6) & 63];
        *w++ = b64_alphabet[v & 63];
    }
    if (i < len) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);
        *w++ = b64_alphabet[v >> 18];
        *w++ = b64_alphabet[(v >> 12) & 63];
        *w++ = i + 1 < len ? b64_alphabet[(v >> 6) & 63] : '=';
        *w++ = '=';
    }
    out->len = (size_t)(w - out->data);
    out->data[out->len] = '\0';
    return 0;
}

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

int gp_base64_decode(const char *text, size_t len, size_t max_bytes, const char *origin,
                     unsigned char **data, size_t *n, gp_error *err) {
    *data = NULL;
    *n = 0;
    size_t cap = len / 4 * 3 + 3;
    if (cap > max_bytes + 3) cap = max_bytes + 3;
    unsigned char *out = malloc(cap ? cap : 1);
    if (!out) return gp_fail_oom(err, origin, cap);
    size_t w = 0, pad = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = b64_value(c);
        if (v < 0 || pad > 0) {
            free(out);
            return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                           "%s is not valid base64: unexpected character at offset %zu", origin, i);
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (w >= max_bytes) {
                free(out);
                return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                               "%s is larger than the limit of %zu bytes", origin, max_bytes);
            }
            out[w++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (bits >= 6 || pad > 2) {
        free(out);
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "%s is not valid base64: its length is not a whole number of bytes", origin);
    }
    *data = out;
    *n = w;
    return GEPARD_OK;
}
