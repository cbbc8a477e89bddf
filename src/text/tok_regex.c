/* tok_regex.c — the Split pre-tokenizer on PCRE2.
 *
 * Hugging Face `tokenizers` compiles the Split pattern with Oniguruma (Ruby /
 * Oniguruma syntax, UTF-8). PCRE2 in UTF + UCP mode reads the same text with
 * the same backtracking, leftmost-first semantics, except for a few escapes
 * and options whose meaning differs; gp_tok_regex_translate rewrites those:
 *
 *   \s \S   Oniguruma: Unicode White_Space. PCRE2 (UCP): \p{Z} + \h + \v,
 *           which also contains U+180E MONGOLIAN VOWEL SEPARATOR. Rewritten
 *           to \p{White_Space} / \P{White_Space}.
 *   \w \W   Oniguruma: Alphabetic, marks, decimal digits, connector
 *           punctuation, and (from its Latin-1 table) the six No characters
 *           of Latin-1 (superscripts 1-3, vulgar fractions). PCRE2 (10.42):
 *           letters, numbers, underscore. Rewritten to that explicit class;
 *           inside a class Oniguruma's \w lacks the Latin-1 extras, and so
 *           does the rewrite. \b \B (defined by \w) become equivalent
 *           lookarounds.
 *   \h \H   Oniguruma: hexadecimal digit. PCRE2: horizontal space. Rewritten.
 *   \uHHHH  Oniguruma: a code point. PCRE2 has no \u: rewritten to \x{HHHH}.
 *   (?m)    Oniguruma: dot matches newline (PCRE2's s). Rewritten to (?s).
 *   ^ $     always line anchors in Oniguruma: compiled with PCRE2_MULTILINE
 *           and LF as the only newline, as Oniguruma uses.
 * POSIX classes (Oniguruma's [:alpha:] is the Alphabetic property, PCRE2's is
 * \p{L}), nested classes and class intersection (Oniguruma only) and
 * \Q...\E are refused.
 *
 * Unicode versions. PCRE2 classifies code points with the tables it was
 * built with (10.42: Unicode 14), HF's Oniguruma with Unicode 16's. So the
 * pattern is matched on a copy of the text in which every code point whose
 * general category may differ is replaced by its representative (unicode.h):
 * one whose category, Alphabetic property (outside marks) and UTF-8 length
 * are the same and whose category has been stable since Unicode 3.2. Byte
 * offsets are unchanged, so the pieces are cut from the original text. This
 * is exact for every general category (\p{L}, \p{Lu}, \p{N}, ...), White_Space
 * (\s), \d, \w and \b — checked on every code point against HF in the tests.
 * It is not done (PCRE2's own tables decide) when the pattern uses another
 * property (scripts, \p{Alphabetic}, \X), spells out a character in octal,
 * or names a character or range that holds a representative without all
 * the code points it stands for, or any non-ASCII character under (?i).
 *
 * Known remaining divergences: under (?i) Oniguruma also matches characters
 * whose case folding is several characters (ß for "ss", U+FB06 for "st");
 * PCRE2 does not. Qwen's (?i:'s|'t|'re|'ve|'m|'ll|'d) is unaffected.
 *
 * Matches are found like the onig crate's find_iter, which HF uses: an empty
 * match right where the previous match ended is skipped by moving one
 * character on, so a pattern that can match empty never loops. The list of
 * matches and gaps then goes through the behavior (Isolated, Removed,
 * MergedWithPrevious, MergedWithNext, Contiguous; invert swaps matches and
 * gaps) exactly as HF's NormalizedString::split folds it, and empty pieces
 * are dropped.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"
#include "text/unicode.h"
#include "text/utf8.h"

#define WORD_IN_CLASS "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}"
#define WORD_CHARS WORD_IN_CLASS "\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}"
#define WORD_CLASS "[" WORD_CHARS "]"
#define HEX_CHARS "0-9a-fA-F"
/* Matches per pcre2_match call are bounded so that a pathological pattern
 * fails with a message instead of running for minutes. */
#define GP_TOK_MATCH_LIMIT 50000000u

static int refuse(gp_error *err, const char *where, size_t offset, const char *what) {
    return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                   "%s.pattern: %s (at offset %zu) is not supported — its meaning differs between "
                   "Oniguruma (used by Hugging Face tokenizers) and PCRE2",
                   where, what, offset);
}

/* ---- what a pattern uses ---- */

