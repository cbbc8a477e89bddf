/* test_tokenizer.c — the tokenizer against the upstream goldens and the
 * pre-tokenizer rules of MODEL.md §G.5, plus decode, bad input and threads.
 *
 * The fixture tokenizer (model-tiny) was built with HF `tokenizers` using
 * Qwen3.5's normalizer, split regex and added-token rules; golden.json holds
 * HF's encode/decode results. Hand-written variants live in
 * tests/data/tokenizers/ (see test_tokenizer_variants.c).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/timing.h"
#include "io/json.h"
#include "test.h"
#include "text/tok_internal.h"
#include "text/tokenizer.h"

static gp_tokenizer *load_fixture(void) {
    gp_error err;
    gp_tokenizer *tok = NULL;
    if (gp_tok_load(test_fixture("model-tiny/model/tokenizer.json"), &tok, &err)) {
        test_fail(__FILE__, __LINE__, "loading the fixture tokenizer: %s", err.message);
        return NULL;
    }
    return tok;
}

static bool ids_equal_json(const int32_t *ids, size_t n, const cJSON *arr) {
    if ((size_t)cJSON_GetArraySize(arr) != n) return false;
    size_t i = 0;
    for (const cJSON *it = arr->child; it; it = it->next, i++)
        if (!cJSON_IsNumber(it) || (int32_t)it->valuedouble != ids[i]) return false;
    return true;
}

static void print_ids(const char *label, const int32_t *ids, size_t n) {
    gp_buf b;
    gp_buf_init(&b);
    for (size_t i = 0; i < n; i++) gp_buf_printf(&b, "%s%d", i ? "," : "", (int)ids[i]);
    test_note("%s [%s]", label, b.data ? b.data : "");
    gp_buf_free(&b);
}

TEST(tokenizer_golden_encode_decode) {
    gp_tokenizer *tok = load_fixture();
    REQUIRE(tok);
    cJSON *golden;
    gp_error err;
    REQUIRE_OK(gp_json_load_file(test_fixture("model-tiny/golden.json"), 0, &golden, &err), &err);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(golden, "tokenizer");
    REQUIRE(cJSON_IsArray(cases) && cJSON_GetArraySize(cases) > 0);
    int checked = 0;
    for (const cJSON *c = cases->child; c; c = c->next) {
        const char *text = cJSON_GetObjectItemCaseSensitive(c, "text")->valuestring;
        const char *decoded = cJSON_GetObjectItemCaseSensitive(c, "decoded")->valuestring;
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "ids");
        int32_t *ids;
        size_t n;
        int rc = gp_tok_encode(tok, text, strlen(text), &ids, &n, &err);
        CHECK_MSG(rc == 0, "encode(\"%s\") failed: %s", text, err.message);
        if (rc) continue;
        if (!ids_equal_json(ids, n, want)) {
            test_fail(__FILE__, __LINE__, "encode(\"%s\") differs from the golden ids", text);
            print_ids("got", ids, n);
            char *w = cJSON_PrintUnformatted(want);
            test_note("want %s", w);
            free(w);
        }
        /* Encoding twice goes through the word cache and must agree. */
        int32_t *again;
        size_t n2;
        REQUIRE_OK(gp_tok_encode(tok, text, strlen(text), &again, &n2, &err), &err);
        CHECK(n2 == n && (n == 0 || memcmp(ids, again, n * sizeof *ids) == 0));
        free(again);
        char *out;
        size_t out_len;
        rc = gp_tok_decode(tok, ids, n, false, &out, &out_len, &err);
        CHECK_MSG(rc == 0, "decode failed: %s", err.message);
        if (!rc) {
            CHECK_MSG(out_len == strlen(decoded) && strcmp(out, decoded) == 0,
                      "decode of \"%s\" gave \"%s\", expected \"%s\"", text, out, decoded);
            free(out);
        }
        free(ids);
        checked++;
    }
    test_note("%d golden tokenizer cases", checked);
    cJSON_Delete(golden);
    gp_tok_free(tok);
}
