/* test_tokenizer_synthetic.c — a generated tokenizer.json of real-ish size.
 *
 * The test writes a byte-level BPE with 50 256 vocabulary entries and 50 000
 * merges whose ranks follow a formula over the 26 lowercase letters:
 *
 *   rank r in [0, 676)          "p q"   -> "pq"     r = 26p + q
 *   rank 676 + k, k < 17 576    "pq s"  -> "pqs"    k = 26(26p + q) + s
 *   rank 18 252 + k, k < 31 748 "pqs t" -> "pqst"   k = 26(676p + 26q + s) + t
 *
 * Byte b has id b (its byte-level symbol computed here independently of the
 * library), the token made by merge r has id 256 + r. A naive reference BPE
 * (scan all pairs for the lowest rank, leftmost, repeat) computes the
 * expected ids from the formula alone. The load time is printed.
 */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/timing.h"
#include "test.h"
#include "text/tokenizer.h"

#define N2 676
#define N3 17576
#define N4 31748
#define N_MERGES (N2 + N3 + N4)

/* GPT-2's bytes_to_unicode, written out independently of src/text. */
static unsigned bytelevel(unsigned b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return b;
    unsigned n = 0;
    for (unsigned c = 0; c < b; c++)
        if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255))) n++;
    return 256 + n;
}

static void put_utf8(gp_buf *b, unsigned cp) {
    char u[3];
    if (cp < 0x80) {
        u[0] = (char)cp;
        gp_buf_append(b, u, 1);
    } else {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        gp_buf_append(b, u, 2);
    }
}

static void put_letters(gp_buf *b, int k, int len) {
    char s[4];
    for (int i = len - 1; i >= 0; i--) {
        s[i] = (char)('a' + k % 26);
        k /= 26;
    }
    gp_buf_append(b, s, (size_t)len);
}

static char *generate_json(size_t *len) {
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_append_str(
        &b, "{\"version\":\"1.0\",\"added_tokens\":[],\"normalizer\":{\"type\":\"NFC\"},"
            "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
            "\"pattern\":{\"Regex\":\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?"
            "[\\\\p{L}\\\\p{M}]+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{M}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*"
            "[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},"
            "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]},"
            "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"byte_fallback\":"
            "false,\"ignore_merges\":false,\"vocab\":{");
    for (unsigned c = 0; c < 256; c++) {
        gp_buf_append_str(&b, c ? ",\"" : "\"");
        unsigned cp = bytelevel(c);
        if (cp == '"' || cp == '\\') gp_buf_append(&b, "\\", 1);
        put_utf8(&b, cp);
        gp_buf_printf(&b, "\":%u", c);
    }
    for (int r = 0; r < N_MERGES; r++) {
        gp_buf_append_str(&b, ",\"");
        if (r < N2)
            put_letters(&b, r, 2);
        else if (r < N2 + N3)
            put_letters(&b, r - N2, 3);
        else
            put_letters(&b, r - N2 - N3, 4);
        gp_buf_printf(&b, "\":%d", 256 + r);
    }
    gp_buf_append_str(&b, "},\"merges\":[");
    for (int r = 0; r < N_MERGES; r++) {
        int k = r < N2 ? r : r < N2 + N3 ? r - N2 : r - N2 - N3;
        int left_len = r < N2 ? 1 : r < N2 + N3 ? 2 : 3;
        gp_buf_append_str(&b, r ? ",\"" : "\"");
        put_letters(&b, k / 26, left_len);
        gp_buf_append(&b, " ", 1);
        put_letters(&b, k % 26, 1);
        gp_buf_append(&b, "\"", 1);
    }
    gp_buf_append_str(&b, "]}}");
    return gp_buf_detach(&b, len);
}

/* ---- the reference ---- */

typedef struct sym {
    char s[5];
    int len;
} sym;

static int letters_index(const char *s, int len) {
    int k = 0;
    for (int i = 0; i < len; i++) k = k * 26 + (s[i] - 'a');
    return k;
}

/* Rank of merging a and b, or -1. */
static int ref_rank(const sym *a, const sym *b) {
    if (b->len != 1) return -1;
    int k = letters_index(a->s, a->len) * 26 + (b->s[0] - 'a');
    if (a->len == 1) return k;
    if (a->len == 2) return N2 + k;
    if (a->len == 3 && k < N4) return N2 + N3 + k;
    return -1;
}

static int ref_id(const sym *t) {
    if (t->len == 1) return (unsigned char)t->s[0];
    sym head = *t, last = {{t->s[t->len - 1]}, 1};
    head.len = t->len - 1;
    return 256 + ref_rank(&head, &last);
}