void gp_tok_regex_info_free(gp_tok_regex_info *info) {
    if (!info) return;
    free(info->literals);
    memset(info, 0, sizeof *info);
}

static int note_literal(gp_tok_regex_info *info, uint32_t lo, uint32_t hi) {
    if (!info || hi < 0x80) return 0;
    if (info->n_literals == info->cap_literals) {
        size_t cap = info->cap_literals ? info->cap_literals * 2 : 8;
        uint32_t(*v)[2] = realloc(info->literals, cap * sizeof *v);
        if (!v) return -1;
        info->literals = v;
        info->cap_literals = cap;
    }
    info->literals[info->n_literals][0] = lo;
    info->literals[info->n_literals][1] = hi;
    info->n_literals++;
    return 0;
}

/* Property names that are general categories or White_Space, compared the
 * loose way both engines compare them (case, spaces, '_' and '-' ignored). */
static bool substitutable_property(const char *name, size_t len) {
    static const char *const names[] = {
        "l",  "lu", "ll", "lt", "lm", "lo", "lc",  "l&",         "m",    "mn", "mc",
        "me", "n",  "nd", "nl", "no", "p",  "pc",  "pd",         "ps",   "pe", "pi",
        "pf", "po", "s",  "sm", "sc", "sk", "so",  "z",          "zs",   "zl", "zp",
        "c",  "cc", "cf", "co", "cn", "cs", "any", "whitespace", "space"};
    char loose[32];
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (c == ' ' || c == '_' || c == '-' || (i == 0 && c == '^')) continue;
        if (n + 1 >= sizeof loose) return false;
        loose[n++] = (char)tolower((unsigned char)c);
    }
    loose[n] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(loose, names[i]) == 0) return true;
    return false;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A character written at p[i] (a UTF-8 character, \xHH, \x{H...}, \uHHHH, or
 * an escaped ASCII character): its code point and length in the pattern, or
 * false. */
static bool read_char(const char *p, size_t len, size_t i, uint32_t *cp, size_t *used) {
    if (p[i] != '\\') {
        size_t pos = i;
        *cp = gp_utf8_next(p, len, &pos);
        *used = pos - i;
        return true;
    }
    if (i + 1 >= len) return false;
    char e = p[i + 1];
    uint32_t v = 0;
    size_t j = i + 2;
    if (e == 'x' && j < len && p[j] == '{') {
        for (j++; j < len && hex_value(p[j]) >= 0 && v <= 0x10FFFF; j++)
            v = v * 16 + (uint32_t)hex_value(p[j]);
        if (j >= len || p[j] != '}' || j == i + 3 || v > 0x10FFFF) return false;
        j++;
    } else if (e == 'x' || e == 'u') {
        size_t digits = e == 'x' ? 2 : 4, k = 0;
        for (; k < digits && j < len && hex_value(p[j]) >= 0; k++, j++)
            v = v * 16 + (uint32_t)hex_value(p[j]);
        if (k == 0 || (e == 'u' && k != 4)) return false;
    } else if (!isalnum((unsigned char)e) && (unsigned char)e < 0x80) {
        v = (unsigned char)e; /* \. \- \\ ... */
    } else {
        const char *simple = strchr("tnrfvae", e);
        if (!simple) return false;
        static const uint32_t values[] = {'\t', '\n', '\r', '\f', '\v', 0x07, 0x1B};
        v = values[simple - "tnrfvae"];
    }
    *cp = v;
    *used = j - i;
    return true;
}

/* ---- translation ---- */

typedef struct translator {
    const char *p;
    size_t len;
    gp_buf *out;
    gp_tok_regex_info *info;
    const char *where;
    gp_error *err;
} translator;

static int oom(translator *t) { return gp_fail_oom(t->err, "a regular expression", t->len); }

/* \p{Name}, \P{Name}, \pL: note the property; copied unchanged. */
static int property(translator *t, size_t i, size_t *used) {
    const char *p = t->p;
    size_t j = i + 2, name = j, name_len = 0;
    if (j < t->len && p[j] == '{') {
        name = ++j;
        while (j < t->len && p[j] != '}') j++;
        if (j >= t->len)
            return gp_fail(t->err, GEPARD_ERR_FORMAT,
                           "%s.pattern: \\p{ at offset %zu is not closed", t->where, i);
        name_len = j - name;
        j++;
    } else if (j < t->len) {
        name_len = 1;
        j++;
    }
    if (t->info) {
        t->info->classes = true;
        if (!substitutable_property(p + name, name_len)) t->info->other_classes = true;
    }
    *used = j - i;
    return gp_buf_append(t->out, p + i, j - i) ? oom(t) : GEPARD_OK;
}

