/* segment.c — sentence / clause / word segmentation of long text (see
 * segment.h). Works on bytes of valid UTF-8; multi-byte characters are never
 * split because every cut is made next to an ASCII space or a punctuation
 * character. */
#include "text/segment.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

gp_segment_options gp_segment_default_options(void) {
    gp_segment_options o = {200, 360};
    return o;
}

static const char *const abbreviations[] = {
    "mr",  "mrs", "ms",   "dr",  "prof", "sr",   "jr",   "st",   "mt",   "vs",     "etc",
    "e.g", "i.e", "cf",   "no",  "nos",  "fig",  "figs", "vol",  "vols", "ch",     "sec",
    "p",   "pp",  "ed",   "eds", "inc",  "ltd",  "co",   "corp", "dept", "gen",    "col",
    "lt",  "sgt", "capt", "rev", "hon",  "gov",  "sen",  "rep",  "jan",  "feb",    "mar",
    "apr", "jun", "jul",  "aug", "sep",  "sept", "oct",  "nov",  "dec",  "approx", "est",
    "min", "max", "avg",  "a.m", "p.m",  "u.s",  "u.k",  "ph.d", "al"};

/* Is the word ending just before text[dot] (a '.') an abbreviation or an
 * initial? */
static bool abbreviation_before(const char *text, size_t dot) {
    size_t start = dot;
    while (start > 0 && !isspace((unsigned char)text[start - 1]) && text[start - 1] != '(' &&
           text[start - 1] != '"' && text[start - 1] != '\'')
        start--;
    size_t n = dot - start;
    if (n == 0 || n > 8) return false;
    if (n == 1 && isupper((unsigned char)text[start])) return true; /* initial: "J." */
    char word[16];
    for (size_t i = 0; i < n; i++) word[i] = (char)tolower((unsigned char)text[start + i]);
    word[n] = '\0';
    for (size_t i = 0; i < sizeof abbreviations / sizeof abbreviations[0]; i++)
        if (strcmp(word, abbreviations[i]) == 0) return true;
    return false;
}

/* Length of a multi-byte sentence terminator at text[i] (。！？…), else 0. */
static size_t wide_terminator(const char *text, size_t len, size_t i) {
    static const char *const marks[] = {"\xE3\x80\x82", "\xEF\xBC\x81", "\xEF\xBC\x9F",
                                        "\xE2\x80\xA6", "\xEF\xBD\xA1"};
    for (size_t k = 0; k < sizeof marks / sizeof marks[0]; k++) {
        size_t m = strlen(marks[k]);
        if (i + m <= len && memcmp(text + i, marks[k], m) == 0) return m;
    }
    return 0;
}

static bool is_closer(char c) { return c == '"' || c == '\'' || c == ')' || c == ']' || c == '}'; }

/* If a sentence ends at text[i], return the index just after it (closing
 * quotes/brackets included), else 0. */
static size_t sentence_end_at(const char *text, size_t len, size_t i) {
    size_t after = 0;
    char c = text[i];
    if (c == '\n' && i + 1 < len && text[i + 1] == '\n') return i + 2; /* paragraph */
    size_t wide = wide_terminator(text, len, i);
    if (wide) {
        after = i + wide;
        while (after < len && (is_closer(text[after]) || wide_terminator(text, len, after)))
            after += wide_terminator(text, len, after) ? wide_terminator(text, len, after) : 1;
        return after;
    }
    if (c != '.' && c != '!' && c != '?') return 0;
    after = i + 1;
    while (after < len && (text[after] == '.' || text[after] == '!' || text[after] == '?')) after++;
    while (after < len && is_closer(text[after])) after++;
    if (after < len && !isspace((unsigned char)text[after])) return 0; /* 3.14, e.g.x, "a.b" */
    if (c == '.' && after == i + 1 && abbreviation_before(text, i)) return 0;
    return after;
}

static bool is_clause_mark(const char *text, size_t len, size_t i) {
    char c = text[i];
    if (c == ',' || c == ';' || c == ':')
        return i + 1 >= len || isspace((unsigned char)text[i + 1]); /* not 1,000 */
    /* em dash / en dash */
    if (i + 3 <= len &&
        (memcmp(text + i, "\xE2\x80\x94", 3) == 0 || memcmp(text + i, "\xE2\x80\x93", 3) == 0))
        return true;
    return false;
}

static size_t skip_spaces(const char *text, size_t len, size_t i) {
    while (i < len && isspace((unsigned char)text[i])) i++;
    return i;
}

/* Cut point for an over-long stretch [start, limit): the last clause mark,
 * else the last space, else the first space after limit (a very long word). */
static size_t fallback_cut(const char *text, size_t len, size_t start, size_t limit) {
    size_t best = 0;
    for (size_t i = start; i < limit && i < len; i++)
        if (is_clause_mark(text, len, i)) best = i + ((unsigned char)text[i] >= 0x80 ? 3 : 1);
    if (best > start + (limit - start) / 3) return best;
    for (size_t i = limit; i > start; i--)
        if (text[i - 1] == ' ' || text[i - 1] == '\n') return i;
    for (size_t i = limit; i < len; i++)
        if (text[i] == ' ' || text[i] == '\n') return i;
    return len;
}

int gp_segment_next(const char *text, size_t len, size_t *pos, const gp_segment_options *opts,
                    size_t *begin, size_t *end) {
    gp_segment_options defaults = gp_segment_default_options();
    if (!opts) opts = &defaults;
    size_t start = skip_spaces(text, len, *pos);
    if (start >= len) {
        *pos = len;
        return 0;
    }
    size_t cut = 0; /* end of the last complete sentence that fits */
    size_t limit = start + opts->max_bytes;
    for (size_t i = start; i < len; i++) {
        if (i >= limit) break;
        size_t e = sentence_end_at(text, len, i);
        if (!e) continue;
        if (e - start > opts->max_bytes) break;
        cut = e;
        if (e - start >= opts->target_bytes) break;
        i = e - 1;
    }
    if (!cut) cut = len - start <= opts->max_bytes ? len : fallback_cut(text, len, start, limit);
    size_t stop = cut;
    while (stop > start && isspace((unsigned char)text[stop - 1])) stop--;
    *begin = start;
    *end = stop;
    *pos = cut;
    return 1;
}
