/* tok_encode.c — encode and decode (MODEL.md §G.1).
 *
 * Encode, in HF `tokenizers` order:
 *   1. check the text is UTF-8;
 *   2. added tokens with normalized: false are matched in the raw text,
 *      leftmost-longest; each gap between them is a segment;
 *   3. each segment is NFC-normalized (when the normalizer says so), then
 *      added tokens with normalized: true are matched in it the same way;
 *   4. each remaining gap is split into pieces by the Split steps in turn
 *      (each step splits every piece of the step before) and every piece
 *      goes through byte-level BPE.
 * Decode maps ids back to token strings, turns byte-level symbols back into
 * bytes and repairs invalid UTF-8 with U+FFFD.
 */
#include <stdlib.h>
#include <string.h>

#include "text/nfc.h"
#include "text/tok_internal.h"
#include "text/utf8.h"

typedef int (*piece_fn)(void *ctx, const char *piece, size_t len, gp_error *err);

/* The pre-tokenizer's working state: per split step a match-data block and
 * a list of spans, and the substituted copy of the segment. */
typedef struct pretok {
    const gp_tokenizer *tok;
    pcre2_match_data *md[GP_TOK_MAX_SPLITS];
    gp_tok_spans spans[GP_TOK_MAX_SPLITS];
    gp_buf subst;
    piece_fn fn;
    void *ctx;
} pretok;

static int pretok_init(pretok *pt, const gp_tokenizer *tok, piece_fn fn, void *ctx, gp_error *err) {
    memset(pt, 0, sizeof *pt);
    pt->tok = tok;
    pt->fn = fn;
    pt->ctx = ctx;
    gp_buf_init(&pt->subst);
    for (int k = 0; k < tok->n_splits; k++) {
        pt->md[k] = pcre2_match_data_create_from_pattern(tok->splits[k].re, NULL);
        if (!pt->md[k]) return gp_fail_oom(err, "regex match data", 256);
    }
    return GEPARD_OK;
}

static void pretok_free(pretok *pt) {
    for (int k = 0; k < GP_TOK_MAX_SPLITS; k++) {
        pcre2_match_data_free(pt->md[k]);
        gp_tok_spans_free(&pt->spans[k]);
    }
    gp_buf_free(&pt->subst);
}

/* Split step k on one piece (s, and subj: the same bytes with
 * representatives substituted), then the next steps on each result. */
static int split_step(pretok *pt, int k, const char *s, const char *subj, size_t len,
                      gp_error *err) {
    if (k == pt->tok->n_splits) return pt->fn(pt->ctx, s, len, err);
    gp_tok_spans *sp = &pt->spans[k];
    sp->n = 0;
    int rc = gp_tok_split_run(pt->tok, k, pt->md[k], pt->tok->splits[k].substitute ? subj : s, len,
                              sp, err);
    for (size_t i = 0; !rc && i < sp->n; i++) {
        size_t a = sp->v[i].start;
        rc = split_step(pt, k + 1, s + a, subj + a, sp->v[i].end - a, err);
    }
    return rc;
}

static int pretok_run(pretok *pt, const char *s, size_t len, gp_error *err) {
    if (len == 0) return GEPARD_OK;
    const char *subj = s;
    if (pt->tok->substitute) {
        int r = gp_tok_substitute(s, len, &pt->subst);
        if (r < 0) return gp_fail_oom(err, "pre-tokenizer text", len);
        if (r) subj = pt->subst.data;
    }
    return split_step(pt, 0, s, subj, len, err);
}

typedef struct enc_state {
    gp_tokenizer *tok;
    gp_i32vec ids;
    gp_tok_scratch scratch;
    pretok pt;
} enc_state;

typedef int (*segment_fn)(enc_state *st, const char *s, size_t len, gp_error *err);

static int on_piece(void *ctx, const char *piece, size_t len, gp_error *err) {
    enc_state *st = ctx;
    return gp_tok_bpe_piece(st->tok, &st->scratch, piece, len, &st->ids, err);
}

static int pre_tokenize(enc_state *st, const char *s, size_t len, gp_error *err) {
    return pretok_run(&st->pt, s, len, err);
}

/* Leftmost-longest added-token matching: at each position the longest token
 * that starts there wins; gaps go to `gap`. Token contents are valid UTF-8,
 * so matches start and end on character boundaries. */
static int scan_added(enc_state *st, const gp_trie *trie, const char *s, size_t len, segment_fn gap,
                      gp_error *err) {
    if (gp_trie_empty(trie)) return gap(st, s, len, err);
    size_t i = 0, seg = 0;
    int rc;
    while (i < len) {
        int32_t id;
        size_t m = gp_trie_longest(trie, s + i, len - i, &id);
        if (m == 0) {
            i++;
            continue;
        }
        if ((rc = gap(st, s + seg, i - seg, err))) return rc;
        if (gp_i32vec_push(&st->ids, id)) return gp_fail_oom(err, "token ids", st->ids.n * 8);
        i += m;
        seg = i;
    }
    return gap(st, s + seg, len - seg, err);
}

static int normalized_segment(enc_state *st, const char *s, size_t len, gp_error *err) {
    return scan_added(st, &st->tok->norm_trie, s, len, pre_tokenize, err);
}

