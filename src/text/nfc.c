/* nfc.c — NFC with Hugging Face's tables (nfc.h), and the decomposition and
 * composition lookups of unicode.h.
 *
 * The text is copied as it is up to the first code point that NFC might
 * change or that might combine with its neighbour ("unstable": a non-zero
 * combining class, a decomposition, or being the second of a composition
 * pair). From the stable code point before it up to the next stable code
 * point is a region; nothing outside a region can interact with it (a stable
 * code point is a starter that nothing before it composes with). A region is
 * decomposed into code points, each run of non-starters is put in canonical
 * order (stable sort by class: insertion sort for short runs, counting sort
 * for long ones, so the cost is linear), then composed in one pass with the
 * algorithm of UAX #15's sample code, and written back as UTF-8.
 */
#include "text/nfc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "text/unicode.h"
#include "text/utf8.h"

#define HANGUL_S 0xAC00u
#define HANGUL_L 0x1100u
#define HANGUL_V 0x1161u
#define HANGUL_T 0x11A7u
#define HANGUL_VCOUNT 21u
#define HANGUL_TCOUNT 28u
#define HANGUL_NCOUNT (HANGUL_VCOUNT * HANGUL_TCOUNT)
#define HANGUL_COUNT (19u * HANGUL_NCOUNT)
/* Runs of non-starters longer than this are counting-sorted. */
#define SHORT_RUN 16

size_t gp_uni_decompose(uint32_t cp, const uint32_t **out) {
    size_t lo = 0, hi = gp_uni_n_decomps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (gp_uni_decomps[mid].cp < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == gp_uni_n_decomps || gp_uni_decomps[lo].cp != cp) return 0;
    *out = gp_uni_decomp_pool + gp_uni_decomps[lo].off;
    return gp_uni_decomps[lo].len;
}

uint32_t gp_uni_compose(uint32_t first, uint32_t second) {
    if (first >= HANGUL_L && first < HANGUL_L + 19 && second >= HANGUL_V &&
        second < HANGUL_V + HANGUL_VCOUNT)
        return HANGUL_S +
               ((first - HANGUL_L) * HANGUL_VCOUNT + (second - HANGUL_V)) * HANGUL_TCOUNT;
    if (first >= HANGUL_S && first < HANGUL_S + HANGUL_COUNT &&
        (first - HANGUL_S) % HANGUL_TCOUNT == 0 && second > HANGUL_T &&
        second < HANGUL_T + HANGUL_TCOUNT)
        return first + (second - HANGUL_T);
    uint64_t key = (uint64_t)first << 32 | second;
    size_t lo = 0, hi = gp_uni_n_pairs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t k = (uint64_t)gp_uni_pairs[mid].first << 32 | gp_uni_pairs[mid].second;
        if (k < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == gp_uni_n_pairs || gp_uni_pairs[lo].first != first ||
        gp_uni_pairs[lo].second != second)
        return 0;
    return gp_uni_pairs[lo].composite;
}

/* The code points of one region, with their classes, and sort scratch. */
typedef struct region {
    uint32_t *cp, *tmp_cp;
    uint8_t *ccc, *tmp_ccc;
    size_t n, cap;
} region;

static void region_free(region *r) {
    free(r->cp);
    free(r->tmp_cp);
    free(r->ccc);
    free(r->tmp_ccc);
}

static int region_reserve(region *r, size_t need) {
    if (need <= r->cap) return 0;
    size_t cap = r->cap ? r->cap : 64;
    while (cap < need) cap *= 2;
    uint32_t *cp = realloc(r->cp, cap * sizeof *cp);
    if (cp) r->cp = cp;
    uint32_t *tcp = realloc(r->tmp_cp, cap * sizeof *tcp);
    if (tcp) r->tmp_cp = tcp;
    uint8_t *cc = realloc(r->ccc, cap);
    if (cc) r->ccc = cc;
    uint8_t *tcc = realloc(r->tmp_ccc, cap);
    if (tcc) r->tmp_ccc = tcc;
    if (!cp || !tcp || !cc || !tcc) return -1;
    r->cap = cap;
    return 0;
}

static void region_push(region *r, uint32_t cp) {
    r->cp[r->n] = cp;
    r->ccc[r->n] = (uint8_t)(gp_uni_nfc_props(cp) & 0xFF);
    r->n++;
}

/* Append the canonical decomposition of cp (room for 4 is reserved). */
static void decompose_into(region *r, uint32_t cp) {
    if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_COUNT) {
        uint32_t s = cp - HANGUL_S;
        region_push(r, HANGUL_L + s / HANGUL_NCOUNT);
        region_push(r, HANGUL_V + (s % HANGUL_NCOUNT) / HANGUL_TCOUNT);
        if (s % HANGUL_TCOUNT) region_push(r, HANGUL_T + s % HANGUL_TCOUNT);
        return;
    }
    const uint32_t *d;
    size_t n = (gp_uni_nfc_props(cp) & GP_UNI_DECOMPOSES) ? gp_uni_decompose(cp, &d) : 0;
    if (n == 0) {
        region_push(r, cp);
        return;
    }
    for (size_t i = 0; i < n; i++) region_push(r, d[i]);
}

