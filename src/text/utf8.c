/* utf8.c — UTF-8 checking and repair, byte-level alphabet (see utf8.h). */
#include "text/utf8.h"

enum {
    BAD_CONTINUATION, /* a continuation byte where a character must start */
    BAD_TRUNCATED,    /* a lead byte not followed by enough continuation bytes */
    BAD_OVERLONG,     /* a longer encoding than the code point needs */
    BAD_SURROGATE,    /* U+D800..U+DFFF */
    BAD_TOO_LARGE,    /* above U+10FFFF */
    BAD_NEVER         /* 0xF5..0xFF */
};

static const char *const bad_reasons[] = {
    "a continuation byte (0x80-0xBF) with no lead byte before it",
    "a multi-byte sequence cut short",
    "an overlong encoding",
    "a UTF-16 surrogate code point (U+D800-U+DFFF)",
    "a code point above U+10FFFF",
    "a byte that never occurs in UTF-8 (0xF5-0xFF)",
};

static bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

/* Examine the sequence at s[i]. Returns its length when well-formed; else 0,
 * with *bad the kind of error and *subpart the length of the maximal prefix
 * of a well-formed sequence (at least 1), which is what lossy repair replaces
 * with one U+FFFD (the Unicode "maximal subpart" rule that Rust follows). */
static size_t seq_check(const unsigned char *s, size_t len, size_t i, int *bad, size_t *subpart) {
    unsigned char c = s[i];
    *subpart = 1;
    if (c < 0x80) return 1;
    if (c < 0xC0) {
        *bad = BAD_CONTINUATION;
        return 0;
    }
    if (c < 0xC2) {
        *bad = BAD_OVERLONG;
        return 0;
    }
    size_t need = c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
    if (need == 0) {
        *bad = BAD_NEVER;
        return 0;
    }
    /* The second byte's range depends on the lead byte. */
    unsigned char lo = 0x80, hi = 0xBF;
    int range_bad = BAD_TRUNCATED;
    if (c == 0xE0) lo = 0xA0, range_bad = BAD_OVERLONG;
    if (c == 0xED) hi = 0x9F, range_bad = BAD_SURROGATE;
    if (c == 0xF0) lo = 0x90, range_bad = BAD_OVERLONG;
    if (c == 0xF4) hi = 0x8F, range_bad = BAD_TOO_LARGE;
    if (i + 1 >= len) {
        *bad = BAD_TRUNCATED;
        return 0;
    }
    unsigned char c1 = s[i + 1];
    if (!is_cont(c1)) {
        *bad = BAD_TRUNCATED;
        return 0;
    }
    if (c1 < lo || c1 > hi) {
        *bad = range_bad;
        return 0;
    }
    for (size_t k = 2; k < need; k++) {
        *subpart = k;
        if (i + k >= len || !is_cont(s[i + k])) {
            *bad = BAD_TRUNCATED;
            return 0;
        }
    }
    return need;
}

int gp_utf8_check(const char *s, size_t len, size_t *bad_offset, const char **reason) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        /* ASCII fast path, 8 bytes at a time when aligned runs allow. */
        while (i + 8 <= len) {
            uint64_t w = 0;
            for (int k = 0; k < 8; k++) w |= (uint64_t)u[i + k] << (8 * k);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= len) break;
        int bad = 0;
        size_t sub;
        size_t n = seq_check(u, len, i, &bad, &sub);
        if (n == 0) {
            *bad_offset = i;
            *reason = bad_reasons[bad];
            return -1;
        }
        i += n;
    }
    return 0;
}

uint32_t gp_utf8_next(const char *s, size_t len, size_t *pos) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = *pos;
    uint32_t c = u[i];
    size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (i + n > len) n = len - i; /* only on malformed input */
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; k++) cp = (cp << 6) | (u[i + k] & 0x3F);
    *pos = i + (n ? n : 1);
    return cp;
}

size_t gp_utf8_put(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

bool gp_utf8_is_ascii(const char *s, size_t len) {
    unsigned char any = 0;
    for (size_t i = 0; i < len; i++) any |= (unsigned char)s[i];
    return any < 0x80;
}

int gp_utf8_append_lossy(gp_buf *b, const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0; /* [run, i) is valid and not yet appended */
    while (i < len) {
        int bad;
        size_t sub;
        size_t n = seq_check(u, len, i, &bad, &sub);
        if (n) {
            i += n;
            continue;
        }
        if (gp_buf_append(b, s + run, i - run) || gp_buf_append(b, "\xEF\xBF\xBD", 3)) return -1;
        i += sub;
        run = i;
    }
    return gp_buf_append(b, s + run, len - run);
}

uint32_t gp_bytelevel_char(uint8_t b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    if (b <= 0x20) return 0x100u + b;                        /* 0x00..0x20 -> U+0100..U+0120 */
    if (b >= 0x7F && b <= 0xA0) return 0x121u + (b - 0x7Fu); /* -> U+0121..U+0142 */
    return 0x143;                                            /* 0xAD */
}

int gp_bytelevel_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp >= 0x100 && cp <= 0x120) return (int)(cp - 0x100);
    if (cp >= 0x121 && cp <= 0x142) return (int)(0x7F + (cp - 0x121));
    if (cp == 0x143) return 0xAD;
    return -1;
}