static int raw_segment(enc_state *st, const char *s, size_t len, gp_error *err) {
    if (len == 0) return GEPARD_OK;
    if (!st->tok->nfc || gp_utf8_is_ascii(s, len)) return normalized_segment(st, s, len, err);
    char *norm;
    size_t norm_len;
    int rc = gp_nfc(s, len, &norm, &norm_len, err);
    if (rc) return rc;
    rc = normalized_segment(st, norm, norm_len, err);
    free(norm);
    return rc;
}

static int check_text(const char *text, size_t len, gp_error *err) {
    size_t bad;
    const char *why;
    if (gp_utf8_check(text, len, &bad, &why) == 0) return GEPARD_OK;
    return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                   "the text is not valid UTF-8: byte offset %zu (0x%02X) is %s — convert the "
                   "text to UTF-8",
                   bad, (unsigned)(unsigned char)text[bad], why);
}

int gp_tok_encode(gp_tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n_ids,
                  gp_error *err) {
    *ids = NULL;
    *n_ids = 0;
    if (!tok) return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "no tokenizer given");
    if (!text && len) return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "no text given");
    int rc = check_text(text, len, err);
    if (rc || len == 0) return rc;
    enc_state st;
    memset(&st, 0, sizeof st);
    st.tok = tok;
    rc = pretok_init(&st.pt, tok, on_piece, &st, err);
    if (!rc && gp_i32vec_reserve(&st.ids, len / 3 + 4)) rc = gp_fail_oom(err, "token ids", len);
    if (!rc) rc = scan_added(&st, &tok->raw_trie, text, len, raw_segment, err);
    pretok_free(&st.pt);
    gp_tok_scratch_free(&st.scratch);
    if (rc || st.ids.n == 0) {
        gp_i32vec_free(&st.ids);
        return rc;
    }
    *ids = st.ids.v;
    *n_ids = st.ids.n;
    return GEPARD_OK;
}

/* Append the bytes a BPE token stands for. As HF's ByteLevel decoder does,
 * a token with any character outside the byte-level alphabet is copied
 * as it is. */
static int append_bpe_token(gp_buf *raw, const char *s, size_t len) {
    size_t bad;
    const char *why;
    if (gp_utf8_check(s, len, &bad, &why)) return gp_buf_append(raw, s, len);
    if (gp_buf_reserve(raw, len)) return -1;
    size_t start = raw->len, pos = 0;
    while (pos < len) {
        int b = gp_bytelevel_byte(gp_utf8_next(s, len, &pos));
        if (b < 0) {
            raw->len = start;
            raw->data[start] = '\0';
            return gp_buf_append(raw, s, len);
        }
        raw->data[raw->len++] = (char)b; /* a symbol is >= 1 byte, so len suffices */
    }
    raw->data[raw->len] = '\0';
    return 0;
}

int gp_tok_decode(const gp_tokenizer *tok, const int32_t *ids, size_t n, bool skip_special,
                  char **text, size_t *len, gp_error *err) {
    *text = NULL;
    if (len) *len = 0;
    if (!tok) return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "no tokenizer given");
    if (!ids && n) return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "no token ids given");
    gp_buf raw, out;
    gp_buf_init(&raw);
    gp_buf_init(&out);
    int rc = GEPARD_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= tok->n_ids || tok->entries[id].kind == GP_TOK_NONE) {
            rc = gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                         "token id %d (position %zu) is not in the vocabulary of %s (ids 0..%d)",
                         (int)id, i, tok->origin, (int)tok->n_ids - 1);
            break;
        }
        const gp_tok_entry *e = &tok->entries[id];
        int fail;
        if (e->kind == GP_TOK_ADDED) {
            if (skip_special && e->special) continue;
            fail = gp_buf_append(&raw, gp_strmap_key(&tok->added, e->off), e->len);
        } else {
            fail = append_bpe_token(&raw, gp_strmap_key(&tok->vocab, e->off), e->len);
        }
        if (fail) rc = gp_fail_oom(err, "decoded text", raw.len);
    }
    if (!rc && (gp_utf8_append_lossy(&out, raw.data ? raw.data : "", raw.len) ||
                gp_buf_append(&out, "", 0)))
        rc = gp_fail_oom(err, "decoded text", raw.len);
    gp_buf_free(&raw);
    if (rc) {
        gp_buf_free(&out);
        return rc;
    }
    *text = gp_buf_detach(&out, len);
    return GEPARD_OK;
}

typedef struct piece_list {
    gp_buf *out;
    size_t count;
} piece_list;

static int collect_piece(void *ctx, const char *piece, size_t len, gp_error *err) {
    piece_list *pl = ctx;
    if (gp_buf_append(pl->out, piece, len) || gp_buf_append(pl->out, "", 1))
        return gp_fail_oom(err, "pieces", len);
    pl->count++;
    return GEPARD_OK;
}

int gp_tok_debug_pieces(const gp_tokenizer *tok, const char *text, size_t len, gp_buf *out,
                        size_t *count, gp_error *err) {
    *count = 0;
    int rc = check_text(text, len, err);
    if (rc || len == 0) return rc;
    char *norm = NULL;
    size_t norm_len = len;
    if (tok->nfc && (rc = gp_nfc(text, len, &norm, &norm_len, err))) return rc;
    const char *s = norm ? norm : text;
    piece_list pl = {out, 0};
    pretok pt;
    rc = pretok_init(&pt, tok, collect_piece, &pl, err);
    if (!rc) rc = pretok_run(&pt, s, norm_len, err);
    pretok_free(&pt);
    free(norm);
    *count = pl.count;
    return rc;
}