static int translate_escape(translator *t, size_t i, bool in_class, size_t *used) {
    const char *p = t->p;
    if (i + 1 >= t->len)
        return gp_fail(t->err, GEPARD_ERR_FORMAT, "%s.pattern ends with a lone backslash",
                       t->where);
    char e = p[i + 1];
    if (e == 'p' || e == 'P') return property(t, i, used);
    const char *rep = NULL;
    bool cls = true;
    switch (e) {
    case 's': rep = "\\p{White_Space}"; break;
    case 'S': rep = "\\P{White_Space}"; break;
    case 'd':
    case 'D': break;
    case 'w': rep = in_class ? WORD_IN_CLASS : WORD_CLASS; break;
    case 'W':
        if (in_class) return refuse(t->err, t->where, i, "\\W inside a character class");
        rep = "[^" WORD_CHARS "]";
        break;
    case 'b':
        if (!in_class)
            rep = "(?:(?<=" WORD_CLASS ")(?!" WORD_CLASS ")|(?<!" WORD_CLASS ")(?=" WORD_CLASS "))";
        break;
    case 'B':
        if (in_class) return refuse(t->err, t->where, i, "\\B inside a character class");
        rep = "(?:(?<=" WORD_CLASS ")(?=" WORD_CLASS ")|(?<!" WORD_CLASS ")(?!" WORD_CLASS "))";
        break;
    case 'h':
        cls = false;
        rep = in_class ? HEX_CHARS : "[" HEX_CHARS "]";
        break;
    case 'H':
        if (in_class) return refuse(t->err, t->where, i, "\\H inside a character class");
        cls = false;
        rep = "[^" HEX_CHARS "]";
        break;
    case 'Q': return refuse(t->err, t->where, i, "\\Q...\\E quoting");
    case 'X':
        if (t->info) t->info->other_classes = true;
        cls = false;
        break;
    default: cls = false; break;
    }
    if (cls && t->info) t->info->classes = true;
    *used = 2;
    if (rep) return gp_buf_append_str(t->out, rep) ? oom(t) : GEPARD_OK;
    if (e == 'o' || (e >= '0' && e <= '7')) {
        if (t->info) t->info->opaque = true; /* octal, or a back-reference */
    } else if (e == 'u' || e == 'x') {
        uint32_t cp;
        if (!read_char(p, t->len, i, &cp, used)) {
            if (e == 'u')
                return gp_fail(t->err, GEPARD_ERR_FORMAT,
                               "%s.pattern: \\u at offset %zu must be followed by 4 hex digits",
                               t->where, i);
        } else {
            if (!in_class && note_literal(t->info, cp, cp)) return oom(t); /* class_char notes */
            if (e == 'u') return gp_buf_printf(t->out, "\\x{%X}", (unsigned)cp) ? oom(t) : 0;
        }
    }
    return gp_buf_append(t->out, p + i, *used) ? oom(t) : GEPARD_OK;
}

/* "(?imx-imx:" or "(?imx)": Oniguruma's m is PCRE2's s. Returns the number
 * of bytes consumed, 0 when p[i] does not start an option group, or -1 after
 * failing. */
static long translate_options(translator *t, size_t i) {
    const char *p = t->p;
    size_t len = t->len;
    if (i + 2 >= len || p[i] != '(' || p[i + 1] != '?') return 0;
    size_t j = i + 2;
    if (!(p[j] == '-' || (p[j] >= 'a' && p[j] <= 'z') || (p[j] >= 'A' && p[j] <= 'Z'))) return 0;
    char opts[32];
    size_t n = 0;
    bool off = false;
    for (; j < len && p[j] != ':' && p[j] != ')'; j++) {
        char c = p[j];
        if (c != 'i' && c != 'm' && c != 'x' && c != '-') {
            refuse(t->err, t->where, j, "this group option letter");
            return -1;
        }
        if (n + 1 >= sizeof opts) {
            refuse(t->err, t->where, i, "a long option group");
            return -1;
        }
        if (c == '-') off = true;
        if (c == 'i' && !off && t->info) t->info->caseless = true;
        opts[n++] = c == 'm' ? 's' : c;
    }
    if (j >= len) return 0; /* unterminated: let PCRE2 report it */
    if (gp_buf_append(t->out, "(?", 2) || gp_buf_append(t->out, opts, n) ||
        gp_buf_append(t->out, p + j, 1)) {
        oom(t);
        return -1;
    }
    return (long)(j + 1 - i);
}