/* Append the reference ids of a lowercase word to out. */
static void ref_encode_word(const char *w, int n, int32_t *out, size_t *n_out) {
    sym *s = malloc((size_t)n * sizeof *s);
    for (int i = 0; i < n; i++) s[i] = (sym){{w[i]}, 1};
    for (;;) {
        int best = -1, best_rank = 0;
        for (int i = 0; i + 1 < n; i++) {
            int r = ref_rank(&s[i], &s[i + 1]);
            if (r >= 0 && (best < 0 || r < best_rank)) best = i, best_rank = r;
        }
        if (best < 0) break;
        memcpy(s[best].s + s[best].len, s[best + 1].s, (size_t)s[best + 1].len);
        s[best].len += s[best + 1].len;
        memmove(s + best + 1, s + best + 2, (size_t)(n - best - 2) * sizeof *s);
        n--;
    }
    for (int i = 0; i < n; i++) out[(*n_out)++] = ref_id(&s[i]);
    free(s);
}

static gp_tokenizer *load_synthetic(void) {
    size_t len;
    char *json = generate_json(&len);
    gp_tokenizer *tok = NULL;
    gp_error err;
    const char *path = test_tmp("synthetic-tokenizer.json");
    if (test_write_file(path, json, len)) test_fail(__FILE__, __LINE__, "cannot write %s", path);
    double t0 = gp_now_s();
    int rc = gp_tok_load(path, &tok, &err);
    double dt = gp_now_s() - t0;
    if (rc)
        test_fail(__FILE__, __LINE__, "loading the synthetic tokenizer: %s", err.message);
    else
        test_note("loaded %.1f MB, %zu ids, %d merges in %.0f ms (this build)", len / 1e6,
                  gp_tok_vocab_size(tok), N_MERGES, dt * 1e3);
    free(json);
    return tok;
}

TEST(tokenizer_synthetic_50k_matches_reference) {
    gp_tokenizer *tok = load_synthetic();
    REQUIRE(tok);
    CHECK_EQ_INT(gp_tok_vocab_size(tok), 256 + N_MERGES);
    /* 40 000 distinct words (more than the word cache holds, so it is
     * emptied on the way) of 1..12 letters, space separated. */
    enum { WORDS = 40000 };
    gp_buf text;
    gp_buf_init(&text);
    size_t cap = (size_t)WORDS * 14 + 16, n_want = 0;
    int32_t *want = malloc(cap * sizeof *want);
    uint64_t state = 0x9E3779B97F4A7C15ull;
    for (int w = 0; w < WORDS; w++) {
        char word[16];
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        int n = 1 + (int)((state >> 33) % 12);
        for (int i = 0; i < n; i++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            word[i] = (char)('a' + (state >> 33) % 26);
        }
        if (w) {
            gp_buf_append(&text, " ", 1);
            want[n_want++] = ' '; /* Ġ never merges */
        }
        gp_buf_append(&text, word, (size_t)n);
        ref_encode_word(word, n, want, &n_want);
    }
    gp_error err;
    int32_t *ids;
    size_t n;
    double t0 = gp_now_s();
    REQUIRE_OK(gp_tok_encode(tok, text.data, text.len, &ids, &n, &err), &err);
    double dt = gp_now_s() - t0;
    test_note("encoded %zu bytes (%d words) in %.0f ms", text.len, WORDS, dt * 1e3);
    CHECK_EQ_INT(n, n_want);
    size_t first_diff = n;
    for (size_t i = 0; i < n && i < n_want; i++)
        if (ids[i] != want[i]) {
            first_diff = i;
            break;
        }
    CHECK_MSG(first_diff == n, "first difference at id %zu: %d, expected %d", first_diff,
              first_diff < n ? (int)ids[first_diff] : -1,
              first_diff < n_want ? (int)want[first_diff] : -1);
    /* Decoding gives the text back. */
    char *back;
    size_t back_len;
    REQUIRE_OK(gp_tok_decode(tok, ids, n, false, &back, &back_len, &err), &err);
    CHECK(back_len == text.len && memcmp(back, text.data, back_len) == 0);
    free(back);
    free(ids);
    free(want);
    gp_buf_free(&text);
    gp_tok_free(tok);
}

TEST(tokenizer_synthetic_long_word_matches_reference) {
    gp_tokenizer *tok = load_synthetic();
    REQUIRE(tok);
    /* One 3000-letter piece: the heap-based merge against the O(n^2)
     * reference, and a word far beyond the cache's piece limit. */
    enum { LEN = 3000 };
    char *word = malloc(LEN);
    uint32_t state = 7;
    for (int i = 0; i < LEN; i++) {
        state = state * 1103515245u + 12345u;
        word[i] = (char)('a' + (state >> 16) % 5); /* few letters: many equal-rank ties */
    }
    int32_t *want = malloc(LEN * sizeof *want);
    size_t n_want = 0;
    ref_encode_word(word, LEN, want, &n_want);
    gp_error err;
    int32_t *ids;
    size_t n;
    REQUIRE_OK(gp_tok_encode(tok, word, LEN, &ids, &n, &err), &err);
    CHECK(n == n_want && memcmp(ids, want, n * sizeof *ids) == 0);
    free(ids);
    free(want);
    free(word);
    gp_tok_free(tok);
}