/* Stable sort of r[a, b) by class; every class there is non-zero. */
static void sort_run(region *r, size_t a, size_t b) {
    if (b - a <= SHORT_RUN) {
        for (size_t i = a + 1; i < b; i++) {
            uint32_t c = r->cp[i];
            uint8_t k = r->ccc[i];
            size_t j = i;
            for (; j > a && r->ccc[j - 1] > k; j--) {
                r->cp[j] = r->cp[j - 1];
                r->ccc[j] = r->ccc[j - 1];
            }
            r->cp[j] = c;
            r->ccc[j] = k;
        }
        return;
    }
    size_t start[256] = {0};
    for (size_t i = a; i < b; i++) start[r->ccc[i]]++;
    size_t pos = 0;
    for (int k = 0; k < 256; k++) {
        size_t count = start[k];
        start[k] = pos;
        pos += count;
    }
    for (size_t i = a; i < b; i++) {
        size_t to = start[r->ccc[i]]++;
        r->tmp_cp[to] = r->cp[i];
        r->tmp_ccc[to] = r->ccc[i];
    }
    memcpy(r->cp + a, r->tmp_cp, (b - a) * sizeof *r->cp);
    memcpy(r->ccc + a, r->tmp_ccc, b - a);
}

static void canonical_order(region *r) {
    size_t i = 0;
    while (i < r->n) {
        if (r->ccc[i] == 0) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < r->n && r->ccc[j] != 0) j++;
        if (j - i > 1) sort_run(r, i, j);
        i = j;
    }
}

/* Canonical composition in place (UAX #15 sample code). */
static void compose(region *r) {
    if (r->n == 0) return;
    size_t starter = 0, out = 1;
    uint32_t starter_cp = r->cp[0];
    int last_class = r->ccc[0] ? 256 : 0; /* a leading non-starter blocks everything */
    for (size_t i = 1; i < r->n; i++) {
        uint32_t c = r->cp[i];
        int cls = r->ccc[i];
        uint32_t composite = last_class < 256 ? gp_uni_compose(starter_cp, c) : 0;
        if (composite && (last_class < cls || last_class == 0)) {
            r->cp[starter] = composite;
            starter_cp = composite;
            continue;
        }
        if (cls == 0) {
            starter = out;
            starter_cp = c;
        }
        last_class = cls;
        r->cp[out] = c;
        r->ccc[out] = (uint8_t)cls;
        out++;
    }
    r->n = out;
}

static int emit(gp_buf *out, const region *r) {
    if (gp_buf_reserve(out, r->n * 4)) return -1;
    for (size_t i = 0; i < r->n; i++) out->len += gp_utf8_put(r->cp[i], out->data + out->len);
    out->data[out->len] = '\0';
    return 0;
}

static bool stable_at(const char *s, size_t len, size_t pos, size_t *next) {
    unsigned char c = (unsigned char)s[pos];
    if (c < 0x80) {
        *next = pos + 1;
        return true;
    }
    *next = pos;
    uint32_t cp = gp_utf8_next(s, len, next);
    return (gp_uni_nfc_props(cp) & GP_UNI_NFC_UNSTABLE) == 0;
}

/* Normalise the region s[start, end) into out. */
static int do_region(region *r, const char *s, size_t start, size_t end, gp_buf *out) {
    r->n = 0;
    size_t pos = start;
    while (pos < end) {
        if (region_reserve(r, r->n + 4)) return -1;
        decompose_into(r, gp_utf8_next(s, end, &pos));
    }
    canonical_order(r);
    compose(r);
    return emit(out, r);
}

int gp_nfc(const char *s, size_t len, char **out, size_t *out_len, gp_error *err) {
    *out = NULL;
    *out_len = 0;
    if (len > (size_t)(SIZE_MAX / 8))
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "text too long to normalize");
    /* The tables stop at U+10FFFF: malformed bytes would index past them. */
    size_t bad = 0;
    const char *why = NULL;
    if (gp_utf8_check(s, len, &bad, &why))
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "text to normalize is not valid UTF-8: %s at byte %zu",
                       why ? why : "a bad sequence", bad);
    gp_buf b;
    gp_buf_init(&b);
    region r;
    memset(&r, 0, sizeof r);
    int fail = gp_buf_reserve(&b, len + 1);
    size_t copied = 0, pos = 0, prev = 0; /* prev: start of the code point before pos */
    while (!fail && pos < len) {
        size_t next;
        if (stable_at(s, len, pos, &next)) {
            prev = pos;
            pos = next;
            continue;
        }
        /* pos is unstable: the region runs from the stable code point before
         * it (if any) to the next stable code point. */
        size_t start = pos > copied ? prev : pos, end = next;
        while (end < len && !stable_at(s, len, end, &next)) end = next;
        fail = gp_buf_append(&b, s + copied, start - copied) || do_region(&r, s, start, end, &b);
        copied = pos = end;
    }
    if (!fail) fail = gp_buf_append(&b, s + copied, len - copied);
    region_free(&r);
    if (fail) {
        gp_buf_free(&b);
        return gp_fail_oom(err, "NFC normalization", len * 4);
    }
    *out = gp_buf_detach(&b, out_len);
    return GEPARD_OK;
}
