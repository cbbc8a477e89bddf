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
 *           does the rewrite (both checked equal to Oniguruma 6.9.8 on every
 *           code point). \b \B (defined by \w) become equivalent
 *           lookarounds.
 *   \h \H   Oniguruma: hexadecimal digit. PCRE2: horizontal space. Rewritten.
 *   (?m)    Oniguruma: dot matches newline (PCRE2's s). Rewritten to (?s).
 *   ^ $     always line anchors in Oniguruma: compiled with PCRE2_MULTILINE
 *           and LF as the only newline, as Oniguruma uses.
 *
 * \s, \d, \p{L}, \p{M}, \p{N} and (?i) folding (U+017F, U+212A) were checked
 * equal on every code point. POSIX classes (Oniguruma's [:alpha:] is the
 * Alphabetic property, PCRE2's is \p{L}), nested classes and class
 * intersection (Oniguruma only) and \Q...\E are refused.
 *
 * Known remaining divergence: under (?i) Oniguruma also matches characters
 * whose case folding is several characters (ß for "ss", U+FB06 for "st");
 * PCRE2 does not. Qwen's (?i:'s|'t|'re|'ve|'m|'ll|'d) is unaffected, which a
 * differential run against Oniguruma 6.9.8 over random text containing all
 * such characters confirmed.
 *
 * Matches are found like the onig crate's find_iter, which HF uses: an empty
 * match right where the previous match ended is skipped by moving one
 * character on, so a pattern that can match empty never loops.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

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

static int translate_escape(const char *p, size_t len, size_t i, bool in_class, gp_buf *out,
                            const char *where, gp_error *err) {
    if (i + 1 >= len)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s.pattern ends with a lone backslash", where);
    const char *rep = NULL;
    switch (p[i + 1]) {
    case 's': rep = "\\p{White_Space}"; break;
    case 'S': rep = "\\P{White_Space}"; break;
    case 'w': rep = in_class ? WORD_IN_CLASS : WORD_CLASS; break;
    case 'h': rep = in_class ? HEX_CHARS : "[" HEX_CHARS "]"; break;
    case 'W':
        if (in_class) return refuse(err, where, i, "\\W inside a character class");
        rep = "[^" WORD_CHARS "]";
        break;
    case 'H':
        if (in_class) return refuse(err, where, i, "\\H inside a character class");
        rep = "[^" HEX_CHARS "]";
        break;
    case 'b':
        if (!in_class)
            rep = "(?:(?<=" WORD_CLASS ")(?!" WORD_CLASS ")|(?<!" WORD_CLASS ")(?=" WORD_CLASS "))";
        break;
    case 'B':
        if (in_class) return refuse(err, where, i, "\\B inside a character class");
        rep = "(?:(?<=" WORD_CLASS ")(?=" WORD_CLASS ")|(?<!" WORD_CLASS ")(?!" WORD_CLASS "))";
        break;
    case 'Q': return refuse(err, where, i, "\\Q...\\E quoting");
    default: break;
    }
    int rc = rep ? gp_buf_append_str(out, rep) : gp_buf_append(out, p + i, 2);
    return rc ? gp_fail_oom(err, "a regular expression", len) : GEPARD_OK;
}

/* "(?imx-imx:" or "(?imx)": Oniguruma's m is PCRE2's s. Returns the number
 * of bytes consumed, 0 when p[i] does not start an option group, or -1 after
 * failing. */
static long translate_options(const char *p, size_t len, size_t i, gp_buf *out, const char *where,
                              gp_error *err) {
    if (i + 2 >= len || p[i] != '(' || p[i + 1] != '?') return 0;
    size_t j = i + 2;
    if (!(p[j] == '-' || (p[j] >= 'a' && p[j] <= 'z') || (p[j] >= 'A' && p[j] <= 'Z'))) return 0;
    char opts[32];
    size_t n = 0;
    for (; j < len && p[j] != ':' && p[j] != ')'; j++) {
        char c = p[j];
        if (c != 'i' && c != 'm' && c != 'x' && c != '-') {
            refuse(err, where, j, "this group option letter");
            return -1;
        }
        if (n + 1 >= sizeof opts) {
            refuse(err, where, i, "a long option group");
            return -1;
        }
        opts[n++] = c == 'm' ? 's' : c;
    }
    if (j >= len) return 0; /* unterminated: let PCRE2 report it */
    if (gp_buf_append(out, "(?", 2) || gp_buf_append(out, opts, n) ||
        gp_buf_append(out, p + j, 1)) {
        gp_fail_oom(err, "a regular expression", len);
        return -1;
    }
    return (long)(j + 1 - i);
}

int gp_tok_regex_translate(const char *p, size_t len, gp_buf *out, const char *where,
                           gp_error *err) {
    bool in_class = false;
    size_t i = 0;
    int rc;
    while (i < len) {
        char c = p[i];
        if (c == '\\') {
            if ((rc = translate_escape(p, len, i, in_class, out, where, err))) return rc;
            i += 2;
            continue;
        }
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
            }
        } else if (c == '[') {
            in_class = true;
            /* A leading ^ and a ']' right after the opening are literal parts. */
            if (i + take < len && p[i + take] == '^') take++;
            if (i + take < len && p[i + take] == ']') take++;
        } else if (c == '(') {
            long used = translate_options(p, len, i, out, where, err);
            if (used < 0) return err ? err->code : GEPARD_ERR_UNSUPPORTED;
            if (used > 0) {
                i += (size_t)used;
                continue;
            }
        }
        if (gp_buf_append(out, p + i, take)) return gp_fail_oom(err, "a regular expression", len);
        i += take;
    }
    if (in_class)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s.pattern has an unterminated character class",
                       where);
    if (!out->data && gp_buf_append(out, "", 0)) return gp_fail_oom(err, "a regular expression", 1);
    return GEPARD_OK;
}