/* Inside a class: a character, possibly the start of a range a-b. Notes
 * non-ASCII ones; copies the text unchanged. Returns 0 and *used, or 1 when
 * p[i] is no character. */
static int class_char(translator *t, size_t i, size_t *used, int *rc) {
    uint32_t lo, hi;
    size_t n, m;
    *rc = GEPARD_OK;
    if (!read_char(t->p, t->len, i, &lo, &n)) return 1;
    hi = lo;
    size_t j = i + n;
    if (j + 1 < t->len && t->p[j] == '-' && t->p[j + 1] != ']' &&
        read_char(t->p, t->len, j + 1, &hi, &m)) {
        if (hi < lo) hi = lo; /* PCRE2 reports the error */
        j += 1 + m;
    }
    if (note_literal(t->info, lo, hi)) {
        *rc = oom(t);
        return 0;
    }
    /* \u inside a class is rewritten by translate_escape; so translate
     * the endpoints separately when either is an escape. */
    *used = j - i;
    if (memchr(t->p + i, '\\', j - i) == NULL)
        return gp_buf_append(t->out, t->p + i, j - i) ? (*rc = oom(t), 0) : 0;
    for (size_t k = i; k < j && !*rc;) {
        size_t u = 1;
        if (t->p[k] == '\\')
            *rc = translate_escape(t, k, true, &u);
        else if (gp_buf_append(t->out, t->p + k, 1))
            *rc = oom(t);
        k += u;
    }
    return 0;
}

int gp_tok_regex_translate(const char *p, size_t len, gp_buf *out, gp_tok_regex_info *info,
                           const char *where, gp_error *err) {
    size_t bad;
    const char *why;
    if (gp_utf8_check(p, len, &bad, &why))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s.pattern is not valid UTF-8 (byte %zu is %s)",
                       where, bad, why);
    translator t = {p, len, out, info, where, err};
    bool in_class = false;
    size_t i = 0;
    int rc;
    while (i < len) {
        char c = p[i];
        size_t take = 1;
        if (in_class) {
            if (c == '[' && i + 1 < len && p[i + 1] == ':') {
                return refuse(err, where, i, "a POSIX character class ([:name:])");
            } else if (c == '[') {
                return refuse(err, where, i, "a nested character class");
            } else if (c == '&' && i + 1 < len && p[i + 1] == '&') {
                return refuse(err, where, i, "character class intersection (&&)");
            } else if (c == ']') {
                in_class = false;
            } else if (c != '\\' || (i + 1 < len && p[i + 1] != 'p' && p[i + 1] != 'P')) {
                if (class_char(&t, i, &take, &rc) == 0) {
                    if (rc) return rc;
                    i += take;
                    continue;
                }
            }
        }
        if (c == '\\') {
            if ((rc = translate_escape(&t, i, in_class, &take))) return rc;
            i += take;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            /* A leading ^ and a ']' right after the opening are literal parts. */
            if (i + take < len && p[i + take] == '^') take++;
            if (i + take < len && p[i + take] == ']') take++;
        } else if (!in_class && c == '(') {
            long used = translate_options(&t, i);
            if (used < 0) return err ? err->code : GEPARD_ERR_UNSUPPORTED;
            if (used > 0) {
                i += (size_t)used;
                continue;
            }
        } else if (!in_class && (unsigned char)c >= 0x80) {
            size_t pos = i;
            uint32_t cp = gp_utf8_next(p, len, &pos);
            if (note_literal(info, cp, cp)) return oom(&t);
            take = pos - i;
        }
        if (gp_buf_append(out, p + i, take)) return oom(&t);
        i += take;
    }
    if (in_class)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s.pattern has an unterminated character class",
                       where);
    if (!out->data && gp_buf_append(out, "", 0)) return oom(&t);
    return GEPARD_OK;
}

/* Every character or range X written in the pattern must hold a code point
 * exactly when it holds its representative. */
