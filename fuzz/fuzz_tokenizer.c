/* fuzz_tokenizer.c — libFuzzer harness for tokenizer.json loading
 * (text/tok_load.c, tok_config.c, the Oniguruma-to-PCRE2 regex translation in
 * tok_regex.c); a tokenizer that loads then encodes and decodes a short text
 * so the parsed tables are used. Seeds: the fixture tokenizer.json and
 * fuzz/seeds/tokenizer/. */
#include "fuzz_common.h"

#include "base/log.h"
#include "text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gp_log_set_level(GP_LOG_SILENT);
    gp_error err;
    gp_error_clear(&err);
    gp_tokenizer *tok = NULL;
    int rc = gp_tok_load_memory((const char *)data, size, "tokenizer.json", &tok, &err);
    fuzz_check_error(rc, &err);
    if (rc) return 0;
    static const char text[] =
        "Hello world! It's 2026, na\xc3\xafve caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd <|im_end|>  x";
    int32_t *ids = NULL;
    size_t n = 0;
    rc = gp_tok_encode(tok, text, sizeof text - 1, &ids, &n, &err);
    fuzz_check_error(rc, &err);
    if (!rc && n) {
        char *out = NULL;
        size_t len = 0;
        gp_error e2;
        gp_error_clear(&e2);
        int r2 = gp_tok_decode(tok, ids, n, false, &out, &len, &e2);
        fuzz_check_error(r2, &e2);
        free(out);
    }
    free(ids);
    (void)gp_tok_vocab_size(tok);
    (void)gp_tok_token_to_id(tok, "<|im_end|>");
    gp_tok_free(tok);
    return 0;
}