int gp_tok_regex_compile(gp_tokenizer *tok, const char *pattern, bool literal, const char *where,
                         gp_error *err) {
    size_t len = strlen(pattern);
    if (len == 0)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s.pattern is empty — nothing to split on", where);
    tok->split_pattern = strdup(pattern);
    if (!tok->split_pattern) return gp_fail_oom(err, "a regular expression", len);
    gp_buf pat;
    gp_buf_init(&pat);
    uint32_t options = PCRE2_UTF;
    int rc = GEPARD_OK;
    if (literal) {
        options |= PCRE2_LITERAL;
        if (gp_buf_append(&pat, pattern, len)) rc = gp_fail_oom(err, "a regular expression", len);
    } else {
        options |= PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NEVER_BACKSLASH_C;
        rc = gp_tok_regex_translate(pattern, len, &pat, where, err);
    }
    pcre2_compile_context *cc = rc ? NULL : pcre2_compile_context_create(NULL);
    if (!rc && !cc) rc = gp_fail_oom(err, "a regular expression", len);
    if (!rc) {
        pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
        int code;
        PCRE2_SIZE offset;
        tok->split_re = pcre2_compile((PCRE2_SPTR)pat.data, pat.len, options, &code, &offset, cc);
        if (!tok->split_re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(code, msg, sizeof msg);
            rc = gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                         "%s.pattern cannot be compiled: %s at offset %zu of \"%.200s\"", where,
                         (const char *)msg, (size_t)offset, pat.data);
        }
    }
    pcre2_compile_context_free(cc);
    gp_buf_free(&pat);
    if (rc) return rc;
    /* JIT is an optimisation; without it pcre2_match interprets. */
    (void)pcre2_jit_compile(tok->split_re, PCRE2_JIT_COMPLETE);
    tok->match_ctx = pcre2_match_context_create(NULL);
    if (!tok->match_ctx) return gp_fail_oom(err, "a regular expression", len);
    pcre2_set_match_limit(tok->match_ctx, GP_TOK_MATCH_LIMIT);
    return GEPARD_OK;
}

static int match_at(const gp_tokenizer *tok, pcre2_match_data *md, const char *text, size_t len,
                    size_t start, gp_error *err) {
    int rc = pcre2_match(tok->split_re, (PCRE2_SPTR)text, len, start, PCRE2_NO_UTF_CHECK, md,
                         tok->match_ctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(tok->split_re, (PCRE2_SPTR)text, len, start,
                         PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, tok->match_ctx);
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

int gp_tok_regex_split(const gp_tokenizer *tok, pcre2_match_data *md, const char *text, size_t len,
                       gp_tok_piece_fn fn, void *ctx, gp_error *err) {
    size_t pos = 0, piece_start = 0, last_end = 0;
    bool have_last = false;
    int rc;
    while (pos <= len) {
        rc = match_at(tok, md, text, len, pos, err);
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
        if (s > piece_start && (rc = fn(ctx, text + piece_start, s - piece_start, err))) return rc;
        if (e > s && (rc = fn(ctx, text + s, e - s, err))) return rc;
        if (e > piece_start) piece_start = e;
    }
    if (piece_start < len && (rc = fn(ctx, text + piece_start, len - piece_start, err))) return rc;
    return GEPARD_OK;
}