static bool literals_uniform(const gp_tok_regex_info *info) {
    for (size_t i = 0; i < info->n_literals; i++) {
        uint32_t a = info->literals[i][0], b = info->literals[i][1];
        for (uint32_t c = a; c <= b; c++) {
            unsigned k = gp_uni_rep_index(c);
            if (k && (gp_uni_reps[k].cp < a || gp_uni_reps[k].cp > b)) return false;
        }
        for (size_t k = 1; k < gp_uni_n_reps; k++) {
            const gp_uni_rep *r = &gp_uni_reps[k];
            if (r->cp >= a && r->cp <= b && (r->lo < a || r->hi > b)) return false;
        }
    }
    return true;
}

bool gp_tok_regex_can_substitute(const gp_tok_regex_info *info) {
    if (!info->classes || info->other_classes || info->opaque) return false;
    if (info->caseless && info->n_literals > 0) return false;
    return literals_uniform(info);
}

/* ---- compilation ---- */

static int compile(const char *pat, size_t len, uint32_t options, pcre2_code **re,
                   const char *where, gp_error *err) {
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    if (!cc) return gp_fail_oom(err, "a regular expression", len);
    pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
    int code;
    PCRE2_SIZE offset;
    *re = pcre2_compile((PCRE2_SPTR)pat, len, options, &code, &offset, cc);
    pcre2_compile_context_free(cc);
    if (!*re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "%s.pattern cannot be compiled: %s at offset %zu of \"%.200s\"", where,
                       (const char *)msg, (size_t)offset, pat);
    }
    /* JIT is an optimisation; without it pcre2_match interprets. */
    (void)pcre2_jit_compile(*re, PCRE2_JIT_COMPLETE);
    return GEPARD_OK;
}

int gp_tok_split_add(gp_tokenizer *tok, const char *pattern, bool literal, int behavior,
                     bool invert, const char *where, gp_error *err) {
    size_t len = strlen(pattern);
    if (len == 0)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s.pattern is empty — nothing to split on", where);
    if (tok->n_splits == GP_TOK_MAX_SPLITS)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "%s: more than %d Split pre-tokenizers in a row are not supported", where,
                       GP_TOK_MAX_SPLITS);
    gp_tok_split *sp = &tok->splits[tok->n_splits];
    memset(sp, 0, sizeof *sp);
    sp->behavior = behavior;
    sp->invert = invert;
    sp->pattern = strdup(pattern);
    if (!sp->pattern) return gp_fail_oom(err, "a regular expression", len);
    tok->n_splits++; /* from here on gp_tok_free releases it */
    gp_buf pat;
    gp_buf_init(&pat);
    gp_tok_regex_info info;
    memset(&info, 0, sizeof info);
    uint32_t options = PCRE2_UTF;
    int rc = GEPARD_OK;
    if (literal) {
        options |= PCRE2_LITERAL;
        if (gp_buf_append(&pat, pattern, len)) rc = gp_fail_oom(err, "a regular expression", len);
    } else {
        options |= PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NEVER_BACKSLASH_C;
        rc = gp_tok_regex_translate(pattern, len, &pat, &info, where, err);
        sp->substitute = rc == 0 && gp_tok_regex_can_substitute(&info);
    }
    if (!rc) rc = compile(pat.data, pat.len, options, &sp->re, where, err);
    gp_buf_free(&pat);
    gp_tok_regex_info_free(&info);
    if (rc) return rc;
    tok->substitute |= sp->substitute;
    if (!tok->match_ctx) {
        tok->match_ctx = pcre2_match_context_create(NULL);
        if (!tok->match_ctx) return gp_fail_oom(err, "a regular expression", len);
        pcre2_set_match_limit(tok->match_ctx, GP_TOK_MATCH_LIMIT);
    }
    return GEPARD_OK;
}

/* ---- matching ---- */

int gp_tok_substitute(const char *text, size_t len, gp_buf *out) {
    const unsigned char *u = (const unsigned char *)text;
    size_t pos = 0;
    bool copied = false;
    while (pos < len) {
        if (u[pos] < 0x80) {
            pos++;
            continue;
        }
        size_t at = pos;
        unsigned k = gp_uni_rep_index(gp_utf8_next(text, len, &pos));
        if (k == 0) continue;
        if (!copied) {
            gp_buf_clear(out);
            if (gp_buf_append(out, text, len)) return -1;
            copied = true;
        }
        gp_utf8_put(gp_uni_reps[k].cp, out->data + at); /* same length by construction */
    }
    return copied ? 1 : 0;
}

void gp_tok_spans_free(gp_tok_spans *s) {
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int spans_push(gp_tok_spans *s, size_t start, size_t end, bool match) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        gp_tok_span *v = realloc(s->v, cap * sizeof *v);
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (gp_tok_span){start, end, match};
    return 0;
}

static int match_at(const gp_tokenizer *tok, const gp_tok_split *sp, pcre2_match_data *md,
                    const char *text, size_t len, size_t start, gp_error *err) {
    int rc =
        pcre2_match(sp->re, (PCRE2_SPTR)text, len, start, PCRE2_NO_UTF_CHECK, md, tok->match_ctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(sp->re, (PCRE2_SPTR)text, len, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                         md, tok->match_ctx);
    if (rc >= 0 || rc == PCRE2_ERROR_NOMATCH) return rc;
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT)
        gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                "%s: the pre-tokenizer regex gave up on this text (%s) near byte %zu — split the "
                "text into shorter pieces",
                tok->origin, (const char *)msg, start);
    else
        gp_fail(err, GEPARD_ERR_INTERNAL, "%s: matching the pre-tokenizer regex failed: %s",
                tok->origin, (const char *)msg);
    return -1000;
}

static size_t char_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

/* HF's find_matches: the matches and the gaps between them, in order,
 * tiling the text; an empty match is listed, an empty gap is not. */
static int find_matches(const gp_tokenizer *tok, const gp_tok_split *sp, pcre2_match_data *md,
                        const char *text, size_t len, gp_tok_spans *out, gp_error *err) {
    size_t pos = 0, prev = 0, last_end = 0;
    bool have_last = false;
    while (pos <= len) {
        int rc = match_at(tok, sp, md, text, len, pos, err);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) return err ? err->code : GEPARD_ERR_INTERNAL;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t s = ov[0], e = ov[1];
        if (e < s || e > len) /* \K in a lookaround can do this; treat as empty */
            e = s;
        if (s == e && have_last && last_end == e) {
            if (pos >= len) break;
            pos += char_len((unsigned char)text[pos]);
            if (pos > len) pos = len;
            continue;
        }
        pos = e;
        have_last = true;
        last_end = e;
        if ((prev != s && spans_push(out, prev, s, sp->invert)) ||
            spans_push(out, s, e, !sp->invert))
            return gp_fail_oom(err, "pre-tokenizer pieces", len);
        prev = e;
    }
    if (prev != len && spans_push(out, prev, len, sp->invert))
        return gp_fail_oom(err, "pre-tokenizer pieces", len);
    return GEPARD_OK;
}

/* Apply the behavior to v[0, n) in place (HF's folds); returns the new
 * count. Afterwards .match marks pieces to remove. */
static size_t apply_behavior(int behavior, gp_tok_span *v, size_t n) {
    size_t w = 0;
    bool previous = false;
    switch (behavior) {
    case GP_SPLIT_REMOVED: return n;
    case GP_SPLIT_ISOLATED:
        for (size_t i = 0; i < n; i++) v[i].match = false;
        return n;
    case GP_SPLIT_CONTIGUOUS:
    case GP_SPLIT_MERGED_WITH_PREVIOUS:
        for (size_t i = 0; i < n; i++) {
            bool m = v[i].match;
            bool merge = behavior == GP_SPLIT_CONTIGUOUS ? m == previous : m && !previous;
            if (merge && w > 0)
                v[w - 1].end = v[i].end;
            else
                v[w++] = (gp_tok_span){v[i].start, v[i].end, false};
            previous = m;
        }
        return w;
    case GP_SPLIT_MERGED_WITH_NEXT:
        w = n; /* built from the back, then moved to the front */
        for (size_t i = n; i-- > 0;) {
            bool m = v[i].match;
            if (m && !previous && w < n)
                v[w].start = v[i].start;
            else
                v[--w] = (gp_tok_span){v[i].start, v[i].end, false};
            previous = m;
        }
        memmove(v, v + w, (n - w) * sizeof *v);
        return n - w;
    }
    return n;
}

int gp_tok_split_run(const gp_tokenizer *tok, int k, pcre2_match_data *md, const char *subject,
                     size_t len, gp_tok_spans *out, gp_error *err) {
    const gp_tok_split *sp = &tok->splits[k];
    size_t base = out->n;
    int rc = find_matches(tok, sp, md, subject, len, out, err);
    if (rc) return rc;
    size_t n = base + apply_behavior(sp->behavior, out->v + base, out->n - base), w = base;
    for (size_t i = base; i < n; i++)
        if (!out->v[i].match && out->v[i].end > out->v[i].start) out->v[w++] = out->v[i];
    out->n = w;
    return GEPARD_OK;
}
